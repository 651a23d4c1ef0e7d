"""The training forms are built from the specs (ui/shared/forms.py): every spec field a form shows reaches the
spec under its own name and survives spec.json, and a new spec field shows without touching a tab."""
import json

import gradio as gr
import pytest

from bertlab.app.ui.shared import forms
from bertlab.app.ui.training import finetune_form, pretrain_tab
from bertlab.train.specs import FinetuneSpec, PretrainSpec

# fields that belong to some members only: changed with a member that has them
CONTEXT = {"generator_size": dict(arch="electra", objective="mlm"), "rtd_weight": dict(arch="electra", objective="mlm"),
           "embedding_size": dict(arch="albert", objective="sop"), "layer_groups": dict(arch="albert", objective="sop"),
           "hidden": dict(heads=1), "heads": dict(hidden=256), "arch": dict(objective=None),
           "gradual_unfreeze": dict(method="full")}


@pytest.fixture(scope="module")
def demo():
    import app
    return app.build_app()


def _endpoint(demo, api_name):
    fn = next(f for f in demo.fns.values() if f.api_name == api_name)
    return dict(zip(fn.input_parameter_names, fn.inputs))


def _other(widget, value):
    """A value of this widget other than `value`, within its range and choices."""
    if isinstance(widget, gr.Checkbox):
        return not value
    if isinstance(widget, (gr.Dropdown, gr.Radio)):
        return next(v for _, v in widget.choices if v != value)
    if isinstance(widget, gr.Textbox):
        return (value or "column") + "_2"
    if isinstance(widget, gr.CheckboxGroup):
        return [v for _, v in widget.choices if v not in value][:2]
    lo, hi = widget.minimum, widget.maximum
    base = 2 if value in (None, 0) else value
    middle = () if lo is None or hi is None else ((lo + hi) / 2,)
    for v in (base * 2, base / 2, base + 1, base - 1, *middle):
        if getattr(widget, "precision", None) == 0:
            v = round(v)
        if v != value and (lo is None or v > lo or v == lo and lo != 0) and (hi is None or v < hi):
            return v
    raise AssertionError(f"no other value for {widget.label}")


@pytest.mark.parametrize("api, tab, spec_cls", [("pretrain_start", pretrain_tab, PretrainSpec),
                                                 ("finetune_start", finetune_form, FinetuneSpec)])
def test_every_field_a_form_shows_reaches_the_spec_and_spec_json(demo, tmp_path, monkeypatch, api, tab, spec_cls):
    """Each spec field on the form, set to another value than the form's, is that value in the spec the
    handler builds and in the spec read back from its spec.json."""
    from bertlab.app import jobs
    monkeypatch.setattr(jobs, "_default", jobs.JobManager(tmp_path / "runs"))
    widgets = _endpoint(demo, api)
    defaults = {k: w.value for k, w in widgets.items() if k not in ("owner", "name", "overlay", "student")}
    shown = [k for k in defaults if k in spec_cls.__dataclass_fields__]
    assert {"steps" if spec_cls is PretrainSpec else "epochs", "seed", "warmup"} <= set(shown)
    assert not set(shown) & set(tab.SERVER)  # where and how a job runs, and what it reads, is the server's
    for name in shown:
        if name in ("corpus", "task", "model"):  # a source the form reads (the tests of the corpus and task boxes)
            continue
        base = {**defaults, **CONTEXT.get(name, {})}
        value = _other(widgets[name], base[name])
        spec = tab.form_spec(**{**base, name: value})
        want = tuple(value) if isinstance(value, list) else pytest.approx(value) if isinstance(value, float) else value
        assert getattr(spec, name) == want, name
        again = spec_cls.from_dict(json.loads(json.dumps(spec.to_dict())))
        assert again == spec and getattr(again, name) == want, name


def test_the_widgets_take_their_label_help_range_and_default_from_the_spec():
    with gr.Blocks():
        form = forms.Form(PretrainSpec, "t")
        steps, rate, ww, arch, more = form("steps"), form("mask_rate"), form("whole_word"), form("arch"), form("max_docs")
        rest = form.rest(hide=pretrain_tab.SERVER)
    f = PretrainSpec.__dataclass_fields__
    assert (steps.label, steps.value, steps.minimum, steps.maximum, steps.precision) == ("Steps", 2000, 1, 10_000_000, 0)
    assert steps.info == f["steps"].metadata["help"]
    assert (rate.minimum, rate.maximum, rate.value) == (0, 1, 0.15)
    assert isinstance(ww, gr.Checkbox) and ww.value is False
    assert isinstance(arch, gr.Dropdown) and [v for _, v in arch.choices] == list(PretrainSpec.ARCHS)
    assert more.value == 0 and more.minimum == 0  # Gradio's number box has no empty state: 0 is "all documents"
    assert "seed" in rest and "corpus" not in rest and "init_from" not in rest and "betas" not in rest
    assert forms.read(PretrainSpec, {"max_docs": 0, "embedding_size": "", "steps": 5, "dropout": 0}) == {
        "max_docs": None, "embedding_size": None, "steps": 5, "dropout": 0}  # dropout 0 is a dropout
    with pytest.raises(ValueError, match="twice"), gr.Blocks():
        twice = forms.Form(PretrainSpec, "u")
        twice("steps")
        twice("steps")


def test_a_new_spec_field_shows_in_more_settings_by_itself(monkeypatch):
    """What the issue asks of a new pre-training option: its field and its consumer, nothing here."""
    import dataclasses

    from bertlab.train.spec_base import opt
    new = dataclasses.make_dataclass("WithNew", [("brand_new", float, opt(0.5, "a new option"))], bases=(PretrainSpec,))
    with gr.Blocks():
        form = forms.Form(new, "t")
        placed = form.rest(hide=pretrain_tab.SERVER)
    assert "brand_new" in placed and form.widgets["brand_new"].value == 0.5


def test_a_form_filling_handler_that_changes_nothing_says_so_in_a_way_gradio_takes(demo, tmp_path, monkeypatch):
    """An empty dict reads to Gradio as one value ("didn't return enough output values", a traceback in
    the server's log): the recipe box showing a run's settings, and a picked run without a pre-training
    spec, change nothing with one skip(), and a run's settings come as a dict of the event's outputs."""
    from browser import run_async

    from bertlab.app import jobs
    from bertlab.train.runs import Run
    monkeypatch.setattr(jobs, "_default", jobs.JobManager(tmp_path / "runs"))
    Run(tmp_path / "runs" / "shown").write_spec(pretrain_tab.default_spec())
    for name, args in (("fill_recipe", (pretrain_tab.FROM_RUN, "bert")), ("show_run", ("no-such-run",)),
                       ("fill_recipe", (next(iter(pretrain_tab.RECIPES)), "albert")), ("show_run", ("shown",))):
        block_fn = next(f for f in demo.fns.values() if f.name == name)
        out = block_fn.fn(*args)
        if isinstance(out, dict) and out != gr.skip():
            assert set(out) <= set(block_fn.outputs) and len(out) > 5, (name, args)
        run_async(demo.postprocess_data(block_fn, out, None))  # what Gradio does with it: no ValueError


def test_an_api_caller_may_leave_out_any_spec_field(demo):
    """Every spec field a form shows has a default in the API (a text box whose field may be None was
    'required' to gradio_client: a Fine-tune call without pair_column failed)."""
    info = demo.get_api_info()["named_endpoints"]
    for api, spec_cls in (("/pretrain_start", PretrainSpec), ("/finetune_start", FinetuneSpec),
                          ("/finetune_compare", FinetuneSpec)):
        required = [p["parameter_name"] for p in info[api]["parameters"] if not p["parameter_has_default"]]
        assert not set(required) & set(spec_cls.__dataclass_fields__), (api, required)


def test_a_handler_taking_its_form_by_name_refuses_an_unknown_name():
    """**form would swallow a misspelt field: the handlers say it, as one message."""
    from bertlab.app.ui.labs import architecture_tab, scaling_tab
    from bertlab.app.ui.training import distill_tab
    with pytest.raises(ValueError, match="unknown field 'stpes'"):
        forms.check_names({"stpes": 1}, ("steps",))
    with pytest.raises(gr.Error, match="unknown field 'batchsize'"):
        scaling_tab.calculate(batchsize=8)
    with pytest.raises(gr.Error, match="unknown field 'layer'"):
        architecture_tab.compute(layer=2)
    with pytest.raises(ValueError, match="unknown field 'alpha'"):
        distill_tab.form_spec(alpha=1.0)


def test_the_options_box_shows_each_method_what_it_reads():
    """The Fine-tune tab's options box follows the records (methods/registry.py): a box shows exactly when
    the picked method reads one of its fields, and every option a method reads has a box (train_pooler,
    read by most, sits under More options for all)."""
    from bertlab.methods.registry import RECORDS
    boxes = finetune_form.OPTION_BOXES
    laid_out = {f for box in boxes for f in box}
    for m in RECORDS:
        assert set(m.options) - laid_out <= {"train_pooler"}, m.name
        shown = [u["visible"] for u in finetune_form.method_fields(m.label)[1:]]
        assert shown == [any(f in m.options for f in box) for box in boxes], m.name
