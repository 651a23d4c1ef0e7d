"""App latency and footprint on the shipped default model (issue goals: fill-mask, NSP and attention
≤ 50 ms server-side for a 32-token input; first page ≤ 8 s after `python app.py`; RSS ≤ 1.5 GB).

    python bench/bench_app.py [--reps 21]

Server-side = the tab's handler called in-process (what one request costs the server), median of
`reps` after a warm-up; startup = seconds from launching `python app.py` until the page answers 200;
RSS = the server process's resident memory after it served every endpoint once.
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
    rss = int(Path(f"/proc/{proc.pid}/status").read_text().split("VmRSS:")[1].split()[0]) / 1024
    proc.terminate()
    proc.wait(timeout=20)
    return startup, rss


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--reps", type=int, default=21)
    a = p.parse_args()
    for name, s in server_side(a.reps).items():
        print(f"{name:<12} {s * 1000:7.1f} ms  (goal <= 50 ms)")
    startup, rss = startup_and_rss()
    print(f"first page   {startup:7.1f} s   (goal <= 8 s)")
    print(f"server RSS   {rss:7.0f} MB  (goal <= 1536 MB)")


if __name__ == "__main__":
    main()
