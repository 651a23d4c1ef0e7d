"""Batches built ahead of the step by a worker process, for a GPU: while the device runs step k, the worker
masks and collates batch k+1..k+depth and the loader pins them, so the step never waits for the data. A
process, not a thread: a thread building batches holds Python's lock, which every kernel launch of the
training loop needs too. (With a thread and the old collate, mini pre-trained on an H200 at 0.32 of its
bare step's rate.)

The trainer's checkpoint asks this for the batch source's position: the position after the last batch
*handed out*, not the last one built, so a resumed run sees exactly the batches an uninterrupted one would.
"""
from __future__ import annotations

import signal
from typing import Iterable

import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info


class _Stream(IterableDataset):
    """The source's batches, epoch after epoch, each with the source's state after it. The worker gets the
    source as it was when iteration began (a resumed position included) and never hands it back."""

    def __init__(self, source: Iterable):
        self.source = source

    def __iter__(self):
        if get_worker_info() is not None:
            torch.set_num_threads(1)  # one core builds batches; the rest are the step's
        stateful = hasattr(self.source, "state_dict")
        while True:
            empty = True
            for batch in self.source:
                empty = False
                yield batch, (self.source.state_dict() if stateful else None)
            if empty:
                raise ValueError("the batch source yielded no batches")


def _quiet_worker(_: int) -> None:
    """Ctrl-C and SIGTERM are the trainer's to handle (a checkpoint after the step): a worker that died of
    them would fail the run instead. The worker ends with its parent (the loader watches it)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


class Prefetcher:
    """Wraps a resumable batch source (iterating it runs the rest of an epoch; `state_dict()` says where it
    is). Iterating this never ends: epochs follow each other, as the trainer restarts them anyway."""

    def __init__(self, source: Iterable, depth: int = 4):
        self.source, self.depth = source, depth
        self._state = source.state_dict() if hasattr(source, "state_dict") else None
        self._it = None

    def __iter__(self):
        if self._it is None:  # started on first use: after a resume has set the source's position
            # One worker keeps the order; batch_size=None hands the source's batches on as they are.
            loader = DataLoader(_Stream(self.source), batch_size=None, num_workers=1,
                                pin_memory=torch.cuda.is_available(), prefetch_factor=self.depth,
                                persistent_workers=False, worker_init_fn=_quiet_worker,
                                generator=torch.Generator())  # leaves the
            self._it = iter(loader)  # global RNG alone: the loader draws its workers' seed from its generator
        for batch, state in self._it:
            self._state = state
            yield batch

    def state_dict(self):
        return self._state

    def close(self) -> None:
        """Stop the worker now (dropping the iterator would too, but a traceback may still hold it)."""
        it, self._it = self._it, None
        if it is not None and hasattr(it, "_shutdown_workers"):
            it._shutdown_workers()
