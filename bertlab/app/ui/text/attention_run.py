"""The Attention tab's forward pass, shared by its sub-views (one module, so none imports the tab)."""
from __future__ import annotations

from ....analysis import attention_views as av
from ..shared.common import check_pair, load_model, mistakes


def checked_run(text, pair, choice, layer, head) -> tuple[av.AttentionRun, int, int]:
    """The forward pass behind every view and the checked layer and head, with one clear line for
    any bad input."""
    model, tok = load_model(choice)
    text, pair = check_pair(text, pair)
    with mistakes():
        run = av.run_attention(model, tok, text, pair)
    with mistakes(ValueError):
        layer = av.check_index(layer, "layer", run.num_layers)
        return run, layer, av.check_index(head, "head", run.num_heads)
