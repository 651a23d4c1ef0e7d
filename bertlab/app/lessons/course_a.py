"""Lessons 1-5: what BERT reads and what it was trained to do (tokens, masking, fill-mask, sentence
pairs, attention). Each question's inputs are the ones checks.py runs the model on."""
from __future__ import annotations

from ...train.specs import PretrainSpec
from ..ui.text import facts_view, fill_in_turn
from . import checks as C
from .lesson import Lesson, TryIt

MASK_RATE = PretrainSpec.mask_rate  # the share pre-training selects

TOKENS = Lesson(
    1, "tokens", "Tokens: what BERT actually reads",
    explain=r"""BERT never sees words. A **WordPiece** tokenizer cuts text into pieces from a fixed
vocabulary (8,192 pieces in the shipped model, 30,522 in bert-base): a frequent word is one piece, a
rare one is several, and a piece that continues a word starts with `##`. `[CLS]` opens every input
and `[SEP]` closes each sentence. To cut a word, the tokenizer takes the longest piece of the
vocabulary that starts it, then the longest `##` piece that goes on from there, and so on.

The shipped vocabulary was learnt by the `tokenizers` library's `WordPieceTrainer`: starting from
single characters, it glues the **most frequent** pair of neighbouring pieces into a new piece, again
and again (the rule of BPE), until the vocabulary is full. Google's original WordPiece glued instead
the pair with the best score

$$\text{score}(a, b) = \frac{\text{count}(ab)}{\text{count}(a)\,\text{count}(b)}$$

which prefers pairs that occur together more often than their parts alone (a frequent pair of
frequent pieces scores low). Both rules keep frequent words whole; they differ on rare ones.""",
    try_its=(TryIt(f"Tokenize “{C.TOKENS_WORD}”", "tokenize", {"text": C.TOKENS_WORD}),
             TryIt("Tokenize a sentence with rare words and an emoji", "tokenize",
                   {"text": "the overacting in this rewatchable sequel was unwatchable 😍"})),
    expect="""Common words (*the*, *sequel*) stay whole; a word the vocabulary lacks is spelt from
smaller pieces, so almost nothing becomes `[UNK]` — only characters the vocabulary has never seen,
such as many emoji. How a word is split depends on the corpus the tokenizer was trained on: movie
reviews for the shipped model. The pieces need not be the parts a person would see (*re·watch·able*):
they are whatever the vocabulary happened to keep, and another model splits the same word differently.""",
    question=f"Into how many pieces does the model's tokenizer cut the word **{C.TOKENS_WORD}** "
             "(not counting `[CLS]` and `[SEP]`)?",
    placeholder="a number, e.g. 2")

MASKING = Lesson(
    2, "masking", "Masking: how BERT makes its own exercises",
    explain=r"""Pre-training needs no labels: BERT hides words and learns to guess them back. About
15 % of the pieces are *selected*; of those, 80 % become `[MASK]`, 10 % a random piece and 10 % stay
as they are, so the model must check every position, not only the `[MASK]`s. The loss is the
average surprise at the selected positions $M$ of the corrupted text $\tilde{x}$:

$$\mathcal{L}_{\text{MLM}} = -\frac{1}{|M|}\sum_{i \in M} \log p_\theta\left(x_i \mid \tilde{x}\right)$$

The draw is new every time a sentence is seen (*dynamic masking*); a seed makes one draw repeatable.

**What the loss teaches.** At a selected position $i$ the model scores every piece $w$ of the vocabulary
($z_w$), and $p = \operatorname{softmax}(z)$. Since $-\log p_y = \log \sum_w e^{z_w} - z_y$ for the
original piece $y = x_i$, its slope with respect to each score is

$$\frac{\partial \mathcal{L}_{\text{MLM}}}{\partial z_{i,w}} = \frac{1}{|M|}\left(p_{i,w} - [w = x_i]\right)
\quad (i \in M), \qquad \frac{\partial \mathcal{L}_{\text{MLM}}}{\partial z_{i,w}} = 0 \quad (i \notin M)$$

Gradient descent therefore raises the original's score ($p_y - 1 < 0$) and lowers every other piece's
by the probability the model gave it, the wrong favourites most; each row sums to 0. A position that
was not selected carries the label $-100$, which the loss skips, so it sends nothing back to the output
layer: only the """ + f"""{MASK_RATE:.0%} selected teach it directly. The study guides' textbook chapter
turns that into a price: for each position that teaches, a masked-word model reads 1 / {MASK_RATE:.2f} ≈
{1 / MASK_RATE:.1f} tokens, where a model that predicts every token reads one. The Masking lab's
*The gradient of the loss* checks the formula against `torch.autograd` on the shipped model.""",
    try_its=(TryIt(f"Open draw #{C.MASK_SEED} of a review sentence", "masking",
                   {"text": C.MASK_TEXT, "rate": C.MASK_RATE, "whole_word": False, "seed": C.MASK_SEED}),
             TryIt("The same sentence with whole-word masking", "masking",
                   {"text": C.MASK_TEXT, "rate": C.MASK_RATE, "whole_word": True, "seed": C.MASK_SEED}),
             TryIt("The same sentence with SpanBERT's spans (runs of whole words)", "masking",
                   {"text": C.MASK_TEXT, "rate": C.MASK_RATE, "whole_word": False, "seed": C.MASK_SEED,
                    "spans": True}),
             TryIt(f"The gradient of draw #{C.MASK_SEED}'s loss, checked against autograd", "masking",
                   {"text": C.MASK_TEXT, "rate": C.MASK_RATE, "whole_word": False, "seed": C.MASK_SEED,
                    "position": 4, "view": "gradient"})),
    expect="""One draw rarely shows 80/10/10 exactly: on one short sentence a handful of pieces
are selected and each one rolls its own die. The chart below the draw counts many draws, and there the
shares settle near 15 % and 80/10/10. With whole-word masking, all pieces of a word are chosen
together (`overact ##ing`), which makes the guess harder: the model cannot read half a word.
SpanBERT hides runs of whole words instead (drawn 3.8 words long on average, until the 15 % is spent;
on one short sentence that budget is a few pieces, so the runs come out shorter), so a whole phrase must
be rebuilt from what surrounds it; the Race tab's *span* recipe pre-trains with it.""",
    question=f"In draw **#{C.MASK_SEED}** (rate {C.MASK_RATE:.0%}, no whole-word masking), how many of "
             "the selected pieces are replaced by `[MASK]`?",
    placeholder="a number")

FILL = Lesson(
    3, "fill", "Fill-mask: reading from both sides",
    explain=r"""At each `[MASK]` the model's last vector $h_i$ goes through the masked-LM head, a
layer and a product with the word table $W_e$, and a softmax gives every piece of the vocabulary a
probability:

$$p(w \mid \tilde{x}) = \operatorname{softmax}\left(W_e\, g(h_i) + b\right)_w$$

Because every layer lets each token look at **all** the others, $h_i$ depends on the words to the
left *and* to the right of the gap: that is the "B" in BERT (bidirectional). A left-to-right model
such as GPT only sees the words before the gap.

Each gap is guessed from the visible words only, never from the other gaps: with two `[MASK]`s side
by side, each may take its own best word, and the pair need not fit (the tab fills them in one pass
and one at a time, and says what XLNet changed).

""" + f"""The same head can take a quiz, as LAMA (Petroni et al., 2019) quizzed BERT: *What BERT knows*, at the foot
of the Fill-mask tab, asks {len(facts_view.FACTS)} facts such as *the capital of france is [MASK] .* and
shows what a model answers when its training text never stated them.""",
    try_its=(TryIt("The gap with the left context only", "fill-mask", {"text": C.FILL_TEXT, "left_only": True}),
             TryIt("The same gap, reading both sides", "fill-mask", {"text": C.FILL_TEXT, "left_only": False}),
             TryIt("Two gaps side by side: one pass or one at a time", "fill-mask",
                   {"text": fill_in_turn.EXAMPLE, "left_only": False}),
             TryIt("What BERT knows: quiz the model on capitals", "fill-mask", {"relation": "capital"})),
    expect="""With both sides, the words after the gap (*recommend this film*) pull the guesses
towards adverbs that fit "would … recommend": *highly*, *strongly* (or *not*). With the left context
only the model sees just "i would …" and guesses verbs that often follow it: the right-hand words were
doing most of the work.""",
    question="With **Left context only** ticked, what is the model's top guess for "
             f"“{C.FILL_TEXT}”?",
    placeholder="one word")

NSP = Lesson(
    4, "nsp", "Next sentence and sentence order",
    explain=r"""Original BERT had a second task: given `[CLS] A [SEP] B [SEP]`, did B really come next
in the document (half the time) or is it a random sentence? A small head reads the `[CLS]` vector
through the *pooler*:

$$P(\text{IsNext}) = \operatorname{softmax}\left(W\tanh\left(W_p\, h_{[\text{CLS}]} + b_p\right)\right)_{\text{IsNext}}$$

RoBERTa showed the task can be dropped without loss; ALBERT replaced it by **sentence order**
(are A and B in their original order?), which cannot be solved by noticing a change of topic.""",
    try_its=(TryIt("Rank four candidate next sentences", "nsp", {"a": C.NSP_A, "b": "\n".join(C.NSP_B)}),),
    expect="""The two sentences about the film come out on top and the recipe last: a change of topic
is easy to spot. Read the **ranking**, not the yes/no: a small model says "next" to many pairs that
are not (the tab shows how often it is right on held-out pairs). Between the two on-topic sentences
the model often hesitates — telling *which* fitting sentence really came next is the hard part.""",
    question="Which candidate sentence B does the model rank **first** (type the sentence, or its line "
             "number in the list of candidates)?",
    placeholder="the sentence, or its line number (1-4)")

ATTENTION = Lesson(
    5, "attention", "Attention heads: where each token looks",
    explain=r"""In every layer, each head turns every token into a *query*, a *key* and a *value*;
a token's output is a mix of all values, weighted by how well its query matches each key:

$$\operatorname{Attention}(Q, K, V) = \operatorname{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}}\right)V$$

Each row of the softmax shares out 100 % of one token's attention. Heads learn habits (Clark et
al. 2019): some look at the previous or the next token, some "park" on `[CLS]` or `[SEP]`, a few
follow syntax.

Every token scoring every token costs $T^2$ pairs a head: 16.8 million at 4,096 tokens. Longformer
and BigBird compute only a window of neighbours, a few global tokens and (BigBird) a few random
ones; the heads that look nearby lose almost nothing.

A batch is one rectangle, so short sentences are filled with `[PAD]`; the attention mask adds a huge
negative number to the pads' scores before the softmax, so they get weight 0 and each sentence reads
as if it were alone. Averaging a layer's heads shows what that layer mixes as a whole; rollout chains
those averages through all layers.""",
    try_its=(TryIt("Open the sentence at layer 2, head 1", "attention", {"text": C.ATTN_TEXT, "layer": 2, "head": 1}),
             TryIt("What Longformer's and BigBird's patterns keep of these heads", "attention",
                   {"text": C.ATTN_TEXT, "layer": 2, "head": 1, "view": "sparse"}),
             TryIt("Layer 4: the average of all its heads, beside head 1", "attention",
                   {"text": C.ATTN_TEXT, "layer": 4, "head": 1}),
             TryIt("Pad sentences into one batch: what the attention mask changes", "attention", {"view": "padding"})),
    expect="""Open the **Overview** and **Head statistics** views: the squares labelled *previous*
are heads that put most of each token's attention on the token just before it — the nearest word is
the best single clue, and learning to look there is how a model leaves the "bag of words" stage of
pre-training. Sort the statistics table by *previous* to find the strongest one.""",
    question=f"In “{C.ATTN_TEXT}”, which head puts the largest share of attention on the **previous** "
             "token? Answer with its layer and head, e.g. “layer 1 head 2”.",
    placeholder="layer … head …")

LESSONS = [TOKENS, MASKING, FILL, NSP, ATTENTION]
