"""A classroom on one server: can N students use the explorer while one of them pre-trains a model?
(issue goals: fill-mask p95 ≤ 500 ms for 30 students with ~1 s think time; ≥ 40 fill-mask calls/s
back to back, on 2 cores, while a training job runs.)

    python bench/bench_class.py [--students 30] [--seconds 60] [--train/--no-train] [--think 1.0] [--json]
    python bench/bench_class.py --burst [--students 30] [--seconds 60]
    python bench/bench_class.py --flood 8 [--seconds 40]

Starts `python app.py` on a free port (runs in a temporary folder), starts one "Tiny and fast"-like
pre-training run through /pretrain_start as a student would, then runs N student threads, each a
browser-like client (one session, join the queue, read the event stream: what the page does;
gradio_client would spend ~60 ms of this machine's CPU per call). Default mode: a mix of
/fill_mask (most), /tokenize, /nsp and /attention with exponential think time (mean --think s).
--burst: /fill_mask only, back to back, for throughput.
--flood N: N addresses (X-Forwarded-For, the server trusting 127.0.0.1 as its proxy) post /attention
events (--flood-rate a second each), each from a new session, never reading the results; one honest student calls
/fill_mask every 0.3 s, first alone, then beside the flood (issue 41's goal: 0 errors, p95 within 2x).

How to read it: per endpoint, calls, errors and p50/p95/max round trip in ms as a browser waits
for it (queue, handler, transport); calls/s over the window; the goals with pass/fail words.
"one fill-mask" is measured first, on the idle server before the job starts: the model alone, the
tab's handler in this process (adds the chart), one idle client over HTTP; the last minus the
handler is Gradio's overhead. Figures are noisy on a shared machine: read them with the CPU line.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
QUIET = {"GRADIO_ANALYTICS_ENABLED": "False", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
         "HF_HUB_DISABLE_TELEMETRY": "1"}
os.environ.update(QUIET)
# the server and this script share the secret that signs browser ids, so the student who trains has one
os.environ.setdefault("BERTLAB_SECRET", os.urandom(16).hex())
P95_GOAL_MS, BURST_GOAL, RUN = 500, 40.0, "bench-class"
MASKED = ["the acting was [MASK] .", "the film was long and [MASK] .", "i [MASK] this movie a lot .",
          "the acting was [MASK] , but the story of the old man kept me watching until the end ."]
MIX = {  # endpoint: (weight, arguments drawn per call) -- what students click in the explorer tabs
    "/fill_mask": (6, lambda r: {"text": r.choice(MASKED)}),
    "/tokenize": (2, lambda r: {"text": "the river bank", "pair": "it was muddy ."}),
    "/nsp": (1, lambda r: {"first": "the film was long .", "candidates": "i liked it .\nthe bank raised rates ."}),
    "/attention": (1, lambda r: {"text": "the river bank was muddy .", "pair": ""}),
}


def owner() -> str:
    from bertlab.app.identity import new_id
    return new_id(ROOT)  # BERTLAB_SECRET is set: the folder is not read


def client(url):
    from gradio_client import Client
    return Client(url, verbose=False, analytics_enabled=False, download_files=False)


class Browser:
    """One call the way a student's browser makes it: join the queue, read the event stream until
    the result. gradio_client spends ~60 ms of CPU per call, which on this machine would load the
    server's own cores; a browser spends it on the student's laptop. Same method as Client.predict."""

    def __init__(self, url: str, names: dict[str, list[str]]):
        import uuid

        import httpx
        self.http, self.session = httpx.Client(base_url=url, timeout=120), uuid.uuid4().hex  # one per tab
        cfg = self.http.get("config").json()
        value = {c["id"]: c.get("props", {}).get("value") for c in cfg["components"]}
        self.api = {f"/{d['api_name']}": (d["id"], [value.get(i) for i in d["inputs"]], names[f"/{d['api_name']}"])
                    for d in cfg["dependencies"] if f"/{d.get('api_name')}" in names}

    def predict(self, api_name: str, **kw):
        fn, data, names = self.api[api_name]
        data, session = [kw.get(n, v) for n, v in zip(names, data)], self.session
        self.http.post("gradio_api/queue/join", json={"data": data, "fn_index": fn, "session_hash": session,
                                                      "event_data": None, "trigger_id": None}).raise_for_status()
        with self.http.stream("GET", "gradio_api/queue/data", params={"session_hash": session}) as events:
            for line in events.iter_lines():
                msg = json.loads(line[5:]) if line.startswith("data:") else {}
                if msg.get("msg") == "process_completed":
                    if not msg.get("success"):
                        raise RuntimeError(str(msg.get("output", {}).get("error"))[:200])
                    return msg["output"]["data"]
        raise RuntimeError("the event stream ended without a result")


def parameter_names(url) -> dict[str, list[str]]:
    """Each endpoint's inputs by name, in order (from the API description gradio_client reads)."""
    api = client(url).view_api(print_info=False, return_format="dict")["named_endpoints"]
    return {name: [p["parameter_name"] for p in api[name]["parameters"]] for name in MIX}


def cpu() -> str:
    names = re.findall(r"^model name\s*:\s*(.+)$", Path("/proc/cpuinfo").read_text(), re.MULTILINE)
    return f"{names[0] if names else 'unknown CPU'}, {len(os.sched_getaffinity(0))} cores"


@contextlib.contextmanager
def serving(folder: Path):
    """The app on a free port, runs under folder/runs, log in folder/app.log; stopped on exit."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, **QUIET, "GRADIO_SERVER_PORT": str(port), "GRADIO_SERVER_NAME": "127.0.0.1",
           "BERTLAB_RUNS_DIR": str(folder / "runs"), "PYTHONUNBUFFERED": "1"}
    url, end = f"http://127.0.0.1:{port}/", time.time() + 120
    with open(folder / "app.log", "w") as log:
        # own session: a Ctrl-C reaches only this script, which stops the job before the server
        proc = subprocess.Popen([sys.executable, "app.py"], cwd=ROOT, env=env, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            while not up(url):
                if proc.poll() is not None or time.time() > end:
                    raise SystemExit(f"app.py exited or did not answer within 120 s; see {log.name}")
                time.sleep(0.5)
            yield url, proc.pid
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()


def cpu_s(pid: int | None = None) -> float:
    """CPU seconds used so far by a process (user + system), or by this one."""
    if pid is None:
        t = os.times()
        return t.user + t.system
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def up(url) -> bool:
    import httpx
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


OWNER = None


def start_training(c, runs: Path, steps: int) -> str:
    """The state the start call reported; then waits until the trainer steps (data prepared)."""
    global OWNER
    OWNER = owner()
    from bertlab.config import PRESETS
    from bertlab.train.runs import read_status
    L, H, A = PRESETS["tiny"]
    out = c.predict(owner=OWNER, name=RUN, upload=None, hub_name="", preset="tiny",
                    layers=L, hidden=H, heads=A, intermediate=4 * H, max_len=32, batch_size=128, steps=steps,
                    api_name="/pretrain_start")
    state = next((w for w in ("running", "starting", "queued", "failed") if w in str(out[1])), "unknown")
    for _ in range(240):  # "starting" prepares the data; the window should see a stepping trainer
        if read_status(runs / RUN)["state"] in ("running", "finished", "failed", "stopped"):
            break
        time.sleep(0.5)
    return state


def stop_training(c, runs: Path) -> None:
    """Graceful /pretrain_stop, then make sure the trainer (its own process group) is gone."""
    with contextlib.suppress(Exception):
        c.predict(owner=OWNER, name=RUN, api_name="/pretrain_stop")
    job = runs / RUN / "job.json"
    pid = json.loads(job.read_text()).get("pid") if job.exists() else None
    for _ in range(60):
        if pid is None or not Path(f"/proc/{pid}").exists():
            return
        time.sleep(0.5)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGTERM)


def student(url, seed, start, stop, burst, think, rec, params):
    r, names, weights = random.Random(seed), list(MIX), [w for w, _ in MIX.values()]
    try:
        c = Browser(url, params)
    except Exception as e:  # noqa: BLE001 -- a student who cannot connect is an error to report
        return rec.append(("connect", None, f"{type(e).__name__}: {e}"))
    start.wait()
    while not stop.is_set():
        api = "/fill_mask" if burst else r.choices(names, weights)[0]
        t = time.perf_counter()
        try:
            c.predict(**MIX[api][1](r), api_name=api)
            rec.append((api, time.perf_counter() - t, None))
        except Exception as e:  # noqa: BLE001
            rec.append((api, None, f"{type(e).__name__}: {str(e)[:200]}"))
        if not burst:
            stop.wait(r.expovariate(1 / think))


def load(url, students, seconds, burst, think) -> tuple[list, float]:
    rec, start, stop, params = [], threading.Event(), threading.Event(), parameter_names(url)
    threads = [threading.Thread(target=student, args=(url, i, start, stop, burst, think, rec, params), daemon=True)
               for i in range(students)]
    for th in threads:
        th.start()
    time.sleep(min(10, 0.3 * students))  # clients fetch the app's config before the clock starts
    t0 = time.perf_counter()
    start.set()
    time.sleep(seconds)
    stop.set()
    for th in threads:
        th.join(timeout=60)
    return rec, time.perf_counter() - t0


def where_time_goes(url, reps=21) -> dict:
    """Median ms of one fill-mask: model only, the tab's handler in-process, one idle HTTP client."""
    from bertlab.analysis.predict import fill_mask
    from bertlab.app.ui.shared import models
    from bertlab.app.ui.text import fill_mask_tab
    model, tok = models.get(models.DEFAULT)
    c, text = Browser(url, parameter_names(url)), MASKED[-1]
    calls = {"model (analysis.predict.fill_mask)": lambda: fill_mask(model, tok, text, top_k=5),
             "handler (fill_mask_tab.predict, + chart)": lambda: fill_mask_tab.predict(text, 5, False, models.DEFAULT),
             "HTTP round trip (idle browser-like client)": lambda: c.predict(text=text, api_name="/fill_mask")}
    ts = {name: [] for name in calls}
    for i in range(reps + 1):  # interleaved, so that a noisy neighbour hits all three alike; 0 warms up
        for name, f in calls.items():
            t = time.perf_counter()
            f()
            ts[name] += [time.perf_counter() - t] if i else []
    out = {name: round(statistics.median(v) * 1e3, 1) for name, v in ts.items()}
    out["Gradio overhead (HTTP - handler)"] = round(out[list(calls)[2]] - out[list(calls)[1]], 1)
    return out


def ms(ts, q):
    return round(1e3 * (statistics.quantiles(ts, n=100, method="inclusive")[q - 1] if len(ts) > 1 else ts[0]), 1)


def measure(a, tmp: Path) -> dict:
    """Serve, profile one fill-mask, start the job, load the server; always stop job and server."""
    from bertlab.train.runs import read_status
    runs, report = tmp / "runs", {"cpu": cpu(), "students": a.students, "seconds": a.seconds, "job": "none (--no-train)",
                                  "mode": "burst, /fill_mask only" if a.burst else f"mix, think {a.think} s"}
    with serving(tmp) as (url, pid):
        c = client(url)
        try:
            report["fill_mask_ms"] = where_time_goes(url)
            if a.train:
                try:
                    report["job"] = f"start said {start_training(c, runs, a.steps)}"
                except Exception as e:  # noqa: BLE001 -- said in the report; the load runs anyway
                    report["job"] = f"failed to start: {str(e)[:200]}"
            step0 = read_status(runs / RUN)["step"]
            cpu0 = cpu_s(pid), cpu_s()
            report["rec"], report["dt"] = load(url, a.students, a.seconds, a.burst, a.think)
            report["cpu_s"] = cpu_s(pid) - cpu0[0], cpu_s() - cpu0[1]  # server, the students' clients
            if a.train:
                st = read_status(runs / RUN)
                report["job"] += f"; tiny run {st['state']}, steps {step0}→{st['step']} during the window"
        finally:
            if a.train:
                stop_training(c, runs)
    return report


def flood(a, tmp: Path) -> None:
    """--flood: the honest student's fill-mask alone, then beside N flooding addresses."""
    import collections
    import uuid

    import httpx
    os.environ["BERTLAB_TRUSTED_PROXIES"] = "127.0.0.1"  # this script is the proxy that names the flooders

    def honest(url, params, seconds):
        c, ts, errs = Browser(url, params), [], []
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            t = time.perf_counter()
            try:
                c.predict(text=MASKED[0], api_name="/fill_mask")
                ts.append(time.perf_counter() - t)
            except Exception as e:  # noqa: BLE001 -- counted and shown
                errs.append(f"{type(e).__name__}: {str(e)[:120]}")
            time.sleep(0.3)
        return ts, errs

    def flooder(url, fn, data, address, stop, codes):
        with httpx.Client(base_url=url, timeout=30, headers={"X-Forwarded-For": address}) as h:
            while not stop.is_set():
                with contextlib.suppress(httpx.HTTPError):
                    r = h.post("gradio_api/queue/join", json={"data": data, "fn_index": fn, "session_hash": uuid.uuid4().hex,
                                                              "event_data": None, "trigger_id": None})
                    codes[r.status_code] += 1
                time.sleep(1 / a.flood_rate)

    with serving(tmp) as (url, _):
        params = parameter_names(url)
        fn, data, names = Browser(url, params).api["/attention"]
        data = [{"text": "the river bank was muddy and the water was cold ."}.get(n, v) for n, v in zip(names, data)]
        alone, alone_errs = honest(url, params, max(10.0, a.seconds / 2))
        stop, codes = threading.Event(), collections.Counter()
        threads = [threading.Thread(target=flooder, args=(url, fn, data, f"10.8.0.{i}", stop, codes), daemon=True)
                   for i in range(a.flood)]
        for th in threads:
            th.start()
        time.sleep(5)  # the flood fills what it may of the queue
        loaded, errs = honest(url, params, a.seconds)
        stop.set()
        for th in threads:
            th.join(timeout=30)
    p_alone, p_loaded = ms(alone, 95), ms(loaded, 95)
    print(f"bertlab flood · {cpu()} · {a.flood} flooding addresses on /attention, {a.flood_rate:g} joins/s each · "
          f"{a.seconds:g} s")
    print(f"flood joins: {dict(sorted(codes.items()))} (200 queued; 429/503 refused)")
    print(f"honest fill-mask alone:        {len(alone)} calls, {len(alone_errs)} errors, p50 {ms(alone, 50)} ms, p95 {p_alone} ms")
    print(f"honest fill-mask beside flood: {len(loaded)} calls, {len(errs)} errors, p50 {ms(loaded, 50)} ms, p95 {p_loaded} ms"
          + (f"; first error: {errs[0]}" if errs else ""))
    ok = not errs and p_loaded <= 2 * p_alone
    print(f"goal: 0 errors and p95 within 2x of alone: {len(errs)} errors, {p_loaded / p_alone:.2f}x → {'pass' if ok else 'FAIL'}")


def summarise(a, report: dict) -> dict:
    rec, dt = report.pop("rec"), report.pop("dt")
    rows = {}
    for api in ["connect", *MIX]:
        ok = [t for n, t, e in rec if n == api and t is not None]
        errs = [e for n, _, e in rec if n == api and e]
        if ok or errs:
            rows[api] = {"calls": len(ok) + len(errs), "errors": len(errs), "first_error": errs[0] if errs else None,
                         **({"p50": ms(ok, 50), "p95": ms(ok, 95), "max": round(max(ok) * 1e3, 1)} if ok else {})}
    report.update(endpoints=rows, calls_per_s=round(sum(r["calls"] for k, r in rows.items() if k != "connect") / dt, 1),
                  fill_mask_per_s=round(rows.get("/fill_mask", {}).get("calls", 0) / dt, 1))
    n = max(1, sum(len(ok) for ok in [[t for _, t, _ in rec if t is not None]]))
    server, clients = report.pop("cpu_s")
    cores = len(os.sched_getaffinity(0))
    report["cpu_ms_per_call"] = {"server": round(1e3 * server / n, 1), "clients": round(1e3 * clients / n, 1),
                                 "server capacity, calls/s on all cores": round(cores * n / server, 1) if server else None}
    train = "with a training job" if a.train else "WITHOUT a training job"
    if a.burst:
        v = report["fill_mask_per_s"]
        report["goal"] = (f"≥ {BURST_GOAL:.0f} fill-mask calls/s on 2 cores with a job running: {v} calls/s "
                          f"{train} → {'pass' if v >= BURST_GOAL else 'FAIL'}")
    else:
        worst = max((r.get("p95", float("inf")), k) for k, r in rows.items() if k != "connect")
        report["goal"] = (f"every view's p95 ≤ {P95_GOAL_MS} ms, 30 students thinking 1 s: the slowest, {worst[1]}, "
                          f"{worst[0]} ms with {a.students} students thinking {a.think} s {train} → "
                          f"{'pass' if worst[0] <= P95_GOAL_MS else 'FAIL'}")
    return report


def show(a, r: dict) -> None:
    print(f"bertlab classroom load · {r['cpu']} · {a.students} students · {a.seconds:g} s · {r['mode']}")
    print(f"job: {r['job']}")
    print("one fill-mask on the idle server, median ms: " + "; ".join(f"{k} {v}" for k, v in r["fill_mask_ms"].items()))
    print(f"\n{'endpoint':<12}{'calls':>7}{'errors':>8}{'p50 ms':>9}{'p95 ms':>9}{'max ms':>9}")
    for api, e in r["endpoints"].items():
        print(f"{api:<12}{e['calls']:>7}{e['errors']:>8}{e.get('p50', '-'):>9}{e.get('p95', '-'):>9}{e.get('max', '-'):>9}")
        if e["first_error"]:
            print(f"    first error: {e['first_error']}")
    print(f"\n{r['calls_per_s']} calls/s overall, {r['fill_mask_per_s']} fill-mask calls/s")
    c = r["cpu_ms_per_call"]
    print(f"CPU per call: server {c['server']} ms, the students' clients {c['clients']} ms (on this same "
          f"machine); with every core to itself the server would answer about "
          f"{c['server capacity, calls/s on all cores']} calls/s")
    print(f"goal: {r['goal']}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--students", type=int, default=30)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--train", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--think", type=float, default=1.0, help="mean seconds between a student's calls")
    ap.add_argument("--burst", action="store_true", help="/fill_mask only, back to back (throughput)")
    ap.add_argument("--steps", type=int, default=3000, help="of the pre-training run; enough to outlast the window")
    ap.add_argument("--flood", type=int, default=0, help="N flooding addresses against one honest student")
    ap.add_argument("--flood-rate", type=float, default=6.0,
                    help="joins a second from each flooding address (issue 41 saw ~40 a second from 8)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if a.flood:
        return flood(a, Path(tempfile.mkdtemp(prefix="bench-flood-")))
    report = summarise(a, measure(a, Path(tempfile.mkdtemp(prefix="bench-class-"))))
    if a.json:
        print(json.dumps(report, indent=1, ensure_ascii=False))
    else:
        show(a, report)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:  # the finally blocks above stopped the job and the server
        sys.exit("interrupted: job stopped, server terminated")
