"""Fair shares for strangers (issue 30, item 5; issue 41): per-session and per-address queue caps, a lane
for the cheap views that heavy calls cannot fill, an hourly upload allowance per address, an upload
folder swept whoever stored the files, and uploads usable only by the browser that sent them."""
from __future__ import annotations

import asyncio
import json
import os
import time
import types

import httpx
import pytest
from browser import run_async
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from bertlab.app import quota, traffic


def event(session: str, address: str, limit):
    fn = types.SimpleNamespace(concurrency_limit=limit)
    return types.SimpleNamespace(session_hash=session, request=types.SimpleNamespace(
        client=types.SimpleNamespace(host=address)), fn=fn)


def queue_of(events, max_size=64):
    return types.SimpleNamespace(max_size=max_size, event_queue_per_concurrency_id={
        "a": types.SimpleNamespace(queue=[e for e in events if e.fn.concurrency_limit != 2]),
        "b": types.SimpleNamespace(queue=[e for e in events if e.fn.concurrency_limit == 2])})


HEAVY, CHEAP = types.SimpleNamespace(concurrency_limit=2), types.SimpleNamespace(concurrency_limit="default")


def test_one_session_one_address_and_the_heavy_lane_each_have_a_cap():
    q = queue_of([event("s1", "1.1.1.1", 2) for _ in range(8)])
    assert "This page already has 8 requests waiting" in traffic.refusal(q, CHEAP, "s1", "1.1.1.1", 8, 32)
    assert traffic.refusal(q, CHEAP, "s2", "1.1.1.1", 8, 32) is None  # another page of the same network
    q = queue_of([event(f"s{i}", "1.1.1.1", "default") for i in range(32)])
    assert "Your network already has 32" in traffic.refusal(q, CHEAP, "new", "1.1.1.1", 8, 32)
    assert traffic.refusal(q, CHEAP, "new", "2.2.2.2", 8, 32) is None
    q = queue_of([event(f"s{i}", f"10.0.0.{i}", 2) for i in range(32)])  # many strangers' probes: half the queue
    assert "busy with long requests" in traffic.refusal(q, HEAVY, "new", "2.2.2.2", 8, 32)
    assert traffic.refusal(q, CHEAP, "new", "2.2.2.2", 8, 32) is None  # the cheap lane stays open


def test_eight_flooding_addresses_leave_room_for_an_honest_one():
    """Issue 41, hole 2: from 8 addresses (a new session each call) the queue's 64 places filled, and
    honest fill-mask calls got HTTP 503. Past half full each address gets its share of the rest."""
    held = []
    q = queue_of(held)
    refused = 0
    for i in range(8 * 40):  # the flood, round robin over its addresses, nothing ever finishing
        address = f"10.9.0.{i % 8}"
        if traffic.refusal(q, CHEAP, f"flood-{i}", address, 16, 32) is None:
            held.append(event(f"flood-{i}", address, "default"))
        else:
            refused += 1
        q = queue_of(held)
    assert len(held) < 64 and refused > 8 * 30
    for k in range(5):  # an honest student's calls, one after another, all queued
        assert traffic.refusal(q, CHEAP, f"honest-{k}", "192.0.2.7", 16, 32) is None
        held.append(event(f"honest-{k}", "192.0.2.7", "default"))
        q = queue_of(held)
        held.pop()  # answered
    why = traffic.refusal(q, CHEAP, "flood-x", "10.9.0.3", 16, 32)
    assert why and "its share" in why


def test_a_guarded_queue_refuses_before_gradio_queues_and_passes_the_rest():
    calls = []

    async def push(body, request, username):
        calls.append(body.fn_index)
        return True, "event-id", "success"

    q = queue_of([event("s", "1.1.1.1", 2) for _ in range(3)])
    q.push = push
    demo = types.SimpleNamespace(_queue=q, fns={0: CHEAP, 1: HEAVY})
    traffic.guard_queue(demo, per_session=3, per_address=32)
    req = types.SimpleNamespace(client=types.SimpleNamespace(host="1.1.1.1"))
    body = lambda i, s: types.SimpleNamespace(fn_index=i, session_hash=s)  # noqa: E731
    ok, why, state = run_async(q.push(body(0, "s"), req, None))
    assert (ok, state) == (False, "queue_full") and "3 requests waiting" in why and calls == []
    assert run_async(q.push(body(1, "other"), req, None)) == (True, "event-id", "success") and calls == [1]


def upload_app(tmp_path, clock, **kw):
    async def upload(request):
        return PlainTextResponse("stored")
    app = Starlette(routes=[Route("/gradio_api/upload", upload, methods=["POST"]),
                            Route("/gradio_api/info", lambda r: PlainTextResponse("info"))],
                    middleware=[Middleware(traffic.UploadGuard, clock=clock, folder=lambda: tmp_path, **kw)])
    return TestClient(app)


def test_uploads_count_per_address_per_hour_and_against_the_folder(tmp_path):
    now = [0.0]
    client = upload_app(tmp_path, lambda: now[0], mb_per_hour=2.5, total_mb=10)
    mb = b"x" * 1_000_000
    assert [client.post("/gradio_api/upload", content=mb).status_code for _ in range(3)] == [200, 200, 429]
    r = client.post("/gradio_api/upload", content=mb)
    assert r.status_code == 429 and "uploaded 2 MB in the last hour" in r.json()["detail"]
    assert client.get("/gradio_api/info").status_code == 200  # only uploads are counted
    now[0] = 3601.0  # an hour on: the allowance is back
    assert client.post("/gradio_api/upload", content=mb).status_code == 200
    (tmp_path / "big.bin").write_bytes(b"x" * 9_500_000)  # the folder near its total
    r = client.post("/gradio_api/upload", content=mb)
    assert r.status_code == 507 and "upload space is full" in r.json()["detail"]


def test_one_address_takes_at_most_a_quarter_of_the_upload_space(tmp_path):
    """Hole 6: at a 300 MB total, two addresses filled it (250 MB an hour each), then 507 for all."""
    client = upload_app(tmp_path, lambda: 0.0, mb_per_hour=250, total_mb=8)  # a quarter: 2 MB
    mb = b"x" * 1_000_000
    assert [client.post("/gradio_api/upload", content=mb).status_code for _ in range(3)] == [200, 200, 429]


def test_the_upload_folder_is_swept_whoever_stored_the_files(tmp_path):
    """Hole 4: a killed server's uploads stayed for good and counted against the total."""
    import os
    import time
    old, fresh = tmp_path / "a", tmp_path / "b"
    for d, age in ((old, 7200), (fresh, 60)):
        d.mkdir()
        with open(d / "f.csv", "wb") as f:
            f.truncate(143_000_000)  # sparse: counted in full, as the upload guard counts
        os.utime(d / "f.csv", (time.time() - age,) * 2)
    assert quota.sweep(tmp_path, 3600) == 143_000_000
    assert not old.exists() and (fresh / "f.csv").exists()


def test_an_upload_belongs_to_the_browser_that_sent_it(tmp_path):
    """Hole 8: knowing an upload's path was enough to use it from another session. The visitor cookie
    (or, for a client that keeps no cookies, the address) is noted with the paths Gradio answers."""
    import json as _json
    stored = str(tmp_path / "abc" / "mine.csv")

    async def upload(request):
        return PlainTextResponse(_json.dumps([stored]), media_type="application/json")
    app = Starlette(routes=[Route("/gradio_api/upload", upload, methods=["POST"]), Route("/", lambda r: PlainTextResponse("page"))],
                    middleware=[Middleware(traffic.VisitorCookie),
                                Middleware(traffic.UploadGuard, mb_per_hour=10, total_mb=40, folder=lambda: tmp_path)])
    browser = TestClient(app)
    cookie = browser.get("/").headers["set-cookie"]
    assert cookie.startswith(traffic.COOKIE + "=") and "HttpOnly" in cookie and "SameSite=Lax" in cookie
    key = "".join(browser.cookies.values())
    assert "set-cookie" not in browser.get("/").headers  # one is enough
    assert browser.post("/gradio_api/upload", content=b"x" * 10).status_code == 200
    assert traffic.OWNERS.owns(stored, key) and not traffic.OWNERS.owns(stored, "b" * 32)
    assert not traffic.OWNERS.owns(stored, "address:testclient")  # the browser's, not its network's
    TestClient(app, cookies={}).post("/gradio_api/upload", content=b"x", headers={"cookie": ""})
    # a bad cookie value is no cookie: the next call gets a fresh one
    assert "set-cookie" in TestClient(app).get("/", headers={"cookie": f"{traffic.COOKIE}=../../x"}).headers


def config_data(url: str, api_name: str) -> tuple[int, list]:
    """(fn_index, its inputs' default values) of one endpoint, read off the page's config."""
    cfg = httpx.get(url + "config", timeout=30).json()
    dep = next(d for d in cfg["dependencies"] if d.get("api_name") == api_name)
    values = {c["id"]: c.get("props", {}).get("value") for c in cfg["components"]}
    return dep["id"], [values.get(i) for i in dep["inputs"]]


@pytest.mark.slow
def test_a_flood_of_probes_leaves_the_class_its_fill_mask(tmp_path):
    """Before: one client queued 64 probes in 0.2 s and 40 of 55 honest fill-mask calls got HTTP 503."""
    from gradio_client import Client

    from browser import serving
    env = {"BERTLAB_CLASSROOM": "1", "BERTLAB_TRUSTED_PROXIES": "127.0.0.1", "BERTLAB_QUEUE_PER_ADDRESS": "40",
           "BERTLAB_WARM_CACHE": "0", "BERTLAB_UPLOAD_MB_PER_HOUR": "1", "GRADIO_TEMP_DIR": str(tmp_path / "uploads")}
    left = tmp_path / "uploads" / "0123abcd" / "corpus.txt"  # hole 4: a killed server's upload, two hours old
    left.parent.mkdir(parents=True)
    with open(left, "wb") as f:
        f.truncate(286_000_000)
    os.utime(left, (time.time() - 7200,) * 2)
    with serving(["app.py"], tmp_path, env) as (url, log):
        for _ in range(600):  # the server sweeps as it starts, whoever stored the file
            if not left.exists():
                break
            time.sleep(0.1)
        assert not left.exists() and not left.parent.exists()
        fn, data = config_data(url, "probe")

        async def flood(n: int, sessions, addresses):
            async with httpx.AsyncClient(timeout=30) as c:
                rs = await asyncio.gather(*(c.post(url + "gradio_api/queue/join", headers={"X-Forwarded-For": a},
                                                   json={"data": data, "fn_index": fn, "session_hash": s,
                                                         "event_data": None, "trigger_id": None})
                                            for s, a in zip(sessions(n), addresses(n))))
            return [r.status_code for r in rs], [r.json().get("detail", "") for r in rs if r.status_code != 200]

        codes, why = run_async(flood(24, lambda n: ["one"] * n, lambda n: ["10.0.0.1"] * n))  # one page
        assert codes.count(200) <= 16 + 2 and any("This page already has 16 requests waiting" in w for w in why)
        # strangers' probes from many pages and addresses: they take half the queue, no more
        codes, why = run_async(flood(60, lambda n: [f"p{i}" for i in range(n)],
                                       lambda n: [f"10.1.{i}.1" for i in range(n)]))
        assert codes.count(200) <= 32 + 2 and any("busy with long requests" in w for w in why), (codes, why)
        # issue 41, hole 2: eight addresses of cheap /attention events, a new session each, filled the other
        # places and honest fill-mask calls got HTTP 503; each address now stops at its share
        fn, data = config_data(url, "attention")
        codes, why = run_async(flood(8 * 30, lambda n: [f"a{i}" for i in range(n)],
                                       lambda n: [f"10.8.0.{i % 8}" for i in range(n)]))
        assert codes.count(200) < 32 and any("its share" in w for w in why), (codes, why)
        client = Client(url, verbose=False)
        up = [httpx.post(url + "gradio_api/upload", files={"files": ("a.txt", b"word " * 120_000)}, timeout=30)
              for _ in range(2)]  # 0.6 MB each, against 1 MB an hour
        assert up[0].status_code == 200 and up[1].status_code == 429 and "MB an hour" in up[1].json()["detail"]
        for _ in range(3):  # answered, not refused as a full queue
            out = client.predict(text="the movie was [MASK] .", top_k=5, api_name="/fill_mask")
            assert "the movie was" in json.dumps(out)
