"""Lessons 6-10: what the vectors hold and how models are made (embeddings, pre-training,
fine-tuning, probing, the family and its scaling). Each question's inputs are checks.py's."""
from __future__ import annotations

from ...analysis import shapes
from ...analysis.memory_measure import guides_gap
from ...config import preset
from ...train.specs import PretrainSpec
from ..ui.labs import architecture_tab
from ..ui.shared import links
from . import checks as C
from .lesson import Lesson, TryIt

MASK_RATE = PretrainSpec.mask_rate  # the share BERT's masked-word loss learns from
SPAN_TARGET = shapes.pretraining_pair(512)["targets"]  # T5's output for its 512-token inputs


def sized(family: str, name: str) -> dict:
    """An Architecture link with the preset's whole shape in it: the tab sizes what its boxes hold."""
    values = architecture_tab.form_values(preset(name, model_type=family))
    shape = {k: v for k, v in zip(getattr(links, "ARCH_FIELDS", ()), values) if v is not None}  # E blank: none
    return {"family": family, "preset": name, **shape}

EMBEDDINGS = Lesson(
    6, "embeddings", "Embeddings and word senses",
    explain=r"""BERT's first vector for a piece is a table lookup — the piece's row plus a vector for
its position and one for its segment: $x_i = E_{\text{tok}}[w_i] + E_{\text{pos}}[i] + E_{\text{seg}}[s_i]$.
Each layer then mixes in the other words, so the same word drifts apart in different sentences:
*score* as film music and *score* as a rating. Vectors are compared by the angle between them:

$$\cos(u, v) = \frac{u \cdot v}{\lVert u \rVert\,\lVert v \rVert}$$

1 means the same direction; the lower, the more the contexts changed the word.

**From Word2Vec to ELMo to BERT.** The row $E_{\text{tok}}[w_i]$ is a *static* vector, the kind
Word2Vec and GloVe learn: one per vocabulary entry, so *bank* by a river and *bank* that lends money
start from the very same numbers (cosine 1 until their positions are added). ELMo made the vector
depend on the sentence by running one LSTM left to right and another right to left and joining their
states; BERT's Transformer lets every layer look both ways at once. The *Static vs contextual* view
sets the row and its nearest rows in the table beside the word's vectors in two sentences, layer by layer.

The position vector is all that tells BERT where a word stands: attention itself compares words
regardless of order. BERT learns its position table; the original Transformer fixed it as sines and
cosines of $p / 10000^{2j/H}$. Switch the table off and shuffle a sentence, and every word comes out
with the vector it had before, only elsewhere.""",
    try_its=(TryIt(f"Follow “{C.EMB_WORD}” through four sentences", "embeddings",
                   {"word": C.EMB_WORD, "sentences": "\n".join(C.EMB_SENTENCES)}),
             TryIt("This model's position table beside the sinusoidal one", "embeddings", {"view": "positions"}),
             TryIt(f"Shuffle “{C.SHUFFLE_TEXT}” with positions on and off", "embeddings",
                   {"view": "positions", "shuffle": C.SHUFFLE_TEXT}),
             TryIt("Try “bank”: river or money?", "embeddings",
                   {"word": "bank", "sentences": "we had a picnic on the river bank .\nthe bank refused to lend "
                    "them any money .\nthey sat by the bank of the river all day .\nhe robbed a bank in the first scene ."}),
             TryIt("“bank”: one row of the table, then two vectors in two sentences", "embeddings",
                   {"view": "static", "word": "bank"})),
    expect="""At layer 0 every pair is nearly identical (same word, only the position differs); the
lines fall as the layers add context. In a model that separates the senses, the pairs with the same
sense (S1–S2 music, S3–S4 rating) stay highest. A small model that read only movie reviews may not
separate a sense it rarely saw — the notes under the chart measure it for this model.""",
    question=f"At the **last** layer, which two sentences give “{C.EMB_WORD}” the most similar vectors? "
             "Answer with their numbers, e.g. “S1 and S3”.",
    placeholder="S… and S…")

PRETRAIN = Lesson(
    7, "pretrain", "Pre-train your own BERT",
    explain=r"""A BERT's size is fixed by four numbers: layers $L$, hidden width $H$, heads and the
feed-forward width (usually $4H$). Each layer holds about $12H^2$ weights (attention's four
$H \times H$ matrices and the feed-forward's two $H \times 4H$), and the word table $V \times H$ more:

$$N \approx V H + 12\,L H^2$$

In a small model the word table dominates. Training shows a plateau first: the model guesses the most
common words whatever the context (the *unigram* line), until attention learns to look at the
neighbours and the masked-token accuracy leaves that line.

Pre-training need not start from scratch: a trained model can go on reading text like its task's
(*task-adaptive pre-training*, TAPT: the sentiment sentences, its held-out ones left out), then be
fine-tuned from that run; `examples/domain_adaptation.py` does both and prints the gain with its standard
error. Expect little here: the shipped model already read film reviews, the task's own domain. And the
loss is yours to choose: BERT learns only from the hidden 15 %; *all-tokens* makes every word a target
(the rest only need copying). A loss is one registered function in `bertlab/train/objectives.py`; `examples/custom_objective.py` writes one and trains it beside BERT's.

The same backbone can also learn as GPT does (objective *causal*). A masked position learns from the
words on both sides of its gap; a causal position sees only itself and the words to its left, and learns
to predict the next one. That is why BERT cannot write: at the end of a text there is no right-hand side
for it to read, so it has no next word to give. And a decoder pays the other way: a word's vector never
hears what follows it, so *bank* before *of the river* cannot know which bank it is.""",
    try_its=(TryIt("Open the “tiny and fast” recipe (nothing starts until you press Start)", "pretrain",
                   {"recipe": C.PRETRAIN_RECIPE}),
             TryIt("Size the same model in the Architecture tab", "architecture", sized("bert", "tiny")),
             TryIt("Adapt the shipped model to the sentiment task (TAPT), then fine-tune from the run", "pretrain",
                   {"recipe": C.TAPT_RECIPE}),
             TryIt("Race BERT's loss against all-tokens for the same minutes", "race",
                   {"recipes": "mlm,loss-all-tokens"}),
             TryIt("Ask the shipped BERT to continue a sentence (Generate, under Fill-mask)", "fill-mask",
                   {"opening": "the acting was", "tokens": 10, "sample": "greedy"})),
    expect="""The form shows the model's parameters and training memory before anything runs. If you
start it, the curves begin on the unigram line and, after a few hundred steps, the accuracy leaves it
at the same moment as the attention to neighbouring tokens rises. The *Watch it learn* rows show the
guesses turning from `. the ,` into words that fit.""",
    question="How many parameters (with the pre-training heads) does the model of the **Tiny and fast** "
             "recipe have?",
    placeholder="a number, e.g. 2,345,678 or 2.3M")

FINETUNE = Lesson(
    8, "finetune", "Fine-tuning, and training only a little",
    explain=r"""Fine-tuning puts a small head on the `[CLS]` vector and trains on labelled examples.
*Full* fine-tuning lets every weight change; the **parameter-efficient** methods train a sliver.
LoRA freezes each chosen matrix $W$ ($d_{out} \times d_{in}$) and learns a low-rank update beside it:

$$W' = W + \frac{\alpha}{r}\,B A, \qquad B \in \mathbb{R}^{d_{out}\times r},\; A \in \mathbb{R}^{r \times d_{in}}$$

so it trains $r\,(d_{in} + d_{out})$ numbers per matrix instead of $d_{in}\,d_{out}$; $B$ starts at
zero, so training starts from BERT itself. Here LoRA also adapts the word table ($V \times H$, the
same idea, $r\,(V + H)$ numbers): on a model this small, changing what the words mean is most of
what full fine-tuning gains.

**IA³** trains less still: a vector $l$ that multiplies a layer's activations channel by channel,
$h' = l \odot h$, starting at ones. The paper scales the keys, the values and the feed-forward layer's
inner activations; here, as `peft` does for BERT, the input of the attention's output layer is
scaled too. That is four vectors a layer, $3H + I$ numbers ($H$ hidden, $I$ the feed-forward width):
5,376 a layer and 64,512 in all on bert-base, plus the head.

**Which vector the head reads** is a choice too (*Sentence vector*, under *Your own data and the
task*): the pooler's $\tanh(W h_{[CLS]})$, $h_{[CLS]}$ itself, the mean or max of the tokens, or the
`[CLS]` vectors of the **last four layers side by side** ($4H$ numbers). With a frozen encoder only
the head learns, so what it reads is all it has. BERT's paper joined the last four layers for another
job: every token's vectors, frozen, to find names (CoNLL-2003), where they gave 96.1 F1 on the
development set against 96.4 fine-tuned (its table 7); it did not test sentence vectors that way. On
the shipped model (4 layers, so the last four are all of them) and sentiment, the frozen runs of
`bench/FINETUNE.md` put the mean of the tokens first, 68.7 % (median of 3 seeds), and the last four
`[CLS]` vectors at 66.9 %.

**The learning rate** BERT's paper used for BERT-base, 2e-5 to 5e-5, is ten times too small for this
20-times-smaller model (its default is 3e-4): a narrow model's weights must move further to change
what it computes, in a short run's few steps. Train full fine-tuning at three rates and chart them
(*Runs by learning rate or labelled examples*, under the runs).

What is pre-training worth? *Start the encoder from random weights* trains the same model, on the
same data and budget, with nothing learnt before: the gap between its curve and the pre-trained one's
is what the unlabelled text taught. Train both on 50, 200 and 1,000 labelled sentences (*Labelled
examples to train on*) and place the runs *by labelled examples*: a learning curve each.""",
    try_its=(TryIt("Open LoRA on sentiment (nothing starts until you press Start)", "finetune",
                   {"task": "sentiment", "method": "lora"}),
             TryIt("The same with full fine-tuning", "finetune",
                   {"task": "sentiment", "method": "full"}),
             TryIt("Full fine-tuning from random weights: what pre-training is worth", "finetune",
                   {"task": "sentiment", "method": "full", "init": "random"}),
             TryIt("Full fine-tuning at BERT-base's learning rate (3e-5), ten times under this model's default",
                   "finetune", {"task": "sentiment", "method": "full", "lr": 3e-5}),
             TryIt("A frozen encoder read through its last four layers' [CLS]", "finetune",
                   {"task": "sentiment", "method": "frozen", "pooling": "last4"})),
    expect="""The line under the method says how many parameters it trains: LoRA a few per cent,
full fine-tuning all of them. *Compare methods* trains all eight on the same data and plots score
against parameters trained: on this small model full fine-tuning is best, and LoRA gets close for
a fraction of the weights. (The bench notes in the repository give the measured numbers.)

*What fine-tuning forgot* (under the runs) puts a finished run's encoder back under the masked-word
head it started with: a frozen encoder keeps every masked word it guessed, full fine-tuning at its
default rate nearly all, and ten times that rate forgets most of what pre-training taught. Which
methods would you trust to keep a model's general knowledge?""",
    question=f"How many parameters does **LoRA** (rank {C.LORA['lora_rank']}, its default layers) train "
             "for sentiment on the model in use?",
    placeholder="a number, e.g. 123,456")

PROBING = Lesson(
    9, "probing", "Probing: what each layer knows",
    explain=r"""A *probe* is a small classifier trained on one layer's frozen vectors. If it reads the
part of speech of each word well from layer 2, that information is *decodable* there. But a probe
can also memorise words; so it is compared with a **control task** (each word type gets a fixed random
tag, Hewitt & Liang 2019) that only memorising can solve:

$$\text{selectivity} = \text{accuracy}_{\text{task}} - \text{accuracy}_{\text{control}}$$

High selectivity means the layer holds the property itself, not just which word it is. *The layer story*
(Tenney et al. 2019) asks where each kind of knowledge sits: part of speech, a word's polarity in its
sentence and the sentence's sentiment, probed at every layer of one model.""",
    try_its=(TryIt(f"Probe part of speech on {C.PROBE['sample']} sentences (press Run probes)", "probing",
                   {"task": C.PROBE["task"], "feature": C.PROBE["feature"], "probe": C.PROBE["kind"],
                    "sample": C.PROBE["sample"]}),
             TryIt("The layer story: syntax, semantics and sentiment across layers (press Tell the layer story)",
                   "probing", {"view": "story"})),
    expect="""Layer 0 (the embeddings: word + position, no context) already scores well, because most
words have one usual tag — but its control is high too. Higher layers mix in context, so the control
(pure memorising) drops while the task stays high: selectivity peaks in a middle or upper layer. A
random model of the same shape (compared by default) is a humbling baseline. In the layer story, each
task's center of gravity says where its gains sit; on a model fine-tuned for sentiment (lesson 8), the
sentiment curve should climb in the top layers.""",
    question=f"Which layer is the **most selective** for part of speech ({C.PROBE['sample']} sentences, "
             "linear probe, first piece of each word)?",
    placeholder="a layer number (0 = embeddings)")

GAP = guides_gap()  # the guides' BERT-base training memory beside a measured step (Scaling, memory)

VARIANTS = Lesson(
    10, "variants", "The family and its scaling",
    explain=r"""BERT's descendants change one thing each. **RoBERTa**: more data, no next-sentence task,
a byte-level vocabulary. **DistilBERT**: half the layers, trained to copy BERT. **ELECTRA**: a small
generator fills the masks and the model learns which tokens were replaced — a lesson from every token,
where BERT's masked-word loss learns from the """ + f"{MASK_RATE:.0%} it hides: 1 / {MASK_RATE:.2f} ≈ {1 / MASK_RATE:.1f}× as " + r"""many
positions teach (the Race tab counts it on its own examples).
**ALBERT**: one set of layer weights shared by all layers, and words stored in $E$ dimensions and
projected up: the word table costs

$$V E + E H \quad\text{instead of}\quad V H$$

**DeBERTa** keeps a word's content and its position apart: each layer scores content against the
*relative* distance between two words as well as content against content, which costs parameters for
the distances and compute at every layer (the note under the Architecture tab's table counts both).
BERT is one of three wirings: GPT-2 is a *decoder* (each token sees only its left, so it can write) and T5
an *encoder-decoder* (it reads both ways, then writes the hidden spans), and the Architecture tab's
*Encoder, decoder, encoder-decoder* table counts their parameters by part against their published sizes.

Scaling laws then say what size to train: compute is about $C \approx 6ND$ FLOPs for $N$ parameters
and $D$ tokens, and Chinchilla's optimum is about $D \approx 20N$. A **mixture of experts** breaks the
link between the two: $E$ copies of a layer's feed-forward and a router that sends each token to $k$ of
them store about $E\times$ those weights while a token costs only $k$ of them (Architecture, *Mixture of
experts*).""",
    try_its=(TryIt("Size ALBERT base", "architecture", sized(*C.VARIANT)),
             TryIt("Size BERT base beside it (then open Mixture of experts under the charts)", "architecture",
                   sized("bert", "base")),
             TryIt("What pre-training BERT base cost", "scaling", {"model_size": "base"}),
             TryIt("BERT beside GPT-2 and T5 (scroll to Encoder, decoder, encoder-decoder)", "architecture",
                   {"shapes_len": 512, "shapes_target": SPAN_TARGET})),
    expect="""ALBERT base runs exactly as many layers as BERT base (the same compute per sentence) but
stores about a tenth of the weights: one layer's weights, and a thin word table. The table under the
charts puts every published model beside a BERT of the same shape. The Scaling tab turns a size and
a number of tokens into FLOPs, hours and a price. The guides put training BERT base at """
    f"{GAP['guide']['batch_size']} × {GAP['guide']['seq_len']} tokens in fp32 at about "
    f"{GAP['guide']['total'] / 1e9:.1f} GB; a step measured on a CPU, drawn out to that size, takes "
    f"{GAP['measured'] / 1e9:.1f} GB, because there every layer keeps its attention maps "
    f"({GAP['estimate']['attention_maps'] / 1e9:.1f} GB in all), which bertlab's fused attention on a GPU does "
    f"not ({GAP['estimate']['gpu'] / 1e9:.1f} GB estimated): the Scaling tab's *Memory, measured* section names "
    "the assumptions that differ.",
    question="How many parameters does **ALBERT base** have without its pre-training heads?",
    placeholder="a number, e.g. 12.3M")

LESSONS = [EMBEDDINGS, PRETRAIN, FINETUNE, PROBING, VARIANTS]
