"""What the browser tests share: Debian's headless Chromium at a desktop or a phone's size, and the app
served on a free port. The `server` and `client` fixtures (conftest.py) are built on these."""
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHOTS = ROOT / "tests" / "screenshots"
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]


DESKTOP = (1280, 900)  # a class laptop
PHONE = (390, 844)  # a phone held upright: a Space is opened on phones in class


@contextlib.contextmanager
def chromium_page(size: tuple[int, int] = (1400, 1000)):
    """(browser, page, outside, errors): headless Debian Chromium with a `size` (width, height) window;
    `outside` collects any request that leaves 127.0.0.1 and `errors` any JavaScript error, for the
    test to assert empty at the end. A phone-sized page is a touch device, as phones are."""
    from urllib.parse import urlparse

    from playwright.sync_api import sync_playwright
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian chromium is not installed (.ci/run installs it)")
    SHOTS.mkdir(exist_ok=True)
    outside, errors = [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        phone = size[0] < 600
        page = browser.new_page(viewport={"width": size[0], "height": size[1]}, is_mobile=phone, has_touch=phone)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("request", lambda r: outside.append(r.url) if urlparse(r.url).scheme in ("http", "https", "ws", "wss")
                and urlparse(r.url).hostname not in ("127.0.0.1", "localhost") else None)
        yield browser, page, outside, errors
        browser.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serving(argv: list[str], folder: Path, env: dict | None = None):
    """(url, log path): the app served by `python argv` on a free port, its runs under `folder`,
    with `env` added to the environment; stopped on exit. The log holds its stdout and stderr."""
    import httpx
    port = free_port()
    env = {**os.environ, "GRADIO_SERVER_PORT": str(port), "GRADIO_SERVER_NAME": "127.0.0.1",
           "BERTLAB_RUNS_DIR": str(folder / "runs"), "PYTHONUNBUFFERED": "1", **(env or {})}
    log = open(folder / "app.log", "w+")
    proc = subprocess.Popen([sys.executable, *argv], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/"
    t0 = time.time()
    try:
        while time.time() - t0 < 120:
            try:
                if httpx.get(url, timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None:
                log.seek(0)
                pytest.fail(f"{argv[0]} exited: {log.read()[-3000:]}")
            time.sleep(0.5)
        else:
            pytest.fail(f"{argv[0]} did not answer within 120 s")
        yield url, Path(log.name)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        kill_runs_under(folder / "runs")  # its probe worker leaves by itself (workers._exit_with_parent)
        log.close()


def kill_runs_under(runs: Path) -> None:
    """Training jobs run in their own process groups (they outlive a server restart, by design): a test's
    server is gone for good, so its runs go too, not training on in the background for minutes."""
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            with contextlib.suppress(OSError):
                cmd = (d / "cmdline").read_bytes().split(b"\0")
                if b"bertlab" in cmd and any(str(runs).encode() in c for c in cmd):
                    os.kill(int(d.name), signal.SIGKILL)


def box(locator) -> dict:
    """An element's rectangle on the page (x, y, w, h)."""
    return locator.evaluate("e => { const r = e.getBoundingClientRect(); return {x: r.x, y: r.y, w: r.width, "
                            "h: r.height}; }")


def figures_fit(page, plots, width: int, parts: str = ".legend, .annotation-text, .gtitle") -> None:
    """Nothing wider than the window; each plotly figure's legend, notes and title inside its own figure."""
    wide = page.evaluate("document.documentElement.scrollWidth")
    assert wide <= width + 2, f"the page is {wide} px wide on a {width} px window"
    for fig in plots.locator(".js-plotly-plot").all():
        frame = box(fig.locator(".main-svg").first)
        for part in fig.locator(parts).all():
            b = box(part)
            assert frame["x"] - 1 <= b["x"] and b["x"] + b["w"] <= frame["x"] + frame["w"] + 1, (b, frame)
            assert b["y"] + b["h"] <= frame["y"] + frame["h"] + 1, f"cut off at the bottom: {b} in {frame}"
