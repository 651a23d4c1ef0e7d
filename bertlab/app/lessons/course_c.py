"""Lesson 11: a task of the student's own, start to finish: a sarcasm detector on a small data set
written for bertlab (examples/sarcasm.csv), and the design choices it asks for. The question's inputs
are checks.py's; the data's figures come from the file and the Fine-tune form's split, never typed."""
from __future__ import annotations

import csv
import math
from collections import Counter

from ...train.specs import FinetuneSpec
from ..ui.training.finetune_form import EXAMPLES, EXAMPLES_DIR
from . import checks as C
from .lesson import Lesson, TryIt

DATA_FILE, _OWN = EXAMPLES[C.SARCASM_TASK]
HELD_SHARE = _OWN["val_frac"]


def _labels() -> Counter:
    """Each label's rows in the shipped file (none if the checkout lacks it)."""
    path = EXAMPLES_DIR / DATA_FILE
    if not path.is_file():
        return Counter()
    with open(path, newline="", encoding="utf-8") as f:
        return Counter(row["label"] for row in csv.DictReader(f))


LABELS = _labels()
N = sum(LABELS.values())
TRAIN = N - round(HELD_SHARE * N)  # split_heldout's rule, for distinct texts (the file has no repeats)
BATCH, DEFAULT_EPOCHS = FinetuneSpec.batch_size, FinetuneSpec.epochs
STEPS = math.ceil(TRAIN / BATCH)
EPOCHS = 5  # the default 2 epochs are few steps on so few sentences
TRY = dict(task=C.SARCASM_TASK, epochs=EPOCHS)

SARCASM = Lesson(
    11, "sarcasm", "A sarcasm detector: the design choices",
    explain=f"""*The data: `examples/{DATA_FILE}`, {N} one-sentence movie remarks and everyday remarks
written sentence by sentence for bertlab by its developers (2026-11-28), copied from no data set;
{' and '.join(f"{n} {k}" for k, n in sorted(LABELS.items()))}; one writer's judgement of what is sarcastic, in
one dialect of English; the project's licence (`examples/README.md` says how it was made and what it
cannot show).*

A task of your own asks a string of choices before any training. This lesson walks them on one
small task: is a sentence **sarcastic** or **sincere**?

**What the data can teach.** Half of the sentences come in matched pairs that share their words: *"what a
masterpiece, i only checked my watch fourteen times"* against *"what a masterpiece, i never once
checked my watch"*. A model cannot win by spotting *great* or *love*; it has to read the contrast
between the praise and what follows. A share of {HELD_SHARE:.0%} is **held out**: never trained on,
it is the only honest score. The classes are balanced, so always answering one label scores about
half: the **line to beat** (the line under the Fine-tune form measures it on the held-out sentences).
And a score on $n$ sentences is uncertain: an accuracy $p$ measured on $n$ sentences has a standard
error of

$$\\mathrm{{SE}} = \\sqrt{{\\frac{{p\\,(1 - p)}}{{n}}}}$$

so on a few dozen held-out sentences two methods a few points apart are not told apart by one run each.

**Which method.** With few labelled examples the method matters. *Full* fine-tuning moves
every weight on a couple of hundred sentences and can memorise them; a *frozen* encoder trains only a
head and can use only what pre-training already put in the vectors; LoRA sits between. Train each
and compare them on the same split, over several seeds (*Compare methods*, *Seeds* 3).

**Which sentence vector.** A frozen encoder's head sees one vector. The pooler was trained to judge
next sentences, not tone; the **mean of the tokens** keeps something of every word, and sarcasm lives
in two parts of a sentence that disagree (*Sentence vector* under *Your own data and the task*).

**Epochs and learning rate.** {TRAIN} training sentences in batches of {BATCH} are {STEPS} steps an epoch, so
the form's default {DEFAULT_EPOCHS} epochs are only {DEFAULT_EPOCHS * STEPS} steps; the links below ask for {EPOCHS}.
More epochs or a higher rate fit the training sentences sooner and can start memorising them: watch
the **held-out** curve, not the training loss.

**What a mistake looks like.** When a run ends, type sentences into its **Try it** box: a sarcastic
one with no negative word in it, a sincere complaint, a sentence from the file with one word changed.
The confusion matrix says which way the model errs; the lesson's script prints the held-out
sentences it got wrong.

**What would help.** More sentences (*Labelled examples to train on* draws a learning curve), more
writers than one, and a model that has read sarcasm before: pre-training on text like the task's
(lesson 7's domain and task-adaptive pre-training). The shipped model read IMDB reviews, where sarcasm
is rare.""",
    try_its=(TryIt("Open the sarcasm task on a frozen encoder reading the mean of the tokens "
                   "(nothing starts until you press Start)", "finetune",
                   {**TRY, "method": "frozen", "pooling": "mean"}),
             TryIt("The same task with LoRA", "finetune", {**TRY, "method": "lora"}),
             TryIt("The same task with full fine-tuning", "finetune", {**TRY, "method": "full"}),
             TryIt("Full fine-tuning from random weights: what pre-training gives a sarcasm detector", "finetune",
                   {**TRY, "method": "full", "init": "random"})),
    expect="""The line under the form says what the data holds, how many sentences a run holds out and
what always answering one label scores on them. `examples/lesson11_sarcasm.py` puts a bag of words
(which words a sentence has, not their order) beside three methods on that split: the bag of words
stays near the line to beat, because the sincere sentences reuse the sarcastic ones' words, and the
fine-tuned encoders do better. Which of the methods is best is a difference of a standard error or two
on one split: *Compare methods* with three seeds says more. From random weights the model has only
the training sentences to learn English from: it scores little above the line to beat, and under the
pre-trained runs.""",
    question="Always answering one label is the line to beat. What does it score on the sarcasm task's "
             "**held-out** sentences, as the Fine-tune form splits them?",
    placeholder="a percentage, e.g. 51.2 %")

LESSONS = [SARCASM]
