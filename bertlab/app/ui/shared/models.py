"""Which model each view explains: the shipped default, runs trained here, hub ids, local folders.

Loaded models are cached for everyone (read-only inference is safe to share between sessions);
the choice itself is per browser session, so one student's switch never changes another's view.
They live on the app's device (BERTLAB_DEVICE: the GPU where there is one), and the card says which.
"""
from __future__ import annotations

import os
from pathlib import Path

from .... import family, fast
from ....analysis import sizing
from ....cache import LRU
from ....checkpoint import (
    DEFAULT_MODEL_DIR,
    hub_folder,
    is_hub_id,
    load_pretrained,
    model_in_run,
    resolve_folder,
    weights_stamp,
)
from ....train.runs import list_runs
from ...jobs import valid_name
from ...limits import MAX_CHOICE_CHARS, app_device, device_label, limits

DEFAULT = "default (shipped)"
CACHE_SIZE = int(os.environ.get("BERTLAB_MODEL_CACHE", "4"))


def _bytes(entry) -> int:
    """A loaded model's memory, wherever it lives (the GPU's counts against the same budget): its
    weights, and on the CPU once more for fast.optimize's packed copies."""
    model, _, _, device = entry
    return (2 if device == "cpu" else 1) * sum(p.numel() * p.element_size() for p in model.parameters())


_cache = LRU(CACHE_SIZE, limits().model_cache_mb * 1e6, _bytes)  # key -> (model, tokenizer, stamp, device)


def runs_root() -> Path:
    return Path(os.environ.get("BERTLAB_RUNS_DIR", "runs"))


def choices() -> list[str]:
    """The default first, then every run here with a model to show (finished, stopped or checkpointed)."""
    return [DEFAULT] + [f"run: {r.name}" for r in list_runs(runs_root()) if r.model_dir() is not None]


def resolve(choice: str | None) -> Path:
    """The model folder a picker value names: the shipped model, a run of this server, a hub id
    (its size checked before it downloads), or a local folder where the host allows local paths.
    Where it does not, no value makes the server look at its disk outside the runs folder, and the
    messages say nothing about what exists there."""
    if choice is not None and not isinstance(choice, str):
        raise ValueError(f"a model is named by text, got {type(choice).__name__} {choice!r:.40}")
    choice = (choice or "").strip()
    if len(choice) > MAX_CHOICE_CHARS:
        raise ValueError(f"a model name has at most {MAX_CHOICE_CHARS} characters; this one has {len(choice):,}")
    if not choice or choice in (DEFAULT, "default"):
        return DEFAULT_MODEL_DIR
    lim = limits()
    if choice.startswith("run: "):
        name = choice[5:].strip()
        folder = model_in_run(runs_root() / name) if valid_name(name) else None
        if folder is None or not (folder / "config.json").is_file():
            raise ValueError(f"{name[:80]!r} is not a run with a model on this server")
        return folder
    if lim.allow_local_paths and (not is_hub_id(choice) or Path(choice).expanduser().exists()):
        return resolve_folder(choice)  # the host allows folders: its messages may tell what exists
    if not is_hub_id(choice):
        raise ValueError(f"{choice[:80]!r} is not a run here or a Hugging Face model id (owner/name); "
                         f"this server does not open its own folders")
    return hub_folder(choice, max_bytes=4.2 * lim.max_model_params)  # fp32 weights, plus tokenizer files


def get(choice: str | None = None):
    """(model, tokenizer) for a picker value; ValueError with a clear message when it cannot load.
    A run's model is re-read when its files change (a run still training gets newer weights)."""
    target = resolve(choice)
    key = str(target)
    stamp, device = weights_stamp(target), app_device()

    def load():
        model, tok = load_pretrained(target, max_params=limits().max_model_params)
        model = model.eval().to(device)
        if device == "cpu":
            model = fast.optimize(model)  # packed weights for CPU inference; a pure speed-up
        return model, tok, stamp, device

    model, tok, *_ = _cache.get_or_make(key, load, fresh=lambda hit: hit[2:] == (stamp, device))
    return model, tok


def runs_on(model) -> str:
    """Where a loaded model computes, as the card says it: "NVIDIA H200 (cuda)", "CPU (2 threads)"."""
    return device_label(next(model.parameters()).device)


def describe(choice: str | None) -> str:
    """A short Markdown card: where the model is from, how big it is, and what it runs on."""
    model, tok = get(choice)
    c = model.config
    n = sizing.param_counts(c)
    kind = family.family_name(c) + (" discriminator" if family.is_discriminator(model)
                                    else " generator" if family.MEMBERS[c.model_type].generator else "")
    return (f"**{choice or DEFAULT}** · {kind} · {c.num_hidden_layers} layers · hidden {c.hidden_size} · "
            f"{c.num_attention_heads} heads · vocabulary {tok.vocab_size:,} · up to "
            f"{c.max_tokens} tokens · {sizing.humanize(n['total'])} parameters · runs on {runs_on(model)}")
