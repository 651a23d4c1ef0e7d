"""Ctrl-C for the training commands: the first asks the run to stop after its step (a checkpoint is
saved, so it resumes), a second aborts. One module, so every command that trains shares it."""
from __future__ import annotations

import signal
import threading


def graceful_stop(log) -> threading.Event:
    """An event set by the first Ctrl-C (or SIGTERM); a second Ctrl-C raises KeyboardInterrupt."""
    ev = threading.Event()

    def handler(signum, frame):
        if ev.is_set() and signum == signal.SIGINT:
            raise KeyboardInterrupt
        ev.set()
        log("stopping after this step (a checkpoint will be saved; Ctrl-C again to abort) ...")
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, handler)
        signal.signal(signal.SIGTERM, handler)
    return ev
