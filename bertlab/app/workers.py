"""Work that can grow large (probes) runs in one worker process with a memory cap, as training runs in
its own: a burst of big requests then fails there, alone, while the web server keeps its memory.
The worker is reused (it keeps a few models loaded) and rebuilt after a crash or a timeout. Its models
live on the app's device (BERTLAB_DEVICE), the GPU where there is one."""
from __future__ import annotations

import concurrent.futures as cf
import multiprocessing as mp
import os
import threading
import time

from ..cache import LRU
from ..checkpoint import load_pretrained
from ..train.probing import probe, random_init
from .limits import app_device, limits

_lock = threading.Lock()
_pool: cf.ProcessPoolExecutor | None = None
_models = LRU(2)  # in the worker: (folder, stamp, random?) -> (model, tokenizer)
_device = "cpu"  # in the worker: where its models compute


def _init(memory_mb: float, threads: int, device: str = "cpu") -> None:
    import resource

    import torch
    global _device
    _device = device
    # CUDA reserves far more address space than it uses (a cap on it makes CUDA fail to start): with a
    # GPU the cap is on the data segment (the heap and private writable memory), which still bounds
    # what a big request takes of the server's RAM. The GPU's own memory is the GPU's to refuse.
    cap = resource.RLIMIT_AS if device == "cpu" else resource.RLIMIT_DATA
    resource.setrlimit(cap, (int(memory_mb * 2**20),) * 2)
    torch.set_num_threads(threads)
    threading.Thread(target=_exit_with_parent, args=(os.getppid(),), daemon=True).start()


def _exit_with_parent(parent: int, every: float = 1.0) -> None:
    """In the worker: a server killed by a signal never shuts its pool down, and the worker (a
    gigabyte with its models) would live on as an orphan; it leaves once its parent is gone."""
    while os.getppid() == parent:
        time.sleep(every)
    os._exit(0)


def probe_job(folder: str, stamp, random: bool, max_params: int, task: str, **kw) -> dict:
    """In the worker: probe the model in `folder` (or a random init of its config) on `task`."""
    key = (folder, stamp, random)
    if (hit := _models.get(key)) is None:
        model, tok = load_pretrained(folder, max_params=max_params)
        hit = _models.put(key, ((random_init(model, seed=0) if random else model).to(_device), tok))
    return probe(hit[0], hit[1], task, **kw)


def run(fn, *args, timeout: float = 900, **kwargs):
    """fn(*args, **kwargs) in the worker; its ValueError comes back as is, a crash (most often: out
    of the worker's memory) or a timeout as a ValueError that says so."""
    global _pool
    lim = limits()
    with _lock:
        if _pool is None:
            _pool = cf.ProcessPoolExecutor(1, mp_context=mp.get_context("spawn"), initializer=_init,
                                           initargs=(lim.worker_mb, lim.job_threads, app_device()))
        pool = _pool
    try:
        return pool.submit(fn, *args, **kwargs).result(timeout)
    except (cf.process.BrokenProcessPool, cf.TimeoutError, MemoryError) as e:
        _drop(pool)
        what = f"took over {timeout:.0f} s" if isinstance(e, cf.TimeoutError) else \
            f"ran out of its {lim.worker_mb:,.0f} MB (BERTLAB_WORKER_MB) or crashed"
        raise ValueError(f"the worker {what}: try a smaller sample or model") from None
    except RuntimeError as e:
        if "alloc" not in str(e).lower():
            raise
        _drop(pool)
        if "cuda" in str(e).lower():  # torch.OutOfMemoryError: the GPU's memory, not the worker's cap
            raise ValueError("the GPU ran out of memory (other models or training jobs hold it): try a "
                             "smaller sample or model, or again later") from None
        raise ValueError(f"the worker ran out of its {lim.worker_mb:,.0f} MB (BERTLAB_WORKER_MB): "
                         f"try a smaller sample or model") from None


def _drop(pool: cf.ProcessPoolExecutor) -> None:
    global _pool
    with _lock:
        if _pool is pool:
            _pool = None
    for p in list((getattr(pool, "_processes", None) or {}).values()):  # a timed-out job holds it for ever
        p.kill()
    pool.shutdown(wait=False, cancel_futures=True)
