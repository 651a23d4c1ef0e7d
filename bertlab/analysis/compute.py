"""What pre-training costs: FLOPs, time, money, and what the scaling laws say about a model and a
budget. Plain arithmetic on a BertConfig (no torch), so the Scaling tab and `python -m bertlab
compute` answer at once. Every function returns its numbers and the formula it used (LaTeX), so a
student sees how each figure was made; every published constant has its source beside it.
"""
from __future__ import annotations

import math
import time
from pathlib import Path

import torch

from ..config import PRESETS, BertConfig, preset
from . import sizing

# ---- published constants ------------------------------------------------------------------------
# Kaplan et al. 2020, "Scaling Laws for Neural Language Models" (arXiv:2001.08361), eq. 1.1-1.2:
# L(N) = (N_c/N)^α_N with N the non-embedding parameters, L(D) = (D_c/D)^α_D with D in tokens; L is
# cross-entropy in nats per token of their decoder LMs on WebText2 (BPE). Constants checked against
# several copies that quote the paper (search, corpus pages/code); the paper's PDF itself not read.
KAPLAN = {"alpha_N": 0.076, "N_c": 8.8e13, "alpha_D": 0.095, "D_c": 5.4e13}
# Hoffmann et al. 2022, "Training Compute-Optimal Large Language Models" (arXiv:2203.15556), Approach 3:
# L(N, D) = E + A/N^α + B/D^β (N all parameters, D tokens, C = 6ND). Checked against several copies
# quoting it (search, code). Chinchilla itself: 70B parameters on 1.4T tokens, 20 tokens a parameter
# (vietanh.dev and labindex.ai summaries of the paper).
CHINCHILLA = {"E": 1.69, "A": 406.4, "B": 410.7, "alpha": 0.34, "beta": 0.28}
TOKENS_PER_PARAM = 20

# Peak dense FLOP/s of one chip (no 2:4 sparsity). "bf16" is the 16-bit tensor-unit figure (fp16
# on V100 and T4, which have no bf16); TPUs multiply in bf16 only, so they have no fp32 figure.
ACCELERATORS: dict[str, dict] = {
    "tpu-v2": {"label": "TPU v2 chip", "fp32": None, "bf16": 45e12,
               "source": "Google I/O 2017: 180 TFLOPS a Cloud TPU v2 board of four chips (androidcentral.com); "
                         "45 TFLOPS a TPUv2 chip (elektroniknet.de)"},
    "tpu-v3": {"label": "TPU v3 chip", "fp32": None, "bf16": 123e12,
               "source": "cloud.google.com/tpu/docs/v3: peak compute per chip 123 teraflops (bf16)"},
    "v100": {"label": "NVIDIA V100 SXM2", "fp32": 15.7e12, "bf16": 125e12,
             "source": "NVIDIA: 15.7 TFLOPS fp32, 'up to 125 Tensor TFLOPS' fp16 (developer.nvidia.com, "
                       "Programming Tensor Cores in CUDA 9)"},
    "t4": {"label": "NVIDIA T4", "fp32": 8.1e12, "bf16": 65e12,
           "source": "TechPowerUp-style spec tables: 8.14 TFLOPS fp32, 65.13 TFLOPS fp16 tensor"},
    "a100": {"label": "NVIDIA A100 SXM", "fp32": 19.5e12, "bf16": 312e12,
             "source": "NVIDIA A100 datasheet via glennklockwood.com: 19.5 fp32, 312 bf16 dense (624 sparse)"},
    "h100": {"label": "NVIDIA H100 SXM", "fp32": 67e12, "bf16": 989e12,
             "source": "NVIDIA H100 datasheet: 67 fp32, 1,979 bf16 'with sparsity', half that dense "
                       "(hpctech.co.jp copy; glennklockwood.com: 989.4)"},
}
DTYPES = ("fp32", "bf16")

# BERT as published (Devlin et al. 2019, appendix A.2, checked via search, corpus pages): 1M steps of
# 256 sequences; 128 tokens for 90 % of the steps, 512 for the rest; BERT-base on 4 Cloud TPUs in Pod
# configuration (16 TPU chips), BERT-large on 16 Cloud TPUs (64 chips), 4 days each. The paper does
# not say which TPU generation. `electra_flops` is the train-FLOPs figure ELECTRA (Clark et al. 2020)
# prints for each (Table 1: BERT-Base 6.4e19; Table 8: BERT-Large 1.9e20). The tables' text was not
# found in the stored pages; ELECTRA's own flops_computation.py (google-research/electra, read) computes
# them as TransformerHparams(768, 12).get_train_flops(256, 1e6) = 6.43e19 and (1024, 24) = 1.92e20,
# which round to those figures; `electra_count` re-counts them.
BERT_CORPUS = {"words": 3.3e9, "parts": "BooksCorpus (800 M words) and English Wikipedia (2,500 M)",
               "epochs": 40, "source": "Devlin et al. 2019 (3.1, A.2)"}  # "approximately 40 epochs"
EXAMPLES: dict[str, dict] = {
    "bert-base": {"preset": "base", "steps": 1_000_000, "batch": 256, "schedule": [(128, 0.9), (512, 0.1)],
                  "chips": 16, "days": 4, "electra_flops": 6.4e19, "corpus": BERT_CORPUS,
                  "source": "Devlin et al. 2019 (A.2); ELECTRA, Clark et al. 2020 (Table 1)"},
    "bert-large": {"preset": "large", "steps": 1_000_000, "batch": 256, "schedule": [(128, 0.9), (512, 0.1)],
                   "chips": 64, "days": 4, "electra_flops": 1.9e20, "corpus": BERT_CORPUS,
                   "source": "Devlin et al. 2019 (A.2); ELECTRA, Clark et al. 2020 (Table 8)"},
}
# RoBERTa's longest run: the same shapes, 160 GB of text, 8K sequences of up to 512 tokens a step
ROBERTA_RUN = {"steps": 500_000, "batch": 8192, "seq_len": 512, "gigabytes": 160,
               "source": "Liu et al. 2019 (3.2, 5, Table 4)"}


def corpus_passes(name: str) -> dict:
    """How often a published BERT read its corpus: its tokens (the appendix's schedule) over the corpus's
    words, and the paper's own figure, which counts 512 tokens every step; RoBERTa's tokens beside them."""
    if name not in EXAMPLES:
        raise ValueError(f"example must be one of {', '.join(EXAMPLES)}, got {name!r}")
    ex = EXAMPLES[name]
    read = tokens(ex["steps"], ex["batch"], ex["schedule"])["tokens"]
    at_512 = ex["steps"] * ex["batch"] * 512
    r = ROBERTA_RUN
    roberta = r["steps"] * r["batch"] * r["seq_len"]
    words = ex["corpus"]["words"]
    return {"tokens": read, "words": words, "passes": read / words, "passes_at_512": at_512 / words,
            "published": ex["corpus"]["epochs"], "roberta_tokens": roberta, "roberta_over_bert": roberta / read}

CAPS = {"tokens": 1e16, "steps": 1e12, "batch": 1e8, "flops": 1e30, "flops_per_second": 1e21,
        "count": 1e6, "price_per_hour": 1e6, "params": 1e15, "seq_len": 1_000_000}


def check(x, what: str, hi: float | None = None, lo_open: float = 0.0) -> float:
    """x as a positive finite number no larger than hi (CAPS[what] by default); ValueError naming it."""
    try:
        v = float(x)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be a number, got {x!r}") from None
    hi = CAPS.get(what, math.inf) if hi is None else hi
    if not math.isfinite(v) or v <= lo_open:
        raise ValueError(f"{what} must be more than {lo_open:g}, got {x!r}")
    if v > hi:
        raise ValueError(f"{what} must be at most {hi:g}, got {v:g}")
    return v


def sci(x: float, digits: int = 2) -> str:
    """1.2345e19 -> '1.23e19': the way papers print FLOPs."""
    m, e = f"{x:.{digits}e}".split("e")
    return f"{m}e{int(e)}"


def tex_int(x: float) -> str:
    """1000000 -> '1{,}000{,}000': thousands commas that LaTeX does not space out."""
    return f"{x:,.0f}".replace(",", "{,}")


def tex_sci(x: float, digits: int = 2) -> str:
    m, e = f"{x:.{digits}e}".split("e")
    return rf"{m}\times10^{{{int(e)}}}"


# ---- tokens and FLOPs ---------------------------------------------------------------------------
def parse_schedule(text) -> list[tuple[int, float]]:
    """'128' or '128:0.9,512:0.1' (sequence length: share of the steps) -> [(128, 0.9), (512, 0.1)]."""
    if isinstance(text, (int, float)):
        text = str(int(text))
    if len(str(text)) > 200:  # a schedule is a few lengths; a long paste is a mistake, not worth echoing
        raise ValueError(f"seq-len is {len(str(text)):,} characters long: give a length like 128, or 128:0.9,512:0.1")
    parts = [p.strip() for p in str(text).split(",") if p.strip()]
    if not parts:
        raise ValueError("seq-len is empty: give a length like 128, or 128:0.9,512:0.1")
    out = []
    for p in parts:
        length, _, share = p.partition(":")
        try:
            L, s = int(length), float(share) if share else (1.0 if len(parts) == 1 else math.nan)
        except ValueError:
            raise ValueError(f"seq-len {p!r} is not LENGTH or LENGTH:SHARE (e.g. 128:0.9)") from None
        check(L, "seq_len")
        if not 0 < s <= 1:
            raise ValueError(f"seq-len {p!r}: each length needs a share of the steps in (0, 1]")
        out.append((L, s))
    if abs(sum(s for _, s in out) - 1) > 1e-6:
        raise ValueError(f"seq-len shares must add up to 1, got {sum(s for _, s in out):g}")
    return out


def tokens(steps: float, batch: float, schedule: list[tuple[int, float]]) -> dict:
    """Tokens seen: steps × batch × the schedule's mean sequence length."""
    steps, batch = check(steps, "steps"), check(batch, "batch")
    mean_len = sum(L * s for L, s in schedule)
    n = steps * batch * mean_len
    return {"tokens": check(n, "tokens"), "sequences": steps * batch, "mean_seq_len": mean_len,
            "formula": rf"D = S \cdot B \cdot \bar T,\ D = {tex_int(steps)} \cdot {tex_int(batch)} \cdot {mean_len:g} "
                       rf"= {tex_sci(n)}"}


def non_embedding_params(c: BertConfig) -> int:
    """Kaplan's N: the encoder without its word, position and type tables (and their LayerNorm)."""
    p = sizing.param_counts(c, heads=False)
    return p["encoder_total"] - p["embeddings"]


def flops_6nd(n_params: float, n_tokens: float) -> dict:
    """C ≈ 6·N·D: 2 FLOPs per parameter per token forward, twice that backward (Kaplan et al. 2020, §2.1)."""
    N, D = check(n_params, "params"), check(n_tokens, "tokens")
    return {"flops": 6 * N * D, "formula": rf"C \approx 6ND,\ C = 6 \cdot {tex_sci(N)} \cdot {tex_sci(D)} = "
                                            rf"{tex_sci(6 * N * D)}"}


def flops_exact(c: BertConfig, steps: float, batch: float, schedule: list[tuple[int, float]],
                sparse: bool = True) -> dict:
    """The size model's count (sizing.flops, training = 3 × forward, matmuls only) per sequence at each
    length, times the sequences at that length. `sparse`: vocabulary logits only at the 15 % masked
    positions, as BERT's own code computes them (run_pretraining.py gathers the masked positions)."""
    steps, batch = check(steps, "steps"), check(batch, "batch")
    key = "total_sparse" if sparse else "total"
    per_seq = {L: sizing.flops(c, L, training=True)[key] for L, _ in schedule}
    total = sum(steps * share * batch * per_seq[L] for L, share in schedule)
    terms = " + ".join(rf"{share:g} \cdot {tex_sci(per_seq[L])}" for L, share in schedule)
    return {"flops": total, "per_sequence": {str(L): f for L, f in per_seq.items()},  # str keys: JSON
            "formula": rf"C = S \cdot B \cdot \sum_T w_T\, f_{{\mathrm{{train}}}}(T),\ C = {tex_sci(steps * batch)} "
                       rf"\cdot ({terms}) = {tex_sci(total)}"}


# ELECTRA's counting convention (google-research/electra flops_computation.py, read through the code
# search): backward = forward (so training = 2 × forward, not 3 ×), embedding lookups counted as dense
# one-hot matmuls, output logits at 20/128 = 15.625 % of positions, and small per-element costs.
_DROPOUT, _LAYER_NORM, _GELU, _SOFTMAX = 4, 5, 8, 5


def electra_count(c: BertConfig, seq_len: int, batch: float, steps: float) -> dict:
    """Training FLOPs counted ELECTRA's way, to compare with the figures its paper prints."""
    H, I, V, E, L, S = c.hidden_size, c.intermediate_size, c.vocab_size, c.embedding_dim, sizing.layers_run(c), seq_len
    A = c.num_attention_heads
    layer = (2 * H * 3 * H + 3 * H + 2 * 2 * H * S + S * A * (_SOFTMAX + _DROPOUT + 1)  # q,k,v; scores, values
             + 2 * H * H + H + _DROPOUT * H + H + _LAYER_NORM * H  # attention output
             + 2 * 2 * H * I + _GELU * I + I + H + _DROPOUT * H + H + _LAYER_NORM * H)  # feed-forward
    embed = 2 * E * V + 2 * E * (S + 2) + 2 * E + _LAYER_NORM * E + _DROPOUT * E
    embed += (2 * H * E + H) if E != H else 0
    head = 0.15625 * (2 * E * V + 2 * H * E + E + _GELU * E + _LAYER_NORM * E + _SOFTMAX * V + 2 * V)
    forward = S * (L * layer + embed + head)
    total = 2 * batch * steps * forward
    return {"flops": total, "forward_per_sequence": forward,
            "formula": rf"C_{{\mathrm{{ELECTRA}}}} = 2 \cdot S \cdot B \cdot f_{{\mathrm{{fwd}}}}(T={seq_len}) = "
                       rf"{tex_sci(total)}"}


# ---- time and money -----------------------------------------------------------------------------
def throughput(accelerator: str | None = None, dtype: str = "bf16", utilization: float = 0.4, count: float = 1,
               flops_per_second: float | None = None, measured_cpu: float | None = None) -> dict:
    """Sustained FLOP/s: a given figure, or peak × utilisation × count of an accelerator ("cpu" is
    this machine's measured matmul rate, passed in as measured_cpu)."""
    if flops_per_second is not None:
        f = check(flops_per_second, "flops_per_second")
        return {"flops_per_second": f, "label": "given", "formula": rf"R = {tex_sci(f)}\ \mathrm{{FLOP/s}}"}
    if accelerator is None:
        raise ValueError("give flops-per-second or an accelerator")
    u, n = check(utilization, "utilization", 1.0), check(count, "count")
    if accelerator == "cpu":
        if measured_cpu is None:
            raise ValueError("the cpu's rate must be measured first")
        peak, label, source = measured_cpu, "this CPU (measured fp32 matmul)", "measured here"
    else:
        if accelerator not in ACCELERATORS:
            raise ValueError(f"accelerator must be one of {', '.join([*ACCELERATORS, 'cpu'])}, got {accelerator!r}")
        if dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
        a = ACCELERATORS[accelerator]
        peak, label, source = a[dtype], a["label"], a["source"]
        if peak is None:
            raise ValueError(f"{a['label']} has no {dtype} matmul figure: TPUs multiply in bf16")
    f = peak * u * n
    return {"flops_per_second": f, "peak": peak, "label": label, "source": source, "utilization": u, "count": n,
            "formula": rf"R = \mathrm{{peak}} \cdot u \cdot n,\ R = {tex_sci(peak)} \cdot {u:g} \cdot {n:g} = "
                       rf"{tex_sci(f)}\ \mathrm{{FLOP/s}}"}


def train_time(flops: float, flops_per_second: float) -> dict:
    t = check(flops, "flops") / check(flops_per_second, "flops_per_second")
    return {"seconds": t, "formula": rf"t = C / R,\ t = {tex_sci(flops)} / {tex_sci(flops_per_second)} = "
                                     rf"{tex_sci(t)}\ \mathrm{{s}} \approx \text{{{human_time(t)}}}"}


def cost(seconds: float, price_per_hour: float, count: float = 1) -> dict:
    """Dollars at a price per device-hour for `count` devices."""
    p, n = check(price_per_hour, "price_per_hour"), check(count, "count")
    usd = seconds / 3600 * p * n
    return {"dollars": usd, "formula": rf"\mathrm{{cost}} = \frac{{t}}{{3600}} \cdot p \cdot n,\ \mathrm{{cost}} = "
                                       rf"{seconds / 3600:.4g}\ \mathrm{{h}} \cdot {p:g} \cdot {n:g} = "
                                       rf"{tex_int(usd)}\ \mathrm{{USD}}"}


def implied_utilization(flops: float, seconds: float, peak: float, count: float) -> float:
    """The share of peak a published run sustained: its FLOPs over what its chips could do in its time."""
    return flops / (seconds * peak * count)


def human_time(seconds: float) -> str:
    for unit, s in (("years", 365.25 * 86400), ("days", 86400), ("hours", 3600), ("minutes", 60)):
        if seconds >= s:
            return f"{seconds / s:,.1f} {unit}"
    return f"{seconds:.1f} seconds"


# ---- scaling laws -------------------------------------------------------------------------------
def kaplan_loss_n(n: float) -> dict:
    N = check(n, "params")
    loss = (KAPLAN["N_c"] / N) ** KAPLAN["alpha_N"]
    return {"loss": loss, "formula": rf"L(N) = (N_c/N)^{{\alpha_N}},\ L = (8.8\times10^{{13}} / {tex_sci(N)})^{{0.076}} "
                                     rf"= {loss:.3f}\ \mathrm{{nats/token}}"}


def kaplan_loss_d(d: float) -> dict:
    D = check(d, "tokens")
    loss = (KAPLAN["D_c"] / D) ** KAPLAN["alpha_D"]
    return {"loss": loss, "formula": rf"L(D) = (D_c/D)^{{\alpha_D}},\ L = (5.4\times10^{{13}} / {tex_sci(D)})^{{0.095}} "
                                     rf"= {loss:.3f}\ \mathrm{{nats/token}}"}


def chinchilla_loss(n: float, d: float) -> float:
    k = CHINCHILLA
    return k["E"] + k["A"] / n ** k["alpha"] + k["B"] / d ** k["beta"]


def chinchilla_rule(budget: float) -> dict:
    """~20 tokens a parameter with C = 6ND: C = 120 N², so N = sqrt(C / 120), D = 20 N."""
    C = check(budget, "flops")
    n = math.sqrt(C / (6 * TOKENS_PER_PARAM))
    d = TOKENS_PER_PARAM * n
    return {"n": n, "d": d, "formula": rf"D = 20N,\ C = 6ND = 120N^2 \Rightarrow N = \sqrt{{C/120}} = {tex_sci(n)},"
                                       rf"\ D = {tex_sci(d)}"}


def chinchilla_fit(budget: float) -> dict:
    """The minimum of L(N, D) on the line C = 6ND, in closed form (Hoffmann et al. 2022, Approach 3):
    N = G (C/6)^a, D = (C/6)^b / G with G = (αA / βB)^(1/(α+β)), a = β/(α+β), b = α/(α+β)."""
    C = check(budget, "flops")
    k = CHINCHILLA
    s = k["alpha"] + k["beta"]
    G = (k["alpha"] * k["A"] / (k["beta"] * k["B"])) ** (1 / s)
    n = G * (C / 6) ** (k["beta"] / s)
    d = (C / 6) ** (k["alpha"] / s) / G
    loss = chinchilla_loss(n, d)
    return {"n": n, "d": d, "loss": loss, "tokens_per_param": d / n,
            "formula": rf"L(N,D) = E + \frac{{A}}{{N^\alpha}} + \frac{{B}}{{D^\beta}},\ N_{{opt}} = G\,(C/6)^{{"
                       rf"\beta/(\alpha+\beta)}} = {tex_sci(n)},\ D_{{opt}} = G^{{-1}}(C/6)^{{\alpha/(\alpha+\beta)}} = "
                       rf"{tex_sci(d)},\ L = {loss:.3f}"}


# ---- everything at once -------------------------------------------------------------------------
def estimate(c: BertConfig, steps: float | None = None, batch: float | None = None, schedule=None,
             n_tokens: float | None = None, rate: dict | None = None, price_per_hour: float | None = None,
             budget: float | None = None) -> dict:
    """The calculator: FLOPs (6ND and exact) for the tokens given as steps × batch × schedule or as a
    count (then sequences of the schedule's first length), time at `rate` (a `throughput` result),
    cost, Kaplan's L(N) and L(D), and Chinchilla's optimum for `budget` (default: this run's FLOPs)."""
    schedule = schedule or [(128, 1.0)]
    if n_tokens is not None:
        n_tokens = check(n_tokens, "tokens")
        batch = check(batch or 1, "batch")
        steps = n_tokens / (batch * sum(L * s for L, s in schedule))
    elif steps is None or batch is None:
        raise ValueError("give the tokens, or steps and batch")
    tok = tokens(steps, batch, schedule)
    p = sizing.param_counts(c, heads=False)
    N, N_ne = p["encoder_total"], non_embedding_params(c)
    out = {"params": N, "non_embedding_params": N_ne, "steps": steps, "batch": batch, "schedule": schedule,
           "tokens": tok, "flops_6nd": flops_6nd(N, tok["tokens"]),
           "flops_exact": flops_exact(c, steps, batch, schedule),
           "kaplan_n": kaplan_loss_n(N_ne), "kaplan_d": kaplan_loss_d(tok["tokens"])}
    C = out["flops_exact"]["flops"]
    if rate is not None:
        out["rate"] = rate
        out["time"] = train_time(C, rate["flops_per_second"])
        if price_per_hour is not None:
            out["cost"] = cost(out["time"]["seconds"], price_per_hour, rate.get("count", 1))
    elif price_per_hour is not None:
        raise ValueError("a price per hour needs a speed: give flops-per-second or an accelerator")
    B = check(budget, "flops") if budget is not None else C
    out["budget"] = B
    out["chinchilla_rule"] = chinchilla_rule(B)
    out["chinchilla_fit"] = chinchilla_fit(B)
    return out


def worked_example(name: str) -> dict:
    """BERT-base or -large as published: its FLOPs, ELECTRA's figure for it (and our count of it
    ELECTRA's way), and the utilisation of its TPUs that the 4 days imply, for TPU v2 and v3 chips."""
    if name not in EXAMPLES:
        raise ValueError(f"example must be one of {', '.join(EXAMPLES)}, got {name!r}")
    ex = EXAMPLES[name]
    c = preset(ex["preset"])
    res = estimate(c, ex["steps"], ex["batch"], ex["schedule"])
    seconds = ex["days"] * 86400
    res["example"] = name
    res["published"] = ex
    res["electra_count"] = electra_count(c, 512, ex["batch"], ex["steps"])
    res["implied_utilization"] = {k: implied_utilization(res["flops_exact"]["flops"], seconds,
                                                         ACCELERATORS[k]["bf16"], ex["chips"])
                                  for k in ("tpu-v2", "tpu-v3")}
    return res


# ---- this machine and the models it sizes -----------------------------------------------------

def measure_cpu(seconds: float = 0.3, n: int = 512) -> float:
    """This machine's fp32 matmul rate (FLOP/s) with torch's threads: what the trainer's matmuls get."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    torch.mm(a, b)  # warm up
    reps, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        torch.mm(a, b)
        reps += 1
    return 2 * n ** 3 * reps / (time.perf_counter() - t0)


def model_config(name: str) -> tuple[BertConfig, str]:
    """A BERT preset (tiny ... large), FAMILY:PRESET (e.g. roberta:base), or a model folder."""
    if name in PRESETS:
        return preset(name), f"BERT {name}"
    if ":" in name and not Path(name).exists():
        family, _, size = name.partition(":")
        return preset(size, model_type=family), f"{family} {size}"
    folder = Path(name)
    if not (folder / "config.json").is_file():
        raise ValueError(f"model {name!r} is no preset ({', '.join(PRESETS)}), FAMILY:PRESET or folder with a config.json")
    return BertConfig.from_json_file(folder / "config.json"), str(folder)
