"""Each lesson's question, answered by the model in use: the same function the lesson's tab calls on
the same inputs, so the page the student reads and the check always agree. No answer key where the
model decides; every check is one small forward pass or arithmetic (the probe is cached per model)."""
from __future__ import annotations

from ... import family
from ...analysis import attention_views as av
from ...analysis import embeddings as E
from ...analysis import sizing
from ...analysis.predict import fill_mask, nsp_scores
from ...data import masking_lab
from ...train.finetune import trainable_estimate
from ..ui.labs import architecture_tab, probe_tab
from ..ui.shared import models
from ..ui.shared.common import load_model
from ..ui.training import finetune_form, pretrain_tab
from .answers import Verdict, clean, integers, numbers, same_number, words

# The inputs every lesson's "Try it" fills and its question is about (the lessons' text quotes them).
TOKENS_WORD = "rewatchable"
MASK_TEXT = "the overacting in this rewatchable sequel was annoying , but the soundtrack was unforgettable ."
MASK_RATE, MASK_SEED = 0.15, 3
FILL_TEXT = "i would [MASK] recommend this film to anyone ."
NSP_A = "i went to see the new batman film last night ."
NSP_B = ["the acting was great and the story kept me hooked until the end .", "it was much better than the first one .",
         "the stock market fell by two percent on tuesday .", "add the flour and stir until the dough is smooth ."]
ATTN_TEXT = "the cat sat on the mat because it was tired ."
EMB_WORD = "score"
EMB_SENTENCES = ["the score swells beautifully in the final scene .", "the score by hans zimmer gave me chills .",
                 "my score for this movie is 8 out of 10 .", "a score of three stars is too generous ."]
SHUFFLE_TEXT = "the man bit the dog ."  # positions off: the same vectors as "the dog bit the man"
PRETRAIN_RECIPE = next(r for r in pretrain_tab.RECIPES if r.startswith("Tiny"))
TAPT_RECIPE = next(r for r in pretrain_tab.RECIPES if "(TAPT)" in r)
LORA = dict(method="LoRA", lora_rank=8, lora_alpha=16)
PROBE = dict(task="pos", feature="first", kind="linear", sample=50)  # small: quick, and the layers already rank clearly
VARIANT = ("albert", "base")
SARCASM_TASK = "example-sarcasm"  # examples/sarcasm.csv, split as the Fine-tune tab splits it
TIE = 0.005  # two heads or pairs this close are the same answer


def _code(s: str) -> str:
    return "`" + str(s).replace("`", "'") + "`"


def _no(model_kind: str) -> Verdict:
    return Verdict(None, f"The model in use is {model_kind}: it cannot answer this question. Pick the shipped "
                         "model (or another BERT) at the top of the page and check again.")


def tokens(answer: str, choice) -> Verdict:
    """How many pieces does the word become?"""
    _, tok = load_model(choice)
    enc = tok.encode(TOKENS_WORD)
    pieces = [tok.piece_text(i) for i, s in zip(enc.ids, enc.special_tokens_mask) if not s]
    said = integers(answer)
    ok = (said[:1] == [len(pieces)]) or words(answer) == words(" ".join(pieces))
    return Verdict(ok, f"This model's tokenizer splits {_code(TOKENS_WORD)} into **{len(pieces)} piece"
                       f"{'s' * (len(pieces) != 1)}**: {' · '.join(map(_code, pieces))} (and adds "
                       f"{_code(enc.tokens[0])} and {_code(enc.tokens[-1])} around the text).", str(len(pieces)))


def masking(answer: str, choice) -> Verdict:
    """How many of the selected pieces does this draw replace by [MASK]?"""
    _, tok = load_model(choice)
    enc = tok.encode(MASK_TEXT)
    draw = masking_lab.preview(tok, enc.ids, MASK_RATE, False, MASK_SEED)
    picked = [(enc.tokens[i], r, draw["input_ids"][i]) for i, r in enumerate(draw["rule"]) if r]
    n_mask = sum(r == masking_lab.MASKED for _, r, _ in picked)
    said = {masking_lab.MASKED: "→ [MASK]", masking_lab.RANDOM: "→ random", masking_lab.KEPT: "kept"}
    listed = ", ".join(f"{_code(t)} {said[r]}" + (f" {_code(tok.id_to_token(i))}" if r == masking_lab.RANDOM else "")
                       for t, r, i in picked)
    return Verdict(integers(answer)[:1] == [n_mask],
                   f"Draw #{MASK_SEED} selects {len(picked)} of {draw['eligible']} pieces: {listed}. "
                   f"**{n_mask}** became [MASK].", str(n_mask))


def fill(answer: str, choice) -> Verdict:
    """The top guess for the gap with the left context only."""
    model, tok = load_model(choice)
    if family.is_discriminator(model):
        return _no(f"a {family.family_name(model.config)} discriminator (it has no masked-word head)")
    text = FILL_TEXT.replace("[MASK]", tok.id_to_token(tok.mask_token_id))
    left = fill_mask(model, tok, text, top_k=3, causal=True)[0]
    both = fill_mask(model, tok, text, top_k=3, causal=False)[0]
    top = left[0]["token_str"]
    show = lambda r: ", ".join(f"{_code(x['token_str'])} {x['score']:.0%}" for x in r)  # noqa: E731
    return Verdict(clean(answer) == clean(top),
                   f"With the left context only the model's guesses are {show(left)}: top guess **{top}**. "
                   f"Reading both sides: {show(both)}.", top)


def next_sentence(answer: str, choice) -> Verdict:
    """Which candidate B does the model rank first (its text, or its line number)?"""
    model, tok = load_model(choice)
    if not family.MEMBERS[model.config.model_type].pair_head:
        return _no(f"a {model.config.model_type} model, trained without a sentence-pair task")
    scores = nsp_scores(model, tok, NSP_A, NSP_B)
    best = max(range(len(NSP_B)), key=lambda i: scores[i])
    said, nums = words(answer), integers(answer)
    ok = said == words(NSP_B[best]) or (len(said) > 0 and nums[:1] == [best + 1] and said.isdigit()) or \
        (len(said.split()) >= 3 and said in words(NSP_B[best]) and sum(said in words(b) for b in NSP_B) == 1)
    order = sorted(range(len(NSP_B)), key=lambda i: -scores[i])
    ranking = "; ".join(f"{k + 1}. line {i + 1} ({scores[i]:.0%})" for k, i in enumerate(order))
    return Verdict(ok, f"The model ranks candidate **line {best + 1}** first: “{NSP_B[best]}” "
                       f"({scores[best]:.0%}). Full ranking: {ranking}.", NSP_B[best])


def attention(answer: str, choice) -> Verdict:
    """Which layer and head puts the most attention on the previous token?"""
    model, tok = load_model(choice)
    stats = av.stats_table(av.run_attention(model, tok, ATTN_TEXT))
    ranked = sorted(stats, key=lambda s: -s["prev"])
    nums = integers(answer)
    pick = next((s for s in stats if nums[:2] == [s["layer"], s["head"]]), None)
    ok = pick is not None and pick["prev"] >= ranked[0]["prev"] - TIE
    top = ", ".join(f"layer {s['layer']} head {s['head']} ({s['prev']:.2f})" for s in ranked[:3])
    mine = f" Layer {pick['layer']} head {pick['head']} puts {pick['prev']:.2f} there." if pick and not ok else ""
    return Verdict(ok, f"Share of attention on the previous token, averaged over the tokens: {top}.{mine}",
                   f"layer {ranked[0]['layer']} head {ranked[0]['head']}")


def embeddings(answer: str, choice) -> Verdict:
    """At the last layer, which two sentences give the word the most similar vectors?"""
    model, tok = load_model(choice)
    res = E.analyze(model, tok, EMB_SENTENCES, EMB_WORD, layer=-1)
    pairs = sorted(res["word"]["pairs"], key=lambda p: -p["similarity"][-1])
    nums = sorted(integers(answer)[:2])
    best = pairs[0]["similarity"][-1]
    ok = any(nums == [p["a"], p["b"]] and p["similarity"][-1] >= best - TIE for p in pairs)
    shown = ", ".join(f"S{p['a']}–S{p['b']} {p['similarity'][-1]:.3f}" for p in pairs)
    return Verdict(ok, f"Cosine similarity of “{EMB_WORD}” at layer {res['num_layers']} (the last): {shown}. "
                       f"Senses: S1, S2 film music; S3, S4 a rating.", f"S{pairs[0]['a']} and S{pairs[0]['b']}")


def _count(answer: str, truth: int, what: str, extra: str = "") -> Verdict:
    ok = same_number(answer, truth)
    hint = f" Your answer: {ok}." if isinstance(ok, str) else ""
    return Verdict(ok is True, f"{what} **{truth:,}** ({sizing.humanize(truth)}){extra}.{hint}", f"{truth:,}")


def pretrain(answer: str, choice) -> Verdict:
    """How many parameters has the model the recipe would train?"""
    spec = pretrain_tab.form_spec(**pretrain_tab.recipe_values(PRETRAIN_RECIPE))  # the form's vocabulary: 8,192
    c = pretrain_tab.model_config(spec)
    layers, hidden = c.num_hidden_layers, c.hidden_size
    p = sizing.param_counts(c)
    v = _count(answer, p["total"], f"The recipe's BERT ({layers} layers, hidden {hidden}, vocabulary 8,192) "
                                   f"has, with its pre-training heads,")
    v.evidence += (f" The word table alone is {c.vocab_size:,} × {hidden} = {c.vocab_size * hidden:,}: "
                   f"{c.vocab_size * hidden / p['total']:.0%} of the model.")
    return v


def finetune(answer: str, choice) -> Verdict:
    """How many parameters does LoRA train on the model in use, for sentiment?"""
    model, _ = load_model(choice)
    spec = finetune_form.spec_from(**LORA)
    trainable, total = trainable_estimate(model.config, "sequence", 2, spec)
    return _count(answer, trainable, f"LoRA rank {LORA['lora_rank']} on the model in use trains",
                  f" of its {total:,} parameters ({trainable / total:.2%})")


def probing(answer: str, choice) -> Verdict:
    """Which layer is the most selective for part of speech (task accuracy minus control accuracy)?"""
    folder = models.resolve(choice)
    r = probe_tab.probe_model(choice or models.DEFAULT, folder, False, PROBE["task"], None, PROBE["kind"], PROBE["sample"])
    best = r["most_selective_layer"]
    sel = [x["selectivity"] for x in r["layers"]]
    nums = integers(answer)
    ok = bool(nums) and 0 <= nums[0] < len(sel) and sel[nums[0]] >= sel[best] - TIE
    per = ", ".join(f"layer {i}: {100 * x['acc']:.1f} % − {100 * x['control_acc']:.1f} % = {100 * x['selectivity']:+.1f}"
                    for i, x in enumerate(r["layers"]))
    return Verdict(ok, f"Accuracy − control accuracy per layer ({PROBE['sample']} sentences): {per}. Most selective: "
                       f"**layer {best}**; best accuracy: layer {r['best_layer']}.", f"layer {best}")


def variants(answer: str, choice) -> Verdict:
    """How many parameters has ALBERT base without its pre-training heads?"""
    family, name = VARIANT
    values = architecture_tab.fill_preset(name, family)
    c = architecture_tab.make_config(family, **dict(zip(architecture_tab.SHAPE, values)))
    own = sizing.param_counts(c)["encoder_total"]
    bert = sizing.param_counts(sizing.as_bert(c))["encoder_total"]
    v = _count(answer, own, f"ALBERT {name} without its pre-training heads has")
    v.evidence += (f" A plain BERT of the same shape has {bert:,} ({sizing.humanize(bert)}): ALBERT stores "
                   f"{sizing.layers_stored(c)} layer weight set for {sizing.layers_run(c)} layers and keeps words in "
                   f"{c.embedding_dim} dimensions.")
    return v


def sarcasm(answer: str, choice) -> Verdict:
    """What does always answering the commonest label score on the sarcasm task's held-out sentences?
    A percentage, a share (0.533) or a count ("32 of 60") all say it."""
    _, tok = load_model(choice)
    d = finetune_form.example_split(SARCASM_TASK, tok=tok)
    n_top, truth = d["held_counts"][d["majority_label"]], 100 * d["majority"]
    found, nums = numbers(answer), integers(answer)
    ok = nums[:2] == [n_top, d["held"]] and not clean(answer).startswith(("0.", "."))
    if found and not ok:
        x, half = found[0]
        if x <= 1 and "%" not in str(answer):  # a share: 0.53
            x, half = 100 * x, 100 * half
        ok = abs(x - truth) <= half + 1e-9 and half <= 0.5
    held = " · ".join(f"{n} {label}" for label, n in d["held_counts"].items())
    se = 100 * (0.25 / d["held"]) ** 0.5
    return Verdict(ok, f"The run holds out {d['held']} of the {d['texts']} sentences (validation share "
                       f"{d['val_frac']:g}, seed {d['seed']}): {held}. Always answering *{d['majority_label']}* "
                       f"gets {n_top} of {d['held']} right: **{truth:.1f} %**. One standard error on {d['held']} "
                       f"sentences is about {se:.1f} points: a model's lead over this line means little until it "
                       f"is two standard errors or so.", f"{truth:.1f} %")


CHECKS = {"tokens": tokens, "masking": masking, "fill": fill, "nsp": next_sentence, "attention": attention,
          "embeddings": embeddings, "pretrain": pretrain, "finetune": finetune, "probing": probing,
          "variants": variants, "sarcasm": sarcasm}
