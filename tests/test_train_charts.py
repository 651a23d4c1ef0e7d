"""The training charts (issue 15, item 3): a colour and a marker per series, held-out series drawn as lines
with points, a dash per overlaid run, notes inside their own panel and no empty axes before any data."""
from bertlab.app.ui.training.train_charts import (
    FINETUNE_PANELS,
    PRETRAIN_PANELS,
    finetune_figure,
    pretrain_figure,
    pretrain_figures,
)

TRAIN = [{"step": s, "split": "train", "loss": 9.7 - s / 20, "mlm_loss": 9 - s / 20, "mlm_acc": s / 500, "nsp_acc": 0.5, "lr": s * 1e-5,
          "tokens_per_s": 2e4} for s in (10, 20, 30, 40, 50)]
EVAL = [{"step": s, "split": "eval", "mlm_loss": 8 - s / 30, "mlm_acc": s / 400, "unigram_acc": 0.043,
         "nsp_acc": 0.5, "attn_prev": 0.03 + s / 1000, "attn_next": 0.03} for s in (10, 25, 50)]


def by_panel(fig):
    panels = {}
    for t in fig.data:
        panels.setdefault(t.xaxis, []).append(t)
    return panels


def test_each_series_has_its_own_colour_and_held_out_series_are_lines_with_points():
    fig = pretrain_figure({"run": TRAIN + EVAL})
    electra = {"rtd_acc", "rtd_auc", "rtd_recall"}  # an ELECTRA run's second task, not a BERT run's
    assert len(fig.data) == sum(len([x for x in lines if x[1] not in electra]) for _, lines in PRETRAIN_PANELS) == 11
    colours = [t.line.color for t in fig.data]
    assert len(set(colours)) == len(colours), colours  # distinct in the whole figure, so one legend reads
    for split, t in ((("eval" if "held-out" in t.name or "unigram" in t.name or "mass" in t.name else "train"), t)
                     for t in fig.data):
        assert t.marker.color == t.line.color
        assert t.mode == ("lines+markers" if split == "eval" else "lines"), (t.name, t.mode)
    for traces in by_panel(fig).values():
        held = [t for t in traces if t.mode == "lines+markers"]
        assert len({t.marker.symbol for t in held}) == len(held)  # and a marker of its own
    assert next(t for t in fig.data if t.name == "unigram guess").line.dash == "dot"  # the baseline
    assert {t.name for t in fig.data} >= {"train MLM loss", "held-out MLM acc.", "mass on previous token"}
    rtd = [{**r, "rtd_acc": 0.8} for r in TRAIN] + [{**r, "rtd_auc": 0.7, "rtd_recall": 0.3} for r in EVAL]
    both = pretrain_figure({"run": rtd}).data
    assert len(both) == 14 and len({t.line.color for t in both}) == 14  # every series its own colour


def test_overlaid_runs_keep_the_series_colour_and_differ_by_dash():
    fig = pretrain_figure({"a": TRAIN + EVAL, "b": TRAIN[:2] + EVAL[:1]})
    a, b = (next(t for t in fig.data if t.name == f"{r}: held-out MLM loss") for r in "ab")
    assert a.line.color == b.line.color and a.line.dash != b.line.dash and a.mode == b.mode == "lines+markers"
    b_loss = next(t for t in fig.data if t.name == "b: train MLM loss")
    assert b_loss.mode == "lines+markers"  # two points so far: visible as points, not a hidden stub


def test_the_loss_panel_plots_like_with_like():
    """Masked words' loss on both sides: ELECTRA's total (MLM + 50 x replaced-token loss, ~30) would flatten
    every other line, and BERT's (+ NSP) sat ~0.7 above the held-out line with no word of why."""
    rows = [{**r, "loss": 30.0} for r in TRAIN] + EVAL
    fig = pretrain_figure({"run": rows})
    train = next(t for t in fig.data if t.name == "train MLM loss")
    assert list(train.y) == [r["mlm_loss"] for r in TRAIN] and max(train.y) < 10


def test_finetune_figure_tells_train_validation_and_macro_f1_apart():
    rows = [{"step": s, "split": "train", "loss": 1 - s / 100, "acc": 0.5 + s / 200} for s in (5, 10, 15, 20)] + \
           [{"step": s, "split": "eval", "loss": 0.8, "accuracy": 0.7, "macro_f1": 0.65} for s in (10, 20)]
    fig = finetune_figure({"ft": rows})
    assert len(fig.data) == sum(len(lines) for _, lines in FINETUNE_PANELS)
    assert len({t.line.color for t in fig.data}) == len(fig.data)
    assert all(t.mode == "lines+markers" for t in fig.data if t.name.startswith("validation"))


def test_notes_sit_in_their_own_panel_and_no_empty_axes_before_data():
    fig = pretrain_figure({"run": TRAIN})  # no evaluation yet
    note = next(a for a in fig.layout.annotations if a.text == "appears at the first evaluation")
    cell = fig.get_subplot(2, 1)  # "Attention to neighbours"
    assert cell.xaxis.domain[0] < note.x < cell.xaxis.domain[1] and cell.yaxis.domain[0] < note.y < cell.yaxis.domain[1]
    for runs in ({}, {"starting": []}):
        empty = pretrain_figure(runs)
        assert not empty.data and empty.layout.xaxis.visible is False and empty.layout.yaxis.visible is False
        assert "No measurements yet" in empty.layout.annotations[0].text
    figs = pretrain_figures({"run": TRAIN + EVAL})
    titles = [a.text for f in figs for a in f.layout.annotations]
    assert len(figs) == 3 and sorted(titles) == sorted(p for p, _ in PRETRAIN_PANELS)  # each panel once
    assert all(len({t.xaxis for t in f.data}) == 2 for f in figs)  # two panels each, one above the other
