"""Charts that say what their numbers are (issue 42, items 6 and 8): log axes label every tick in full,
and close points' labels sit apart."""
import math

from bertlab.app.ui.shared.common import away_from_neighbours, log_ticks, si


def test_log_axes_label_every_tick_in_full():
    ticks = log_ticks(25, 400, lambda v: f"{v:,.0f}")  # the learning curve by labelled examples
    assert ticks["tickvals"] == [50, 100, 200] and ticks["ticktext"] == ["50", "100", "200"]  # was "5", "", "2"
    short = log_ticks(3, 8)  # a loss axis within a decade: every whole number, none a bare digit of a bigger one
    assert short["tickvals"] == [3, 4, 5, 6, 7, 8]
    assert log_ticks(1e5, 1e10, si)["ticktext"] == ["100k", "1M", "10M", "100M", "1G", "10G"]  # decades only
    lr = log_ticks(1e-5, 1e-3, lambda v: f"{v:.0e}")
    assert lr["ticktext"] == ["1e-05", "2e-05", "5e-05", "1e-04", "2e-04", "5e-04", "1e-03"]
    assert log_ticks(0, 10) == {} and log_ticks(5, 5) == {}


def test_the_learning_rate_and_examples_chart_uses_them():
    from bertlab.app.ui.training import finetune_rates
    pts = [{"method": "full", "init": "pretrained", "start": "shipped", "examples": n, "lr": 5e-4, "score": s,
            "metric": "accuracy"} for n, s in ((50, 0.6), (200, 0.7), (800, 0.8))]
    fig = finetune_rates.figure(pts, ["a", "b", "c"], by="labelled examples")
    ax = fig.layout.xaxis
    assert ax.type == "log" and list(ax.ticktext) == [f"{v:,.0f}" for v in ax.tickvals]
    assert {50, 100, 200, 500, 1000} <= set(ax.tickvals)


def test_close_points_put_their_labels_apart():
    assert len(set(away_from_neighbours([(1, 1), (1, 1), (1, 1)]))) == 3  # one place: three sides
    where = away_from_neighbours([(0, 0), (0.01, 0.0), (5, 5)])
    assert where[0] != where[1]
    low, high, _ = away_from_neighbours([(0, 0), (0, 1), (3, 0)])
    assert low != "top center" and high == "top center"  # neither label toward the other point


def test_the_variants_chart_keeps_bert_and_roberta_base_apart():
    from bertlab.app.ui.labs import architecture_variants as av
    _, fig, data = av.variants(128)
    where = {}
    for t in fig.data:
        for name, pos, x, y in zip(t.text, t.textposition, t.x, t.y):
            where[(t.name, name)] = (pos, math.log10(x), math.log10(y))
    bases = [v[0] for (fam, n), v in where.items() if n == "base" and fam in ("BERT", "RoBERTa", "ELECTRA")]
    assert len(bases) == 3 and len(set(bases)) == 3, where  # BERT, RoBERTa, ELECTRA base: three sides
