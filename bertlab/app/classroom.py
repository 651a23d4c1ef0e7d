"""The class view's backend: every student's pre-training runs in one list (curves and the held-out
accuracy that ranks them), the names students put on their runs, and the teacher's "clear the class's
runs".

Watching another student's run is allowed (the run pickers already offer every run), so the list reads
them all; what leaves here names runs and students, never a path of this server or a browser's id.
Changing a run stays its owner's: a name goes on a run only through the job manager's own owner check.
"""
from __future__ import annotations

import contextlib
import hmac
import os
import threading
import time
from collections import deque
from pathlib import Path

from ..train import runs
from . import jobs

STUDENT = "student.json"  # {"display_name": ...} in a run folder: who the class chart says trained it
MAX_NAME = 40  # characters of a display name
MAX_RUNS = 60  # runs in the class list, newest first: a class of thirty with two runs each
MAX_POINTS = 120  # points of one curve (evenly thinned, the first and the last kept): a light figure
CACHE_S = 3.0  # thirty pages refreshing share one reading of the runs folder
MAX_TOKEN = 256  # characters of a typed teacher token

_lock = threading.Lock()
_pending: dict[str, tuple[str, str]] = {}  # queued run -> (owner, display name): written once it has a folder
_summaries: dict[str, tuple[tuple, dict]] = {}  # metrics.jsonl -> ((mtime, size), its curves and scores)
_listed: tuple[float, tuple, list] = (0.0, (), [])


def check_display_name(name) -> str:
    """A name for the class chart: spaces collapsed, at most MAX_NAME printable characters ("" = none).
    HTML is not refused but never interpreted: every view escapes it."""
    if name is None:
        return ""
    if not isinstance(name, str):
        raise ValueError(f"your name must be text, got {type(name).__name__}")
    name = " ".join(name.split())
    if len(name) > MAX_NAME:
        raise ValueError(f"your name has {len(name)} characters; the class chart shows at most {MAX_NAME}")
    if not name.isprintable():
        raise ValueError("your name holds characters that cannot be shown (control or formatting characters)")
    return name


def display_name(run_dir: Path) -> str:
    d = runs.read_json(Path(run_dir) / STUDENT) or {}
    try:
        return check_display_name(d.get("display_name"))
    except ValueError:  # a hand-edited file: shown as unnamed rather than as it is
        return ""


def name_run(mgr: jobs.JobManager, run: str, owner: str, name: str) -> None:
    """Put a display name on one of `owner`'s runs (`owner` as jobs_ui.visitor returns it: a browser's
    id or jobs.TEACHER). A stranger's run, or one the command line made, is refused as a stop is."""
    name = check_display_name(name)
    if not isinstance(owner, str) or not owner:
        raise PermissionError("only the browser that started a run may name it")
    st = mgr.status(jobs.check_name(run), log_lines=0)
    folder = mgr.root / run
    if st["state"] == "unknown" and not (folder / jobs.JOB).exists():
        raise ValueError(f"there is no run {run} here")
    if st.get("owner") is None:
        raise PermissionError("this run was not started from the web page, so it is read-only here")
    if owner != jobs.TEACHER and st["owner"] != owner:
        raise PermissionError("this run belongs to another session: you can watch it, not change it")
    with _lock:
        if st["state"] == "queued":  # no folder yet: written when it starts (see _apply_pending)
            _pending.pop(run, None)
            _pending[run] = (st["owner"], name)
            while len(_pending) > 500:
                _pending.pop(next(iter(_pending)))
        else:
            _pending.pop(run, None)
            runs.write_json_atomic(folder / STUDENT, {"display_name": name})
        _forget_list()


def name_my_runs(mgr: jobs.JobManager, owner: str, name: str) -> list[str]:
    """Put a display name on every pre-training run `owner` started; the names of those runs."""
    name = check_display_name(name)
    mine = [r for r in mgr.owned(owner) if jobs.valid_name(r)]
    done = []
    for r in mine:
        if runs.Run(mgr.root / r).kind in ("pretrain", None):  # None: queued, not yet written
            try:
                name_run(mgr, r, owner, name)
                done.append(r)
            except (ValueError, PermissionError):
                continue  # ended and removed meanwhile, or (a queued job) of another kind
    return done


def _apply_pending(mgr: jobs.JobManager) -> None:
    """Names given to queued runs go into their folders once the job manager has launched them."""
    with _lock:
        items = list(_pending.items())
    for run, (owner, name) in items:
        info = runs.read_json(mgr.root / run / jobs.JOB) or {}
        if info.get("owner") == owner:
            runs.write_json_atomic(mgr.root / run / STUDENT, {"display_name": name})
        elif mgr.status(run, log_lines=0)["state"] == "queued":
            continue
        with _lock:
            if _pending.get(run) == (owner, name):
                del _pending[run]


def _thin(points: list, k: int) -> list:
    if len(points) <= k:
        return points
    return [points[round(i * (len(points) - 1) / (k - 1))] for i in range(k)]


def _summary(run_dir: Path, max_points: int) -> dict:
    """A run's curves and last held-out scores from its metrics.jsonl, re-read only when it changed."""
    path = run_dir / runs.METRICS
    try:
        st = path.stat()
        stamp = (st.st_mtime_ns, st.st_size, max_points)
    except OSError:
        return {"curves": {"held_out_acc": [], "train_loss": []}, "held_out_acc": None, "held_out_loss": None,
                "eval_step": None}
    with _lock:
        hit = _summaries.get(str(path))
    if hit and hit[0] == stamp:
        return hit[1]
    rows = runs.read_metrics(run_dir)[0]

    def num(r, k):
        v = r.get(k)
        return isinstance(v, (int, float)) and not isinstance(v, bool) and v == v and abs(v) != float("inf")
    evals = [r for r in rows if r.get("split") == "eval" and num(r, "step") and num(r, "mlm_acc")]
    # the masked-word loss (ELECTRA's "loss" adds its 50x replaced-token loss; not comparable)
    train = [(r["step"], r["mlm_loss"] if num(r, "mlm_loss") else r["loss"]) for r in rows
             if r.get("split") == "train" and num(r, "step") and (num(r, "mlm_loss") or num(r, "loss"))]
    last = evals[-1] if evals else {}
    out = {"curves": {"held_out_acc": _thin([(r["step"], r["mlm_acc"]) for r in evals], max_points),
                      "train_loss": _thin(train, max_points)},
           "held_out_acc": last.get("mlm_acc"), "held_out_loss": last.get("mlm_loss") if num(last, "mlm_loss") else None,
           "eval_step": last.get("step")}
    with _lock:
        _summaries[str(path)] = (stamp, out)
    return out


def _forget_list() -> None:
    global _listed
    _listed = (0.0, (), [])


def class_runs(mgr: jobs.JobManager, max_runs: int = MAX_RUNS, max_points: int = MAX_POINTS,
               fresh: bool = False) -> list[dict]:
    """The newest `max_runs` pre-training runs of this server, best held-out masked-token accuracy first
    (runs not yet evaluated last): rank, run, student (display name, "" if none), group (a number per
    student, the same for all of one browser's runs), arch, state, step, total_steps, held_out_acc,
    held_out_loss, eval_step and curves {"held_out_acc", "train_loss"}: [(step, value)], at most
    `max_points` each. Cached for CACHE_S seconds (unless `fresh`): a class refreshing at once reads
    the folder once."""
    global _listed
    key = (str(mgr.root), max_runs, max_points)
    with _lock:
        at, k, rows = _listed
        if not fresh and k == key and time.monotonic() - at < CACHE_S:
            return rows
    _apply_pending(mgr)
    found = [r for r in runs.list_runs(mgr.root) if jobs.valid_name(r.name) and r.kind == "pretrain"][:max_runs]
    rows, groups = [], {}
    for r in found:
        st = mgr.status(r.name, log_lines=0)
        who = st.get("owner") or ("\0cli", r.name)  # a command-line run: a student of its own
        spec = r.spec_dict() or {}
        rows.append({"run": r.name, "student": display_name(r.path), "group": groups.setdefault(who, len(groups) + 1),
                     "arch": str(spec.get("arch") or "bert"), "state": st["state"], "step": int(st.get("step") or 0),
                     "total_steps": st.get("total_steps"), **_summary(r.path, max_points)})
    rows.sort(key=lambda x: (x["held_out_acc"] is None, -(x["held_out_acc"] or 0.0)))
    for i, row in enumerate(rows, 1):
        row["rank"] = i if row["held_out_acc"] is not None else None
    with _lock:
        live = {str(r.path / runs.METRICS) for r in found}
        for p in [p for p in _summaries if p not in live]:
            del _summaries[p]
        _listed = (time.monotonic(), key, rows)
    return rows


# ---- the teacher's clearing ------------------------------------------------------------------------

MIN_TOKEN = 16  # characters of BERTLAB_TEACHER_TOKEN: long and random, so guessing is hopeless


class WrongToken(PermissionError):
    """A wrong teacher token; `delay`: the seconds its answer should wait (Guard)."""

    def __init__(self, msg: str, delay: float):
        super().__init__(msg)
        self.delay = delay


class Guard:
    """Wrong teacher tokens, counted per client (its address) within `window_s`. The first `free` are
    answered at once; each later one waits twice as long as the one before (1, 2, 4 ... s, at most
    `max_delay_s`), so one address guesses a few times a minute. The right token is always heard at
    once: before, five wrong tries from any student behind the school's router locked the teacher out
    for ten minutes. What makes guessing hopeless is the token's length (MIN_TOKEN)."""

    def __init__(self, free: int = 5, max_delay_s: float = 60.0, window_s: float = 600.0, clock=time.monotonic):
        self.free, self.max_delay_s, self.window_s, self.clock = free, max_delay_s, window_s, clock
        self._fails: deque[tuple[float, str]] = deque()
        self._lock = threading.Lock()

    def fail(self, client: str) -> float:
        """Count a wrong try of `client`; the seconds its answer waits."""
        with self._lock:
            now = self.clock()
            while self._fails and self._fails[0][0] <= now - self.window_s:
                self._fails.popleft()
            self._fails.append((now, client))
            n = sum(c == client for _, c in self._fails)
        return 0.0 if n <= self.free else float(min(self.max_delay_s, 2.0 ** (n - self.free - 1)))


GUARD = Guard()


def teacher_token() -> str:
    return os.environ.get("BERTLAB_TEACHER_TOKEN", "").strip()


def check_token_setting() -> None:
    """A host's token too short to stand guessing stops the server with one line (app.check_settings)."""
    if (token := teacher_token()) and len(token) < MIN_TOKEN:
        raise ValueError(f"BERTLAB_TEACHER_TOKEN has {len(token)} characters: give at least {MIN_TOKEN}, e.g. "
                         f"what `python -c \"import secrets; print(secrets.token_urlsafe(18))\"` prints")


def check_token(given, client: str, guard: Guard = GUARD) -> None:
    """The teacher's token, compared in constant time; a wrong one counts against `client` (its address)
    and raises WrongToken with the delay its answer owes."""
    token = teacher_token()
    if not token:
        raise ValueError("clearing is off on this server: its host has set no BERTLAB_TEACHER_TOKEN")
    given = given.strip() if isinstance(given, str) else ""
    if not hmac.compare_digest(given[:MAX_TOKEN].encode(), token.encode()):
        raise WrongToken("that is not this server's teacher token", guard.fail(client))


def clear_class(mgr: jobs.JobManager, kill_timeout: float = 5.0) -> dict:
    """Stop and delete every run started from the web page (every student's and the teacher page's):
    queued ones leave the queue first, training ones are killed (their whole process group), then each
    folder goes through the job manager's delete, which removes only <runs>/<valid name>. Runs the
    command line made stay, as does everything outside the runs folder (the shipped model included).
    {"removed": names, "stopped": how many were queued or training, "kept": command-line runs,
    "failed": {name: why}}."""
    rows = [st for st in mgr.list() if jobs.valid_name(st.get("name"))]
    rows.sort(key=lambda st: st["state"] != "queued")  # none of them may start while the rest are removed
    out = {"removed": [], "stopped": 0, "kept": 0, "failed": {}}
    for st in rows:
        name, folder = st["name"], mgr.root / st["name"]
        if st.get("owner") is None:
            out["kept"] += 1
            continue
        if folder.is_symlink():
            out["failed"][name] = "a link, not a run folder"
            continue
        try:
            if st["state"] == "queued" or st.get("alive"):
                out["stopped"] += 1
                with contextlib.suppress(ValueError):  # it ended by itself meanwhile
                    mgr.kill(name, jobs.TEACHER, timeout=kill_timeout)
            if folder.is_dir():
                mgr.delete(name, jobs.TEACHER)
            out["removed"].append(name)
        except (ValueError, PermissionError, OSError) as e:
            out["failed"][name] = str(e)
    with _lock:
        _pending.clear()
        _forget_list()
    return out
