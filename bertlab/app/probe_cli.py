"""`python -m bertlab probe`: per-layer probe accuracy, control accuracy and selectivity in a terminal."""
from __future__ import annotations

import json

from .. import fast
from ..checkpoint import load_pretrained
from ..train.loop import resolve_device
from ..train.probing import describe, layer_story, per_tag, probe, public, random_init
from ..train.specs import ProbeSpec


def _pct(x: float) -> str:
    return f"{100 * x:5.1f} %"


def report_probe(a: ProbeSpec, as_json: bool = False) -> int:
    """Run the probes a spec asks for and print them (a table, or JSON)."""
    model, tok = load_pretrained(a.model)
    model = fast.optimize(model.to(resolve_device(a.device)).eval())  # read under no_grad: on a CPU, the packed path
    if a.story:
        return report_story(model, tok, a, as_json)
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


def report_story(model, tok, a: ProbeSpec, as_json: bool) -> int:
    """The layer story: three tasks' accuracy per layer, side by side, and where each one's gains sit."""
    s = layer_story(model, tok, probe_kind="mlp" if a.mlp else "linear", seed=a.seed, name=a.model or "default")
    if as_json:
        print(json.dumps(s, indent=2))
        return 0
    ts = s["tasks"]
    print(f"the layer story on {s['model']} ({s['probe']} probes; accuracy on held-out words or sentences, control task in brackets)")
    for t in ts:
        c = t["counts"]
        print(f"  {t['task']:<10} {t['label']}: {c['sentences']} sentences, {c['validation']} held-out {c['unit']}, "
              f"majority {_pct(t['majority']).strip()}")
    print(f"\n{'layer':<12}" + "".join(f"{t['task']:>22}" for t in ts))
    for i in range(s["num_layers"] + 1):
        print(f"{'embeddings' if i == 0 else f'layer {i}':<12}" +
              "".join(f"{_pct(t['acc'][i])} ({_pct(t['control_acc'][i]).strip():>6})".rjust(22) for t in ts))
    for t in ts:
        if t["subset"]:
            sub = t["subset"]
            print(f"\n{t['task']}, only the {sub['validation']} held-out words {sub['name']} ({_pct(sub['share']).strip()}): "
                  + " ".join(_pct(x).strip() for x in sub["acc"]))
    print("\ncenter of gravity (expected layer of the gains, Tenney et al. 2019): " +
          ", ".join(f"{t['task']} {'-' if t['center'] is None else format(t['center'], '.2f')}" for t in ts))
    print(f"{describe(s)}\n{s['seconds']:.1f} s")
    return 0
