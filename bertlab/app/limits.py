"""Caps for a shared server (a free Space serving a class): what one visitor may start.

Read from the environment on every call, so a host (or a test) can change them without a restart.
The defaults suit a laptop; a hosted Space would lower them, e.g. BERTLAB_MAX_STEPS=3000.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

UPLOAD_SUFFIXES = (".txt", ".csv", ".tsv", ".json", ".jsonl", ".conll")


@dataclass(frozen=True)
class Limits:
    max_steps: int  # pre-training optimizer steps per run
    max_params: int  # parameters of a model trained from scratch
    max_upload_mb: float
    max_epochs: int  # fine-tuning
    job_threads: int  # torch threads per training job: leave a core for the explorer tabs


def _env_num(name: str, default, kind=int):
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        v = kind(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not a number") from None
    if v <= 0:
        raise ValueError(f"{name} must be positive, got {raw!r}")
    return v


def limits() -> Limits:
    cores = os.cpu_count() or 1
    return Limits(max_steps=_env_num("BERTLAB_MAX_STEPS", 20_000),
                  max_params=_env_num("BERTLAB_MAX_PARAMS", 50_000_000),
                  max_upload_mb=_env_num("BERTLAB_MAX_UPLOAD_MB", 50.0, float),
                  max_epochs=_env_num("BERTLAB_MAX_EPOCHS", 10),
                  job_threads=_env_num("BERTLAB_JOB_THREADS", max(1, cores - 1)))


def check_upload(path: str | os.PathLike | None, what: str = "file") -> Path:
    """An uploaded file that exists, is not empty, has a known suffix and fits the size cap."""
    if not path:
        raise ValueError(f"no {what} uploaded: choose a file first")
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"the uploaded {what} is gone from the server; upload it again")
    if p.suffix.lower() not in UPLOAD_SUFFIXES:
        raise ValueError(f"{p.name}: upload a {', '.join(UPLOAD_SUFFIXES)} file")
    size, cap = p.stat().st_size, limits().max_upload_mb
    if size == 0:
        raise ValueError(f"{p.name} is empty")
    if size > cap * 1e6:
        raise ValueError(f"{p.name} has {size / 1e6:.1f} MB; this server takes at most {cap:g} MB "
                         f"(BERTLAB_MAX_UPLOAD_MB)")
    return p
