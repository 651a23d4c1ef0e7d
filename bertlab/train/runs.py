"""A training run is a folder, so a UI in another process can watch, stop and resume it.

    runs/<name>/spec.json            what the run computes: its job spec (specs.py), kind included
                train_args.json      the Trainer's own settings (what a resume must keep)
                status.json          {"state", "step", "total_steps", "message", "pid", "updated", ...}
                metrics.jsonl        one JSON object per line, appended while training
                STOP                 exists = "please stop" (any process may create it)
                .lock                flock-ed by the process that trains the run
                checkpoints/step-N/  complete checkpoints only (written as .tmp-step-N, then renamed)
                model/               the latest model, a Hugging Face folder (finished or stopped runs)
                data/                pre-training: its vocabulary and tokenized examples
                facts.json           fine-tuning: labels, example and parameter counts
                confusion.json       fine-tuning: the latest validation confusion matrix
                probes.jsonl         pre-training: the probe sentences' top guesses at each evaluation
                job.json, log.txt    written by the app's job manager when it launched the run
Runs from before spec.json (pretrain.json or finetune.json) still load: `Run.spec` converts them.

Every reader here tolerates half-written files: a trainer may be killed at any moment.
"""
from __future__ import annotations

import errno
import fcntl
import json
import os
import random
import re
import shutil
import time
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from ..checkpoint import model_in_run
from . import specs

STATES = ("running", "stopping", "stopped", "finished", "failed")
STATUS, METRICS, ARGS, STOP, LOCK, CHECKPOINTS = (
    "status.json", "metrics.jsonl", "train_args.json", "STOP", ".lock", "checkpoints")
SPEC, FACTS, MODEL = "spec.json", "facts.json", "model"
LEGACY = {"pretrain": "pretrain.json", "finetune": "finetune.json"}  # before spec.json
COMPLETE = "trainer_state.json"  # written last into a checkpoint: its presence means "complete"
_STEP_DIR = re.compile(r"^step-(\d+)$")


def write_json_atomic(path: str | os.PathLike, obj) -> None:
    _write_atomic(Path(path), json.dumps(obj, indent=1))


def _write_atomic(path: Path, text: str) -> None:
    """Write a sibling temp file, fsync, rename: a reader sees the old file or the new, never half."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def read_json(path: Path) -> dict | None:
    """The JSON object in `path`; None if missing, corrupt or not an object."""
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return d if isinstance(d, dict) else None


# ---- status -----------------------------------------------------------------------------------

def pid_alive(pid) -> bool:
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, TypeError, ValueError):
        return True  # exists (someone else's) or unknowable: do not cry wolf
    return True


def read_status(run_dir: str | os.PathLike) -> dict:
    """The status, with state "unknown" if missing or corrupt. A "running"/"stopping" run whose
    process is gone (killed, machine rebooted) is reported as "failed" (the file is left alone)."""
    st = {"state": "unknown", "step": 0, "total_steps": None, "message": "", "pid": None, "updated": None}
    st.update(read_json(Path(run_dir) / STATUS) or {})
    if st["state"] in ("running", "stopping") and st["pid"] is not None and not pid_alive(st["pid"]):
        st.update(state="failed", message=f"the training process (pid {st['pid']}) ended without "
                                          f"saying why (killed?); resume from the last checkpoint")
    return st


def write_status(run_dir: str | os.PathLike, **fields) -> dict:
    """Merge `fields` into status.json atomically; stamps pid and time. Returns the new status."""
    st = {**(read_json(Path(run_dir) / STATUS) or {}), **fields}
    st.setdefault("pid", os.getpid())
    st["updated"] = time.time()
    write_json_atomic(Path(run_dir) / STATUS, st)
    return st


def read_args(run_dir: str | os.PathLike) -> dict | None:
    return read_json(Path(run_dir) / ARGS)


# ---- metrics ----------------------------------------------------------------------------------

def append_metrics(run_dir: str | os.PathLike, row: dict) -> None:
    with open(Path(run_dir) / METRICS, "a", encoding="utf-8") as f:
        f.write(json.dumps(row) + "\n")
        f.flush()


def read_metrics(run_dir: str | os.PathLike, since_line: int = 0) -> tuple[list[dict], int]:
    """Rows from line `since_line` on, and the line to ask for next time. A last line without its
    newline is still being written: it is left for the next call. Corrupt lines are skipped."""
    try:
        text = (Path(run_dir) / METRICS).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return [], since_line
    lines = text.split("\n")[:-1]  # drop the unfinished tail ("" when the file ends in "\n")
    rows = []
    for line in lines[since_line:]:
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict):
            rows.append(row)
    return rows, max(since_line, len(lines))


def truncate_metrics(run_dir: str | os.PathLike, after_step: int) -> None:
    """Drop rows logged after `after_step` (and torn lines): a resumed run logs them again."""
    path = Path(run_dir) / METRICS
    if not path.exists():
        return
    rows, _ = read_metrics(run_dir)
    _write_atomic(path, "".join(json.dumps(r) + "\n" for r in rows if r.get("step", 0) <= after_step))


# ---- stop requests ----------------------------------------------------------------------------

def request_stop(run_dir: str | os.PathLike) -> None:
    """Ask the trainer to checkpoint and stop after its current step."""
    (Path(run_dir) / STOP).touch()


def stop_requested(run_dir: str | os.PathLike) -> bool:
    return (Path(run_dir) / STOP).exists()


def clear_stop(run_dir: str | os.PathLike) -> None:
    (Path(run_dir) / STOP).unlink(missing_ok=True)


# ---- checkpoints ------------------------------------------------------------------------------

def checkpoint_step(folder: str | os.PathLike) -> int:
    m = _STEP_DIR.match(Path(folder).name)
    if not m:
        raise ValueError(f"{folder}: not a checkpoint folder (expected step-N)")
    return int(m.group(1))


def checkpoint_dirs(run_dir: str | os.PathLike) -> list[Path]:
    """checkpoints/step-N folders, oldest first (temp folders start with "." and are never listed)."""
    d = Path(run_dir) / CHECKPOINTS
    if not d.is_dir():
        return []
    return sorted((p for p in d.iterdir() if p.is_dir() and _STEP_DIR.match(p.name)), key=checkpoint_step)


def latest_checkpoint(run_dir: str | os.PathLike) -> Path | None:
    """The newest checkpoint whose trainer_state.json (written last) is present and readable."""
    complete = (p for p in reversed(checkpoint_dirs(run_dir)) if read_json(p / COMPLETE) is not None)
    return next(complete, None)


def prepare_run(run_dir: str | os.PathLike, args: dict, resume_step: int | None) -> None:
    """Before (re)starting: drop leftovers of a killed save and any stale STOP, write the args, and
    start metrics afresh, or (resuming) drop the rows logged after the checkpoint: they come again."""
    rd = Path(run_dir)
    (rd / CHECKPOINTS).mkdir(parents=True, exist_ok=True)
    for p in (rd / CHECKPOINTS).glob(".*"):
        shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
    stop = rd / STOP
    if stop.exists() and stop.stat().st_mtime < _process_start():  # stale; a fresh one was meant for us
        clear_stop(rd)
    write_json_atomic(rd / ARGS, args)
    if resume_step is None:
        (rd / METRICS).unlink(missing_ok=True)
    else:
        truncate_metrics(rd, resume_step)


def _process_start() -> float:
    """Wall-clock time this process started (a STOP written after it is a live request)."""
    try:
        ticks = int(Path(f"/proc/{os.getpid()}/stat").read_text().rsplit(")", 1)[1].split()[19])
        boot = next(float(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                    if line.startswith("btime"))
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return time.time()


# ---- one trainer per run ----------------------------------------------------------------------

class RunLock:
    """An exclusive flock on run_dir/.lock for as long as a process trains the run. The kernel drops
    it when the process dies, even by SIGKILL, so a crashed run never stays locked."""

    def __init__(self, run_dir: str | os.PathLike):
        self.run_dir, self.fd = Path(run_dir), None

    def __enter__(self) -> "RunLock":
        self.run_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.run_dir / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            os.close(fd)
            if e.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                raise
            raise RuntimeError(f"run {self.run_dir.name} is already being trained by process {holder}; "
                               f"stop it first (or wait for it to finish)") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self.fd = fd
        return self

    def __exit__(self, *exc) -> None:
        if self.fd is not None:
            os.ftruncate(self.fd, 0)
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None


# ---- checkpoint contents ----------------------------------------------------------------------

def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)  # all CUDA devices too


def rng_state() -> dict:
    """Every RNG stream as tensors/ints/lists, so torch.load(weights_only=True) accepts it."""
    _, keys, pos, has_gauss, gauss = np.random.get_state()
    version, py_state, py_gauss = random.getstate()
    return {"torch": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else [],  # never wake CUDA
            "numpy": [torch.from_numpy(keys.astype(np.int64)), int(pos), int(has_gauss), float(gauss)],
            "python": [int(version), torch.tensor(py_state, dtype=torch.int64), py_gauss]}


def set_rng_state(s: dict) -> None:
    torch.set_rng_state(s["torch"])
    if s["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(s["cuda"])
    keys, pos, has_gauss, gauss = s["numpy"]
    np.random.set_state(("MT19937", keys.numpy().astype(np.uint32), pos, has_gauss, gauss))
    version, py_state, py_gauss = s["python"]
    random.setstate((version, tuple(py_state.tolist()), py_gauss))


def _fsync(*paths: Path) -> None:
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_checkpoint(run_dir: str | os.PathLike, step: int, write: Callable[[Path], None], state: dict,
                     keep_last: int) -> Path:
    """`write(folder)` fills checkpoints/.tmp-step-N; then trainer_state.json (`state`) goes in last,
    everything is fsynced and the folder renamed to step-N. A kill at any moment leaves the previous
    checkpoint whole. Older ones beyond `keep_last` are deleted afterwards."""
    ck = Path(run_dir) / CHECKPOINTS
    tmp, final = ck / f".tmp-step-{step}", ck / f"step-{step}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    write(tmp)
    (tmp / COMPLETE).write_text(json.dumps(state, indent=1), encoding="utf-8")
    _fsync(*tmp.rglob("*"), tmp)
    if final.exists():
        old = ck / f".old-step-{step}"
        os.replace(final, old)
        shutil.rmtree(old, ignore_errors=True)
    os.replace(tmp, final)
    _fsync(ck)  # the rename itself
    for old in checkpoint_dirs(run_dir)[:-keep_last]:
        shutil.rmtree(old, ignore_errors=True)
    return final


# ---- the run folder as one object ---------------------------------------------------------------

class Run:
    """One run folder: its spec, kind, facts, status, metrics and model, from old folders too."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.name = self.path.name

    def spec_dict(self) -> dict | None:
        """spec.json, or what an older run wrote (pretrain.json + train_args.json, finetune.json)."""
        if (d := read_json(self.path / SPEC)) is not None:
            if d.get("kind") == "finetune" and "methods" in d:  # a comparison before it was a kind of its own
                d["kind"] = "compare"
            return d
        if (old := read_json(self.path / LEGACY["pretrain"])) is not None:
            return legacy_pretrain(old, read_args(self.path))
        old = read_json(self.path / LEGACY["finetune"])
        return None if old is None else {**old, "kind": "finetune"}

    def spec(self) -> specs.Spec | None:
        d = self.spec_dict()
        return None if d is None else specs.spec_from_dict(d)

    @property
    def kind(self) -> str | None:
        return (self.spec_dict() or {}).get("kind")

    def write_spec(self, spec: specs.Spec) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        write_json_atomic(self.path / SPEC, spec.to_dict())

    def facts(self) -> dict:
        d = read_json(self.path / FACTS)
        if d is None:  # an older fine-tune kept them in finetune.json
            d = read_json(self.path / LEGACY["finetune"])
        return d or {}

    def write_facts(self, **facts) -> None:
        write_json_atomic(self.path / FACTS, {**self.facts(), **facts})

    def model_dir(self) -> Path | None:
        """The exported model (finished or stopped runs), else the newest checkpoint with a config."""
        folder = model_in_run(self.path)
        return None if folder == self.path else folder


def list_runs(root: str | os.PathLike) -> list[Run]:
    """The run folders under `root` (any with a spec, a status or trainer settings), newest first."""
    root = Path(root)
    marks = (SPEC, STATUS, ARGS, *LEGACY.values())
    found = [p for p in root.iterdir() if p.is_dir() and any((p / m).exists() for m in marks)] if root.is_dir() else []
    return [Run(p) for p in sorted(found, key=lambda p: p.stat().st_mtime, reverse=True)]


def legacy_pretrain(pretrain_json: dict, train_args: dict | None) -> dict:
    """A run folder from before spec.json (pretrain.json + train_args.json) as PretrainSpec fields."""
    d = {**(train_args or {}), **{k: v for k, v in pretrain_json.items() if k != "config"}, "kind": "pretrain"}
    c = pretrain_json.get("config") or {}
    for key, name in (("num_hidden_layers", "layers"), ("hidden_size", "hidden"), ("num_attention_heads", "heads"),
                      ("intermediate_size", "intermediate"), ("hidden_dropout_prob", "dropout"), ("pre_ln", "pre_ln")):
        if key in c:
            d[name] = c[key]
    d.setdefault("dropout", None)  # the model's (BertConfig's) own, as it was built then
    d["max_position"] = c.get("max_position_embeddings", d.get("max_len", 128))  # old runs sized it to max_len
    return d
