"""The app as people use it: a real server, its API through gradio_client, the page in Chromium."""
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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    import httpx
    port = free_port()
    env = {**os.environ, "GRADIO_SERVER_PORT": str(port), "GRADIO_SERVER_NAME": "127.0.0.1",
           "BERTLAB_RUNS_DIR": str(tmp_path_factory.mktemp("runs"))}
    log = open(tmp_path_factory.mktemp("log") / "app.log", "w+")
    proc = subprocess.Popen([sys.executable, "app.py"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/"
    t0 = time.time()
    while time.time() - t0 < 120:
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if proc.poll() is not None:
            log.seek(0)
            pytest.fail(f"app.py exited: {log.read()[-3000:]}")
        time.sleep(0.5)
    else:
        proc.kill()
        pytest.fail("app.py did not answer within 120 s")
    yield url
    proc.terminate()
    proc.wait(timeout=20)
    log.seek(0)
    text = log.read()
    # Gradio logs a traceback for every gr.Error (a user's bad input); anything else is a bug.
    assert text.count("Traceback") == text.count("gradio.exceptions.Error: "), text[-4000:]


@pytest.fixture(scope="module")
def client(server):
    from gradio_client import Client
    return Client(server, verbose=False, analytics_enabled=False, download_files=False)


def test_api_endpoints_are_named(client):
    names = set(client.view_api(print_info=False, return_format="dict")["named_endpoints"])
    assert {"/tokenize", "/mask_preview", "/fill_mask", "/nsp", "/attention", "/embeddings"} <= names


def test_fill_mask_api_returns_widget_fields(client):
    out = client.predict(text="the acting was [MASK] .", api_name="/fill_mask")
    data = next(o for o in out if isinstance(o, list))  # the JSON output: one list per [MASK]
    assert {"score", "token", "token_str", "sequence"} <= set(data[0][0])
    scores = [c["score"] for c in data[0]]
    assert scores == sorted(scores, reverse=True) and 0 < sum(scores) <= 1 + 1e-6


def test_bad_input_is_a_clear_error_and_the_server_lives(client):
    from gradio_client.exceptions import AppError
    for bad in ("", "   ", "no gap here"):
        with pytest.raises(AppError) as e:
            client.predict(text=bad, api_name="/fill_mask")
        assert "Traceback" not in str(e.value) and len(str(e.value)) < 300
    out = client.predict(text="a [MASK] film .", api_name="/fill_mask")  # still serving
    assert out


def test_tokenize_and_attention_apis(client):
    tok = client.predict(text="the river bank", api_name="/tokenize")
    assert "[CLS]" in str(tok)
    att = client.predict(text="the river bank", api_name="/attention")
    assert "tokens" in str(att)


@pytest.mark.slow
def test_page_in_chromium(server):
    from playwright.sync_api import sync_playwright
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian chromium is not installed (.ci/run installs it)")
    SHOTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(server, wait_until="networkidle")
        page.get_by_text("bertlab").first.wait_for()
        page.screenshot(path=str(SHOTS / "home.png"), full_page=True)
        page.get_by_role("tab", name="Fill-mask").click()
        box = page.get_by_label("Text with [MASK]")
        box.fill("i would [MASK] recommend this film .")
        page.get_by_role("button", name="Predict").click()
        page.locator(".js-plotly-plot").first.wait_for(timeout=30000)
        page.screenshot(path=str(SHOTS / "fill_mask.png"), full_page=True)
        box.fill("")
        page.get_by_role("button", name="Predict").click()
        page.get_by_text("empty").first.wait_for(timeout=15000)  # a clear message, not a traceback
        assert page.get_by_text("Traceback").count() == 0
        browser.close()
    assert not errors, errors
