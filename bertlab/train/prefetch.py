"""Batches built ahead of the step on a thread, for a GPU: while the device runs step k, the CPU masks,
collates and pins batch k+1..k+depth, so the step never waits for Python. The trainer's checkpoint asks
this for the batch source's position, which is the position after the last batch *handed out*, not the
last one built, so a resumed run sees exactly the batches an uninterrupted one would have."""
from __future__ import annotations

import queue
import threading
from typing import Any, Iterable

import torch

_END = object()


def pin(batch: Any) -> Any:
    """Page-locked copies, so the copy to the GPU runs without the CPU waiting for it."""
    if isinstance(batch, dict):
        return {k: pin(v) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)):
        return type(batch)(pin(v) for v in batch)
    return batch.pin_memory() if torch.is_tensor(batch) and torch.cuda.is_available() else batch


class Prefetcher:
    """Wraps a resumable batch source (iterating it runs the rest of an epoch; `state_dict()` says where it
    is). Iterating this never ends: epochs follow each other, as the trainer restarts them anyway."""

    def __init__(self, source: Iterable, depth: int = 4):
        self.source, self.depth = source, depth
        self._q: queue.Queue = queue.Queue(depth)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._state = source.state_dict() if hasattr(source, "state_dict") else None

    def _work(self) -> None:
        try:
            while not self._stop.is_set():
                empty = True
                for batch in self.source:
                    empty = False
                    state = self.source.state_dict() if self._state is not None else None
                    if not self._put((pin(batch), state)):
                        return
                if empty:
                    raise ValueError("the batch source yielded no batches")
        except BaseException as e:  # handed to the trainer, which raises it where it waits
            self._put(e)

    def _put(self, item) -> bool:
        while not self._stop.is_set():
            try:
                self._q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def __iter__(self):
        if self._thread is None:  # started on first use: after a resume has set the source's position
            self._thread = threading.Thread(target=self._work, name="bertlab-prefetch", daemon=True)
            self._thread.start()
        while True:
            item = self._q.get()
            if isinstance(item, BaseException):
                raise item
            batch, self._state = item
            yield batch

    def state_dict(self):
        return self._state

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
