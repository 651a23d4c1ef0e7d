"""Quiet server logs: a visitor's mistake is a message on the page and nothing in the server log;
a real bug still logs its traceback.

One server for the module, started through a launcher written into tmp_path (none of it ships):
job launches are refused there, so no bad input can start a training run, and /architecture has
an injected bug at one magic batch size.
"""
import os
import time

import pytest
from browser import ROOT, serving

BUG_BATCH = 77  # within the batch slider's range, so Gradio passes it on
LAUNCHER = f'''
import sys
sys.path.insert(0, {str(ROOT)!r})  # before the launcher's own folder
import app  # noqa: E402
from bertlab.app import jobs  # noqa: E402
from bertlab.app.ui.labs import architecture_tab  # noqa: E402


def no_jobs(self, name, *args, **kwargs):
    raise ValueError("this test server starts no jobs")


def buggy_memory_table(c, batch, seq_len, real=architecture_tab.memory_table):
    if batch == {BUG_BATCH}:
        raise RuntimeError("an injected bug")
    return real(c, batch, seq_len)


jobs.JobManager.start = no_jobs
architecture_tab.memory_table = buggy_memory_table
if __name__ == "__main__":  # not in the probe worker, which imports this script again (spawn)
    app.main()
'''

HUGE = "the film was long . " * 15_000  # 300,000 characters: over every text box's limit
ODD = "\u202e\u200b😀 ﷽ שלום \x00\x07 [MASK] \ufffd"  # bidi override, zero width, emoji, RTL, controls
TEXT = ["", None, "  \n\t", HUGE, ODD, 12345]
NUMBER = [None, "abc", -1, 0, 2.5, 10 ** 30, 1e308, [1]]  # JSON has no inf or NaN
MODEL = ["/no/such/folder", "nobody/no-such-bert", "run: ../../etc", " ", 7]
CHOICE = ["no such option", None, 3]
LIST = [None, "just a string", [7], ["../.."], "x" * 300]
BY_TYPE = {"str": TEXT, "float": NUMBER, "int": NUMBER, "bool": [None, "yes"]}
BASE = {"/probe": {"sample": 60, "compare": []}}  # a base call that finishes quickly when nothing is wrong


def bad_values(param: dict, files: list) -> list:
    name, kind = param["parameter_name"], param["python_type"]["type"]
    if name == "choice":
        return MODEL
    if name == "owner":
        return [None, "short", 5]
    if name in ("name", "overlay") or kind.startswith("list"):
        return LIST
    if kind.startswith("Literal"):
        return CHOICE
    if kind == "filepath":
        return [None, "/etc/passwd"] + files  # a bare path is not an upload
    return BY_TYPE.get(kind, TEXT)


def calls(api: dict, files: list, full: bool = False):
    """(endpoint, parameter, value, keyword arguments): bad values with the other parameters kept at their
    defaults, then every parameter None. Covering, not repeating: per endpoint, each parameter gets a bad
    value and each bad value of a kind goes to one parameter of that kind (its parameters in turn), so
    every value and every parameter is tried. `full` (BERTLAB_FUZZ=full) sends every value to every
    parameter: about three times the calls, for a release."""
    for endpoint, info in api["named_endpoints"].items():
        params = info["parameters"]
        base = {p["parameter_name"]: p["parameter_default"] for p in params} | BASE.get(endpoint, {})
        kinds = {}  # the same list of bad values -> the parameters that take it
        for p in params:
            values = bad_values(p, files)
            kinds.setdefault(tuple(map(repr, values)), (values, []))[1].append(p["parameter_name"])
        for values, names in kinds.values():
            pairs = ([(n, v) for n in names for v in values] if full else
                     [(names[k % len(names)], values[k % len(values)]) for k in range(max(len(names), len(values)))])
            for name, v in pairs:
                yield endpoint, name, v, {**base, name: v}
        yield endpoint, "*", None, dict.fromkeys(base)


@pytest.fixture(scope="module")
def quiet_server(tmp_path_factory):
    from gradio_client import Client, handle_file
    folder = tmp_path_factory.mktemp("quiet")
    (folder / "launch.py").write_text(LAUNCHER)
    (folder / "empty.txt").write_text("")
    (folder / "binary.csv").write_bytes(bytes(range(256)) * 8)
    with serving([str(folder / "launch.py")], folder) as (url, log):
        client = Client(url, verbose=False, analytics_enabled=False, download_files=False)
        yield client, log, [handle_file(str(folder / "empty.txt")), handle_file(str(folder / "binary.csv"))]


def run(client, endpoint, kw):
    """The API's answer, or the AppError's message."""
    from gradio_client.exceptions import AppError
    try:
        return client.predict(**kw, api_name=endpoint)
    except AppError as e:
        return str(e)


@pytest.mark.slow
def test_bad_inputs_to_every_endpoint_log_no_traceback(quiet_server):
    from concurrent.futures import CancelledError

    from gradio_client.exceptions import AppError
    client, log, files = quiet_server
    api = client.view_api(print_info=False, return_format="dict")
    assert len(api["named_endpoints"]) >= 15
    todo = list(calls(api, files, full=os.environ.get("BERTLAB_FUZZ") == "full"))
    assert {(e, n) for e, n, _, _ in calls(api, files, True)} == {(e, n) for e, n, _, _ in todo}  # every parameter
    noisy, t0 = [], time.time()
    for i in range(0, len(todo), 16):  # a batch at a time, so a traceback points at 16 calls at most
        batch = todo[i:i + 16]
        start = log.stat().st_size
        jobs = [client.submit(**kw, api_name=endpoint) for endpoint, _, _, kw in batch]
        for job, (endpoint, name, value, kw) in zip(jobs, batch):
            try:
                try:
                    job.result(timeout=120)
                except CancelledError:  # gradio_client can drop a reply among many in flight: ask alone
                    client.predict(**kw, api_name=endpoint)
            except AppError as e:  # a clear message: short, no traceback
                assert str(e).strip() and len(str(e)) < 1000 and "Traceback" not in str(e), (endpoint, name, e)
        if "Traceback" in log.read_text(errors="replace")[start:]:
            noisy += [(endpoint, name, f"{value!r:.40}") for endpoint, name, value, _ in batch]
    print(f"{len(todo)} bad calls in {time.time() - t0:.0f} s")
    assert not noisy, f"one of these logged a traceback: {noisy}\n" + log.read_text(errors="replace")[-5000:]


@pytest.mark.slow
def test_a_real_bug_still_logs_its_traceback(quiet_server):
    client, log, _ = quiet_server
    start = log.stat().st_size
    good = dict(layers=2, hidden=128, heads=2, intermediate=512, vocab=1000, max_positions=128, seq_len=64)
    assert not isinstance(run(client, "/architecture", {**good, "batch": 8}), str)
    assert isinstance(run(client, "/architecture", {**good, "hidden": 100, "heads": 3}), str)  # a mistake
    msg = run(client, "/architecture", {**good, "batch": BUG_BATCH})
    assert isinstance(msg, str) and "injected" not in msg  # the visitor sees an error, not the internals
    time.sleep(0.5)
    text = log.read_text(errors="replace")[start:]
    assert text.count("Traceback") == 1 and "RuntimeError: an injected bug" in text, text[-3000:]
