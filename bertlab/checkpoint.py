"""Model folders in the Hugging Face layout: config.json + model.safetensors + tokenizer files.

Loading never unpickles code (safetensors, or torch.load(weights_only=True)); saving writes a
temporary folder and renames it, so a crash mid-write never leaves a half-written model behind.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import warnings
from pathlib import Path

import torch

from . import family
from .config import BertConfig, read_json_config
from .model import BertForPreTraining
from .tokenizer import WordPieceTokenizer

DEFAULT_MODEL_DIR = Path(__file__).resolve().parent.parent / "assets" / "default-model"
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin")
HUB_FILES = ["config.json", "adapter_config.json", "*.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
             "vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"]
TIED = BertForPreTraining.tied_keys
HEADS = BertForPreTraining.head_names


def resolve_folder(path_or_hub_id: str | os.PathLike | None) -> Path:
    """A local folder as is; None or "default" (no such folder here) is the shipped model; anything
    else is taken as a hub id and downloaded (cached)."""
    if path_or_hub_id is None or (str(path_or_hub_id) == "default" and not Path("default").is_dir()):
        return DEFAULT_MODEL_DIR
    p = Path(path_or_hub_id).expanduser()
    if p.is_dir():
        return p if (p / "config.json").exists() else model_in_run(p)
    name = str(path_or_hub_id)
    if p.exists():
        raise ValueError(f"{name}: expected a model folder (config.json + weights), got a file")
    if not is_hub_id(name):
        raise ValueError(f"{name}: no such folder, and not a Hugging Face hub id")
    return hub_folder(name)


def is_hub_id(name: str) -> bool:
    return bool(re.fullmatch(r"[\w.-]+(/[\w.-]+)?", name)) and ".." not in name and not name.startswith(".")


def hub_folder(name: str, max_bytes: float | None = None) -> Path:
    """A hub model's files (downloaded once, then cached). With max_bytes, the repository's file
    sizes are read first, so an oversized model is refused before anything is downloaded."""
    import fnmatch

    from huggingface_hub import HfApi, snapshot_download
    from huggingface_hub.errors import (
        HfHubHTTPError,
        LocalEntryNotFoundError,
        OfflineModeIsEnabled,
        RepositoryNotFoundError,
    )
    try:
        if max_bytes is not None:
            info = HfApi().model_info(name, files_metadata=True)
            size = sum(f.size or 0 for f in info.siblings or []
                       if any(fnmatch.fnmatch(f.rfilename, pat) for pat in HUB_FILES))
            if size > max_bytes:
                raise ValueError(f"{name}: its files are {size / 1e9:.1f} GB; this server loads "
                                 f"models of at most {max_bytes / 1e9:.1f} GB")
        return Path(snapshot_download(name, allow_patterns=HUB_FILES))
    except RepositoryNotFoundError as e:
        raise ValueError(f"{name}: no such model on the Hugging Face hub (or it is private)") from e
    except (LocalEntryNotFoundError, OfflineModeIsEnabled) as e:  # a typo, as a reader sees it, not a setting
        raise ValueError(f"{name}: no model of that name here, and this server cannot fetch it from the "
                         f"Hugging Face hub (it is offline): check the name") from e
    except (HfHubHTTPError, OSError) as e:
        raise ValueError(f"{name}: download from the Hugging Face hub failed: {e}") from e
    except Exception as e:  # the hub client's HTTP library (httpx, or its fork) has its own errors
        if type(e).__module__.split(".")[0] not in ("httpx", "httpx2", "httpcore", "requests", "urllib3"):
            raise
        raise ValueError(f"{name}: the Hugging Face hub cannot be reached ({type(e).__name__}: {e})") from e


def weights_stamp(folder: str | os.PathLike):
    """When a model folder's weights last changed (None: it has none): what caches key on."""
    try:
        return (Path(folder) / "model.safetensors").stat().st_mtime_ns
    except OSError:
        return None


def model_in_run(run: Path) -> Path:
    """A training run folder stands for its exported model, else its newest checkpoint."""
    if (run / "model" / "config.json").exists():
        return run / "model"
    steps = sorted((int(m.group(1)), c) for c in (run / "checkpoints").glob("step-*")
                   if (m := re.fullmatch(r"step-(\d+)", c.name)) and (c / "config.json").exists())
    return steps[-1][1] if steps else run


def read_weights(folder: Path) -> dict[str, torch.Tensor]:
    """Tensors from safetensors (single or sharded) or a weights-only torch pickle."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file
    if (folder / "model.safetensors").exists():
        files = [folder / "model.safetensors"]
    elif (folder / "model.safetensors.index.json").exists():
        idx = folder / "model.safetensors.index.json"
        try:
            shards = sorted(set(json.loads(idx.read_text())["weight_map"].values()))
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as e:
            raise ValueError(f"{idx}: malformed shard index ({type(e).__name__})") from None
        # a shard is a file of this folder: a name like "../other-run/model.safetensors" would read
        # another visitor's weights
        bad = [s for s in shards if not isinstance(s, str) or Path(s).name != s or s in ("", ".", "..")]
        if bad:
            raise ValueError(f"{idx}: a shard must be a file name in the model's folder, got {str(bad[0])[:60]!r}")
        files = [folder / s for s in shards]
    elif (folder / "pytorch_model.bin").exists():
        f = folder / "pytorch_model.bin"
        try:
            sd = torch.load(f, map_location="cpu", weights_only=True)
        except Exception as e:  # weights_only refuses code; a torn file fails to unzip
            raise ValueError(f"{f}: cannot read weights ({type(e).__name__}: {str(e)[:200]})") from e
        if not isinstance(sd, dict):
            raise ValueError(f"{f}: expected a state dict, got {type(sd).__name__}")
        return sd
    else:
        raise ValueError(f"{folder}: no weights found (looked for {', '.join(WEIGHT_FILES)})")
    sd = {}
    for f in files:
        try:
            sd.update(load_file(f))
        except (SafetensorError, OSError, ValueError) as e:
            raise ValueError(f"{f}: cannot read weights, the file is truncated or corrupt ({e})") from e
    return sd


def to_pretraining_keys(sd: dict[str, torch.Tensor], prefix: str = "bert") -> dict[str, torch.Tensor]:
    """Rename a bare encoder's keys (BertModel, AlbertModel, ...) and TF-era names into those of our
    full model, whose encoder sits under `prefix`."""
    out = {}
    encoder_only = not any(k.startswith(prefix + ".") for k in sd)
    for k, v in sd.items():
        k = re.sub(r"LayerNorm\.gamma$", "LayerNorm.weight", re.sub(r"LayerNorm\.beta$", "LayerNorm.bias", k))
        if encoder_only and k.split(".")[0] in ("embeddings", "encoder", "pooler", "embeddings_project",
                                                "transformer"):
            k = prefix + "." + k
        out[k] = v
    return out


def params_at_most(c: BertConfig) -> int:
    """An upper bound of count_params for any member, cheap enough for every load: every table
    untied, every head present, generous small terms. A config under the server's
    limit by this bound needs no meta build (whose first use costs ~2 s of CPU: it imports torch._dynamo)."""
    E, H, I, V = c.embedding_dim, c.hidden_size, c.intermediate_size, c.vocab_size
    shares = "num_hidden_groups" in family.MEMBERS[c.model_type].only  # ALBERT stores groups, not layers
    layers = c.num_hidden_groups * c.inner_group_num if shares else c.num_hidden_layers
    per_layer = 4 * H * H + 2 * H * I + 16 * H + 2 * I
    tables = (V + c.max_position_embeddings + c.type_vocab_size) * E + 8 * E
    heads = 3 * H * H + 2 * H * E + V * E + 2 * V + 16 * (H + E)
    own = sum(v for v in family.own_sizing(c)[0].values() if v > 0)  # a member's extras (DeBERTa's relative table)
    return tables + E * H + layers * per_layer + heads + own + 1024


def count_params(config: BertConfig) -> int:
    """Exact, without allocating: the model built on the meta device."""
    with torch.device("meta"):
        return sum(p.numel() for p in family.build(config).parameters())


def load_model(folder: str | os.PathLike, config: BertConfig | None = None,
               max_params: int | None = None):
    """Weights of any family member's key layout (full model or bare encoder) into our class for it
    (family.model_class); missing heads are initialised."""
    folder = Path(folder)
    architectures = ()
    if config is None:
        if not (folder / "config.json").exists():
            raise ValueError(f"{folder}: no config.json, so this is not a model folder")
        config = BertConfig.from_json_file(folder / "config.json")
        architectures = read_json_config(folder / "config.json").get("architectures") or ()
    shared = config.num_hidden_layers // config.num_hidden_groups  # ALBERT stores one weight set per group
    floor = config.num_hidden_layers // shared * 4 * config.hidden_size ** 2  # attention alone: no meta build of a huge one
    if max_params is not None and params_at_most(config) > max_params and (
            n := floor if floor > max_params else count_params(config)) > max_params:
        raise ValueError(f"{folder.name}: its config.json describes at least {n:,} parameters; this server "
                         f"loads at most {max_params:,}")
    cls = family.model_class(config, architectures if isinstance(architectures, list) else ())
    model = cls(config)
    sd = to_pretraining_keys(read_weights(folder), cls.base_model_prefix)
    own = model.state_dict()
    tied, heads = cls.tied_keys, cls.head_names
    expected = {k for k in own if k not in tied}
    state, unexpected = {}, []
    for k, v in sd.items():
        if k in tied or k.endswith(("position_ids", "embeddings.token_type_ids")):
            continue
        if k not in expected:
            unexpected.append(k)
            continue
        if not torch.is_tensor(v) or tuple(v.shape) != tuple(own[k].shape):
            shape = tuple(v.shape) if torch.is_tensor(v) else type(v).__name__
            raise ValueError(f"{folder}: weight {k} has shape {shape}, but config.json implies "
                             f"{tuple(own[k].shape)}: the weights do not match the config")
        state[k] = v.float()
    missing = sorted(expected - state.keys())
    if any(not k.startswith(tuple(heads)) for k in missing):
        enc = [k for k in missing if not k.startswith(tuple(heads))]
        raise ValueError(f"{folder}: weights lack {len(enc)} encoder tensors (e.g. {enc[0]}): "
                         f"not a {family.family_name(config)} checkpoint, or a truncated one")
    model.load_state_dict(state, strict=False)
    model.tie_weights()
    notes = sorted({name for k in missing for p, name in heads.items() if k.startswith(p)})
    if notes:
        warnings.warn(f"{folder}: no weights for the {', '.join(notes)}; initialised at random "
                      f"(predictions from them mean nothing until trained)", stacklevel=2)
    if unexpected:
        warnings.warn(f"{folder}: ignored {len(unexpected)} weights this model has no place for "
                      f"(e.g. {unexpected[0]})", stacklevel=2)
    return model.eval()


def load_pretrained(path_or_hub_id: str | os.PathLike | None = None, max_params: int | None = None):
    """(model, tokenizer) from a local folder, a hub id, or, with no argument, the shipped default.
    max_params refuses a bigger model from its config.json, before any weight is read."""
    folder = resolve_folder(path_or_hub_id)
    if not folder.is_dir():
        raise ValueError(f"{folder}: no such model folder")
    model = load_model(folder, max_params=max_params)
    tok = WordPieceTokenizer.from_pretrained(folder)
    if tok.vocab_size > model.config.vocab_size:
        raise ValueError(f"{folder}: the tokenizer has {tok.vocab_size} tokens but the model only "
                         f"{model.config.vocab_size}: they do not belong together")
    tok.model_max_length = min(tok.model_max_length, model.config.max_tokens)
    return model, tok


MODEL_FILES = frozenset({"config.json", "model.safetensors", "tokenizer.json", "vocab.txt",
                         "vocab.json", "merges.txt",  # a byte-level BPE tokenizer's (RoBERTa)
                         "tokenizer_config.json", "special_tokens_map.json"})  # what save_pretrained writes


def is_model_folder(folder: str | os.PathLike) -> bool:
    """A folder save_pretrained may replace: config.json and nothing but the files it writes."""
    folder = Path(folder)
    if folder.is_symlink() or not (folder / "config.json").is_file():
        return False
    return all(f.name in MODEL_FILES and f.is_file() and not f.is_symlink() for f in folder.iterdir())


def save_pretrained(model: BertForPreTraining, tokenizer: WordPieceTokenizer | None,
                    folder: str | os.PathLike, dtype: torch.dtype = torch.float32,
                    extra_files: dict[str, str] | None = None, overwrite: bool = True) -> Path:
    """Write to a sibling temp folder, fsync, then rename into place: readers never see half a model.
    Only an empty folder or a model folder (is_model_folder) is ever replaced, so a wrong target
    (a run, a parent folder, someone's data) loses nothing; overwrite=False keeps model folders too."""
    folder = Path(folder)
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        if not is_model_folder(folder):
            raise ValueError(f"{folder} exists and is not a model folder bertlab wrote: "
                             f"nothing was written; choose a new or empty folder")
        if not overwrite:
            raise ValueError(f"{folder} holds a model already: pass --overwrite to replace it")
    return write_folder_atomically(folder, lambda tmp: write_model_files(tmp, model, tokenizer, dtype,
                                                                         extra_files or {}))


def write_folder_atomically(folder: Path, fill) -> Path:
    """`fill(tmp)` writes a sibling temp folder, which then replaces `folder` in one rename: a crash
    leaves the old folder or the new one, never half of either."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = folder.parent / f".{folder.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        fill(tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = folder.parent / f".{folder.name}.old-{os.getpid()}"
    if folder.exists():
        os.replace(folder, old)
    os.replace(tmp, folder)
    shutil.rmtree(old, ignore_errors=True)
    return folder


def save_weights(model: torch.nn.Module, folder: str | os.PathLike, dtype: torch.dtype | None = None) -> None:
    """model.safetensors: every tensor once, under its first name (a tied decoder is the word
    embeddings, as Hugging Face leaves it out too). The one save policy: exports and checkpoints."""
    from safetensors.torch import save_file
    seen, sd = set(), {}
    for k, v in model.state_dict().items():
        if v.numel() and v.data_ptr() in seen:
            continue
        seen.add(v.data_ptr())
        sd[k] = v.detach().to("cpu", dtype if dtype is not None and v.is_floating_point() else v.dtype).contiguous()
    save_file(sd, Path(folder) / "model.safetensors", metadata={"format": "pt"})
    os.chmod(Path(folder) / "model.safetensors", 0o666 & ~_umask())  # safetensors writes 0600


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def load_weights(model: torch.nn.Module, folder: str | os.PathLike) -> None:
    """What save_weights wrote, back into the same model class (a checkpoint: exact, every key)."""
    from safetensors.torch import load_file
    sd = load_file(Path(folder) / "model.safetensors")
    missing, unexpected = model.load_state_dict(sd, strict=False)
    own = model.state_dict()
    loaded = {own[k].data_ptr() for k in sd if k in own}
    missing = [k for k in missing if own[k].data_ptr() not in loaded]  # tied aliases are fine
    if missing or unexpected:
        raise ValueError(f"{folder}: weights do not fit the model (missing {missing[:3]}, "
                         f"unexpected {unexpected[:3]})")


def write_model_files(tmp: Path, model, tokenizer, dtype=torch.float32, extra_files: dict[str, str] | None = None) -> None:
    """config.json + model.safetensors (+ tokenizer files) into an existing folder."""
    model.config.to_json_file(tmp / "config.json", type(model).__name__)
    save_weights(model, tmp, dtype)
    if tokenizer is not None:
        tokenizer.save_pretrained(tmp)
    for name, text in (extra_files or {}).items():
        (tmp / name).write_text(text, encoding="utf-8")
    for f in tmp.iterdir():
        with open(f, "rb") as fh:
            os.fsync(fh.fileno())
