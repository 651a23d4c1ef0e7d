"""Lesson 3, fill-mask and bidirectional context: the masked-LM head turns the [MASK] position's
last hidden state h into a probability for every vocabulary piece,

    p(w | context) = softmax(E · transform(h) + b)_w      (E: the tied word-embedding table)

and because every token attends to both sides, the words *after* the mask matter. We compare the
guesses with the full sentence and with the left context only (a causal mask, as GPT reads), then
watch the guess form layer by layer (the logit lens).

Run:  python examples/lesson03_fill_mask.py ["a sentence with [MASK] ."]   (about 2 s; no training)
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # a checkout: bertlab sits beside examples/
import bertlab  # noqa: E402
from bertlab.analysis.lens import logit_lens  # noqa: E402
from bertlab.analysis.predict import fill_mask  # noqa: E402

model, tok = bertlab.load_pretrained()  # the shipped default model


def show(guesses):
    return ", ".join(f"{g['token_str']} ({g['score']:.0%})" for g in guesses)


# 1. Top-5 guesses for a few sentences. Each [MASK] gets its own list.
sentences = [sys.argv[1]] if len(sys.argv) > 1 else [
    "the acting was [MASK] .",
    "the special [MASK] were amazing .",
    "i would [MASK] recommend this film .",
]
for s in sentences:
    for i, guesses in enumerate(fill_mask(model, tok, s, top_k=5)):
        print(f"{s}\n  [MASK] #{i + 1}: {show(guesses)}")

# 2. Bidirectional vs left context only: the same words before the gap, opposite endings. Reading both
# sides, the model turns its guess around with the words after the gap; with the left context only it
# cannot, so both sentences get the very same guesses (and poor ones: this model never trained
# that way, it always saw both sides).
pairs = ["this film was [MASK] . i loved it .",
         "this film was [MASK] . i hated it ."]
print("\nboth sides vs left context only:")
for s in pairs:
    both = fill_mask(model, tok, s, top_k=3)[0]
    left = fill_mask(model, tok, s, top_k=3, causal=True)[0]
    print(f"  {s}\n    both sides: {show(both)}\n    left only:  {show(left)}")

# 3. The logit lens: the masked-LM head applied after every layer. The last row is fill-mask's answer;
# the earlier rows show when the right word comes up.
lens = logit_lens(model, tok, sentences[0], top_k=3)
print(f"\nlogit lens on {sentences[0]!r}:")
for name, top in zip(lens["layers"], lens["top"]):
    print(f"  {name:<11} {show(top)}")
