"""The probe worker leaves with its server: a server killed by a signal never shuts its pool down."""
import os
import subprocess
import sys
import time

from browser import ROOT

CHILD = f'''
import os, sys, threading, time
sys.path.insert(0, {str(ROOT)!r})
from bertlab.app import workers
pid = os.fork()
if pid == 0:  # the "worker": watches its parent, which exits at once
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1), os.dup2(null, 2)  # so the test's pipe closes when the parent exits
    threading.Thread(target=workers._exit_with_parent, args=(os.getppid(), 0.05), daemon=True).start()
    time.sleep(60)
    os._exit(3)
print(pid, flush=True)
os._exit(0)
'''


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as f:
            return "State:\tZ" not in f.read()
    except OSError:
        return False


def test_worker_exits_when_its_parent_is_gone():
    child = int(subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, check=True).stdout)
    deadline = time.time() + 10
    while alive(child) and time.time() < deadline:
        time.sleep(0.1)
    assert not alive(child)
    if alive(child):  # pragma: no cover - leave nothing behind
        os.kill(child, 9)
