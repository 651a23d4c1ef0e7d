"""The app's tabs, one record each: the title the tab strip shows, the key a link names (?tab=KEY), the
module whose build(model) draws it, and the inputs a link may set. app.py builds the page from this list
and links.py reads its keys and parameters here, so a new tab is its module and its record."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Tab:
    title: str
    key: str
    module: str  # "bertlab.app.ui.text.attention_tab", imported by app.py
    params: tuple[str, ...] = ()  # the inputs a link may set, in the order a copied link lists them


# Lessons first: a student who opens the app meets the course, which leads through the other tabs (a
# teacher's link, ?tab=..., opens any other tab directly).
TABS = (
    Tab("Lessons", "lessons", "bertlab.app.ui.lessons.lessons_tab", ("lesson",)),
    Tab("Tokenize", "tokenize", "bertlab.app.ui.text.tokenize_tab", ("text", "pair")),
    # position: the gradient view's selected piece (from 1); view = the sub-tab (score, gradient)
    Tab("Masking lab", "masking", "bertlab.app.ui.text.masking_tab",
        ("text", "rate", "whole_word", "seed", "n", "spans", "position", "view")),
    # relation: the "What BERT knows" quiz's, or all; Generate's opening (the words to continue), tokens,
    # sample (greedy or sample), sample_k, seed
    Tab("Fill-mask", "fill-mask", "bertlab.app.ui.text.fill_mask_tab",
        ("text", "k", "left_only", "relation", "opening", "tokens", "sample", "sample_k", "seed")),
    Tab("Next sentence", "nsp", "bertlab.app.ui.text.nsp_tab", ("a", "b")),  # sentence A; candidates B, one a line
    # layer, head from 1; view = sparse or padding: that sub-tab
    Tab("Attention", "attention", "bertlab.app.ui.text.attention_tab",
        ("text", "pair", "layer", "head", "hide", "view")),
    # layer 0 = embeddings; view = the sub-tab (compare, static, contexts, positions); shuffle = the positions'
    # sentence; view=static&word=bank: the static view follows that word (with its example's sentences)
    Tab("Embeddings", "embeddings", "bertlab.app.ui.text.embeddings_tab",
        ("word", "sentences", "layer", "pooling", "special", "view", "shuffle")),
    # the boxes; a preset alone does not fill them (the tab fills them when a student picks one); shapes_len,
    # shapes_target: the encoder / decoder / encoder-decoder section's tokens in and out
    Tab("Architecture", "architecture", "bertlab.app.ui.labs.architecture_tab",
        ("family", "preset", "layers", "hidden", "heads", "ffn", "vocab", "positions", "embedding", "groups", "batch",
         "seq_len", "shapes_len", "shapes_target")),
    Tab("Pre-train", "pretrain", "bertlab.app.ui.training.pretrain_tab", ("recipe", "arch")),  # the recipe: the rest
    Tab("Fine-tune", "finetune", "bertlab.app.ui.training.finetune_tab",
        ("task", "method", "epochs", "pooling", "init", "lr")),
    Tab("Distil", "distill", "bertlab.app.ui.training.distill_tab", ("layers", "steps", "temperature")),
    Tab("Race", "race", "bertlab.app.ui.training.race_tab", ("minutes", "seeds", "recipes")),  # recipes: a,b,c
    Tab("Scaling", "scaling", "bertlab.app.ui.labs.scaling_tab",
        ("model_size", "steps", "batch", "seq_len", "tokens", "accel", "dtype", "util", "count", "flops", "price",
         "budget")),
    # filled; probes run on "Run probes" (slow); view=story opens the layer story (run by its own button)
    Tab("Probing", "probing", "bertlab.app.ui.labs.probe_tab", ("task", "feature", "probe", "sample", "layer", "view")),
)
KEYS = {t.title: t.key for t in TABS}  # tab title -> key in the address
PARAMS = {t.key: t.params for t in TABS}  # key -> the names of the inputs a link may set
