"""Saving and loading a fine-tuned model, as its method's record says (registry.Method.saves):

  plain     a transformers folder (save_classifier)
  peft      peft's adapter folder (peft_format.py); a mergeable method (`Method.mergeable`) is saved
            merged as a plain folder instead, with peft's adapter folder in `adapter_folder` beside it
  adapters  a bertlab folder: config.json + model.safetensors of the base classifier, and
            adapters.safetensors beside (transformers would load it without the adapters)

`load_finetuned` reads any of them by what the folder holds, and adapter folders peft wrote.
"""
from __future__ import annotations

import json
import os
import shutil
import warnings
from pathlib import Path

import torch
import torch.nn as nn

from ..checkpoint import is_hub_id, load_pretrained, read_weights, resolve_folder
from ..family import encoder_of
from ..heads import HEADS, classifier_class, load_classifier, read_head_config, save_classifier
from ..tokenizer import SubwordTokenizer
from .adapters import AdaptedLinear, add_adapters
from .lowrank import merged_state_dict
from .peft_format import CONFIG, TASK_TYPES, apply_adapter, head_size, read_adapter, write_adapter
from .registry import method

ADAPTERS_FILE, ADAPTER_KEY = "adapters.safetensors", "bertlab_adapter_size"
RUN_ADAPTER = "adapter"  # a run's folder for the peft adapter a mergeable method writes beside its model/


def merged_copy(model: nn.Module) -> nn.Module:
    """A plain classifier with `model`'s LoRA / IA3 folded in (`model` is left as it is)."""
    with torch.random.fork_rng(devices=[]):  # building it draws initial weights: leave the RNG alone
        plain = type(model)(model.config, **model.init_kwargs())
    plain.load_state_dict(merged_state_dict(model))
    return plain.train(model.training)


def _base_name(base) -> str:
    """The base as peft records it: a hub id as is, a folder (the shipped model's too) as its absolute path."""
    if base in (None, "", "default") and not Path("default").is_dir():
        return str(resolve_folder(None).resolve())
    p = Path(str(base)).expanduser()
    if p.is_dir() or not is_hub_id(str(base)):
        return str(resolve_folder(str(base)).resolve())
    return str(base)


def _random_pooler(model: nn.Module, base: str) -> bool:
    """Is `model`'s pooler missing from the base's checkpoint (so random, here and in transformers)?"""
    pooler = getattr(encoder_of(model), "pooler", None)
    if not isinstance(pooler, nn.Module) or not any(True for _ in pooler.parameters()):
        return False
    try:
        folder = resolve_folder(base)
        if (folder / "model.safetensors").is_file():
            from safetensors import safe_open
            with safe_open(folder / "model.safetensors", "pt") as f:
                keys = list(f.keys())
        else:
            keys = list(read_weights(folder))
    except (OSError, ValueError):
        return False
    return not any(".pooler." in f".{k}" for k in keys)


def save_finetuned(model: nn.Module, tok, folder: str | os.PathLike, spec, base_folder,
                   adapter_folder: str | os.PathLike | None = None) -> Path:
    """Save a fine-tuned `model` as its method saves (module docstring) to `folder`; returns `folder`.
    `base_folder`: the folder or hub id fine-tuning started from (peft's base_model_name_or_path).
    A mergeable method also writes peft's adapter to `adapter_folder` (default: `<folder>-adapter`)."""
    folder, record = Path(folder), method(spec.method)
    if record.saves == "plain":
        return save_classifier(model, tok, folder)
    if record.saves == "adapters":
        return _save_adapters(model, tok, folder)
    base = _base_name(base_folder)
    # a trained pooler, or one the base lacks (random), travels in peft's folder (modules_to_save)
    pooler = bool(getattr(spec, "train_pooler", False)) or _random_pooler(model, base)
    if record.mergeable:
        save_classifier(merged_copy(model), tok, folder)
        write_adapter(model, tok, adapter_folder or folder.with_name(folder.name + "-adapter"), base, pooler)
        return folder
    return write_adapter(model, tok, folder, base, pooler)


def _save_adapters(model: nn.Module, tok, folder: Path) -> Path:
    """Houlsby adapters: the base classifier as a plain folder (save_classifier), then the adapters'
    tensors and their size beside it."""
    from safetensors.torch import save_file
    wrapped = {n: m for n, m in model.named_modules() if isinstance(m, AdaptedLinear)}
    size = next(iter(wrapped.values())).adapter.down.out_features
    sd = model.state_dict()
    plain = {k.replace(".base.", ".", 1) if k.rpartition(".base.")[0] in wrapped else k: v for k, v in sd.items()
             if ".adapter." not in k}
    adapters = {k: v.detach().cpu().contiguous() for k, v in sd.items() if ".adapter." in k}
    with torch.random.fork_rng(devices=[]):
        twin = type(model)(model.config, **model.init_kwargs())
    twin.load_state_dict(plain)
    hf = {**twin.hf_config(), ADAPTER_KEY: size}
    tmp = folder.with_name(f".{folder.name}.adapters-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    save_classifier(twin, tok, tmp)
    (tmp / "config.json").write_text(json.dumps(hf, indent=2) + "\n")
    save_file(adapters, tmp / ADAPTERS_FILE, metadata={"format": "pt"})
    if folder.exists():
        if not (folder / ADAPTERS_FILE).is_file() and any(folder.iterdir()):
            shutil.rmtree(tmp, ignore_errors=True)
            raise ValueError(f"{folder} exists and is not an adapter model bertlab wrote: nothing was written")
        old = folder.with_name(f".{folder.name}.old-{os.getpid()}")
        os.replace(folder, old)
        shutil.rmtree(old, ignore_errors=True)
    os.replace(tmp, folder)
    return folder


def _finetuned_folder(path_or_hub_id) -> Path:
    p = Path(str(path_or_hub_id)).expanduser()
    if p.is_dir() and (p / "model").is_dir() and not (p / "config.json").exists() and not (p / CONFIG).exists():
        p = p / "model"  # a fine-tuning run: its model
    if p.is_dir() and (p / CONFIG).is_file():
        return p
    folder = resolve_folder(path_or_hub_id)
    if not p.exists() and not (folder / "config.json").exists() and not (folder / CONFIG).exists():
        _hub_adapter_files(str(path_or_hub_id))  # a peft adapter on the hub: its config comes beside the weights
    return folder


def _hub_adapter_files(name: str) -> None:
    """Fetch a hub repository's adapter_config.json (and bertlab.json if any) into the cached snapshot
    that resolve_folder downloaded the weights and tokenizer into."""
    from huggingface_hub import hf_hub_download
    try:
        hf_hub_download(name, CONFIG)
    except Exception as e:  # not found, offline, or the hub client's own HTTP errors
        raise ValueError(f"{name}: neither a model (config.json) nor a peft adapter ({CONFIG}) on the hub: "
                         f"{type(e).__name__}") from e
    try:
        hf_hub_download(name, "bertlab.json")
    except Exception:  # peft's own folders have none
        pass


def load_finetuned(path_or_hub_id) -> tuple[nn.Module, SubwordTokenizer]:
    """(model, tokenizer) in eval mode from a fine-tuned folder (plain, or Houlsby adapters), a peft
    adapter folder (ours or peft's: its base model is loaded from base_model_name_or_path), a run
    folder (its model/) or a hub id."""
    folder = _finetuned_folder(path_or_hub_id)
    if (folder / CONFIG).is_file():
        return _load_peft(folder)
    model, tok = load_classifier(folder)
    raw = json.loads((folder / "config.json").read_text())
    if ADAPTER_KEY in raw:
        from safetensors.torch import load_file
        add_adapters(model, int(raw[ADAPTER_KEY]))
        missing, unexpected = model.load_state_dict(load_file(folder / ADAPTERS_FILE), strict=False)
        if unexpected or any(".adapter." in k for k in missing):
            raise ValueError(f"{folder}: {ADAPTERS_FILE} does not fit the model")
    return model.eval(), tok


def _load_peft(folder: Path):
    config, tensors, extra = read_adapter(folder)
    base = config.get("base_model_name_or_path")
    if not base:
        raise ValueError(f"{folder / CONFIG}: no base_model_name_or_path, so the base model is unknown")
    kinds = {v: k for k, v in TASK_TYPES.items()}
    if config.get("task_type") not in kinds:
        raise ValueError(f"{folder / CONFIG}: task_type {config.get('task_type')!r}; bertlab loads "
                         f"{', '.join(kinds)} adapters")
    base_dir = resolve_folder(base)
    arch, labels, _ = read_head_config(base_dir)
    with torch.random.fork_rng(devices=[]), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a base without heads: they are the adapter's to bring
        if arch is not None:
            start, tok = load_classifier(base_dir)
        else:
            start, tok = load_pretrained(base_dir)
        if extra.get("architecture") in HEADS:
            cls, kw = HEADS[extra["architecture"]], dict(extra.get("init_kwargs") or {})
        else:
            cls = classifier_class(start.config, kinds[config["task_type"]])
            n = head_size(tensors) or getattr(start, "num_labels", 2)
            kw = {"num_labels": n, "id2label": labels if labels and len(labels) == n else None}
        model = cls(start.config, **kw)
    own = model.state_dict()  # the base's encoder, and its head where it is a classifier of this shape
    theirs = start.state_dict() if type(start) is cls else {
        f"{model.base_model_prefix}.{k}": v for k, v in encoder_of(start).state_dict().items()}
    model.load_state_dict({k: v for k, v in theirs.items() if k in own and v.shape == own[k].shape}, strict=False)
    apply_adapter(model, config, tensors, str(folder))
    if (folder / "tokenizer.json").exists() or (folder / "vocab.txt").exists():
        tok = SubwordTokenizer.from_pretrained(folder)
    return model.eval(), tok
