"""`python -m bertlab probe`: per-layer probe accuracy, control accuracy and selectivity in a terminal."""
from __future__ import annotations

import json

from .. import fast
from ..checkpoint import load_pretrained
from ..train.loop import resolve_device
from ..train.probing import per_tag, probe, public, random_init
from ..train.specs import ProbeSpec


def _pct(x: float) -> str:
    return f"{100 * x:5.1f} %"


def report_probe(a: ProbeSpec, as_json: bool = False) -> int:
    """Run the probes a spec asks for and print them (a table, or JSON)."""
    model, tok = load_pretrained(a.model)
    model = fast.optimize(model.to(resolve_device(a.device)).eval())  # read under no_grad: on a CPU, the packed path
    kw = dict(feature=a.feature, probe="mlp" if a.mlp else "linear", sample=a.sample, seed=a.seed,
              text_column=a.text_column, label_column=a.label_column)
    runs = [probe(model, tok, a.task, name=a.model or "default", **kw)]
    if a.compare_random:
        runs.append(probe(random_init(model, a.seed).to(next(model.parameters()).device), tok, a.task, name="random init (same config)", **kw))
    for r in runs:
        if a.layer is not None:
            r["per_tag"], r["per_tag_layer"] = per_tag(r, a.layer), a.layer
        else:
            r["per_tag_layer"] = r["best_layer"]
    if as_json:
        out = [public(r) for r in runs]
        print(json.dumps(out[0] if len(out) == 1 else out, indent=2))
        return 0
    r, c = runs[0], runs[0]["counts"]
    print(f"{r['task']} probe on {r['model']}: {c['sentences']} sentences, {c['train']} training / "
          f"{c['validation']} validation {c['unit']}, {c['labels']} labels; {r['probe']} probe, "
          f"feature {r['feature']}")
    print(f"control task: {r['control']}; majority baseline {_pct(r['majority']).strip()}")
    for n in r["notes"]:
        print(f"note: {n}")
    head = f"\n{'layer':<12} {'accuracy':>9} {'control':>9} {'selectivity':>12}"
    if len(runs) > 1:
        head += f"   | random init: {'accuracy':>9} {'control':>9} {'selectivity':>12}"
    print(head)
    for i, row in enumerate(r["layers"]):
        line = f"{row['name']:<12} {_pct(row['acc']):>9} {_pct(row['control_acc']):>9} {100 * row['selectivity']:>+12.1f}"
        if len(runs) > 1:
            q = runs[1]["layers"][i]
            line += f"   | {'':13}{_pct(q['acc']):>9} {_pct(q['control_acc']):>9} {100 * q['selectivity']:>+12.1f}"
        print(line)
    print(f"\nbest layer {r['best_layer']} ({_pct(r['layers'][r['best_layer']]['acc']).strip()}), most selective "
          f"layer {r['most_selective_layer']}; {sum(x['seconds'] for x in runs):.1f} s")
    if a.per_tag:
        print(f"\nper label at layer {r['per_tag_layer']} (validation):")
        print(f"  {'label':<12} {'count':>6} {'accuracy':>9}  most confused with")
        for t in r["per_tag"]:
            print(f"  {t['label']:<12} {t['count']:>6} {_pct(t['accuracy']):>9}  {t['most confused with']}")
    return 0
