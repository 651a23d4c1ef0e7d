"""The web server's memory stays flat however many strangers come (issue 30, item 1): Gradio kept
10,000 sessions, each with a copy of the page's config (~1.3 MB here), so 500 fresh visitors took the
server from 533 to 1,195 MB for good. A session now holds only what it changed (serving.light_sessions,
issue 40); the cap still bounds what those hold."""
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


CAP = 5  # sessions the server keeps: small, so a few dozen visitors show the bound
PER_SESSION_MB = 0.29  # what a kept session of one such visitor cost at a cap of 1,000 (2-core EPYC)
# a text the default model reads to its last position: its pieces, table and JSON stay in the session
LONG_TEXT = " ".join(["the quiet film kept me watching until the very end ."] * 40)


@pytest.fixture(scope="module")
def small_server(tmp_path_factory):
    """(url, runs folder): a server that keeps 5 sessions and deletes uploads after 2 s."""
    folder = tmp_path_factory.mktemp("bounded")
    with serving(["app.py"], folder, {"BERTLAB_MAX_SESSIONS": str(CAP), "BERTLAB_UPLOAD_AGE_S": "2"}) as (url, log):
        yield url, folder / "runs"
    assert "Traceback" not in log.read_text(errors="replace")


@pytest.mark.slow
def test_fresh_sessions_do_not_pile_up(small_server):
    """65 fresh visitors against a cap of 5: the 50 after the 15th would hold ~15 MB if kept."""
    from gradio_client import Client
    url, runs = small_server
    client = Client(url, verbose=False, analytics_enabled=False, download_files=False)
    rss = []
    for i in range(65):
        client.reset_session()  # a new visitor
        client.predict(text=LONG_TEXT, pair="", choice="default (shipped)", api_name="/tokenize")
        if i in (14, 64):
            rss.append(_server_rss_mb(runs))
    print(f"server RSS after 15 and 65 sessions: {rss[0]:.0f} and {rss[1]:.0f} MB")
    # all 50 kept would be ~15 MB more; what remains is allocator noise
    assert rss[1] - rss[0] < 50 * PER_SESSION_MB / 2, rss


@pytest.mark.slow
def test_uploaded_files_do_not_pile_up(small_server):
    """/gradio_api/upload took any number of files and kept them for good (issue 30, item 3)."""
    import time

    import httpx
    url, _ = small_server
    got = httpx.post(url + "gradio_api/upload", files=[("files", ("a.txt", b"some corpus\n" * 1000))]).json()
    kept = Path(got[0])
    assert kept.exists()
    end = time.monotonic() + 120  # deleted within seconds of its 2 s; a busy machine may take longer
    while kept.exists() and time.monotonic() < end:
        time.sleep(0.5)
    assert not kept.exists(), "an upload is still there 2 minutes after its 2 s"
