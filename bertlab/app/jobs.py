"""Training runs as subprocesses, so the UI never owns a training loop: server threads, a reloaded page
or a restarted server find a run again through its folder. A job is a spec: the manager writes it to
the run's spec.json and launches `python -m bertlab run DIR`, which executes exactly that; job.json
{pid, owner, started, cmd, kind, resume, group?, returncode?, killed?} and log.txt are the manager's own.
Queued jobs live in memory only (running ones are adopted)."""
from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..train import runs
from ..train.kinds import RUN_KINDS
from ..train.specs import Spec
from . import quota
from .limits import app_device, hide_paths, limits

JOB, LOG, UPLOADS = "job.json", "log.txt", ".uploads"
TEACHER = "\0teacher"  # the owner of a teacher's page: may act on every run, has no per-visitor caps
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
# a run with any of these was prepared: a fresh start would silently reuse its data/, so resume it instead
_PREPARED = ("data", "model", runs.CHECKPOINTS, runs.ARGS)
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])  # the child imports this very bertlab


def check_name(name: str) -> str:
    if not valid_name(name):
        raise ValueError(f"bad run name {name!r:.80}: up to 64 letters, digits, '-', '_' or '.', "
                         f"a letter or digit first")
    return name


def valid_name(name) -> bool:
    return isinstance(name, str) and bool(_NAME.match(name))


def _read_json(path: Path) -> dict:
    d = runs.read_json(path)
    return d if isinstance(d, dict) else {}


def _proc_alive(pid) -> bool:
    """Alive, not a zombie, and (where /proc says) still a bertlab process rather than a recycled pid."""
    if not pid or not runs.pid_alive(pid):
        return False
    try:
        if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
            return False
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        return not cmdline or b"bertlab" in cmdline  # empty while it exits: alive a moment longer
    except (OSError, IndexError):
        return runs.pid_alive(pid)  # no /proc (macOS), or it ended just now


def _tail(path: Path, n: int) -> list[str]:
    try:
        with open(path, "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - 16384))
            lines = [ln for ln in f.read().decode(errors="replace").replace("\r", "\n").split("\n") if ln.strip()]
    except OSError:
        return []
    return lines[-n:] if n > 0 else []


@dataclass
class Job:
    """One launch as this manager sees it: "queued" -> "running" -> "exited"."""
    name: str
    spec: Spec | None  # None: adopted from an earlier server
    owner: str | None
    resume: bool
    state: str = "queued"
    position: int | None = None  # 1-based place in the queue while queued
    pid: int | None = None
    error: str = ""  # why a queued job could not start after all
    stop_pending: bool = False
    notice: str = ""  # what the start did besides (e.g. removed old runs to free disk)
    group: list[str] = field(default_factory=list)  # the runs started together with it (a comparison)
    created: float = field(default_factory=time.time)
    proc: subprocess.Popen | None = field(default=None, repr=False)


class JobManager:
    """Starts, queues, watches, stops and kills training subprocesses under `root`. Thread-safe."""

    def __init__(self, root: str | os.PathLike = "runs", max_concurrent: int = 1, python: str = sys.executable,
                 nice: int = 10, device=None, memory_mb: float | None = None):
        """`device`: where the jobs train, written into each spec that has a device field (a start and
        a resume alike): a device name ("cpu", "cuda", "cuda:1"), a function that returns one when a
        job starts (the web's: limits.app_device), or None to keep each spec's own. `memory_mb` caps
        each job process's private memory (RLIMIT_DATA: the heap and anonymous maps, which bounds what
        it takes of the machine's RAM and, unlike an address-space cap, lets CUDA start)."""
        if not isinstance(max_concurrent, int) or max_concurrent < 1:
            raise ValueError(f"max_concurrent (BERTLAB_MAX_JOBS) must be a positive integer, got {max_concurrent!r}")
        self.root = Path(root).resolve()  # absolute: --out must not depend on the child's cwd
        self.max_concurrent, self.python, self.device, self.memory_mb = max_concurrent, python, device, memory_mb
        # lower priority for training, so the explorer tabs answer first (where the kernel honours it)
        self.nice = nice if nice and shutil.which("nice") else 0
        self._lock, self._jobs, self._queue = threading.RLock(), {}, []
        for d in sorted(self.root.iterdir()) if self.root.is_dir() else []:  # a previous server's jobs
            info = _read_json(d / JOB)
            if _NAME.match(d.name) and info.get("returncode") is None and _proc_alive(info.get("pid")):
                self._jobs[d.name] = Job(d.name, None, info.get("owner"), bool(info.get("resume")), "running",
                                         pid=info["pid"])

    def _reap(self) -> None:
        """Collect exited children (Popen.poll: no zombies) and store their exit code; frees their slot."""
        for job in self._jobs.values():
            if job.state == "running" and not (job.proc.poll() is None if job.proc else _proc_alive(job.pid)):
                job.state = "exited"
                if job.proc is not None:
                    self._update_job_json(job.name, returncode=job.proc.returncode, ended=time.time())

    def _update_job_json(self, name: str, **fields) -> None:
        if (path := self.root / name / JOB).exists():
            runs.write_json_atomic(path, {**_read_json(path), **fields})

    def _running_pid(self, name: str) -> int | str | None:
        """Who trains the run: a job.json pid (ours or an earlier server's), or whoever flocks the run
        (e.g. a CLI run), found by a non-blocking try that is released at once."""
        if (info := _read_json(self.root / name / JOB)).get("returncode") is None and _proc_alive(info.get("pid")):
            return info["pid"]
        if not (lock := self.root / name / runs.LOCK).exists():
            return None
        fd = os.open(lock, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.flock(fd, fcntl.LOCK_UN)
        except BlockingIOError:
            return os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
        finally:
            os.close(fd)
        return None

    def _check_owner(self, name: str, owner: str | None) -> None:
        """owner None is the operator (CLI, tests); a web visitor changes only runs it started."""
        if owner == TEACHER:
            return
        job = self._jobs.get(name)
        have = job.owner if job is not None else _read_json(self.root / name / JOB).get("owner")
        if have is not None and owner != have:
            raise PermissionError("this run belongs to another session: you can watch it, not change it")
        if have is None and owner is not None and (job is not None or (self.root / name).exists()):
            raise PermissionError("this run was not started from the web page, so it is read-only here")

    def owned(self, owner: str) -> list[str]:
        """The run folders a visitor started (job.json says so)."""
        found = [d.name for d in self.root.iterdir() if d.is_dir() and _NAME.match(d.name)
                 and _read_json(d / JOB).get("owner") == owner] if self.root.is_dir() else []
        return found + [n for n, j in self._jobs.items() if j.owner == owner and n not in found]

    def _check_quota(self, name: str, owner: str | None, resume: bool) -> None:
        if owner is None or owner == TEACHER:
            return
        busy = sum(j.owner == owner and j.state in ("queued", "running") and n != name for n, j in self._jobs.items())
        everyone = sum(j.state in ("queued", "running") and n != name for n, j in self._jobs.items())
        mine = self.owned(owner)
        quota.check_visitor(busy, [self.root / n for n in mine], new=not resume and name not in mine,
                            everyone=everyone)

    def _free_disk(self, keep: str, owner: str | None = None) -> list[str]:
        """Make room under the disk budget for `owner`'s new run; the names removed. Ended web runs
        past BERTLAB_KEEP_DAYS go first, whoever started them. Then a visitor's start removes only
        their own ended runs, oldest first: a start under a new browser id removed other students'
        finished runs. The operator (CLI, owner None) and the teacher may remove anyone's, oldest
        first. Never a live or queued run, nor one the CLI made. A visitor's start that still does not
        fit is refused (ValueError), and nothing of theirs was removed for it."""
        quota.sweep(self.root / UPLOADS)
        live = {n for n, j in self._jobs.items() if j.state in ("queued", "running")} | {keep}
        info: dict[str, dict | None] = {}  # a folder's job.json once it is known to have ended, else None

        def ended(d: Path) -> bool:  # read once a folder: job.json, and whether anyone trains it
            if d.name not in info:
                info[d.name] = _read_json(d / JOB) if (_NAME.match(d.name) and d.name not in live
                                                       and (d / JOB).exists() and self._running_pid(d.name) is None) else None
            return info[d.name] is not None

        def started(d: Path) -> float:
            return info[d.name].get("started") or 0
        cutoff = time.time() - limits().keep_days * 86400
        removed = quota.remove_old(self.root, lambda d: ended(d) and (info[d.name].get("ended") or started(d)) < cutoff)
        anyone = owner is None or owner == TEACHER
        refuse = None if anyone else (
            f"this server's disk for runs (BERTLAB_DISK_BUDGET_MB) is full of other visitors' runs, and "
            f"deleting all of your finished ones would not make room: ask your teacher to clear old runs "
            f"(finished runs are kept {limits().keep_days:g} days, BERTLAB_KEEP_DAYS)")
        removed += quota.free_disk(self.root, lambda d: ended(d) and (anyone or info[d.name].get("owner") == owner),
                                   started, refuse)
        for n in removed:
            self._jobs.pop(n, None)
        return removed

    def delete(self, name: str, owner: str | None = None) -> None:
        """Remove a run folder for good: only its owner, and only once it is not training or queued."""
        with self._lock:
            self._reap()
            self._check_owner(check_name(name), owner)
            job = self._jobs.get(name)
            if (job is not None and job.state in ("queued", "running")) or self._running_pid(name) is not None:
                raise ValueError(f"run {name} is queued or training: stop it first")
            if not (self.root / name).is_dir():
                raise ValueError(f"there is no run {name} here")
            shutil.rmtree(self.root / name)
            self._jobs.pop(name, None)

    def _own_uploads(self, job: Job) -> None:
        """Move files the web staged for this job (under .uploads/) into its run folder, so they count
        to its owner's disk and go when the run is deleted."""
        staging, fields = self.root / UPLOADS, {}
        for k, v in job.spec.to_dict().items():
            if isinstance(v, str) and Path(v).parent == staging and Path(v).is_file():
                dest = self.root / job.name / f"upload-{k}{Path(v).suffix}"
                dest.parent.mkdir(parents=True, exist_ok=True)
                os.replace(v, dest)
                fields[k] = str(dest)
        if fields:
            job.spec = job.spec.replace(**fields)

    def _check_startable(self, name: str, owner: str | None, resume: bool) -> None:
        self._check_owner(name, owner)  # first: a stranger's run is not theirs, running or not
        if (pid := self._running_pid(name)) is not None:
            raise ValueError(f"run {name} is already being trained (process {pid}); stop it or wait for it to end")
        if not resume and any((self.root / name / n).exists() for n in _PREPARED):
            raise ValueError(f"run {name} exists: resume it or pick another name")
        if resume and not (self.root / name).is_dir():  # deleted since the resume read its spec
            raise ValueError(f"run {name} is gone (deleted): there is nothing to resume")

    def _launch(self, job: Job) -> None:
        rd = self.root / job.name
        runs.Run(rd).write_spec(job.spec)
        cmd = [self.python, "-m", "bertlab", "run", str(rd)]
        cmd = ["nice", "-n", str(self.nice), *cmd] if self.nice else cmd  # nice execs: the pid stays python's
        path = os.pathsep.join(p for p in (_PACKAGE_ROOT, os.environ.get("PYTHONPATH")) if p)
        env = {**os.environ, "TOKENIZERS_PARALLELISM": "false", "PYTHONUNBUFFERED": "1", "PYTHONPATH": path}
        with open(rd / LOG, "a" if job.resume else "w", encoding="utf-8") as log:
            log.write(f"--- resumed {time.ctime()} ---\n" if job.resume else "")
            log.flush()
            job.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                        env=env, start_new_session=True)  # its own group: kill reaches all
        if self.memory_mb:  # set on the running child (a preexec_fn is unsafe in a threaded server);
            import resource  # it keeps the cap through nice's exec, and the data loader's worker inherits it
            cap = int(self.memory_mb * 2**20)
            with contextlib.suppress(ProcessLookupError):
                resource.prlimit(job.proc.pid, resource.RLIMIT_DATA, (cap, cap))
        job.pid, job.state, job.position, job.created = job.proc.pid, "running", None, time.time()
        group = job.group or (_read_json(rd / JOB).get("group") if job.resume else None)  # a resume keeps it
        runs.write_json_atomic(rd / JOB, {"pid": job.pid, "owner": job.owner, "started": job.created, "cmd": cmd,
                                          "kind": job.spec.KIND, "resume": job.resume, "group": group or None})

    def _free_slot(self) -> bool:
        return sum(j.state == "running" for j in self._jobs.values()) < self.max_concurrent

    def start(self, name: str, spec: Spec, owner: str | None = None, resume: bool = False,
              group: list[str] | None = None) -> Job:
        """Write `spec` into <root>/<name>/spec.json and launch `python -m bertlab run` on it, or queue it
        when every slot is taken (the Job then says "queued", with its position). `group`: the names
        of the runs started together with this one (e.g. a comparison), which its status repeats."""
        check_name(name)
        if not isinstance(spec, Spec) or spec.KIND not in RUN_KINDS:
            raise ValueError(f"a job is a {', '.join(RUN_KINDS[:-1])} or {RUN_KINDS[-1]} spec, got {type(spec).__name__}")
        spec = self.on_device(spec)
        with self._lock:
            self._reap()
            if (old := self._jobs.get(name)) is not None and old.state == "queued":
                raise ValueError(f"run {name} is already queued (position {old.position})")
            self._check_startable(name, owner, resume)
            self._check_quota(name, owner, resume)
            removed = self._free_disk(keep=name, owner=owner)  # may refuse: nothing is registered yet
            job = self._jobs[name] = Job(name, spec, owner, resume, group=list(group or []))
            self._own_uploads(job)
            if removed:
                job.notice = (f"To keep this server's disk budget, old finished runs were removed: "
                              f"{', '.join(removed)}.")
            if self._free_slot():
                self._launch(job)
            else:
                self._queue.append(name)
                job.position = len(self._queue)
            return job

    def on_device(self, spec: Spec) -> Spec:
        """The spec with this manager's device, where both have one (a spec without a device field keeps
        to the CPU). Several jobs may share one GPU: BERTLAB_MAX_JOBS still says how many run at once."""
        device = self.device() if callable(self.device) else self.device
        return spec.replace(device=device) if device and hasattr(spec, "device") else spec

    def resume(self, name: str, owner: str | None = None, changes: dict | None = None) -> Job:
        """Go on from the newest checkpoint with the run's own spec, plus the `changes` a resume may
        make (e.g. more steps)."""
        saved = runs.Run(self.root / check_name(name)).spec()
        if saved is None:
            raise ValueError(f"run {name} has nothing to resume (no such run under {self.root})")
        spec, ignored = saved.resumed(changes or {})
        if ignored:
            raise ValueError(f"a resumed run keeps its own {', '.join(ignored)}")
        end = time.monotonic() + 20.0  # a run that just said "stopped" may still be writing and exiting
        while runs.read_status(self.root / name).get("state") in ("stopped", "finished", "failed") \
                and self._running_pid(name) is not None and time.monotonic() < end:
            with self._lock:
                self._reap()
            time.sleep(0.1)
        return self.start(name, spec, owner, resume=True)

    def poll(self) -> None:
        """Reap finished jobs, start queued ones in freed slots, and repeat stops the trainer missed
        (it clears STOP while it prepares a run, so a stop asked for then is asked again)."""
        with self._lock:
            self._reap()
            while self._queue and self._free_slot():
                job = self._jobs[self._queue.pop(0)]
                try:
                    self._check_startable(job.name, job.owner, job.resume)
                    self._launch(job)
                except (ValueError, PermissionError, OSError) as e:
                    job.state, job.position, job.error = "exited", None, str(e)
            for i, name in enumerate(self._queue, 1):
                self._jobs[name].position = i
            for job in [j for j in self._jobs.values() if j.stop_pending and j.state == "running"]:
                st, rd = runs.read_status(self.root / job.name), self.root / job.name
                if st.get("pid") == job.pid and st["state"] != "running":
                    job.stop_pending = False
                elif st.get("pid") == job.pid and st["step"] < (st["total_steps"] or 0) and not runs.stop_requested(rd):
                    runs.request_stop(rd)

    def _dequeue(self, name: str, owner: str | None) -> bool:
        """The owner check of stop and kill; a queued job is just dropped from the queue (True)."""
        self._reap()
        self._check_owner(check_name(name), owner)
        if (job := self._jobs.get(name)) is None or job.state != "queued":
            return False
        self._queue.remove(name)
        del self._jobs[name]
        if not job.resume and not (self.root / name / JOB).exists():
            # a new run that never started holds only its staged upload: with no job.json its owner could
            # not delete it, and no cap or disk budget counted it
            shutil.rmtree(self.root / name, ignore_errors=True)
        self.poll()  # renumbers the queue
        return True

    def stop(self, name: str, owner: str | None = None) -> dict:
        """Graceful: the trainer checkpoints and exits after its current step. A queued job is dropped."""
        with self._lock:
            if not self._dequeue(name, owner):
                if self._running_pid(name) is None:
                    raise ValueError(f"run {name} is not running")
                runs.request_stop(self.root / name)
                if (job := self._jobs.get(name)) is not None:
                    job.stop_pending = True
        return self.status(name)

    def kill(self, name: str, owner: str | None = None, timeout: float = 10.0) -> dict:
        """For a stuck process: SIGTERM to its process group, then SIGKILL after `timeout` seconds."""
        with self._lock:
            if self._dequeue(name, owner):
                return self.status(name)
            if not isinstance(pid := self._running_pid(name), int):
                raise ValueError(f"run {name} is not running" + (f" as a job (process {pid} trains it)" if pid else ""))
            self._update_job_json(name, killed=True)
            proc = job.proc if (job := self._jobs.get(name)) is not None and job.pid == pid else None
        alive = (lambda: proc.poll() is None) if proc is not None else (lambda: _proc_alive(pid))
        for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 10.0)):
            if alive():
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, sig)
            end = time.monotonic() + wait
            while alive() and time.monotonic() < end:
                time.sleep(0.05)
        self.poll()
        return self.status(name)

    def status(self, name: str, log_lines: int = 20) -> dict:
        """status.json merged with process liveness, queue position, owner, log tail, progress and ETA.
        States: those of runs.STATES, plus "queued", "starting" (preparing data) and "unknown"."""
        rd = self.root / check_name(name)
        with self._lock:
            self._reap()  # before reading job.json: it stores the exit codes
            if (job := self._jobs.get(name)) is not None and job.state == "queued":
                return {"name": name, "kind": job.spec.KIND, "state": "queued", "queue_position": job.position,
                        "owner": job.owner, "alive": False, "pid": None, "step": 0, "total_steps": None,
                        "progress": 0.0, "eta_s": None, "log_tail": "", "queued_at": job.created,
                        "group": job.group or None, "method": getattr(job.spec, "method", None),
                        "message": f"waiting for a free slot (number {job.position} in the queue)"}
            info, err, owner = _read_json(rd / JOB), getattr(job, "error", ""), getattr(job, "owner", None)
            # our child: Popen.poll (in _reap) knows; /proc shows a zombie while torch's threads still exit
            mine = getattr(job, "proc", None) is not None and job.pid == info.get("pid")
            alive = job.state == "running" if mine else None
        pid, rc, st = info.get("pid"), info.get("returncode"), runs.read_status(rd)
        alive = alive if alive is not None else rc is None and _proc_alive(pid)
        ours = pid is not None and st.get("pid") == pid  # else status.json is older than this process
        state, message = st["state"], st.get("message", "")
        if err:
            state, message = "failed", err
        elif alive:
            state = st["state"] if ours else "starting"  # "finished" while alive: it is exiting
        elif pid is not None and not ours:  # it ended without a word in status.json: a crash
            state, message = ("finished", "") if rc == 0 else ("failed", f"the process exited with code {rc}; see the log")
        if state == "failed" and info.get("killed"):
            message = "killed on request; resume to go on from the last checkpoint"
        step, total, eta = int(st.get("step") or 0), st.get("total_steps"), None
        if state == "running" and step and total and st.get("elapsed"):
            eta = max(0.0, st["elapsed"] / step * (total - step) - (time.time() - (st.get("updated") or time.time())))
        public = {str(self.root): "runs"}  # what visitors see holds no path of this server
        return {**st, "name": name, "kind": info.get("kind") or runs.Run(rd).kind, "state": state,
                "message": hide_paths(message.strip(), public),
                "pid": pid, "alive": alive, "owner": info.get("owner", owner), "queue_position": None,
                "group": info.get("group") or getattr(job, "group", None) or None,
                "returncode": rc, "launched": info.get("started"), "cmd": info.get("cmd"), "eta_s": eta,
                "progress": 1.0 if state == "finished" else min(1.0, step / total) if total else 0.0,
                "log_tail": hide_paths("\n".join(_tail(rd / LOG, log_lines)), public)}

    def list(self) -> list[dict]:
        """Every run under root and every queued job, newest first; without log tails (cheap to poll)."""
        with self._lock:
            self._reap()
            names = set(self._queue)
        names |= {r.name for r in runs.list_runs(self.root) if _NAME.match(r.name)}
        rows = [self.status(n, log_lines=0) for n in names]
        return sorted(rows, key=lambda r: r.get("queued_at") or r.get("launched") or r.get("started") or 0)[::-1]


def _poll_forever(mgr: JobManager, interval: float) -> None:
    """The default manager's daemon thread: queued jobs start even when no UI timer ticks."""
    while True:
        time.sleep(interval)
        try:
            mgr.poll()
        except Exception as e:  # keep going: the next tick may succeed
            print(f"bertlab jobs: poll failed: {e}", file=sys.stderr)


_default: JobManager | None = None
_default_lock = threading.Lock()


def default_manager() -> JobManager:
    """The process-wide, self-polling manager: BERTLAB_RUNS_DIR (default "runs"), BERTLAB_MAX_JOBS (1);
    its jobs train on the app's device (BERTLAB_DEVICE, read as each starts)."""
    global _default
    with _default_lock:
        if _default is None:
            root, n = os.environ.get("BERTLAB_RUNS_DIR", "runs"), os.environ.get("BERTLAB_MAX_JOBS", "1")
            _default = JobManager(root, int(n) if n.strip().isdigit() else n,  # a bad value: a clear ValueError
                                  device=app_device, memory_mb=limits().job_mb)
            threading.Thread(target=_poll_forever, args=(_default, 2.0), name="bertlab-jobs", daemon=True).start()
        return _default
