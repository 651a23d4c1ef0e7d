"""`python -m bertlab scaling ...`: a scaling sweep from a terminal. It says how long it will take
first, prints a line as each run finishes, then the table and the fit (α next to Kaplan's)."""
from __future__ import annotations

import argparse
import json
import sys

import torch

from ..train import scaling
from ..train.specs import ScalingSpec
from .stopping import graceful_stop


def add_arguments(p: argparse.ArgumentParser) -> None:
    ScalingSpec.add_arguments(p)  # every field a flag; the two lists take commas instead, as below
    p.add_argument("--sizes", default=argparse.SUPPRESS, dest="sizes",
                   help="model sizes, comma-separated: presets (tiny, mini, ...), LxH (heads = hidden / 64) or "
                        f"LxHxA (default: {','.join(ScalingSpec().sizes)})")
    p.add_argument("--size", default=argparse.SUPPRESS, dest="sizes",
                   help="the one size of a data sweep (with several --tokens)")
    p.add_argument("--tokens", default=argparse.SUPPRESS, dest="tokens",
                   help="training tokens per run, e.g. 2M; several, comma-separated (1M,2M,4M), with one --size "
                        f"sweep the data (default: {scaling.tokens_label(ScalingSpec().tokens[0])})")
    p.add_argument("--out", required=True, help="the sweep's folder (created; a second call reuses its finished runs)")
    p.add_argument("--json", action="store_true", help="print the results (table, fits, curves) as JSON")


def spec_from_args(a) -> ScalingSpec:
    given = ScalingSpec.given(a)
    if isinstance(given.get("sizes"), str):
        given["sizes"] = tuple(s.strip() for s in given["sizes"].split(",") if s.strip())
    if isinstance(given.get("tokens"), str):
        given["tokens"] = tuple(scaling.parse_tokens(t) for t in given["tokens"].split(",") if t.strip())
    return ScalingSpec(**given)


def _err(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def cmd_scaling(a) -> int:
    spec = spec_from_args(a)
    if spec.threads:  # before the estimate: it times this CPU's matmuls with the threads the runs will use
        torch.set_num_threads(spec.threads)
    pts = scaling.points(spec)
    eta = scaling.estimate_s(spec, a.out)
    what = (f"{len(pts)} sizes × {scaling.tokens_label(spec.tokens[0])} tokens" if spec.mode == "size" else
            f"{spec.sizes[0]} × {len(pts)} token budgets")
    def say(text: str, flush: bool = True) -> None:  # with --json, stdout holds only the JSON
        print(text, file=sys.stderr if a.json else sys.stdout, flush=flush)
    say(f"scaling sweep: {what}; about {eta / 60:.0f} min here (runs already finished are reused)", flush=True)

    def on_part(p: dict, reused: bool) -> None:
        say(f"  {p['name']:<18} N {p['non_embedding']:>11,}  tokens {p['tokens']:.3g}  held-out loss "
            f"{p['loss']:.3f}  acc {p['acc']:.1%}  " + ("(reused)" if reused else f"{p['minutes']:.1f} min"),
            flush=True)
    res = scaling.sweep(a.out, spec, log=lambda m: None, stop_event=graceful_stop(_err), on_part=on_part)
    if res["state"] != "finished":
        _err(f"{res['state']}: {res.get('message', '')} (run the same command again to go on)")
        return 1
    if a.json:
        print(json.dumps(res, indent=2))
    else:
        print("\n" + scaling.table_md(res))
    return 0
