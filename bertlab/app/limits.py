"""Caps for a shared server (a free Space serving a class): what one visitor may start, load and keep.

Read from the environment on every call, so a host (or a test) can change them without a restart.
The defaults suit a laptop; a Space (SPACE_ID is set there) or BERTLAB_CLASSROOM=1 turns off local
paths from the web. BERTLAB_DEVICE (app_device) says where models and web jobs run. README "Hosting"
lists every setting.
"""
from __future__ import annotations

import ipaddress
import os
import re
from dataclasses import dataclass
from pathlib import Path

UPLOAD_SUFFIXES = (".txt", ".csv", ".tsv", ".json", ".jsonl", ".conll")
MAX_CHOICE_CHARS = 255  # a model picker value: a run name, a hub id or (where allowed) a folder


@dataclass(frozen=True)
class Limits:
    max_steps: int  # pre-training optimizer steps per run
    max_params: int  # parameters of a model trained (pre-trained or fine-tuned) from the web
    max_model_params: int  # parameters of a model the views may load (checked on its config first)
    max_upload_mb: float
    max_epochs: int  # fine-tuning
    job_threads: int  # torch threads per training job: leave a core for the explorer tabs
    max_jobs_per_visitor: int  # queued + running
    max_queue: int  # queued + running, everyone's
    max_runs_per_visitor: int  # run folders kept
    max_visitor_mb: float  # bytes on disk of one visitor's runs
    disk_budget_mb: float  # all runs: past it a visitor's start removes their own oldest finished runs
    model_cache_mb: float  # models the views keep loaded
    worker_mb: float  # address space of the worker process that runs probes
    job_mb: float  # private memory (heap, anonymous maps) of one training job process
    max_sessions: int  # browser sessions the server keeps (~0.1 MB each: what a session changed, serving.light_sessions)
    upload_age_s: int  # an uploaded file is deleted this long after it came (a run keeps its own copy)
    allow_local_paths: bool  # may the web name a folder of the server (model picker)?
    queue_per_session: int = 16  # events one browser session may have waiting in Gradio's queue
    queue_per_address: int = 32  # ... one address (a classroom behind one NAT shares it)
    upload_mb_per_hour: float = 250.0  # megabytes one address may upload an hour
    uploads_mb: float = 2000.0  # all uploads the server holds (each is deleted after upload_age_s)
    trusted_proxies: str = ""  # proxies whose X-Forwarded-For entries are believed (traffic.ClientAddress)
    new_ids_per_hour: int = 100  # visitor ids one address is issued an hour (identity.py)
    keep_days: float = 14.0  # a finished web run older than this goes at the next start, whoever made it
    warm_cache: bool = True  # prepare the default recipe's data as the server starts (pretrain.warm_cache)


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


def _env_flag(name: str, default: bool) -> bool:
    raw = os.environ.get(name, "").strip().lower()
    if not raw:
        return default
    if raw not in ("1", "0", "true", "false", "yes", "no", "on", "off"):
        raise ValueError(f"{name}={raw!r}: say 1 or 0")
    return raw in ("1", "true", "yes", "on")


def hosted() -> bool:
    """A Space or a classroom server: every visitor is a stranger."""
    return bool(os.environ.get("SPACE_ID")) or _env_flag("BERTLAB_CLASSROOM", False)


def app_device() -> str:
    """BERTLAB_DEVICE: where the views' models and the web's training jobs run, as torch names it
    ("cpu", "cuda", "cuda:1"). "auto" (the default) is the GPU where PyTorch sees one, else the CPU.
    A value this server cannot honour is a ValueError that says what to set instead."""
    import torch  # here, not at the top: reading the other caps needs no torch

    raw = os.environ.get("BERTLAB_DEVICE", "").strip().lower() or "auto"
    if raw == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if raw == "cpu":
        return raw
    m = re.fullmatch(r"cuda(?::(\d+))?", raw)
    if m is None:
        raise ValueError(f"BERTLAB_DEVICE={raw!r}: say auto, cpu, cuda or cuda:N (N a GPU's number)")
    if not torch.cuda.is_available():
        raise ValueError(f"BERTLAB_DEVICE={raw}, but PyTorch sees no CUDA GPU here (no GPU, no driver, or a "
                         f"CPU-only torch): set BERTLAB_DEVICE=auto or cpu")
    if m.group(1) is not None and int(m.group(1)) >= (n := torch.cuda.device_count()):
        raise ValueError(f"BERTLAB_DEVICE={raw}, but this server has {n} GPU{'s' * (n != 1)} "
                         f"(cuda:0{f' to cuda:{n - 1}' if n > 1 else ''})")
    return raw


def device_label(device) -> str:
    """A device as a visitor reads it: "NVIDIA H200 (cuda)", "CPU (2 threads)"."""
    import torch

    device = torch.device(device)
    if device.type == "cpu":
        n = torch.get_num_threads()
        return f"CPU ({n} thread{'s' * (n != 1)})"
    if device.type == "cuda":
        return f"{torch.cuda.get_device_name(device)} ({device})"
    return str(device)


def limits() -> Limits:
    cores = os.cpu_count() or 1
    return Limits(max_steps=_env_num("BERTLAB_MAX_STEPS", 20_000),
                  max_params=_env_num("BERTLAB_MAX_PARAMS", 50_000_000),
                  max_model_params=_env_num("BERTLAB_MAX_MODEL_PARAMS", 400_000_000),
                  max_upload_mb=_env_num("BERTLAB_MAX_UPLOAD_MB", 50.0, float),
                  max_epochs=_env_num("BERTLAB_MAX_EPOCHS", 10),
                  job_threads=_env_num("BERTLAB_JOB_THREADS", max(1, cores - 1)),
                  max_jobs_per_visitor=_env_num("BERTLAB_MAX_QUEUED", 3),
                  max_queue=_env_num("BERTLAB_MAX_QUEUE", 30),
                  max_runs_per_visitor=_env_num("BERTLAB_MAX_RUNS", 20),
                  max_visitor_mb=_env_num("BERTLAB_MAX_VISITOR_MB", 2000.0, float),
                  disk_budget_mb=_env_num("BERTLAB_DISK_BUDGET_MB", 20_000.0, float),
                  model_cache_mb=_env_num("BERTLAB_MODEL_CACHE_MB", 3000.0, float),
                  worker_mb=_env_num("BERTLAB_WORKER_MB", 6000.0, float),
                  job_mb=_env_num("BERTLAB_JOB_MB", 6000.0, float),
                  max_sessions=_env_num("BERTLAB_MAX_SESSIONS", 1000),
                  upload_age_s=_env_num("BERTLAB_UPLOAD_AGE_S", 3600),
                  queue_per_session=_env_num("BERTLAB_QUEUE_PER_SESSION", 16),
                  queue_per_address=_env_num("BERTLAB_QUEUE_PER_ADDRESS", 32),
                  upload_mb_per_hour=_env_num("BERTLAB_UPLOAD_MB_PER_HOUR", 250.0, float),
                  uploads_mb=_env_num("BERTLAB_UPLOADS_MB", 2000.0, float),
                  new_ids_per_hour=_env_num("BERTLAB_NEW_IDS_PER_HOUR", 100),
                  keep_days=_env_num("BERTLAB_KEEP_DAYS", 14.0, float),
                  allow_local_paths=_env_flag("BERTLAB_ALLOW_LOCAL_PATHS", not hosted()),
                  warm_cache=_env_flag("BERTLAB_WARM_CACHE", True),
                  trusted_proxies=_proxies())


def _proxies() -> str:
    """BERTLAB_TRUSTED_PROXIES: the proxies whose X-Forwarded-For header is believed. A client's address
    keys its teacher-token guesses, new ids, queue and upload shares; if any connection could name its
    own, rotating the header got round them. A Space is reached only through Hugging Face's proxy ("*":
    one hop, the right-most entry); elsewhere none is."""
    raw = os.environ.get("BERTLAB_TRUSTED_PROXIES")
    raw = ("*" if os.environ.get("SPACE_ID") else "") if raw is None else raw.strip()
    for part in filter(None, (p.strip() for p in raw.split(","))):
        try:
            if part != "*":
                ipaddress.ip_network(part, strict=False)
        except ValueError:
            raise ValueError(f"BERTLAB_TRUSTED_PROXIES={raw!r}: give IP addresses or networks, comma-separated, "
                             f"or *") from None
    return raw


def check_upload(path: str | os.PathLike | None, what: str = "file") -> Path:
    """An uploaded file that exists, is not empty, has a known suffix and fits the size cap.
    Messages name the file, never where the server keeps it."""
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


_ABS_PATH = re.compile(r"(?<![\w.:/~-])(?:[A-Za-z]:\\|~?/)(?:[^\s'\"/\\:]+[/\\])+([^\s'\"/\\:,;)]*)")


def hide_paths(text: str, roots: dict[str, str] | None = None) -> str:
    """Text shown to visitors with the server's paths taken out: each root named in `roots` becomes
    its public name (e.g. the runs folder -> "runs"), any other absolute path its last part."""
    for path, public in (roots or {}).items():
        text = text.replace(path.rstrip("/") + "/", public.rstrip("/") + "/").replace(path, public)
    return _ABS_PATH.sub(lambda m: m.group(1) or "…", text)
