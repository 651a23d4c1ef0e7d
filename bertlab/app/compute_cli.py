"""`python -m bertlab compute ...`: pre-training FLOPs, time, cost and the scaling laws from a terminal.
Numbers are parsed here (not by argparse) so a bad one is one line on stderr and exit 2, as cli.main does."""
from __future__ import annotations

import json

from ..analysis import compute
from ..analysis.compute import measure_cpu, model_config
from ..analysis.sizing import humanize


def add_arguments(p) -> None:
    p.add_argument("--model", default="base", help="BERT preset (tiny, mini, small, medium, base, large), "
                   "FAMILY:PRESET (roberta:base) or a model folder")
    p.add_argument("--example", default=None, help="a published run: bert-base or bert-large (sets model, steps, "
                   "batch and seq-len as Devlin et al. 2019 trained them)")
    p.add_argument("--tokens", default=None, help="tokens seen (instead of --steps)")
    p.add_argument("--steps", default=None, help="optimizer steps")
    p.add_argument("--batch", default="256", help="sequences a step (default 256)")
    p.add_argument("--seq-len", default="128", help="tokens a sequence, or a schedule LEN:SHARE,... "
                   "(BERT: 128:0.9,512:0.1)")
    p.add_argument("--flops-per-second", default=None, help="sustained FLOP/s (instead of --accelerator)")
    p.add_argument("--accelerator", default=None,
                   help=f"one of {', '.join(compute.ACCELERATORS)}, or cpu (measured now)")
    p.add_argument("--dtype", default="bf16", help="fp32 or bf16 peak of the accelerator (default bf16)")
    p.add_argument("--utilization", default="0.4", help="share of peak sustained, in (0, 1] (default 0.4)")
    p.add_argument("--count", default="1", help="accelerators (default 1)")
    p.add_argument("--price-per-hour", default=None, help="dollars per accelerator-hour")
    p.add_argument("--budget", default=None, help="FLOP budget for Chinchilla's optimum (default: this run's)")
    p.add_argument("--json", action="store_true", help="print every number and formula as JSON")


def _opt(a, name: str, what: str | None = None):
    v = getattr(a, name)
    return None if v is None else compute.check(v, what or name)


def run(a) -> dict:
    """The flags as one compute.estimate (or worked_example) result."""
    if a.example:
        res = compute.worked_example(a.example)
        where = a.example
    else:
        c, where = model_config(a.model)
        schedule = compute.parse_schedule(a.seq_len)
        if a.tokens is None and a.steps is None:
            raise ValueError("give --tokens or --steps (or --example bert-base)")
        if a.tokens is not None and a.steps is not None:
            raise ValueError("give --tokens or --steps, not both")
        res = compute.estimate(c, steps=_opt(a, "steps"), batch=_opt(a, "batch"), schedule=schedule,
                               n_tokens=_opt(a, "tokens"), budget=_opt(a, "budget", "flops"))
    rate = None
    if a.flops_per_second is not None or a.accelerator is not None:
        cpu = measure_cpu() if a.accelerator == "cpu" else None
        rate = compute.throughput(a.accelerator, a.dtype, compute.check(a.utilization, "utilization", 1.0),
                                  _opt(a, "count"), _opt(a, "flops_per_second"), measured_cpu=cpu)
        res["rate"] = rate
        res["time"] = compute.train_time(res["flops_exact"]["flops"], rate["flops_per_second"])
        if a.price_per_hour is not None:
            res["cost"] = compute.cost(res["time"]["seconds"], _opt(a, "price_per_hour"), rate.get("count", 1))
    elif a.price_per_hour is not None:
        raise ValueError("--price-per-hour needs a speed: --flops-per-second or --accelerator")
    if a.example and a.budget is not None:
        b = _opt(a, "budget", "flops")
        res["budget"], res["chinchilla_rule"], res["chinchilla_fit"] = b, compute.chinchilla_rule(b), compute.chinchilla_fit(b)
    res["model"] = where
    return res


def report(res: dict, as_json: bool) -> int:
    if as_json:
        print(json.dumps(res, indent=2, default=str))
        return 0
    sci = compute.sci
    tok = res["tokens"]
    print(f"{res['model']}: {humanize(res['params'])} parameters ({humanize(res['non_embedding_params'])} "
          f"without embeddings)")
    print(f"  tokens        {sci(tok['tokens'])}  ({tok['sequences']:,.0f} sequences, mean length {tok['mean_seq_len']:g})")
    print(f"  FLOPs 6ND     {sci(res['flops_6nd']['flops'])}")
    print(f"  FLOPs exact   {sci(res['flops_exact']['flops'])}  (size model: matmuls, 3 x forward, MLM logits "
          f"at the masked 15 %)")
    if "electra_count" in res:
        pub = res["published"]
        print(f"  ELECTRA's way {sci(res['electra_count']['flops'])}  (ELECTRA prints {sci(pub['electra_flops'], 1)}; "
              f"all steps at 512 tokens, backward = forward)")
        u = res["implied_utilization"]
        print(f"  {pub['chips']} chips x {pub['days']} days imply {u['tpu-v2']:.1%} of TPU v2 peak, "
              f"{u['tpu-v3']:.1%} of TPU v3 peak")
    if "time" in res:
        r = res["rate"]
        print(f"  speed         {sci(r['flops_per_second'])} FLOP/s ({r['label']})")
        print(f"  time          {compute.human_time(res['time']['seconds'])}")
    if "cost" in res:
        print(f"  cost          ${res['cost']['dollars']:,.0f}")
    print(f"  Kaplan L(N)   {res['kaplan_n']['loss']:.3f} nats/token, L(D) {res['kaplan_d']['loss']:.3f} "
          f"(WebText2 decoder LMs: a shape, not BERT's MLM loss)")
    fit, rule = res["chinchilla_fit"], res["chinchilla_rule"]
    print(f"  Chinchilla, budget {sci(res['budget'])} FLOPs: 20 tokens/param -> N {humanize(rule['n'])}, "
          f"D {sci(rule['d'])}; fitted L(N, D) -> N {humanize(fit['n'])}, D {sci(fit['d'])}, L {fit['loss']:.3f}")
    print(f"  (the fit's own best is {fit['tokens_per_param']:.1f} tokens/param here: its loss falls faster in N "
          f"than in D, so its ratio grows with the budget, while the 20 is Chinchilla's ratio at its own size)")
    return 0


def cmd_compute(a) -> int:
    return report(run(a), a.json)
