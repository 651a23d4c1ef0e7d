"""The app as a hostile visitor meets it on a classroom server (BERTLAB_CLASSROOM=1), through its HTTP
API: refused with a clear message, no server path in any message, nothing deleted, nothing of another
visitor's readable or changeable. Plus the CLI's export, which must never delete what is not a model."""
import hashlib
import re
import shutil
import time
from pathlib import Path

import pytest
from browser import ROOT, serving

from bertlab.app.cli import main as cli
from bertlab.app.identity import new_id
from bertlab.checkpoint import DEFAULT_MODEL_DIR
from bertlab.train import runs
from bertlab.train.specs import PretrainSpec

SECRET = "do-not-leak-7f3a"
TEACHER_TOKEN = "class-of-2026-token"
ALICE, EVE = new_id("."), new_id(".")  # browser ids, as the server mints them (the tests share its secret)


def _run_folder(root: Path, name: str, owner: str | None) -> Path:
    """A finished pre-training run with a model; `owner` None: one the CLI made (no job.json)."""
    d = root / name
    shutil.copytree(DEFAULT_MODEL_DIR, d / "model")
    runs.Run(d).write_spec(PretrainSpec(steps=5))
    runs.write_status(d, state="finished", step=5, total_steps=5, pid=1)
    if owner is not None:
        runs.write_json_atomic(d / "job.json", {"pid": 1, "owner": owner, "started": time.time(), "returncode": 0,
                                                "kind": "pretrain"})
    return d


def _digest(folder: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(folder.rglob("*")):
        h.update(str(f.relative_to(folder)).encode() + (f.read_bytes() if f.is_file() else b""))
    return h.hexdigest()


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """(client, runs folder, secret file, log): a classroom server with runs of its own."""
    from gradio_client import Client
    folder = tmp_path_factory.mktemp("classroom")
    root = folder / "runs"
    secret = folder / "secret" / "grades.csv"
    secret.parent.mkdir()
    secret.write_text(f"text,label\n{SECRET} one,a\n{SECRET} two,b\n" * 20)
    _run_folder(root, "cli-run", None)
    _run_folder(root, "alice-run", ALICE)
    _run_folder(root, "bob-run", "bob-browser-id-0003")
    env = {"BERTLAB_CLASSROOM": "1", "BERTLAB_MAX_RUNS": "2", "BERTLAB_MAX_UPLOAD_MB": "0.05",
           "BERTLAB_TEACHER_TOKEN": TEACHER_TOKEN}
    with serving(["app.py"], folder, env) as (url, log):
        yield Client(url, verbose=False, analytics_enabled=False, download_files=False), root, secret, log
    text = log.read_text(errors="replace")
    assert "Traceback" not in text, text[-4000:]


def refused(client, api: str, **kw) -> str:
    from gradio_client.exceptions import AppError
    with pytest.raises(AppError) as e:
        client.predict(**kw, api_name=api)
    msg = str(e.value)
    assert "Traceback" not in msg and len(msg) < 500, msg
    return msg


def assert_no_paths(msg: str, *paths: Path) -> None:
    for p in (*paths, ROOT, Path.home()):
        assert str(p) not in msg, (p, msg)


def test_the_picker_tells_nothing_about_the_server_disk(hostile):
    client, root, secret, _ = hostile
    probes = ["/etc", "/etc/passwd", "/no/such/place", "~", "~/.bashrc", str(secret), str(secret.parent),
              str(DEFAULT_MODEL_DIR), str(root / "alice-run" / "model"), "../assets/default-model", "/"]
    shapes = set()
    for value in probes:
        msg = refused(client, "/fill_mask", text="a [MASK] film .", choice=value)
        assert_no_paths(msg.replace(value, "<v>"), root, secret)
        shapes.add(re.sub(r"^'.*?' ", "<v> ", msg))  # the value itself is echoed (its path parts hidden)
    assert len(shapes) == 1, shapes  # a file, a folder, a model folder and nothing read the same
    for value in ("run: ../..", "run: ../../etc", "run: .", "run: cli-run/../alice-run", "run: no-such-run"):
        assert "not a run with a model on this server" in refused(client, "/fill_mask", text="a [MASK] .",
                                                                   choice=value)
    assert "at most 255 characters" in refused(client, "/fill_mask", text="a [MASK] .", choice="x" * 300)
    for ok in ("default (shipped)", "run: cli-run", "run: alice-run"):  # what the picker offers still works
        assert client.predict(text="a [MASK] film .", choice=ok, api_name="/fill_mask")


def _pretrain(client, **kw):
    form = dict(owner=EVE, name="", upload=None, hub_name="", steps=5)
    return client.predict(**{**form, **kw}, api_name="/pretrain_start")


def test_no_server_path_is_accepted_as_data(hostile):
    from gradio_client.exceptions import AppError
    client, root, secret, _ = hostile
    before = {p.name for p in root.iterdir()}
    hub = "hub"
    for value in (str(secret), str(secret.parent), "/etc/passwd", "../secret/grades.csv", "~/grades.csv",
                  str(root / ".uploads")):
        with pytest.raises(AppError) as e:
            _pretrain(client, corpus=hub, hub_name=value, name="steal")
        assert "Hugging Face dataset" in str(e.value) and SECRET not in str(e.value)
        assert_no_paths(str(e.value).replace(value, "<v>"), root, secret)
    for value in (str(secret), "/etc/passwd"):  # nor as a task, nor as the model to start from
        msg = refused(client, "/finetune_start", owner=EVE, name="", upload=None, task=value)
        assert "unknown task" in msg or "not in the list of choices" in msg  # ours, or Gradio's own check
        msg = refused(client, "/pretrain_start", owner=EVE, name="", upload=None, hub_name="",
                      start_from=value, steps=5)
        assert "does not open its own folders" in msg or "not in the list of choices" in msg
    assert {p.name for p in root.iterdir()} == before  # no run folder was made for any of it


def test_an_api_call_with_too_few_values_is_one_message(hostile):
    """Over raw HTTP a call may send fewer values than the endpoint takes: Gradio logged a traceback and
    answered `{"error": null}` (issue 30, item 8). The fixture checks the log has no traceback."""
    import httpx
    client = hostile[0]
    url = client.src.rstrip("/") + "/gradio_api/call/fill_mask"
    event = httpx.post(url, json={"data": ["a [MASK] film ."]}).json()["event_id"]
    said = httpx.get(f"{url}/{event}", timeout=60).text
    assert "event: error" in said and "This endpoint takes" in said and "got 1" in said, said


def test_runs_of_others_and_of_the_cli_are_read_only(hostile):
    client, root, _, _ = hostile
    eve = EVE
    digests = {n: _digest(root / n) for n in ("cli-run", "alice-run")}
    for name, words in (("cli-run", "read-only"), ("alice-run", "another browser")):
        assert words in refused(client, "/pretrain_resume", owner=eve, name=name, steps=10)
        assert words in refused(client, "/pretrain_delete", owner=eve, name=name)
        assert words in refused(client, "/finetune_delete", owner=eve, name=name)
        assert words in refused(client, "/pretrain_start", owner=eve, name=name, upload=None, hub_name="",
                                steps=5)
    # no browser id is not the operator's power, and an id the server did not mint owns nothing (issue
    # 41: a made-up id got fresh per-visitor caps): one that looks like the old random ids, one of the
    # right form with a wrong signature
    for owner in (None, "", "alice-browser-id-0001", "v1." + "0" * 32 + "." + "0" * 32, ALICE[:-1] + "x"):
        assert "reload" in refused(client, "/pretrain_delete", owner=owner, name="cli-run")
    assert {n: _digest(root / n) for n in digests} == digests  # nothing changed, nothing re-owned
    assert runs.read_json(root / "alice-run" / "job.json")["owner"] == ALICE


def test_a_visitor_deletes_its_own_runs_and_is_capped(hostile):
    client, root, _, _ = hostile
    alice = ALICE
    _run_folder(root, "alice-two", alice)  # with alice-run: two runs, this server's BERTLAB_MAX_RUNS
    assert "BERTLAB_MAX_RUNS" in refused(client, "/pretrain_start", owner=alice, name="alice-three", upload=None,
                                         hub_name="", steps=5)
    assert not (root / "alice-three").exists()
    assert "is queued or training" not in str(client.predict(owner=alice, name="alice-two",
                                                             api_name="/pretrain_delete"))
    assert not (root / "alice-two").exists() and (root / "alice-run").exists()
    assert "there is no run" in refused(client, "/pretrain_delete", owner=alice, name="alice-two")


def test_uploads_are_bounded_and_their_paths_hidden(hostile, tmp_path):
    from gradio_client import handle_file
    client, root, _, _ = hostile
    big = tmp_path / "big.csv"
    big.write_text("text,label\n" + "a long enough line of text,pos\n" * 4000)  # ~120 kB over a 50 kB cap
    with pytest.raises(Exception) as e:
        client.predict(owner=EVE, name="", task="upload-csv",
                       upload=handle_file(str(big)), api_name="/finetune_start")
    assert "Traceback" not in str(e.value)
    odd = tmp_path / "labels.csv"
    odd.write_text("review,stars\n" + "good,1\nbad,0\n" * 10)
    msg = refused(client, "/finetune_start", owner=EVE, name="",
                  task="upload-csv", upload=handle_file(str(odd)))
    assert "column" in msg and "/tmp" not in msg and "gradio" not in msg.lower()
    assert not list((root / ".uploads").glob("*"))  # the refused start left no staged copy


def _join(url: str, api: str, values: dict, cookie: str) -> str:
    """One call sent as a browser sends it (queue/join, then the event stream), with its visitor cookie;
    the error message or the output. gradio_client would upload a local path again as its own file."""
    import json

    import httpx

    from bertlab.app.traffic import COOKIE
    info = httpx.get(url + "gradio_api/info", timeout=30).json()["named_endpoints"]["/" + api]["parameters"]
    dep = next(d for d in httpx.get(url + "config", timeout=30).json()["dependencies"] if d.get("api_name") == api)
    data = [values.get(p["parameter_name"], p.get("parameter_default")) for p in info]
    session = "s" + cookie[:12]
    with httpx.Client(base_url=url, cookies={COOKIE: cookie}, timeout=120) as c:
        c.post("gradio_api/queue/join", json={"data": data, "fn_index": dep["id"], "session_hash": session,
                                              "event_data": None, "trigger_id": None}).raise_for_status()
        with c.stream("GET", f"gradio_api/queue/data?session_hash={session}") as r:
            for line in r.iter_lines():
                if line.startswith("data:") and (msg := json.loads(line[5:]))["msg"] == "process_completed":
                    return json.dumps(msg["output"])
    return ""


def test_an_upload_is_usable_only_by_the_browser_that_sent_it(hostile, tmp_path):
    """Issue 41, hole 8: knowing an upload's server path was enough to use it from another session."""
    import httpx

    from bertlab.app.traffic import COOKIE
    client, _, _, _ = hostile
    url = client.src.rstrip("/") + "/"
    ann, eve = "a1" * 16, "e5" * 16
    odd = tmp_path / "labels.csv"
    odd.write_text("review,stars\n" + "good,1\nbad,0\n" * 10)
    with httpx.Client(cookies={COOKIE: ann}, timeout=30) as c:
        path = c.post(url + "gradio_api/upload", files={"files": ("labels.csv", odd.read_bytes())}).json()[0]
    upload = {"path": path, "orig_name": "labels.csv", "meta": {"_type": "gradio.FileData"}}
    form = {"owner": EVE, "name": "", "task": "upload-csv", "upload": upload}
    theirs = _join(url, "finetune_start", form, eve)
    assert "not uploaded from this page" in theirs and path not in theirs
    mine = _join(url, "finetune_start", form, ann)  # its own browser gets on to the file's columns
    assert "column" in mine and "not uploaded from this page" not in mine


def test_export_never_deletes_what_is_not_a_model(tmp_path, capsys):
    run = _run_folder(tmp_path / "runs", "r", None)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "notes.csv").write_text("keep me")
    before = {p: _digest(p) for p in (run, tmp_path / "data")}
    for target in (run, tmp_path / "runs", tmp_path / "data", tmp_path / "data" / "notes.csv", tmp_path):
        for extra in ([], ["--overwrite"]):
            assert cli(["export", str(run), str(target), *extra]) == 2
            assert "not a model folder" in capsys.readouterr().err
    assert {p: _digest(p) for p in before} == before
    out = tmp_path / "export"
    assert cli(["export", str(run), str(out)]) == 0
    fp32 = (out / "model.safetensors").stat().st_size
    assert cli(["export", str(run), str(out)]) == 2 and "--overwrite" in capsys.readouterr().err
    assert cli(["export", str(run), str(out), "--overwrite", "--fp16"]) == 0  # a model folder: replaced
    assert (out / "model.safetensors").stat().st_size < 0.6 * fp32
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "export", "runs"]  # no temp folder left


SERVER_RSS_BOUND_MB = 1500  # README "Hosting": the web server's peak resident memory under this burst


def _server_pid(url: str) -> int:
    """The app process serving `url` (found by its GRADIO_SERVER_PORT)."""
    port = url.rstrip("/").rsplit(":", 1)[1]
    for env in Path("/proc").glob("[0-9]*/environ"):
        try:
            if f"GRADIO_SERVER_PORT={port}".encode() in env.read_bytes().split(b"\0") \
                    and b"app.py" in (env.parent / "cmdline").read_bytes():
                return int(env.parent.name)
        except OSError:
            continue
    pytest.fail(f"no app.py process serves port {port}")


def _status_kb(pid: int, field: str) -> int:
    line = next(ln for ln in Path(f"/proc/{pid}/status").read_text().splitlines() if ln.startswith(field))
    return int(line.split()[1])


@pytest.mark.slow
def test_a_burst_of_probes_and_model_loads_keeps_the_server_small(hostile):
    from concurrent.futures import ThreadPoolExecutor
    client, _, _, _ = hostile
    pid = _server_pid(client.src)
    calls = [dict(task="pos", file=None, sample=2000, compare=["random init (same config)"], layer=0,
                  api_name="/probe")] * 4
    calls += [dict(text="a [MASK] film .", choice=c, api_name="/fill_mask")
              for c in ("run: cli-run", "run: alice-run", "default (shipped)") * 4]
    calls += [dict(task="sentiment", file=None, sample=4000, compare=[], layer=0, api_name="/probe")] * 2
    with ThreadPoolExecutor(12) as pool:
        outs = list(pool.map(lambda kw: client.predict(**kw), calls))
    assert all(o is not None for o in outs)
    peak = _status_kb(pid, "VmHWM") / 1024
    print(f"server peak resident memory {peak:.0f} MB")  # shown with pytest -s
    assert peak < SERVER_RSS_BOUND_MB, f"the server peaked at {peak:.0f} MB"


@pytest.mark.parametrize("argv, words", [
    (["evaluate", "--batches", "0"], "at least 1"),
    (["info", "--seq-len", "-3"], "at least 1"),
    (["pretrain", "--steps", "1000000000000"], "steps must be from 1 to 10,000,000"),
    (["pretrain", "--max-len", "100000"], "max_len must be from 8 to 8,192"),
    (["pretrain", "--layers", "100000", "--hidden", "100000"], "must be from 1 to"),
    (["finetune", "--max-len", "100000"], "max_len must be from 4 to 8,192"),
    (["pretrain", "--resume"], "no run to resume"),
    (["finetune", "--resume"], "no run to resume"),
])
def test_cli_edges_are_one_clear_line(tmp_path, capsys, argv, words):
    out = tmp_path / "run"
    if argv[0] in ("pretrain", "finetune"):
        argv = [*argv, "--out", str(out)]
    try:
        rc = cli(argv)
    except SystemExit as e:  # argparse's own check of a flag
        rc = e.code
    err = capsys.readouterr().err
    assert rc == 2 and words in err and "Traceback" not in err, err
    assert not out.exists()  # nothing was started, nor a folder made


def test_upload_messages_name_the_file_not_where_it_lies(tmp_path, monkeypatch):
    from bertlab.app.ui.training import finetune_tab, pretrain_tab
    monkeypatch.setenv("BERTLAB_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setattr("bertlab.app.jobs._default", None)  # a manager for this runs folder
    bad = tmp_path / "deep" / "folder" / "labels.csv"
    bad.parent.mkdir(parents=True)
    bad.write_text("review,stars\n" + "good,1\nbad,0\n" * 10)
    csv = next(k for k, v in finetune_tab.TASKS.items() if v == "upload-csv")
    form = dict(model=None, task=csv, upload=str(bad), text_column="text", label_column="label", method="lora",
                epochs=1, lr=0, lora_rank=4, lora_alpha=8, max_examples=50, max_len=32, batch_size=8)
    with pytest.raises(ValueError) as e:
        finetune_tab.form_spec(**form)
    assert "labels.csv" in str(e.value) and str(tmp_path) not in str(e.value)
    assert not list((tmp_path / "runs" / ".uploads").glob("*"))  # the staged copy went with the refusal
    with pytest.raises(ValueError) as e:
        pretrain_tab.form_spec(preset="tiny", layers=2, hidden=64, heads=2, intermediate=256, vocab_size=500,
                               corpus="upload", upload=str(bad), steps=10, objective="mlm")
    assert "labels.csv" in str(e.value) and str(tmp_path) not in str(e.value)


def test_the_teacher_token_and_only_it_may_act_on_any_run(hostile):
    client, root, _, _ = hostile
    for fake in ("teacher:", "teacher:guess", "teacher:" + TEACHER_TOKEN[:-1], "teacher:" + TEACHER_TOKEN + " "):
        msg = refused(client, "/pretrain_delete", owner=fake, name="bob-run")
        assert "reload" in msg and TEACHER_TOKEN not in msg
    assert (root / "bob-run").exists()
    refused(client, "/pretrain_delete", owner="teacher:" + TEACHER_TOKEN, name="bob-run")  # the token is not an id
    from bertlab.app.ui.training.jobs_ui import (
        teacher_id,  # what a ?teacher= page stores: a nonce and its HMAC
    )
    forged = teacher_id(TEACHER_TOKEN[:-1] + "x", "0" * 32)
    assert "reload" in refused(client, "/pretrain_delete", owner=forged, name="bob-run")
    assert (root / "bob-run").exists()
    client.predict(owner=teacher_id(TEACHER_TOKEN), name="bob-run", api_name="/pretrain_delete")
    assert not (root / "bob-run").exists()


def test_a_hub_model_is_sized_before_anything_downloads(monkeypatch, tmp_path):
    from types import SimpleNamespace

    import huggingface_hub

    from bertlab.checkpoint import hub_folder, load_model
    from bertlab.config import preset
    files = [SimpleNamespace(rfilename="model.safetensors", size=5_000_000_000),
             SimpleNamespace(rfilename="vocab.txt", size=200_000), SimpleNamespace(rfilename="big.ckpt", size=10**12)]
    monkeypatch.setattr(huggingface_hub.HfApi, "model_info", lambda self, name, files_metadata: SimpleNamespace(
        siblings=files))
    monkeypatch.setattr(huggingface_hub, "snapshot_download", lambda *a, **k: pytest.fail("downloaded"))
    with pytest.raises(ValueError, match="5.0 GB; this server loads models of at most 1.7 GB"):
        hub_folder("someone/huge-bert", max_bytes=4.2 * 400e6)
    preset("large").to_json_file(tmp_path / "config.json")  # 335 M parameters, and no weights at all
    with pytest.raises(ValueError, match="describes at least"):
        load_model(tmp_path, max_params=50_000_000)  # refused from config.json, before any allocation


def test_a_hub_that_cannot_be_reached_is_a_clear_message(monkeypatch):
    import importlib

    import huggingface_hub

    from bertlab.checkpoint import hub_folder
    http = next(m for m in (importlib.util.find_spec(n) and importlib.import_module(n) for n in ("httpx2", "httpx")) if m)

    def unreachable(self, name, files_metadata):
        raise http.ConnectError("[Errno -2] Name or service not known")
    monkeypatch.setattr(huggingface_hub.HfApi, "model_info", unreachable)
    with pytest.raises(ValueError, match="someone/bert: the Hugging Face hub cannot be reached"):
        hub_folder("someone/bert", max_bytes=1e9)
