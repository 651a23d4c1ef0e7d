"""PEFT's adapter folder, read and written without peft: adapter_config.json + adapter_model.safetensors.

A LoRA, IA3, prefix or prompt model saves as peft 0.21 saves the same adapter on transformers' model
of the same family: the tensors under peft's keys (LoRA and IA3 under `base_model.model.<module>`,
the virtual tokens as `prompt_embeddings`, the head as a module to save), the config with the
base model's folder or hub id. So `peft.PeftModel.from_pretrained(<transformers' classifier of the
base>, folder)` computes our logits, and folders peft wrote load here (tests/test_methods_peft.py).
bertlab.json beside them keeps what peft has no field for (the label names, the head's settings).

The head is what peft's modules_to_save names (`classifier`, `score`; `qa_outputs` for QA): every
module outside the encoder (peft's suffix match takes DistilBERT's pre_classifier with `classifier`).
BERT's and ALBERT's pooler stay frozen inside the encoder, as with peft; when the base checkpoint has
none (masked-LM-only pre-training), ours is random and so is transformers', so it is saved too.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import torch
import torch.nn as nn

from ..checkpoint import write_folder_atomically
from ..family import encoder_of
from .lowrank import LORA, IA3Linear, LoRAEmbedding, LoRALinear, replace_module
from .virtual import attach, attention_maps

CONFIG, WEIGHTS, SIDECAR = "adapter_config.json", "adapter_model.safetensors", "bertlab.json"
PEFT_TYPES = {"lora": "LORA", "ia3": "IA3", "prefix": "PREFIX_TUNING", "prompt": "PROMPT_TUNING"}
METHODS = {v: k for k, v in PEFT_TYPES.items()}
TASK_TYPES = {"sequence": "SEQ_CLS", "token": "TOKEN_CLS", "qa": "QUESTION_ANS"}
# the modules peft itself saves beside the adapter, per task type (matched as name suffixes)
PEFT_HEADS = {"SEQ_CLS": ["classifier", "score"], "TOKEN_CLS": ["classifier", "score"], "QUESTION_ANS": ["qa_outputs"]}
PROMPT_LEARNING = ("prefix", "prompt")


def method_of(model: nn.Module) -> str | None:
    """Which PEFT method `model` carries (lora, ia3, prefix, prompt), or None."""
    mods = list(model.modules())
    if any(isinstance(m, LORA) for m in mods):
        return "lora"
    if any(isinstance(m, IA3Linear) for m in mods):
        return "ia3"
    enc = encoder_of(model)
    if getattr(enc, "prefix", None) is not None:
        return "prefix"
    return "prompt" if getattr(enc, "prompt", None) is not None else None


def head_modules(model: nn.Module, pooler: bool = False) -> list[str]:
    """The modules outside the encoder that hold weights (the head), and the encoder's pooler if asked."""
    heads = [n for n, m in model.named_children() if n != model.base_model_prefix and any(True for _ in m.parameters())]
    enc = encoder_of(model)
    if pooler and isinstance(getattr(enc, "pooler", None), nn.Module) and any(True for _ in enc.pooler.parameters()):
        heads.append("pooler")
    return heads


def modules_to_save(model: nn.Module, task_type: str, pooler: bool = False) -> list[str]:
    """peft's list for the task (`classifier`, `score`), after any head module it would not match."""
    defaults = PEFT_HEADS[task_type]
    extra = [h for h in head_modules(model, pooler) if not any(h.endswith(d) for d in defaults)]
    return extra + defaults


def _wrapped(model: nn.Module, cls) -> dict[str, nn.Module]:
    return {n: m for n, m in model.named_modules() if isinstance(m, cls)}


def adapter_config(model: nn.Module, base: str, pooler: bool = False) -> dict:
    """adapter_config.json for `model`'s method, with peft's field names and defaults."""
    method, c = method_of(model), model.config
    task = TASK_TYPES[model.kind]
    common = {"peft_type": PEFT_TYPES[method], "task_type": task, "base_model_name_or_path": base,
              "revision": None, "inference_mode": True, "modules_to_save": modules_to_save(model, task, pooler)}
    if method == "lora":
        lora = _wrapped(model, LORA)
        shapes = {(m.rank, m.alpha) for m in lora.values()}
        if len(shapes) > 1:
            raise ValueError("LoRA layers of different ranks or alphas have no single adapter_config")
        (rank, alpha), = shapes
        dropout = max([getattr(m.lora_dropout, "p", 0.0) for m in lora.values() if isinstance(m, LoRALinear)] or [0.0])
        return {**common, "r": rank, "lora_alpha": alpha, "lora_dropout": dropout, "target_modules": sorted(lora),
                "bias": "none", "fan_in_fan_out": False, "init_lora_weights": True, "use_rslora": False,
                "use_dora": False, "lora_bias": False, "rank_pattern": {}, "alpha_pattern": {},
                "layers_to_transform": None, "layers_pattern": None, "exclude_modules": None, "target_parameters": None}
    if method == "ia3":
        ia3 = _wrapped(model, IA3Linear)
        return {**common, "target_modules": sorted(ia3),
                "feedforward_modules": sorted(n for n, m in ia3.items() if m.scale_input),
                "fan_in_fan_out": False, "init_ia3_weights": True, "exclude_modules": None}
    enc = encoder_of(model)
    virtual = enc.prefix if method == "prefix" else enc.prompt
    out = {**common, "num_virtual_tokens": virtual.size(0), "num_transformer_submodules": 1,
           "num_attention_heads": c.num_attention_heads, "num_layers": attention_maps(c)}
    if method == "prefix":
        return {**out, "token_dim": c.hidden_size, "encoder_hidden_size": c.hidden_size, "prefix_projection": False}
    return {**out, "token_dim": c.embedding_dim, "prompt_tuning_init": "RANDOM", "prompt_tuning_init_text": None,
            "tokenizer_name_or_path": None, "tokenizer_kwargs": None}


def adapter_tensors(model: nn.Module, pooler: bool = False) -> dict[str, torch.Tensor]:
    """The tensors peft saves, under peft's keys."""
    method = method_of(model)
    pre = "base_model." if method in PROMPT_LEARNING else "base_model.model."
    sd = {}
    if method == "lora":
        for n, m in _wrapped(model, LoRALinear).items():
            sd[f"{pre}{n}.lora_A.weight"], sd[f"{pre}{n}.lora_B.weight"] = m.lora_A, m.lora_B
        for n, m in _wrapped(model, LoRAEmbedding).items():  # peft keeps these as bare parameters
            sd[f"{pre}{n}.lora_embedding_A"], sd[f"{pre}{n}.lora_embedding_B"] = m.lora_embedding_A, m.lora_embedding_B
    elif method == "ia3":
        sd.update({f"{pre}{n}.ia3_l": m.ia3_l.reshape(m.peft_shape) for n, m in _wrapped(model, IA3Linear).items()})
    else:
        enc = encoder_of(model)
        sd["prompt_embeddings"] = enc.prefix if method == "prefix" else enc.prompt
    own = model.state_dict()
    for h in head_modules(model, pooler):
        own_child = h in dict(model.named_children())  # DeBERTa's head has a `pooler` of its own
        name = h if own_child else f"{model.base_model_prefix}.{h}"  # else the encoder's (BERT's, ALBERT's)
        sd.update({f"{pre}{k}": v for k, v in own.items() if k.startswith(name + ".")})
    return {k: v.detach().to("cpu", torch.float32).contiguous() for k, v in sd.items()}


def sidecar(model: nn.Module) -> dict:
    """What rebuilds our head exactly: its class and constructor arguments."""
    kw = model.init_kwargs() if hasattr(model, "init_kwargs") else {"num_labels": model.num_labels,
                                                                     "id2label": model.id2label}
    return {"architecture": model.architecture, "init_kwargs": kw, "method": method_of(model)}


def write_adapter(model: nn.Module, tokenizer, folder: str | os.PathLike, base: str, pooler: bool = False) -> Path:
    """Write the adapter folder atomically (a sibling temp folder renamed into place). Only an empty
    folder or an adapter folder is replaced."""
    from safetensors.torch import save_file
    folder = Path(folder)
    if folder.exists() and (not folder.is_dir() or (any(folder.iterdir()) and not (folder / CONFIG).is_file())):
        raise ValueError(f"{folder} exists and is not an adapter folder: nothing was written; choose a new "
                         f"or empty folder")

    def fill(tmp: Path) -> None:
        (tmp / CONFIG).write_text(json.dumps(adapter_config(model, base, pooler), indent=2) + "\n")
        save_file(adapter_tensors(model, pooler), tmp / WEIGHTS, metadata={"format": "pt"})
        (tmp / SIDECAR).write_text(json.dumps(sidecar(model), indent=2) + "\n")
        if tokenizer is not None:
            tokenizer.save_pretrained(tmp)
    return write_folder_atomically(folder, fill)


def read_adapter(folder: Path) -> tuple[dict, dict[str, torch.Tensor], dict]:
    """(adapter config, tensors, bertlab.json or {}) of an adapter folder."""
    try:
        config = json.loads((folder / CONFIG).read_text())
    except (OSError, ValueError) as e:
        raise ValueError(f"{folder / CONFIG}: cannot read it ({e})") from e
    if (folder / WEIGHTS).exists():
        from safetensors.torch import load_file
        tensors = load_file(folder / WEIGHTS)
    elif (folder / "adapter_model.bin").exists():
        tensors = torch.load(folder / "adapter_model.bin", map_location="cpu", weights_only=True)
    else:
        raise ValueError(f"{folder}: no {WEIGHTS}")
    extra = json.loads((folder / SIDECAR).read_text()) if (folder / SIDECAR).exists() else {}
    return config, tensors, extra


def _strip(key: str) -> str:
    for pre in ("base_model.model.", "base_model."):
        if key.startswith(pre):
            key = key[len(pre):]
            break
    return key.replace(".modules_to_save.default.", ".").replace(".modules_to_save.", ".")


def head_size(tensors: dict[str, torch.Tensor]) -> int | None:
    """The number of outputs of the saved head (its last linear layer's rows), if one is saved."""
    for k in ("classifier.out_proj.weight", "classifier.weight", "score.weight", "qa_outputs.weight"):
        for key, v in tensors.items():
            if _strip(key) == k:
                return v.size(0)
    return None


def _b_of(tensors: dict[str, torch.Tensor], key: str, a_suffix: str, where: str) -> torch.Tensor:
    """LoRA's B beside the A saved under `key`: a file with one half of a pair is refused in one line."""
    b_key = key.removesuffix(a_suffix) + a_suffix.replace("_A", "_B")
    if b_key not in tensors:
        raise ValueError(f"{where}: the adapter file holds {key} but not its pair {b_key}: it is incomplete")
    return tensors[b_key]


def apply_adapter(model: nn.Module, config: dict, tensors: dict[str, torch.Tensor], where: str = "") -> nn.Module:
    """Give `model` (a classifier with the base's weights) the saved adapter and head, in place."""
    kind = config.get("peft_type")
    if kind not in METHODS:
        raise ValueError(f"{where}: peft_type {kind!r} is not one bertlab runs ({', '.join(METHODS)})")
    method, enc = METHODS[kind], encoder_of(model)
    for flag in ("use_dora", "fan_in_fan_out"):
        if config.get(flag):
            raise ValueError(f"{where}: {flag} adapters are not supported here")
    if config.get("rank_pattern") or config.get("alpha_pattern") or config.get("bias", "none") != "none":
        raise ValueError(f"{where}: per-layer ranks or alphas and trained biases are not supported here")
    if config.get("num_transformer_submodules", 1) != 1:
        raise ValueError(f"{where}: an encoder has one transformer, not {config['num_transformer_submodules']}")
    for p in enc.parameters():
        p.requires_grad_(False)
    rest = {}
    for key, v in tensors.items():
        k = _strip(key)
        if method == "lora" and k.endswith((".lora_A.weight", ".lora_B.weight", ".lora_embedding_A",
                                            ".lora_embedding_B")):
            continue
        if method == "ia3" and k.endswith(".ia3_l"):
            continue
        if k != "prompt_embeddings":
            rest[k] = v.float()
    if method == "lora":
        alpha, rslora = float(config.get("lora_alpha", 8)), bool(config.get("use_rslora"))
        dropout = float(config.get("lora_dropout") or 0.0)
        for key, a in tensors.items():
            k = _strip(key)
            if k.endswith(".lora_A.weight"):  # a linear layer's A: (r, in)
                path, b = k.removesuffix(".lora_A.weight"), _b_of(tensors, key, ".lora_A.weight", where)
                m = LoRALinear(model.get_submodule(path), a.size(0), alpha, dropout)
                pair = m.lora_A, m.lora_B
            elif k.endswith(".lora_embedding_A"):  # a word table's A: (r, V), a bare parameter
                path, b = k.removesuffix(".lora_embedding_A"), _b_of(tensors, key, ".lora_embedding_A", where)
                m = LoRAEmbedding(model.get_submodule(path), a.size(0), alpha)
                pair = m.lora_embedding_A, m.lora_embedding_B
            else:
                continue
            if rslora:
                m.scaling = alpha / a.size(0) ** 0.5
            with torch.no_grad():
                pair[0].copy_(a), pair[1].copy_(b)
            replace_module(model, path, m)
    elif method == "ia3":
        for key, v in tensors.items():
            k = _strip(key)
            if k.endswith(".ia3_l"):
                path = k.removesuffix(".ia3_l")
                m = IA3Linear(model.get_submodule(path), scale_input=v.dim() == 2 and v.size(0) == 1 and v.size(1) > 1)
                with torch.no_grad():
                    m.ia3_l.copy_(v.flatten())
                replace_module(model, path, m)
    else:
        v = tensors["prompt_embeddings"].float()
        c = model.config
        want = 2 * attention_maps(c) * c.hidden_size if method == "prefix" else c.embedding_dim
        if v.dim() != 2 or v.size(1) != want:
            raise ValueError(f"{where}: prompt_embeddings of shape {tuple(v.shape)} do not fit this model "
                             f"({want} per virtual token)")
        attach(enc, method, nn.Parameter(v.clone()))
    if rest:
        missing, unexpected = model.load_state_dict(rest, strict=False)
        if unexpected:
            raise ValueError(f"{where}: saved tensors fit no module of the model ({unexpected[:3]})")
    return model
