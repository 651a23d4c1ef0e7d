"""How the page is served (issue 40): it starts when Gradio's own check would have given up, its first
page travels compressed, and a new session costs what it changes, not a copy of every component."""
import json
import tracemalloc

import httpx
import pytest

FIRST_PAGE_MAX_BYTES = 300_000  # sent, compression allowed
SESSION_MAX_MB = 0.3


@pytest.fixture(scope="module")
def demo():
    import app
    return app.build_app()


def _session_classes():
    """(Gradio's SessionState, ours): light_sessions replaces the one the state holder makes."""
    from gradio import state_holder

    from bertlab.app import serving
    serving.light_sessions()
    light = state_holder.SessionState
    return light.__mro__[1], light


def _mb_each(cls, demo, n: int) -> float:
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    kept = [cls(demo) for _ in range(n)]
    grown = sum(s.size_diff for s in tracemalloc.take_snapshot().compare_to(before, "filename"))
    tracemalloc.stop()
    assert len(kept) == n
    return grown / n / 2**20


def test_a_new_session_costs_what_it_changes(demo):
    gradio_cls, light_cls = _session_classes()
    light, eager = _mb_each(light_cls, demo, 40), _mb_each(gradio_cls, demo, 4)
    print(f"a fresh session: {light:.3f} MB here, {eager:.2f} MB as Gradio makes it")
    assert light <= SESSION_MAX_MB
    assert eager > 3 * light  # what the change is for: Gradio's copy of every component's config


def test_the_light_session_keeps_every_field_gradio_sets(demo):
    """Our __init__ replaces Gradio's: a Gradio upgrade that adds a field must fail here, not in a visitor's page."""
    gradio_cls, light_cls = _session_classes()
    assert set(vars(gradio_cls(demo))) <= set(vars(light_cls(demo))) | {"config_values"}


def test_a_deep_link_still_lists_every_component_with_the_sessions_values(demo):
    gradio_cls, light_cls = _session_classes()
    sessions = gradio_cls(demo), light_cls(demo)
    box = next(k for k, b in demo.blocks.items() if type(b).__name__ == "Textbox" and b.elem_id == "model-in-use")
    for s in sessions:
        s._update_value_in_config(box, "run: mine")
    eager, light = ([json.dumps(c, sort_keys=True, default=str) for c in s.components] for s in sessions)
    assert len(light) > 500 and light == eager
    assert sum('"run: mine"' in c for c in light) == 1


def test_the_first_page_is_sent_compressed_and_small(server):
    r = httpx.get(server, headers={"Accept-Encoding": "gzip"}, timeout=120)
    sent = int(r.headers["content-length"])
    print(f"GET /: {len(r.content):,} bytes of page, {sent:,} sent")
    assert r.status_code == 200 and r.headers.get("content-encoding") == "gzip"
    assert sent <= FIRST_PAGE_MAX_BYTES < len(r.content)  # the page itself is still the whole app
    assert "bertlab" in r.text
    plain = httpx.get(server, headers={"Accept-Encoding": "identity"}, timeout=120)
    assert plain.headers.get("content-encoding") is None and plain.content == r.content


def test_an_answer_stream_is_not_compressed(server):
    """Server-sent events must not wait in a compressor's buffer: a page accepting gzip gets the queue's
    messages as they come, uncompressed, each on its own line."""
    import uuid
    cfg = httpx.get(server + "config", timeout=120).json()
    fn = next(d["id"] for d in cfg["dependencies"] if d.get("api_name") == "tokenize")
    session = uuid.uuid4().hex
    joined = httpx.post(server + "gradio_api/queue/join", timeout=120, json={
        "data": ["a fresh visitor .", "", "default (shipped)"], "fn_index": fn, "session_hash": session,
        "event_data": None, "trigger_id": None})
    assert joined.status_code == 200, joined.text
    with httpx.stream("GET", server + f"gradio_api/queue/data?session_hash={session}",
                      headers={"Accept-Encoding": "gzip"}, timeout=120) as events:
        assert events.headers["content-type"].startswith("text/event-stream")
        assert events.headers.get("content-encoding") is None
        msgs = []
        for line in events.iter_lines():
            if line.startswith("data: "):
                msgs.append(json.loads(line[6:])["msg"])
            if msgs and msgs[-1] == "process_completed":
                break
    assert msgs[-1] == "process_completed" and "process_starts" in msgs


def test_the_app_started_though_gradios_own_check_timed_out(plain_app):
    """The shared app starts with every one of Gradio's start-up checks timing out (conftest.SLOW_HEAD)."""
    _, log, _ = plain_app
    assert "bertlab: the page is up at http://" in log.read_text(errors="replace")
