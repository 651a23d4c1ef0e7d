"""What the browser tests share: Debian's headless Chromium at a desktop or a phone's size, and the app
served on a free port. The `server` and `client` fixtures (conftest.py) are built on these."""
import contextlib
import os
import re
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


_PLAYWRIGHT = None
_BROWSER = None
# A busy machine renders slowly: wait for what a test waits on, never fail on a short clock. Beside two
# CPU burners and the other worker, one load of the fourteen-tab page at a phone's width took over 120 s.
WAIT_MS = 300_000
TIMEOUT_MS = WAIT_MS  # Playwright's default for every action and wait of a page


def shared_browser():
    """One headless Chromium per test process (an xdist worker), launched when a test first needs it;
    each test gets a fresh context of its own (chromium_page), so nothing carries over between tests."""
    global _PLAYWRIGHT, _BROWSER
    if _BROWSER is None or not _BROWSER.is_connected():
        from playwright.sync_api import sync_playwright
        if not Path(CHROMIUM).exists():
            pytest.skip("Debian chromium is not installed (.ci/run installs it)")
        _PLAYWRIGHT = _PLAYWRIGHT or sync_playwright().start()
        _BROWSER = _PLAYWRIGHT.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
    return _BROWSER


def close_shared_browser() -> None:
    global _PLAYWRIGHT, _BROWSER
    with contextlib.suppress(Exception):
        if _BROWSER is not None:
            _BROWSER.close()
        if _PLAYWRIGHT is not None:
            _PLAYWRIGHT.stop()
    _PLAYWRIGHT = _BROWSER = None


def run_async(coro):
    """asyncio.run(coro) in a thread of its own: the shared browser's sync Playwright keeps an event loop
    running in the test's thread, where asyncio.run is refused."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


def shots_wanted() -> bool:
    return os.environ.get("BERTLAB_SHOTS") == "1"


def shot(target, name: str, **kw) -> None:
    """A screenshot of a page or an element into tests/screenshots/NAME, only with BERTLAB_SHOTS=1 (to look
    at the pages by eye); a failing browser test saves its pages whatever the setting (chromium_page)."""
    if shots_wanted():
        SHOTS.mkdir(exist_ok=True)
        target.screenshot(path=str(SHOTS / name), **kw)


def _failed_shots(contexts) -> None:
    test = os.environ.get("PYTEST_CURRENT_TEST", "test").split(" ")[0]
    stem = re.sub(r"[^\w.-]+", "_", test.split("::", 1)[-1])[:80]
    SHOTS.mkdir(exist_ok=True)
    for i, page in enumerate(p for c in contexts for p in c.pages):
        with contextlib.suppress(Exception):
            page.screenshot(path=str(SHOTS / f"FAILED_{stem}_{i}.png"), full_page=True, timeout=20_000)


@contextlib.contextmanager
def chromium_page(size: tuple[int, int] = (1400, 1000)):
    """(browser, page, outside, errors): a fresh page of the shared headless Chromium in a `size` (width,
    height) window; `outside` collects any request that leaves 127.0.0.1 and `errors` any JavaScript error,
    for the test to assert empty at the end. A phone-sized page is a touch device, as phones are. Pages
    and contexts the test opens on `browser` are closed when the block ends; when it raises, every such
    page is saved under tests/screenshots/FAILED_*."""
    from urllib.parse import urlparse

    browser = shared_browser()
    before = set(browser.contexts)
    outside, errors = [], []
    page = new_page(browser, size)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: outside.append(r.url) if urlparse(r.url).scheme in ("http", "https", "ws", "wss")
            and urlparse(r.url).hostname not in ("127.0.0.1", "localhost") else None)
    try:
        yield browser, page, outside, errors
    except BaseException:
        _failed_shots([c for c in browser.contexts if c not in before])
        raise
    finally:
        for c in browser.contexts:
            if c not in before:
                with contextlib.suppress(Exception):
                    c.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(argv: list[str], folder: Path, env: dict, attempt: int):
    """(process, url, log file) once the page answers 200: a slow start is waited for as long as the
    process lives (10 min at most); (None, None, log) when it exited."""
    import httpx
    port = free_port()
    env = {**os.environ, "GRADIO_SERVER_PORT": str(port), "GRADIO_SERVER_NAME": "127.0.0.1",
           "BERTLAB_RUNS_DIR": str(folder / "runs"), "PYTHONUNBUFFERED": "1", **env}
    log = open(folder / ("app.log" if attempt == 0 else f"app-{attempt}.log"), "w+")
    proc = subprocess.Popen([sys.executable, *argv], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/"
    t0 = time.time()
    while time.time() - t0 < 600:
        try:
            if httpx.get(url, timeout=60).status_code == 200:
                return proc, url, log
        except httpx.HTTPError:
            pass
        if proc.poll() is not None:
            return None, None, log
        time.sleep(0.5)
    stop(proc)
    return None, None, log


def stop(proc) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextlib.contextmanager
def serving(argv: list[str], folder: Path, env: dict | None = None):
    """(url, log path): the app served by `python argv` on a free port, its runs under `folder`,
    with `env` added to the environment; stopped on exit. The log holds its stdout and stderr.
    A start is awaited as long as the process runs; one that fails is tried once more, and a second
    failure fails the test with both logs."""
    proc, url, log = _start(argv, folder, env or {}, 0)
    if proc is None:
        log.seek(0)
        first = log.read()[-3000:]
        print(f"{argv[0]} failed to start once; trying again. Its log:\n{first}", file=sys.stderr)
        proc, url, log = _start(argv, folder, env or {}, 1)
        if proc is None:
            log.seek(0)
            pytest.fail(f"{argv[0]} failed to start twice.\nFirst log:\n{first}\nSecond log:\n{log.read()[-3000:]}")
    try:
        yield url, Path(log.name)
    finally:
        stop(proc)
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


def new_page(browser, size: tuple[int, int]):
    """A page in a context of its own (another student: own storage) at `size`, a phone's width a
    touch device; closed with the chromium_page block that lent `browser`."""
    phone = size[0] < 600
    context = browser.new_context(viewport={"width": size[0], "height": size[1]}, is_mobile=phone, has_touch=phone)
    context.set_default_timeout(TIMEOUT_MS)
    return context.new_page()


def upload(page, box: str, path) -> None:
    """Give the file box `box` (a CSS selector) the file at `path` and wait until it shows the file's name.
    The file is set again only if the browser never sent it: on a loaded machine the box's input can be
    swapped for a new one as the page settles, and the first file then went nowhere (CI #3: no name in
    300 s). An upload that was sent and failed is the app's failure, and the test fails on it."""
    sent = []
    listen = lambda r: sent.append(f"{r.method} {r.url.split('?')[0][-40:]}") if "/upload" in r.url else None  # noqa: E731
    page.on("request", listen)
    name = page.locator(box).get_by_text(Path(path).name)
    try:
        for attempt in range(3):
            if not sent:  # the first time, or the browser never sent the last one
                page.locator(f"{box} input[type=file]").set_input_files(str(path))
            try:
                name.wait_for(timeout=60_000 if attempt < 2 else WAIT_MS)
                return
            except Exception:
                if sent:  # sent: wait for the answer as long as for anything else
                    try:
                        name.wait_for(timeout=WAIT_MS)
                        return
                    except Exception:
                        raise AssertionError(f"{box}: the upload was sent ({sent}) and the box never showed it")
        raise AssertionError(f"{box}: the browser never sent the file")
    finally:
        page.remove_listener("request", listen)


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


def overlapping_labels(plot) -> list[tuple[str, str]]:
    """Pairs of a plotly figure's point labels (and notes) drawn over each other (issue 42, item 8: "S3"
    under "S4", "base" over "base")."""
    return plot.evaluate("""el => {
      const b = [...el.querySelectorAll('.textpoint text, .annotation-text')].filter(t => t.textContent.trim())
        .map(t => [t.textContent, t.getBoundingClientRect()]).filter(([, r]) => r.width > 0);
      const out = [];
      for (let i = 0; i < b.length; i++) for (let j = i + 1; j < b.length; j++) {
        const [p, q] = [b[i][1], b[j][1]];
        if (Math.min(p.right, q.right) - Math.max(p.left, q.left) > 1 &&
            Math.min(p.bottom, q.bottom) - Math.max(p.top, q.top) > 1) out.push([b[i][0], b[j][0]]);
      }
      return out;
    }""")


def cut_columns(table) -> list[str]:
    """A Gradio Dataframe's column headers not wholly in sight: past the right edge of the table's box
    (hidden until scrolled to), their words cut short, or broken over lines ("p|o|s") (issue 42, item 7)."""
    return table.evaluate("""el => {
      const box = el.getBoundingClientRect();
      const lines = e => { const r = document.createRange(); r.selectNodeContents(e);
                           return new Set([...r.getClientRects()].map(q => Math.round(q.top))).size; };
      return [...el.querySelectorAll('[role=columnheader], thead th')].filter(h => h.offsetParent).filter(h => {
        const r = h.getBoundingClientRect();
        const clipped = [...h.querySelectorAll('span, div')].some(s => s.scrollWidth > s.clientWidth + 1);
        return r.right > box.right + 1 || clipped || lines(h.querySelector('span.header') || h) > 1;
      }).map(h => h.innerText.trim());
    }""")
