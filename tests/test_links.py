"""Deep links without a browser: a link's values are checked against the components they fill (strangers
send links), every tab registers its inputs under the names of links.PARAMS, and the events that run when
the page opens see the link's values (so the first drawing is the linked view)."""
import json
import types

import gradio as gr
import pytest
from gradio.context import LocalContext

from bertlab.app.ui.shared import links


def _registry():
    with gr.Blocks() as demo:
        text = gr.Textbox(max_length=20_000)
        layer = gr.Slider(1, 4, value=2, step=1)
        rate = gr.Slider(0.01, 1.0, value=0.15, step=0.01)
        hide = gr.Checkbox()
        seed = gr.Number(0, precision=0, minimum=0)
        pooling = gr.Dropdown([("mean of the tokens", "mean"), ("[CLS]", "cls")], value="mean")
        lesson = gr.Radio(["1", "2", "3"], value="1")
        links.register("attention", text=text, layer=layer, hide=hide)
        links.register("masking", rate=rate, seed=seed)
        links.register("embeddings", pooling=pooling)
        links.register("lessons", lesson=lesson)
    return demo.__dict__["_bl_links"]


def test_url_round_trip_and_its_contract():
    reg = _registry()
    q = links.url("attention", text="the cat sat .\nnext line & more", layer=3, hide=True)
    assert q.startswith("?tab=attention&")
    import urllib.parse
    link = links.parse(dict(urllib.parse.parse_qsl(q[1:])), reg)
    assert link.tab == "attention" and not link.problems
    assert link.values == {"text": "the cat sat .\nnext line & more", "layer": 3, "hide": True}
    assert isinstance(link.values["layer"], int)
    with pytest.raises(ValueError, match="takes text, pair"):
        links.url("attention", colour="red")
    with pytest.raises(ValueError, match="No tab"):
        links.url("nowhere")
    with pytest.raises(ValueError, match="PARAMS"):
        with gr.Blocks():
            links.register("attention", colour=gr.Textbox())


def test_strangers_values_are_checked_clamped_or_refused():
    reg = _registry()
    link = links.parse({"tab": "attention", "text": "x" * 5000, "layer": "99", "hide": "maybe"}, reg)
    assert link.tab == "attention" and link.values == {"layer": 4}  # clamped to the slider's range
    msg = link.message()
    assert "text has 5,000 characters" in msg and "layer 99 is outside 1 to 4: 4 is used" in msg
    assert "hide must be 1 or 0" in msg
    link = links.parse({"tab": "attention", "layer": "nan"}, reg)
    assert link.values == {} and "finite" in link.message()
    link = links.parse({"tab": "attention", "layer": "two"}, reg)
    assert link.values == {} and "must be a number" in link.message()
    link = links.parse({"tab": "masking", "rate": "0.234", "seed": "-3.7"}, reg)
    assert link.values == {"rate": 0.23, "seed": 0} and "seed" in link.message()  # on the slider's steps; min 0
    link = links.parse({"tab": "embeddings", "pooling": "[CLS]"}, reg)  # a label or a value
    assert link.values == {"pooling": "cls"} and not link.problems
    link = links.parse({"tab": "embeddings", "pooling": "me"}, reg)  # the start of one choice
    assert link.values == {"pooling": "mean"}
    link = links.parse({"tab": "embeddings", "pooling": "max"}, reg)
    assert link.values == {} and "not one of the choices (mean, cls)" in link.message()
    link = links.parse({"tab": "attention", "text": "a\x00b\x1bc\td"}, reg)
    assert link.values["text"] == "abc\td"  # control characters dropped, tabs and newlines kept


def test_tabs_unknown_names_lessons_and_the_model():
    reg = _registry()
    link = links.parse({"tab": "nope", "layer": "2"}, reg, ["tokenize", "attention"])
    assert link.tab is None and link.values == {}
    assert "no tab 'nope'; the tabs are tokenize, attention" in link.message()
    link = links.parse({"tab": "ATTENTION", "utm_source": "mail", "colour": "red"}, reg)
    assert link.tab == "attention" and not link.problems  # unknown names: ignored without a word
    link = links.parse({"lesson": "2"}, reg)
    assert link.tab == "lessons" and link.values == {"lesson": "2"}
    link = links.parse({"model": "prajjwal1/bert-tiny"}, reg)
    assert link.tab is None and link.model == "prajjwal1/bert-tiny"
    assert links.parse({"model": "x" * 300}, reg).model is None
    assert links.parse({}, reg).tab is None and not links.parse({}, reg).problems
    many = {f"k{i}": "1" for i in range(100)} | {"tab": "attention"}
    assert links.parse(many, reg).tab is None  # only the first MAX_PARAMS names are read


@pytest.fixture(scope="module")
def demo():
    import app
    return app.build_app()


def test_every_tab_registers_under_its_keys_with_a_copy_button(demo):
    import app
    reg = demo.__dict__["_bl_links"]
    keys = [links.KEYS[title] for title, _ in app.TABS]
    for key in keys:
        assert key in reg and set(reg[key].get("inputs", {})) <= set(links.PARAMS[key]), key
        assert "copy" in reg[key], f"the {key} tab has no copy-link button"
        if key != "lessons":
            assert reg[key]["inputs"], key
    assert set(links.PARAMS) - {"lessons"} <= set(keys)


def _call_with_link(block_fn, args, query):
    """Call an event's function as Gradio does, inside a request for the page address `query`."""
    token = LocalContext.request.set(types.SimpleNamespace(query_params=query))
    try:
        return block_fn.fn(*args)
    finally:
        LocalContext.request.reset(token)


def _inside(demo, comp, tab_block) -> bool:
    block = comp
    while block is not None:
        if block is tab_block:
            return True
        block = getattr(block, "parent", None)
    return False


def test_opening_the_page_fills_only_the_first_tab(demo):
    """Each tab draws its view when it is opened: filling every tab as the page opened sent some sixty
    results into tabs not yet drawn, and the browser walked its whole page for each (a 2-core laptop's
    page froze ~25 s before a tab could be clicked)."""
    tabs = next(b for b in demo.blocks.values() if isinstance(b, gr.Tabs) and b.elem_id == "bl-tabs")
    first, *others = [c for c in tabs.children if isinstance(c, gr.Tab)]
    on_open = [f for f in demo.fns.values() if links._opens_page(demo, f)]
    assert on_open
    for f in on_open:
        for c in f.outputs:
            assert not any(_inside(demo, c, t) for t in others), (f.name, c)
    # the views are drawn when their tab opens: the attention tab's view, for one
    analyse = [f for f in demo.fns.values() if f.name == "analyse"]
    attention = next(t for t in others if t.id == "attention")
    assert any(t == (attention._id, "select") for f in analyse for t in f.targets)


def test_a_link_fills_its_tab_then_selects_it(demo):
    reg = demo.__dict__["_bl_links"]
    comps = reg["attention"]["inputs"]
    apply = next(f for f in demo.fns.values() if f.name == "apply")
    text = "the dog chased the ball ."
    query = {"tab": "attention", "text": text, "layer": "3", "head": "2"}
    picker_out, held = apply.fn(types.SimpleNamespace(query_params=query))
    assert held and isinstance(picker_out, type(gr.skip()))
    fill = next(f for f in demo.fns.values() if f.name == "fill")
    out = dict(zip([c._id for c in fill.outputs], fill.fn(held)))
    assert out[comps["text"]._id] == text and out[comps["layer"]._id] == 3 and out[comps["head"]._id] == 2
    other = reg["tokenize"]["inputs"]["text"]._id
    assert isinstance(out[other], type(gr.skip()))  # another tab's inputs are left alone
    select = next(f for f in demo.fns.values() if f.name == "select")
    assert select.fn(held).selected == "attention"
    assert select.outputs[0].elem_id == "bl-tabs"  # the app's own tabs
    # no link: nothing is held, so nothing is filled or selected
    assert all(isinstance(v, type(gr.skip())) for v in apply.fn(types.SimpleNamespace(query_params={})))
    # on a training tab a link changes only what describes the form: no page-opening event starts a job
    starts = [f.name for f in demo.fns.values() if links._opens_page(demo, f) and "start" in (f.name or "")]
    assert not starts, starts
    # the events that do run as the page opens see a linked model
    linked = set().union(*(getattr(f.fn, "substitutes", set()) for f in demo.fns.values()))
    assert demo.__dict__["_bl_links"]["lessons"]["inputs"]["lesson"]._id in linked


def test_every_try_it_link_of_the_lessons_is_valid(demo):
    """The Lessons tab's "Try it" links fill real inputs with values those inputs take, without a warning."""
    import urllib.parse

    from bertlab.app.lessons import LESSONS
    reg = demo.__dict__["_bl_links"]
    tries = [t for lesson in LESSONS for t in lesson.try_its]
    assert tries
    for t in tries:
        link = links.parse(dict(urllib.parse.parse_qsl(links.url(t.tab, **t.params)[1:])), reg)
        assert link.tab == t.tab and not link.problems, (t, link.problems)
        assert set(link.values) == set(t.params) - {"model"}, (t, link.values)  # every name is a registered input


def test_a_linked_inputs_change_listeners_run_once_the_link_is_applied(demo):
    """A browser does not fire .change for a tab it has not drawn yet: the Pre-train recipe must still
    fill the form, the Fine-tune method still show its own settings."""
    from bertlab.app.ui.training import pretrain_tab
    run = next(f for f in demo.fns.values() if f.name == "run_listeners")
    slot = {c._id: i for i, c in enumerate(run.outputs)}
    recipe = list(pretrain_tab.RECIPES)[1]
    arch = demo.__dict__["_bl_links"]["pretrain"]["inputs"]["arch"]
    fill = next(f for f in demo.fns.values() if f.name == "fill_recipe")
    held = json.dumps({"tab": "pretrain", "values": {"recipe": recipe}})
    out = run.fn(held)
    want = {k: 0 if v is None else v for k, v in pretrain_tab.recipe_values(recipe, arch.value).items()}  # 0: all docs
    assert {c.elem_id.removeprefix("pretrain-").replace("-", "_"): out[slot[c._id]] for c in fill.outputs} == want
    method_out = next(f for f in demo.fns.values() if f.name == "method_fields").outputs
    out = run.fn(json.dumps({"tab": "finetune", "values": {"method": "lora"}}))
    assert "LoRA" in out[slot[method_out[0]._id]]  # the method's note
    out = run.fn("")
    assert all(isinstance(v, type(gr.skip())) for v in out)  # no link: nothing changes
    # a reload keeps ?tab=pretrain alone: refilling the form from the default recipe raced the settings of
    # the run the reopened page shows (Steps 800 under "The settings of the run shown below")
    out = run.fn(json.dumps({"tab": "pretrain", "values": {}}))
    assert all(isinstance(v, type(gr.skip())) for v in out)


def test_a_links_warning_shows_what_it_quotes_as_text(demo, monkeypatch):
    """Gradio's toasts render HTML: `?model=<img src=/pixel1>` made every reader's browser fetch it, and
    `?tab=<a href=/phish>` showed a live link. The warning quotes them as text."""
    said = []
    monkeypatch.setattr(gr, "Warning", lambda msg, *a, **k: said.append(msg))
    apply = next(f for f in demo.fns.values() if f.name == "apply")
    apply.fn(types.SimpleNamespace(query_params={"tab": "<a href=/phish>log in</a>", "model": "<img src=/pixel1>"}))
    assert len(said) == 1 and "<" not in said[0] and "&lt;a href=/phish&gt;" in said[0], said
    assert "&lt;img src=/pixel1&gt;" in said[0]


def test_a_tabs_opening_run_gives_way_to_what_the_student_asked():
    """A slow opening run (defaults) that ends after the student's own request must not draw over it."""
    import threading

    from bertlab.app.ui.shared import common
    started, release = threading.Event(), threading.Event()

    def view(text):
        if text == "default":
            started.set()
            release.wait(5)
        return f"result of {text}", text
    opening, asked = common._opening(view, "demo-view", 2), common._asked(view, "demo-view")
    out = {}

    def in_session(fn, arg, name):
        token = LocalContext.request.set(types.SimpleNamespace(session_hash="browser-1"))
        try:
            out[name] = fn(arg)
        finally:
            LocalContext.request.reset(token)
    t = threading.Thread(target=in_session, args=(opening, "default", "opening"))
    t.start()
    started.wait(5)
    in_session(asked, "mine", "asked")  # the student asks while the opening run is still busy
    release.set()
    t.join(5)
    assert out["asked"] == ("result of mine", "mine")
    assert all(isinstance(v, type(gr.skip())) for v in out["opening"]), out["opening"]
    in_session(opening, "default", "again")  # an opening run nothing overtook draws as usual
    assert out["again"] == ("result of default", "default")


def test_a_checkbox_group_takes_comma_separated_choices():
    """The Race tab's recipes from a link (issue 32, item 15: a lesson races a registered loss)."""
    box = gr.CheckboxGroup([("BERT: MLM only", "mlm"), ("all tokens", "loss-all-tokens"), ("ELECTRA", "electra")])
    assert links.check_value(box, "mlm, loss-all-tokens,mlm", "recipes") == (["mlm", "loss-all-tokens"], "")
    assert links.check_value(box, "ELECTRA", "recipes") == (["electra"], "")  # a label reads as its value
    value, problem = links.check_value(box, "mlm,<b>x</b>", "recipes")
    assert value is None and "must be choices from: mlm, loss-all-tokens, electra" in problem
    assert links.check_value(box, " , ", "recipes")[0] is None
