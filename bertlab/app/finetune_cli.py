"""`python -m bertlab classify` and `finetune --compare`: what they print (cli.py wires the commands)."""
from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

from tqdm import tqdm

from ..analysis import classify
from ..train.compare import spec_of
from ..train.specs import CompareSpec
from ..train.loop import resolve_device


def compare_spec(a, given: dict) -> CompareSpec:
    """The comparison the flags ask for; with --resume and no --compare, the folder's own (with what
    a resume may change)."""
    if a.compare is None:
        spec, ignored = spec_of(a.out).resumed(given)
        if ignored:
            warnings.warn(f"resuming keeps the comparison's own {', '.join(ignored)}")
        return spec
    if "method" in given:
        raise ValueError("--compare names the methods: leave out --method")
    methods = tuple(m.strip() for m in a.compare.split(",") if m.strip())
    return CompareSpec(**given, methods=methods, seeds=a.seeds or 1)


def compare_progress():
    """(log, on_row, close): messages to stderr, and on a terminal a bar of the run in progress with the ETA."""
    bar = tqdm(total=None, unit="step", disable=not sys.stderr.isatty(), dynamic_ncols=True, leave=False)

    def log(msg: str) -> None:
        if bar.disable:
            print(msg, file=sys.stderr, flush=True)
        else:
            tqdm.write(msg, file=sys.stderr)

    def on_row(row: dict) -> None:
        if bar.disable:
            return
        if row["event"] == "progress" and row.get("total_steps"):
            if bar.total != row["total_steps"] or row["step"] < bar.n:
                bar.reset(total=row["total_steps"])
            bar.set_description_str(f"{row['method']} seed {row['seed']}")
            bar.update(row["step"] - bar.n)
            bar.set_postfix_str(f"about {row['eta_s'] / 60:.1f} min left in all")
        elif row["event"] == "run":
            bar.reset(total=None)
    return log, on_row, bar.close


def report_compare(res: dict, out: str, as_json: bool) -> int:
    """The table (or JSON) on stdout; 1 when the comparison stopped or a method failed."""
    if res["state"] != "finished":
        print(f"{res['state']}: {res.get('message', '')}; run the same command again to go on", file=sys.stderr)
        return 1
    if as_json:
        print(json.dumps(res, indent=2))
    else:
        print("\n" + (Path(out) / "table.md").read_text(encoding="utf-8"))
    failed = [r["method"] for r in res["rows"] if r["failed"]]
    if failed:
        print(f"error: {', '.join(failed)} failed: see {Path(out)}/<method>-seed<N>.log", file=sys.stderr)
    return 1 if failed else 0


def report_classify(model_path: str, text: str, pair: str | None, question: str | None, as_json: bool,
                    device: str = "cpu") -> int:
    if not (model_path or "").strip():
        raise ValueError("--model is empty: name a fine-tuned folder or hub id")
    model, tok = classify.load(model_path)
    model = model.to(resolve_device(device)).eval()
    res = classify.predict(model, tok, text, pair=pair, question=question)
    if as_json:
        print(json.dumps(res, indent=2, ensure_ascii=False))
        return 0
    if res["kind"] == "qa":
        print(f"answer: {res['answer']!r}  (score {res['score']:.3f}, characters {res['start']}-{res['end']})")
    elif res["kind"] == "token":
        print(" ".join(f"{w['word']}/{w['label']}" for w in res["words"]))
    elif res["problem"] == "regression":
        print(f"value: {res['value']:.4f}")
    else:
        for name, p in sorted(res["labels"].items(), key=lambda kv: -kv[1]):
            print(f"  {p:7.2%}  {name:<20} logit {res['logits'][name]:+.3f}")
        if res["problem"] == "multi":
            print(f"predicted (p >= 0.5): {', '.join(res['predicted']) or 'none'}")
    if res.get("truncated"):
        print(f"note: the input was cut to the model's {tok.model_max_length} pieces", file=sys.stderr)
    return 0
