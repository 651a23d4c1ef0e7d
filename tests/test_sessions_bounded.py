"""The web server's memory stays flat however many strangers come (issue 30, item 1): Gradio copied
the page's config (~1.3 MB here) into every new session and kept 10,000 of them, so 500 fresh
visitors took the server from 533 to 1,195 MB for good."""
import os
from pathlib import Path

import pytest
from browser import serving


def _server_rss_mb(runs: Path) -> float:
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            env = (d / "environ").read_bytes()
            cmd = (d / "cmdline").read_bytes()
        except OSError:
            continue
        if b"app.py" in cmd and f"BERTLAB_RUNS_DIR={runs}".encode() in env:
            status = (d / "status").read_text()
            return int(next(line for line in status.splitlines() if line.startswith("VmRSS")).split()[1]) / 1024
    raise AssertionError("the server process was not found")


@pytest.mark.slow
def test_fresh_sessions_do_not_pile_up(tmp_path):
    from gradio_client import Client
    with serving(["app.py"], tmp_path, {"BERTLAB_MAX_SESSIONS": "40"}) as (url, log):
        client = Client(url, verbose=False, analytics_enabled=False, download_files=False)
        rss = []
        for i in range(360):
            client.reset_session()  # a new visitor
            client.predict(text="a fresh visitor .", pair="", choice="default (shipped)", api_name="/tokenize")
            if i in (119, 359):
                rss.append(_server_rss_mb(tmp_path / "runs"))
        print(f"server RSS after 120 and 360 sessions: {rss[0]:.0f} and {rss[1]:.0f} MB")
        # 240 more sessions kept would be ~310 MB more; what remains is allocator noise
        assert rss[1] - rss[0] < 80, rss
    assert "Traceback" not in log.read_text(errors="replace")


@pytest.mark.slow
def test_uploaded_files_do_not_pile_up(tmp_path):
    """/gradio_api/upload took any number of files and kept them for good (issue 30, item 3)."""
    import time

    import httpx
    with serving(["app.py"], tmp_path, {"BERTLAB_UPLOAD_AGE_S": "2"}) as (url, log):
        got = httpx.post(url + "gradio_api/upload", files=[("files", ("a.txt", b"some corpus\n" * 1000))]).json()
        kept = Path(got[0])
        assert kept.exists()
        end = time.monotonic() + 20
        while kept.exists() and time.monotonic() < end:
            time.sleep(0.5)
        assert not kept.exists(), "an upload is still there 20 s after its 2 s"
