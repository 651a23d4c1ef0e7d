"""App latency and footprint on the shipped default model (issue goals: fill-mask, NSP and attention
≤ 50 ms server-side for a 32-token input; RSS ≤ 1.5 GB; issue 40: the first page ≤ 300 kB sent,
`HEAD /` ≤ 1 s, ≤ 0.3 MB per fresh session, about 8 s of CPU from `python app.py` to the first page,
and on a phone the first tab usable within 3 s of navigation).

    python bench/bench_app.py [--reps 21] [--starts 5] [--sessions 300] [--phone 5]

Server-side = the tab's handler called in-process (what one request costs the server), median of
`reps` after a warm-up; startup = from launching `python app.py` until the page answers 200, in
seconds and in the server process's CPU seconds (median of `starts`); RSS = the server process's
resident memory after it served every endpoint once; a session = the server's RSS growth over
`sessions` fresh visitors (each opens a session and tokenizes once) at a cap that keeps them all;
phone = Chromium at 390×844 (touch), from navigation until the Lessons tab's text is shown and its
"Next" button takes a click (performance.now(), median of `phone` fresh contexts).
"""
from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

TEXT = ("the acting was [MASK] , but the story of the old man and his young son kept me watching "
        "until the very end of this long and quiet film .")
PLAIN = TEXT.replace("[MASK]", "great")


def handlers():
    from bertlab.app.ui.shared import models
    from bertlab.app.ui.text import attention_tab, fill_mask_tab, nsp_tab
    d = models.DEFAULT
    return {
        "fill_mask": lambda: fill_mask_tab.predict(TEXT, 5, False, d),
        "nsp": lambda: nsp_tab.nsp("the acting was great .", "i would watch it again .\nthe bank raised rates .", d),
        "attention": lambda: attention_tab.analyse(PLAIN, "", 1, 1, False, d),
    }


def server_side(reps: int) -> dict[str, float]:
    import torch

    from bertlab.app.ui.shared import models
    torch.set_num_threads(2)
    model, tok = models.get(models.DEFAULT)
    print(f"input: {len(tok.encode(PLAIN).ids)} tokens")
    out = {}
    for name, fn in handlers().items():
        fn()
        ts = []
        for _ in range(reps):
            t = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t)
        out[name] = statistics.median(ts)
    return out


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    return int(Path(f"/proc/{pid}/status").read_text().split("VmRSS:")[1].split()[0]) / 1024


def launch_app(extra_env: dict | None = None) -> tuple[subprocess.Popen, str, float]:
    """`python app.py` on a free port: (process, url, seconds until the page answered 200)."""
    import httpx
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "GRADIO_SERVER_PORT": str(port), **(extra_env or {})}
    t = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "app.py"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/"
    while True:
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            if proc.poll() is not None:
                raise SystemExit("app.py exited before it answered")
            time.sleep(0.1)
    return proc, url, time.perf_counter() - t


def startup_and_rss() -> tuple[float, float]:
    proc, url, startup = launch_app()
    from gradio_client import Client
    c = Client(url, verbose=False, analytics_enabled=False, download_files=False)
    c.predict(text=TEXT, api_name="/fill_mask")
    c.predict(text=PLAIN, api_name="/attention")
    c.predict(first="the acting was great .", candidates="i liked it .", api_name="/nsp")
    rss = rss_mb(proc.pid)
    stop(proc)
    return startup, rss


def stop(proc) -> None:
    proc.terminate()
    proc.wait(timeout=60)


def starts(n: int, stay_s: float = 0) -> dict:
    """Medians over n launches: wall and CPU seconds to the first page, its size and HEAD's time; with
    stay_s, how many were still serving that long after their first page."""
    import httpx
    wall, cpu, head, page, stayed = [], [], [], None, 0
    for _ in range(n):
        proc, url, t = launch_app()
        wall.append(t)
        cpu.append(cpu_s(proc.pid))
        time.sleep(stay_s)  # Gradio's own check, when it fails, ends the process within seconds
        stayed += proc.poll() is None and httpx.get(url, timeout=120).status_code == 200
        r = httpx.get(url, headers={"Accept-Encoding": "gzip"}, timeout=60)
        page = {"bytes": len(r.content), "sent": int(r.headers["content-length"]),
                "encoding": r.headers.get("content-encoding")}
        for _ in range(5):
            t0 = time.perf_counter()
            httpx.head(url, timeout=60)
            head.append(time.perf_counter() - t0)
        stop(proc)
    return {"wall_s": statistics.median(wall), "cpu_s": statistics.median(cpu), "cpu_all": cpu,
            "head_s": statistics.median(head), "page": page, "stayed": stayed, "wall_all": wall}


def beside_burners(n: int, burners: int) -> dict:
    """n starts while `burners` processes spin the CPUs: each must serve and stay up (30 s after)."""
    spin = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(burners)]
    try:
        return starts(n, stay_s=30)
    finally:
        for p in spin:
            p.kill()


def session_cost(n: int) -> dict:
    """The server's RSS growth per fresh visitor over n of them, all kept (the cap is above n)."""
    import uuid

    sys.path.insert(0, str(ROOT / "bench"))
    import bench_class as bc
    proc, url, _ = launch_app({"BERTLAB_MAX_SESSIONS": str(n + 100)})
    b = bc.Browser(url, bc.parameter_names(url))

    def visitors(k):
        for _ in range(k):
            b.session = uuid.uuid4().hex
            b.predict("/tokenize", text="a fresh visitor .", pair="")
    visitors(20)  # past the first calls' one-off allocations
    before = rss_mb(proc.pid)
    visitors(n)
    after = rss_mb(proc.pid)
    stop(proc)
    return {"sessions": n, "rss_before_mb": before, "rss_after_mb": after, "mb_each": (after - before) / n}


PHONE_READY = ("() => { const b = document.querySelector('#lesson-next button, button#lesson-next'); "
               "const t = document.querySelector('#lesson-body'); "
               "return b && !b.disabled && b.offsetParent !== null && t && t.innerText.length > 40; }")


def phone(n: int) -> dict:
    """Chromium at a phone's size: ms from navigation until the first tab is shown and takes a click."""
    from playwright.sync_api import sync_playwright
    proc, url, _ = launch_app()
    out = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", headless=True,
                                        args=["--no-sandbox", "--disable-gpu"])
            for _ in range(n):
                ctx = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
                page = ctx.new_page()
                page.goto(url, wait_until="commit")
                page.wait_for_function(PHONE_READY, timeout=120_000, polling=50)
                out.append(page.evaluate("performance.now()"))
                ctx.close()
            browser.close()
    finally:
        stop(proc)
    return {"ms": statistics.median(out), "all_ms": [round(x) for x in out]}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--reps", type=int, default=21)
    p.add_argument("--starts", type=int, default=5)
    p.add_argument("--sessions", type=int, default=300)
    p.add_argument("--phone", type=int, default=5)
    p.add_argument("--burners", type=int, default=2, help="CPU-burning processes beside the busy starts (0: skip them)")
    a = p.parse_args()
    for name, s in server_side(a.reps).items():
        print(f"{name:<12} {s * 1000:7.1f} ms  (goal <= 50 ms)")
    _, rss = startup_and_rss()
    print(f"server RSS   {rss:7.0f} MB  (goal <= 1536 MB)")
    st = starts(a.starts)
    print(f"first page   {st['wall_s']:7.1f} s, {st['cpu_s']:.1f} s of CPU (goal about 8 s; "
          f"each start: {', '.join(f'{c:.1f}' for c in st['cpu_all'])})")
    pg = st["page"]
    print(f"GET /        {pg['sent'] / 1e3:7.0f} kB sent ({pg['encoding']}), {pg['bytes'] / 1e3:.0f} kB of page "
          f"(goal <= 300 kB sent)")
    print(f"HEAD /       {st['head_s'] * 1000:7.0f} ms  (goal <= 1000 ms)")
    sc = session_cost(a.sessions)
    print(f"a session    {sc['mb_each']:7.3f} MB  ({sc['sessions']} fresh: {sc['rss_before_mb']:.0f} -> "
          f"{sc['rss_after_mb']:.0f} MB; goal <= 0.3 MB)")
    if a.phone:
        ph = phone(a.phone)
        print(f"phone        {ph['ms']:7.0f} ms to the first tab (each: {ph['all_ms']}; goal <= 3000 ms)")
    if a.burners:
        bz = beside_burners(a.starts, a.burners)
        print(f"busy starts  {bz['stayed']} of {a.starts} served and stayed up beside {a.burners} CPU burners "
              f"(first page after {', '.join(f'{w:.0f}' for w in bz['wall_all'])} s)")


if __name__ == "__main__":
    main()
