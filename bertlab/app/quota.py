"""What one visitor may start and keep, and which old runs go when the runs folder is over the server's
disk budget. The job manager asks; these functions only count and remove folders."""
from __future__ import annotations

import collections
import contextlib
import os
import shutil
import stat
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from .limits import limits


def folder_bytes(path: Path) -> int:
    """Bytes of the plain files under `path` (links not followed); a file deleted meanwhile counts 0."""
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                st = os.lstat(os.path.join(root, name))
            except OSError:  # gone between the listing and the look (Gradio's delete_cache, a run removed)
                continue
            total += st.st_size if stat.S_ISREG(st.st_mode) else 0
    return total


class Window:
    """Amounts per key (an address) within the last `window_s` seconds: what one network uploaded, the
    browser ids it was given. Keys whose amounts all aged out are forgotten (bounded by active keys)."""

    def __init__(self, window_s: float, clock=time.monotonic):
        self.window_s, self.clock, self._lock = window_s, clock, threading.Lock()
        self._taken: dict[str, collections.deque] = {}

    def take(self, key: str, amount: float, limit: float) -> float | None:
        """Count `amount` against `key` when its total stays within `limit` (None); else, counting
        nothing, the total it already has."""
        now = self.clock()
        with self._lock:
            for k in list(self._taken):
                q = self._taken[k]
                while q and q[0][0] <= now - self.window_s:
                    q.popleft()
                if not q:
                    del self._taken[k]
            mine = self._taken.get(key, ())
            used = sum(a for _, a in mine)
            if used + amount > limit:
                return used
            self._taken.setdefault(key, collections.deque()).append((now, amount))
        return None


def check_visitor(busy: int, kept: list[Path], new: bool, everyone: int = 0) -> None:
    """Per-visitor caps: `busy` jobs queued or training, the `kept` run folders (one more if `new`),
    and their bytes on disk; and the server's: `everyone`'s jobs queued or training (a visitor id is
    the browser's own, so made-up ids got round the per-visitor caps). A ValueError says which cap
    and which setting."""
    lim = limits()
    if everyone >= lim.max_queue:
        raise ValueError(f"this server has {everyone} runs queued or training, the most it takes "
                         f"(BERTLAB_MAX_QUEUE): try again when one has ended")
    if busy >= lim.max_jobs_per_visitor:
        raise ValueError(f"you have {busy} runs queued or training, the most this server allows one "
                         f"visitor (BERTLAB_MAX_QUEUED): wait for one to end, or stop it")
    if new and len(kept) >= lim.max_runs_per_visitor:
        raise ValueError(f"you keep {len(kept)} runs, the most this server allows one visitor "
                         f"(BERTLAB_MAX_RUNS): delete one of yours first")
    used = sum(folder_bytes(d) for d in kept if d.is_dir())
    if used > lim.max_visitor_mb * 1e6:
        raise ValueError(f"your runs take {used / 1e6:,.0f} MB, over this server's {lim.max_visitor_mb:,.0f} MB "
                         f"per visitor (BERTLAB_MAX_VISITOR_MB): delete one of yours first")


def sweep(folder: Path, max_age_s: float = 3600) -> int:
    """Remove the files under `folder` older than `max_age_s`, whoever wrote them, and the folders they
    leave empty; the bytes freed. Uploads staged by a form that failed afterwards, and Gradio's upload
    folder (its own cleaning deletes only the files of the server that stored them: a killed server's
    uploads stayed for good, counted against the total, and a later upload got 507 for everyone)."""
    freed, cutoff = 0, time.time() - max_age_s
    for root, _, files in os.walk(folder, topdown=False):
        for name in files:
            with contextlib.suppress(OSError):  # gone meanwhile (another start took it), or not ours
                st = os.lstat(p := os.path.join(root, name))
                if st.st_mtime < cutoff:
                    os.unlink(p)
                    freed += st.st_size
        if root != str(folder):
            with contextlib.suppress(OSError):
                os.rmdir(root)  # only if empty
    return freed


def remove_old(root: Path, old: Callable[[Path], bool]) -> list[str]:
    """Remove every folder under root that is `old` (an age rule, whatever the budget); the names."""
    gone = [d for d in (root.iterdir() if root.is_dir() else []) if d.is_dir() and old(d)]
    for d in gone:
        shutil.rmtree(d, ignore_errors=True)
    return sorted(d.name for d in gone)


def free_disk(root: Path, removable: Callable[[Path], bool], age: Callable[[Path], float],
              refuse: str | None = None) -> list[str]:
    """Past BERTLAB_DISK_BUDGET_MB, remove the `removable` run folders under root, oldest `age` first,
    until everything under root fits again. The names removed. With `refuse`, when removing them all
    would still not fit, nothing is removed and ValueError(refuse) is raised."""
    budget = limits().disk_budget_mb * 1e6
    sizes = {d: folder_bytes(d) if d.is_dir() else d.stat().st_size for d in (root.iterdir() if root.is_dir() else [])}
    total, removed = sum(sizes.values()), []
    if total <= budget:
        return removed
    candidates: Iterable[Path] = [d for d in sizes if removable(d)]
    if refuse is not None and total - sum(sizes[d] for d in candidates) > budget:
        raise ValueError(refuse)
    for d in sorted(candidates, key=age):
        if total <= budget:
            break
        shutil.rmtree(d, ignore_errors=True)
        total -= sizes[d]
        removed.append(d.name)
    return removed
