"""Same weights, same numbers, on a device: every from-scratch member (pre-training classes, ELECTRA's generator,
the sequence / token / QA heads) against its transformers class, and LoRA, IA3, prompt and prefix tuning against
peft, with both sides on `--device` (default cuda). The unit tests check this on the CPU; this is their check
where CUDA's kernels run. fp32 with TF32 off must agree within 1e-5 (exit 1 if not); our SDPA path (no attention
maps asked for) and bf16 autocast are measured beside it, not asserted.
    python bench/gpu_oracles.py --device cuda --json gpu-out/oracles.json
    python bench/gpu_oracles.py --device cpu     # the same checks on a CPU (about 20 s)"""
from __future__ import annotations

import argparse
import copy
import json
import sys
import tempfile
import warnings
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bertlab import family, save_pretrained  # noqa: E402
from bertlab.config import BertConfig  # noqa: E402
from bertlab.heads import KINDS, classifier_class, save_classifier  # noqa: E402
from bertlab.methods import apply_method, save_finetuned  # noqa: E402
from bertlab.train.specs import FinetuneSpec  # noqa: E402

TOL = 1e-5
V = 97
SMALL = dict(hidden_size=48, num_hidden_layers=2, num_attention_heads=3, intermediate_size=70, max_position_embeddings=40)
EXTRA = {"bert": dict(type_vocab_size=3), "albert": dict(embedding_size=16, hidden_act="gelu_new"),
         "electra": dict(embedding_size=16), "distilbert": {},
         "roberta": dict(type_vocab_size=1, max_position_embeddings=42, pad_token_id=1, bos_token_id=0, eos_token_id=2),
         "deberta-v2": dict(type_vocab_size=2, relative_attention=True, position_buckets=8, pos_att_type=("c2p", "p2c"),
                            norm_rel_ebd="layer_norm", position_biased_input=False)}
VIRTUAL = tuple(n for n, m in family.MEMBERS.items() if not m.no_virtual)  # members that take virtual tokens
METHODS = {"lora": tuple(family.MEMBERS), "ia3": tuple(family.MEMBERS), "prompt": VIRTUAL,
           "prefix": ("bert", "electra", "roberta")}  # transformers' ALBERT and DistilBERT take no cache


def config(member: str) -> BertConfig:
    return family.config_class(member)(vocab_size=V, model_type=member, **(SMALL | EXTRA[member]))


def noisy(params, scale=0.1, seed=5):
    """Initialisers zero biases, make LayerNorms identities and LoRA's B zero: make every parameter matter."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in params:
            p.add_((torch.randn(p.shape, generator=g) * scale).to(p.device))


def batch(c: BertConfig, dev, T=17):
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(5, c.vocab_size, (3, T), generator=g)
    tt = torch.randint(0, c.type_vocab_size, (3, T), generator=g)
    am = torch.ones(3, T, dtype=torch.long)
    am[1, 11:] = 0  # padding inside the batch
    am[2, 4:] = 0
    ids[am == 0] = c.pad_token_id
    return ids.to(dev), tt.to(dev), am.to(dev)


def hf(arch: str, folder, dev, **kw):
    import transformers
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return getattr(transformers, arch).from_pretrained(folder, attn_implementation="eager", **kw).to(dev).eval()


def theirs_out(model, c, ids, tt, am, **kw):
    segs = {} if c.model_type == "distilbert" else {"token_type_ids": tt}  # DistilBERT has no segments
    return model(input_ids=ids, attention_mask=am, **segs, **kw)


def logit_pairs(a, b, am):
    """(ours, theirs) logits: by name where both have it (a head's logits, QA's start and end), else by shape
    (our mlm/nsp/rtd logits against their prediction/seq_relationship/sop logits). Every one of theirs is
    compared; padded positions of per-token outputs are left out (any value is right there)."""
    ours = {k: v for k, v in vars(a).items() if k.endswith("logits") and torch.is_tensor(v)}
    theirs = {k: v for k, v in b.items() if k.endswith("logits") and torch.is_tensor(v)}
    pairs = [(ours.pop(k), theirs.pop(k)) for k in list(theirs) if k in ours]
    for k, y in theirs.items():
        same = [n for n, x in ours.items() if x.shape == y.shape]
        assert len(same) == 1, (k, y.shape, {n: x.shape for n, x in ours.items()})
        pairs.append((ours.pop(same[0]), y))
    assert pairs
    keep = am.bool()
    return [(x[keep], y[keep]) if x.dim() >= 2 and x.shape[:2] == am.shape else (x, y) for x, y in pairs]


def worst(pairs) -> float:
    return max((x.float() - y.float()).abs().max().item() for x, y in pairs)


@torch.no_grad()
def compare(ours, theirs, c, dev) -> dict:
    """fp32 with attention maps (our explicit softmax), fp32 on our SDPA path, and both under bf16 autocast."""
    ids, tt, am = batch(c, dev)
    a = ours(ids, tt, am, output_attentions=True, output_hidden_states=True)
    b = theirs_out(theirs, c, ids, tt, am, output_attentions=True, output_hidden_states=True)
    enc = [*zip(a.hidden_states, b.hidden_states), *zip(a.attentions, b.attentions)] if a.hidden_states else []
    fp32 = worst(logit_pairs(a, b, am) + [(x[am.bool()], y[am.bool()]) for x, y in enc[:len(a.hidden_states or ())]]
                 + enc[len(a.hidden_states or ()):])
    sdpa = worst(logit_pairs(ours(ids, tt, am), b, am))
    out = {"fp32": fp32, "fp32_sdpa": sdpa}
    if torch.device(dev).type == "cuda":
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out["bf16"] = worst(logit_pairs(ours(ids, tt, am), theirs_out(theirs, c, ids, tt, am), am))
    return out


def pretraining(member: str, dev, tmp: Path) -> dict:
    """Each of our pre-training classes (and ELECTRA's generator), saved, loaded by transformers' class."""
    c, out = config(member), {}
    classes = [[]] + ([["ElectraForMaskedLM"]] if member == "electra" else [])
    for archs in classes:
        torch.manual_seed(0)
        ours = family.build(c, archs)
        noisy(ours.parameters())
        folder = save_pretrained(ours.eval(), None, tmp / f"{member}-{type(ours).__name__}")
        arch = json.loads((folder / "config.json").read_text())["architectures"][0]
        out[arch] = compare(ours.to(dev), hf(arch, folder, dev), c, dev)
    return out


def heads(member: str, dev, tmp: Path) -> dict:
    c, out = config(member), {}
    for kind in KINDS:
        cls = classifier_class(c, kind)
        torch.manual_seed(0)
        ours = cls(c, 3, list("abc")) if kind != "qa" else cls(c)
        noisy(ours.parameters())
        save_classifier(ours.eval(), None, tmp / f"{member}-{kind}")
        out[cls.architecture] = compare(ours.to(dev), hf(cls.architecture, tmp / f"{member}-{kind}", dev), c, dev)
    return out


def methods(dev, tmp: Path) -> dict:
    """Our method saved in peft's format, loaded by peft onto transformers' classifier of the same base."""
    import peft
    out = {}
    for method, members in METHODS.items():
        for member in members:
            c = config(member)
            cls = classifier_class(c, "sequence")
            torch.manual_seed(0)
            base = cls(c, 3, list("abc"))
            noisy(base.parameters())
            base_dir = save_classifier(base.eval(), None, tmp / f"base-{method}-{member}")
            ours = copy.deepcopy(base)
            spec = FinetuneSpec(method=method, lora_rank=2, lora_alpha=4.0, virtual_tokens=3,
                                lora_targets=("query", "key", "value", "attention_output", "ffn"))
            apply_method(ours, spec)
            noisy([p for p in ours.parameters() if p.requires_grad], 0.3, seed=7)
            save_finetuned(ours, None, tmp / f"m-{method}-{member}", spec, str(base_dir),
                           adapter_folder=tmp / f"a-{method}-{member}")
            folder = tmp / (f"a-{method}-{member}" if method in ("lora", "ia3") else f"m-{method}-{member}")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                theirs = peft.PeftModel.from_pretrained(hf(cls.architecture, base_dir, "cpu"), folder).to(dev).eval()
            ours = ours.to(dev).eval()
            ids, tt, am = batch(c, dev)
            with torch.no_grad():
                mine = ours(ids, tt, am).logits
                d = worst([(mine, theirs_out(theirs, c, ids, tt, am).logits)])
                moved = worst([(mine, base.to(dev).eval()(ids, tt, am).logits)])
            out[f"{method} {member}"] = {"fp32": d if moved > 1e-3 else float("nan")}  # nan: the method did nothing
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--json", help="write every difference here")
    args = ap.parse_args(argv)
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 means fp32: TF32 would round inputs to 10 bits
    torch.backends.cudnn.allow_tf32 = False
    dev = args.device
    result = {"device": dev, "name": torch.cuda.get_device_name() if dev.startswith("cuda") else "cpu",
              "torch": torch.__version__, "tolerance": TOL, "models": {}, "methods": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for member in family.MEMBERS:
            result["models"][member] = pretraining(member, dev, Path(tmp)) | heads(member, dev, Path(tmp))
        result["methods"] = methods(dev, Path(tmp))
    rows = [(f"{m} {a}", d) for m, archs in result["models"].items() for a, d in archs.items()]
    rows += list(result["methods"].items())
    bad = [name for name, d in rows if not d["fp32"] <= TOL]
    for name, d in rows:
        print(f"{name:45s} " + "  ".join(f"{k} {v:.1e}" for k, v in d.items()))
    result["failed"] = bad
    print(f"{len(rows) - len(bad)} of {len(rows)} within {TOL:g} in fp32 on {result['name']}"
          + (f"; over: {', '.join(bad)}" if bad else ""))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(result, indent=1))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
