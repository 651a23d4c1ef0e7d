"""Which model each view explains: the shipped default, runs trained here, local folders, hub ids.

Loaded models are cached for everyone (read-only inference is safe to share between sessions);
the choice itself is per browser session, so one student's switch never changes another's view.
"""
from __future__ import annotations

import os
from pathlib import Path

from ... import fast
from ...analysis import sizing
from ...cache import LRU
from ...checkpoint import DEFAULT_MODEL_DIR, load_pretrained
from ...train.runs import list_runs

DEFAULT = "default (shipped)"
CACHE_SIZE = int(os.environ.get("BERTLAB_MODEL_CACHE", "4"))
_cache = LRU(CACHE_SIZE)  # str(target) -> (model, tokenizer, stamp of its weight files)


def runs_root() -> Path:
    return Path(os.environ.get("BERTLAB_RUNS_DIR", "runs"))


def choices() -> list[str]:
    """The default first, then every run here with a model to show (finished, stopped or checkpointed)."""
    return [DEFAULT] + [f"run: {r.name}" for r in list_runs(runs_root()) if r.model_dir() is not None]


def resolve(choice: str | None) -> str | Path:
    if choice is not None and not isinstance(choice, str):
        raise ValueError(f"a model is named by text, got {type(choice).__name__} {choice!r:.40}")
    if not choice or choice == DEFAULT:
        return DEFAULT_MODEL_DIR
    if choice.startswith("run: "):
        return runs_root() / choice[5:]
    return choice.strip()  # a local folder or a hub id


def get(choice: str | None = None):
    """(model, tokenizer) for a picker value; ValueError with a clear message when it cannot load.
    A run's model is re-read when its files change (a run still training gets newer weights)."""
    target = resolve(choice)
    key = str(target)
    stamp = _stamp(Path(target)) if Path(target).exists() else None
    hit = _cache.get(key)
    if hit is not None and hit[2] == stamp:
        return hit[0], hit[1]
    model, tok = load_pretrained(target)  # outside the lock: a slow hub download blocks no one else
    fast.optimize(model.eval())  # packed weights for CPU inference; a pure speed-up
    _cache.put(key, (model, tok, stamp))
    return model, tok


def _stamp(p: Path):
    files = list(p.glob("model/model.safetensors")) + list(p.glob("checkpoints/step-*/model.safetensors")) \
        + list(p.glob("model.safetensors"))
    return max((f.stat().st_mtime_ns for f in files), default=0)


def describe(choice: str | None) -> str:
    """A short Markdown card: where the model is from and how big it is."""
    model, tok = get(choice)
    c = model.config
    n = sizing.param_counts(c)
    return (f"**{choice or DEFAULT}** · {c.num_hidden_layers} layers · hidden {c.hidden_size} · "
            f"{c.num_attention_heads} heads · vocabulary {tok.vocab_size:,} · up to "
            f"{c.max_position_embeddings} tokens · {sizing.humanize(n['total'])} parameters")
