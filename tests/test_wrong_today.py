"""Issue 44's "Wrong today" (W1-W5): each corrected statement read against the numbers the code computes
or the bench records, so a later change to either shows up here."""
import re
import statistics
from pathlib import Path

import pytest
import torch

from bertlab.analysis import compute, sizing
from bertlab.checkpoint import DEFAULT_MODEL_DIR
from bertlab.config import BertConfig, preset

ROOT = Path(__file__).resolve().parent.parent


def flat(text: str) -> str:
    return " ".join(text.split())


def test_w1_scaling_tab_says_why_its_fitted_ratio_is_not_twenty():
    """The tab's two Chinchilla rows: the rule (Chinchilla's own 70 B / 1.4 T) and Approach 3's fitted
    minimum, whose tokens a parameter grow as C^((α-β)/(α+β)). The note quotes the tab's own rows."""
    from bertlab.app.ui.labs import scaling_tab

    def fitted(budget):
        row = scaling_tab.example_row("bert-base")
        row[11] = budget  # the form's FLOP budget box
        data = scaling_tab.calculate(**dict(zip((*scaling_tab.INPUTS, "picker"), (*row, None))))[4]
        how = {r[0]: r[2] for r in data["table"]}["Chinchilla N, D (fitted L)"]
        return data, how

    bert, how = fitted(None)  # blank: the run's own FLOPs
    budgets = {"small": scaling_tab.SMALL_BUDGET, "bert": bert["budget"],
               "chinchilla": 6 * scaling_tab.CHINCHILLA_N * scaling_tab.CHINCHILLA_D}
    ratios = {k: fitted(b)[0]["chinchilla_fit"]["tokens_per_param"] for k, b in budgets.items()}
    assert how.startswith(f"{ratios['bert']:.1f} tokens/param")
    assert ratios["small"] < ratios["bert"] < ratios["chinchilla"]  # it grows with the budget
    k = compute.CHINCHILLA
    e = (k["alpha"] - k["beta"]) / (k["alpha"] + k["beta"])
    assert ratios["chinchilla"] / ratios["small"] == pytest.approx((budgets["chinchilla"] / budgets["small"]) ** e)
    # the rule's 20 is Chinchilla's own ratio, and the rule row returns Chinchilla at its budget
    rule = compute.chinchilla_rule(budgets["chinchilla"])
    assert scaling_tab.CHINCHILLA_D / scaling_tab.CHINCHILLA_N == compute.TOKENS_PER_PARAM
    assert rule["n"] == pytest.approx(scaling_tab.CHINCHILLA_N) and rule["d"] == pytest.approx(scaling_tab.CHINCHILLA_D)
    chin = compute.chinchilla_fit(budgets["chinchilla"])
    note = flat(scaling_tab.fit_note())
    agree = scaling_tab.fit_ratios()["agree"]
    assert compute.chinchilla_fit(agree)["tokens_per_param"] == pytest.approx(compute.TOKENS_PER_PARAM)
    for said in (f"{ratios['small']:.1f} tokens a parameter at {compute.sci(budgets['small'], 0)} FLOPs",
                 f"{ratios['bert']:.1f} at BERT-base's {compute.sci(budgets['bert'])}",
                 f"{ratios['chinchilla']:.1f} at Chinchilla's own {compute.sci(budgets['chinchilla'])}",
                 f"{chin['n'] / 1e9:.1f} B parameters on {chin['d'] / 1e12:.2f} T tokens",
                 f"grows as C^{e:.3f}", f"α = {k['alpha']:g} is larger than β = {k['beta']:g}",
                 f"*{compute.TOKENS_PER_PARAM} tokens/param*", "Approaches 1 and 2", "Approach 3",
                 f"agree only near {compute.sci(agree, 1)} FLOPs"):
        assert said in note, said
    explain = flat(scaling_tab.EXPLAIN)
    assert f"({compute.TOKENS_PER_PARAM} tokens a parameter)" in explain
    assert f"({ratios['small']:.1f} tokens a parameter at {compute.sci(budgets['small'], 0)} FLOPs" in explain


def test_w2_ia3_note_ranks_it_where_the_trainable_counts_do():
    """IA3 trains fewer than BitFit, LoRA, prefix tuning and adapters; prompt tuning at its default
    virtual tokens fewer on the shipped model and BERT-base, not on the 2-layer tiny shape; the frozen
    encoder fewest. Counted as the form's line counts them (trainable_estimate)."""
    from bertlab.methods.registry import REGISTRY
    from bertlab.train.finetune import trainable_estimate
    from bertlab.train.specs import FinetuneSpec

    def counts(c):
        return {m: trainable_estimate(c, "sequence", 2, FinetuneSpec(method=m))[0]
                for m in ("frozen", "prompt", "ia3", "bitfit", "lora", "prefix", "adapter")}

    note = flat(REGISTRY["ia3"].note)
    more = ("bitfit", "lora", "prefix", "adapter")
    for m in more:
        assert REGISTRY[m].label.split(" (")[0].lower().split()[0] in note.lower()
    assert f"prompt tuning at its default {FinetuneSpec().virtual_tokens} virtual tokens" in note.lower()
    for c in (BertConfig.from_json_file(DEFAULT_MODEL_DIR / "config.json"), preset("base")):
        n = counts(c)
        assert n["frozen"] < n["prompt"] < n["ia3"] < min(n[m] for m in more), n
    tiny = preset("tiny")
    n = counts(tiny)
    assert n["ia3"] < n["prompt"] and f"(not on the {tiny.num_hidden_layers}-layer tiny shapes)" in note
    assert "frozen encoder fewest of all" in note and n["frozen"] == min(n.values())


def test_w3_lowrank_docstring_names_the_places_ia3_scales():
    from bertlab.methods import lowrank
    from bertlab.model import BertModel
    names = {"attention.self.key": "the keys", "attention.self.value": "the values",
             "attention.output.dense": "the attention's output layer", "output.dense": "the feed-forward's output layer"}
    with torch.device("meta"):
        model = BertModel(BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=40))
    lowrank.add_ia3(model)
    scaled = {lowrank.in_layer(n): m.scale_input for n, m in model.named_modules()
              if isinstance(m, lowrank.IA3Linear) and ".0." in n}
    assert set(scaled) == set(names)
    doc = flat(lowrank.__doc__)
    word = {2: "two", 3: "three", 4: "four", 5: "five", 6: "six"}[len(scaled)]
    outs = " and ".join(names[p] for p, i in scaled.items() if not i)
    ins = " and ".join(names[p] for p, i in scaled.items() if i)
    assert f"in {word} places a layer" in doc
    assert f"it scales the outputs of {outs}, and the inputs of {ins}." in doc


def test_w4_info_says_what_its_gradients_line_is(capsys):
    """`info base` at its default 32 x 128 peaks at backward's start, before any gradient exists; at
    1 x 8 the optimizer step, with all of them. Either way the line says which, with the full size."""
    from bertlab.app import cli
    c = preset("base")
    every = sizing.humanize(4 * sizing.param_counts(c)["total"], "B")  # one fp32 gradient a weight
    seen = set()
    for extra in ((), ("--batch-size", "1", "--seq-len", "8")):
        a = cli.build_parser().parse_args(["info", "base", *extra])
        assert a.run(a) == 0
        out = capsys.readouterr().out.splitlines()
        phases = sizing.training_phases(c, a.batch_size, a.seq_len)
        peak = max(phases, key=lambda k: phases[k]["total"])
        grads = sizing.memory(c, a.batch_size, a.seq_len, training=True)["gradients"]
        assert phases[peak]["gradients"] == grads
        head = next(line for line in out if line.startswith("training memory"))
        assert head.endswith(cli.INFO_PEAK[peak])
        line = next(line for line in out if line.split()[:1] == ["gradients"])
        assert line.split()[1:3] == sizing.humanize(grads, "B").split()
        if grads == 0:
            assert "none yet" in line and f"all of them take {every}" in line and peak == "head"
        else:
            assert sizing.humanize(grads, "B") == every and "all of them" in line
        seen.add(grads == 0)
    assert seen == {True, False}


def test_w5_lesson_8_quotes_the_bench_pooling_figures_and_the_papers_task():
    from bertlab.app.lessons.course_b import FINETUNE
    bench = (ROOT / "bench" / "FINETUNE.md").read_text(encoding="utf-8")
    rows = {name: (seeds, median) for name, seeds, median in re.findall(
        r"^\| (pooler|cls|mean|last4) \| [\d,]+ \| ([^|]+) \| \**([\d.]+) %\** \|$", bench, re.MULTILINE)}
    assert set(rows) == {"pooler", "cls", "mean", "last4"}
    for seeds, median in rows.values():
        runs = [float(s.strip(" %")) for s in seeds.split("/")]
        assert statistics.median(runs) == float(median)
    med = {k: float(v[1]) for k, v in rows.items()}
    assert med["last4"] < med["mean"] == max(med.values())
    paper = re.search(r"last four\s+layers concatenated gave ([\d.]+) F1.*?and ([\d.]+) fine-tuned", bench, re.DOTALL)
    text = flat(FINETUNE.explain)
    assert "best frozen features" not in text
    seeds = len(rows["mean"][0].split("/"))
    assert f"the mean of the tokens first, {rows['mean'][1]} % (median of {seeds} seeds)" in text
    assert f"the last four `[CLS]` vectors at {rows['last4'][1]} %" in text
    assert f"{paper[1]} F1 on the development set against {paper[2]} fine-tuned" in text
    layers = BertConfig.from_json_file(DEFAULT_MODEL_DIR / "config.json").num_hidden_layers
    assert layers <= 4 and f"the shipped model ({layers} layers, so the last four are all of them)" in text


def test_the_compute_command_and_the_last4_note_say_the_same(capsys):
    """W1 and W5's statements where else they were made: `compute` quotes the fit's own tokens a parameter,
    and the Fine-tune form's last-4 note no longer calls the [CLS] vectors the paper's best frozen features."""
    from bertlab.app.cli import main as cli
    from bertlab.app.ui.training import finetune_form
    from bertlab.train.specs import FinetuneSpec
    assert cli(["compute", "--example", "bert-base"]) == 0
    ratio = re.search(r"fit's own best is ([\d.]+) tokens/param", capsys.readouterr().out).group(1)
    budget = compute.worked_example("bert-base")["flops_exact"]["flops"]
    assert float(ratio) == round(compute.chinchilla_fit(budget)["tokens_per_param"], 1)
    note = finetune_form.pooling_md(preset("mini"), "sequence", FinetuneSpec(pooling="last4"))
    assert "not for [CLS]" in note and "best frozen" not in note and "96.1" in note
