"""The app as people use it: a real server, its API through gradio_client, the page in Chromium."""
import contextlib
import os
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


@contextlib.contextmanager
def chromium_page():
    """(browser, page, outside, errors): headless Debian Chromium; `outside` collects any request that
    leaves 127.0.0.1 and `errors` any JavaScript error, for the test to assert empty at the end."""
    from urllib.parse import urlparse

    from playwright.sync_api import sync_playwright
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian chromium is not installed (.ci/run installs it)")
    SHOTS.mkdir(exist_ok=True)
    outside, errors = [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
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
        log.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with serving(["app.py"], tmp_path_factory.mktemp("app")) as (url, log):
        yield url
    text = log.read_text(errors="replace")
    # a user's bad input is a message, never a traceback in the log; anything else is a bug
    assert "Traceback" not in text, text[-4000:]


@pytest.fixture(scope="module")
def client(server):
    from gradio_client import Client
    return Client(server, verbose=False, analytics_enabled=False, download_files=False)


API = {  # api name: (good keyword arguments, bad keyword arguments, words expected in the error)
    "/tokenize": ({"text": "the river bank", "pair": "it was muddy ."}, {"text": "   "}, "empty"),
    "/mask_preview": ({"text": "the acting was great and the plot was fun ."}, {"text": ""}, "empty"),
    "/fill_mask": ({"text": "the acting was [MASK] ."}, {"text": "no gap here"}, "[MASK]"),
    "/nsp": ({"first": "the film was long .", "candidates": "i liked it .\nthe bank raised rates ."},
             {"first": "the film was long .", "candidates": ""}, "candidate sentence"),
    "/attention": ({"text": "the river bank was muddy .", "pair": ""}, {"text": "\u200b\u200b"}, "no tokens"),
    "/embeddings": ({"word": "bank", "sentences": "the river bank was muddy .\nthe bank raised rates ."},
                    {"word": "bank", "sentences": "the river bank was muddy .\nwe went home ."}, "we went home"),
    "/architecture": ({"layers": 2, "hidden": 128, "heads": 2}, {"hidden": 100, "heads": 3}, "divisible"),
}


def test_api_endpoints_are_named(client):
    names = set(client.view_api(print_info=False, return_format="dict")["named_endpoints"])
    assert set(API) <= names


@pytest.mark.parametrize("name", API)
def test_each_api_gives_data_and_clear_errors(client, name):
    from gradio_client.exceptions import AppError
    good, bad, words = API[name]
    out = client.predict(**good, api_name=name)
    assert out is not None and "Traceback" not in str(out)
    with pytest.raises(AppError) as e:
        client.predict(**bad, api_name=name)
    msg = str(e.value)
    assert words.lower() in msg.lower() and "Traceback" not in msg and len(msg) < 400, msg


def test_fill_mask_api_returns_widget_fields(client):
    out = client.predict(text="the acting was [MASK] .", api_name="/fill_mask")
    data = next(o for o in out if isinstance(o, list))  # the JSON output: one list per [MASK]
    assert {"score", "token", "token_str", "sequence"} <= set(data[0][0])
    scores = [c["score"] for c in data[0]]
    assert scores == sorted(scores, reverse=True) and 0 < sum(scores) <= 1 + 1e-6


@pytest.mark.parametrize("text, words", [
    ("", "empty"), ("   \n\t", "empty"), ("no gap here", "[MASK]"), ("[MASK] " * 50, "at most"),
])
def test_fill_mask_bad_input_messages(client, text, words):
    from gradio_client.exceptions import AppError
    with pytest.raises(AppError) as e:
        client.predict(text=text, api_name="/fill_mask")
    assert words.lower() in str(e.value).lower()


def test_long_and_odd_text_is_served(client):
    long = ("the acting was [MASK] . " + "the film was long and slow . " * 400)[:10_000]
    assert client.predict(text=long, api_name="/fill_mask")
    for odd in ("😀 [MASK] 🎬", "日本語の[MASK]映画", "مرحبا [MASK] العالم", "a\x00b\x07 [MASK] \u202e"):
        assert client.predict(text=odd, api_name="/fill_mask")
    tok = client.predict(text=long, pair="", api_name="/tokenize")
    assert "cut" in str(tok).lower()


def test_unknown_models_are_clear_errors_and_the_server_lives(client):
    from gradio_client.exceptions import AppError
    for choice, words in (("/no/such/folder", "no such folder"), ("nobody/no-such-bert", "hub")):
        with pytest.raises(AppError) as e:
            client.predict(text="a [MASK] film .", choice=choice, api_name="/fill_mask")
        assert words in str(e.value) and "Traceback" not in str(e.value)
    assert client.predict(text="a [MASK] film .", api_name="/fill_mask")  # still serving


TABS = [  # tab, button to press (None: the tab shows its example on load), what must render
    ("Tokenize", "Tokenize", "text=[CLS]"),
    ("Masking lab", "Mask", ".js-plotly-plot"),
    ("Fill-mask", "Predict", ".js-plotly-plot"),
    ("Next sentence", "Rank the B's", ".js-plotly-plot"),
    ("Attention", "Show attention", ".js-plotly-plot"),
    ("Embeddings", "Compare", ".js-plotly-plot"),
    ("Architecture", "Size it", ".js-plotly-plot"),
]


@pytest.mark.slow
def test_every_tab_in_chromium(server):
    with chromium_page() as (browser, page, outside, errors):
        page.goto(server)  # not "networkidle": Gradio keeps a heartbeat stream open
        page.get_by_text("bertlab").first.wait_for()
        for i, (tab, button, check) in enumerate(TABS):
            page.get_by_role("tab", name=tab).click()
            panel = page.locator("[role=tabpanel]:visible").first
            panel.get_by_role("button", name=button, exact=True).first.click()
            panel.locator(check).first.wait_for(timeout=60_000)
            page.wait_for_timeout(500)
            page.screenshot(path=str(SHOTS / f"{i}_{tab.lower().replace(' ', '_')}.png"), full_page=True)
            assert panel.get_by_text("Traceback").count() == 0
        page.get_by_role("tab", name="Attention").click()  # the offline bertviz view draws into an svg
        page.get_by_role("tab", name="bertviz").click()
        frame = page.frame_locator("iframe:visible").first
        frame.locator("svg").first.wait_for(timeout=60_000)
        page.locator("iframe:visible").first.screenshot(path=str(SHOTS / "bertviz_head_view.png"))
        page.get_by_role("tab", name="Fill-mask").click()
        box = page.get_by_label("Text with [MASK]")
        box.fill("")
        page.get_by_role("button", name="Predict").click()
        page.wait_for_timeout(2000)
        page.screenshot(path=str(SHOTS / "error.png"))
        page.get_by_text("text is empty").first.wait_for(timeout=15000)  # a clear message, not a traceback
    assert not outside, f"requests left the machine: {outside[:5]}"
    assert not errors, errors
