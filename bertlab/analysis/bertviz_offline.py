"""bertviz's head view and model view (Vig 2019) as self-contained HTML that works with no network.

bertviz 1.4.1's page loads require.js, d3 and jQuery from a CDN, so offline it shows nothing. We
keep bertviz's drawing code and parameters but inline d3 5.7.0 (from the `mpld3` wheel) and jQuery
(`XStatic-jQuery`), read from the installed packages (found with `find_spec`, which does not import
them: their `__init__`s need IPython and matplotlib), and replace require.js by a small shim.
The page goes into a sandboxed iframe: `gr.HTML` does not run scripts, and the sandbox isolates them.
"""
from __future__ import annotations

import functools
import html
import importlib.util
import json
import re
import uuid
from pathlib import Path

import torch

# Most attention numbers one page may carry (the JSON is ~7 bytes per number; a browser copes with ~10 MB).
MAX_NUMBERS = 1_500_000
_REQUIRE_CONFIG = re.compile(r"require\.config\(\{.*?\}\);", re.S)
_SHIM = """
window.require = window.requirejs = function (deps, cb) {
  var mods = {jquery: window.jQuery, d3: window.d3};
  return cb.apply(null, deps.map(function (d) { return mods[d]; }));
};
window.require.config = function () {};
"""
# Display-only edits of bertviz's JS so its labels count layers and heads from 1, as the rest of the app
# does (its data and parameters stay 0-based); each must match exactly once or the view is refused.
_ONE_BASED = {
    "head_view": [
        ('layerEl.append($("<option />").val(layer).text(layer));',
         'layerEl.append($("<option />").val(layer).text(layer + 1));'),
        ('            .attr("height", CHECKBOX_SIZE);\n\n        function updateCheckboxes() {',
         '            .attr("height", CHECKBOX_SIZE);\n'
         '        checkbox.append("title").text((d, i) => "head " + (i + 1));\n'
         '        checkboxContainer.selectAll("text").data(config.headVis).enter().append("text")\n'
         '            .text((d, i) => i + 1).attr("x", (d, i) => (i + 0.5) * CHECKBOX_SIZE).attr("y", top + 14)\n'
         '            .attr("text-anchor", "middle").attr("font-size", "11px").attr("fill", "white")\n'
         '            .style("pointer-events", "none");\n\n        function updateCheckboxes() {'),
    ],
    "model_view": [
        (".text(config.heads[i])", ".text(config.heads[i] + 1)"),
        (".text(config.layers[i])", ".text(config.layers[i] + 1)"),
        ("'Layer ' + config.layers[layerIndex] + \", Head \" + config.heads[headIndex]",
         "'Layer ' + (config.layers[layerIndex] + 1) + \", Head \" + (config.heads[headIndex] + 1)"),
    ],
}


class BertvizUnavailable(RuntimeError):
    """A package that provides the view's JavaScript is not installed."""


def _package_file(package: str, *parts: str) -> str:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise BertvizUnavailable(f"the bertviz view needs the Python package '{package}' "
                                 "(pip install --no-deps bertviz==1.4.1 mpld3==0.5.12 XStatic-jQuery==3.7.1.1)")
    for root in spec.submodule_search_locations:
        path = Path(root, *parts)
        if path.is_file():
            return path.read_text(encoding="utf-8")
    raise BertvizUnavailable(f"{'/'.join(parts)} is missing from the installed package '{package}'")


def _inline_js(code: str) -> str:
    """Make JS safe inside an inline <script>: the parser must never see a closing tag in it."""
    return re.sub(r"</(script)", r"<\\/\1", code, flags=re.I)


@functools.lru_cache(maxsize=None)
def _libraries() -> str:
    d3 = _package_file("mpld3", "js", "d3.v5.min.js")
    if "v5.7.0" not in d3[:200]:
        raise BertvizUnavailable("mpld3's d3.v5.min.js is not d3 5.7.0, the version bertviz was written for")
    jquery = _package_file("xstatic.pkg.jquery", "data", "jquery.min.js")
    return "".join(f'<script type="text/javascript">\n{_inline_js(js)}\n</script>\n' for js in (d3, jquery))


@functools.lru_cache(maxsize=None)
def _view_js(name: str) -> str:
    js = _package_file("bertviz", f"{name}.js")
    js, n = _REQUIRE_CONFIG.subn("", js, count=1)
    ok = n == 1 and "PYTHON_PARAMS" in js
    for old, new in _ONE_BASED[name]:
        ok = ok and js.count(old) == 1
        js = js.replace(old, new)
    if not ok:
        raise BertvizUnavailable(f"bertviz's {name}.js is not the one this code knows (use bertviz==1.4.1)")
    return js


def _attn_data(att: torch.Tensor, tokens: list[str], sentence_b_start: int | None) -> list[dict]:
    """bertviz's `attention` parameter: all tokens, and with a pair the four sentence-to-sentence blocks."""
    att = torch.round(att.double(), decimals=4)  # 4 digits are plenty for a picture and keep the page small
    whole = {"name": None, "attn": att.tolist(), "left_text": tokens, "right_text": tokens}
    if sentence_b_start is None:
        return [whole]
    a, b = slice(0, sentence_b_start), slice(sentence_b_start, len(tokens))
    blocks = [{"name": f"Sentence {x} -> Sentence {y}", "attn": att[:, :, sx, sy].tolist(),
               "left_text": tokens[sx], "right_text": tokens[sy]}
              for (x, sx), (y, sy) in [(("A", a), ("A", a)), (("B", b), ("B", b)),
                                       (("A", a), ("B", b)), (("B", b), ("A", a))]]
    return [{**whole, "name": "All"}] + blocks


def _page(name: str, att: torch.Tensor, tokens: list[str], sentence_b_start: int | None, note: str,
          **view) -> str:
    """A whole page running bertviz's `name` view of `att`, with that view's own parameters `view`."""
    attn_data = _attn_data(att, tokens, sentence_b_start)
    vis_id = f"bertviz-{uuid.uuid4().hex}"
    params = {"attention": attn_data, "default_filter": "0", "root_div_id": vis_id, **view}
    select = ""
    if len(attn_data) > 1:
        options = "".join(f'<option value="{i}">{html.escape(d["name"])}</option>' for i, d in enumerate(attn_data))
        select = f'Attention: <select id="filter">{options}</select>'
    layer = 'Layer: <select id="layer"></select>' if name == "head_view" else ""
    # JSON may carry the user's text; "<" as \\u003c keeps any "</script>" in it from closing the tag.
    data = json.dumps(params).replace("<", "\\u003c")
    js = _inline_js(_view_js(name).replace("PYTHON_PARAMS", data))
    note_html = f'<p style="font-size:13px;color:#555;margin:0 0 6px">{html.escape(note)}</p>' if note else ""
    return (f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>bertviz {name}</title></head>\n'
            f'<body style="margin:8px;background:white;color:black">\n{note_html}'
            f'<div id="{vis_id}" style="font-family:\'Helvetica Neue\', Helvetica, Arial, sans-serif;">\n'
            f'<span style="user-select:none">{layer} {select}</span>\n<div id="vis"></div>\n</div>\n'
            f'{_libraries()}<script type="text/javascript">{_SHIM}</script>\n'
            f'<script type="text/javascript">\n{js}\n</script>\n</body></html>\n')


def _check(att: torch.Tensor, tokens: list[str]) -> None:
    if att.dim() != 4 or att.shape[-1] != att.shape[-2] or att.shape[-1] != len(tokens):
        raise ValueError(f"attention must be (layers, heads, T, T) with T = {len(tokens)} tokens, "
                         f"got {tuple(att.shape)}")


def head_view_html(att: torch.Tensor, tokens: list[str], sentence_b_start: int | None = None,
                   layer: int | None = None, heads: list[int] | None = None, note: str = "") -> str:
    """A whole HTML page with bertviz's head view of `att` (L, A, T, T), opened on `layer` with only
    `heads` drawn (0-based, as bertviz takes them; its labels say them from 1). When all layers would
    be too much data for a browser, only `layer` is included."""
    _check(att, tokens)
    L = att.shape[0]
    layers = list(range(L))
    if not fits(att, whole_model=True):
        layer = layer or 0
        layers = [layer]
        note = (note + " " if note else "") + f"Only layer {layer + 1} is included: all {L} layers would be too much data."
    return _page("head_view", att[layers], tokens, sentence_b_start, note, layer=layer, heads=heads,
                 include_layers=layers)


def model_view_html(att: torch.Tensor, tokens: list[str], sentence_b_start: int | None = None,
                    display_mode: str = "light", note: str = "") -> str:
    """A whole HTML page with bertviz's model view: one thumbnail per head, layers down, heads across."""
    _check(att, tokens)
    L, A = att.shape[:2]
    return _page("model_view", att, tokens, sentence_b_start, note, display_mode=display_mode,
                 include_layers=list(range(L)), include_heads=list(range(A)), total_heads=A)


def fits(att: torch.Tensor, whole_model: bool) -> bool:
    """Whether a page for `att` stays small enough to send (the model view always needs every head)."""
    L, A, T, _ = att.shape
    return (L if whole_model else 1) * A * T * T <= MAX_NUMBERS


def head_view_height(n_tokens: int) -> int:
    """Pixels the head view needs (bertviz: 22.5 px per token + 30 px heading) plus the controls."""
    return int(22.5 * n_tokens + 30 + 90)


def model_view_height(n_layers: int, n_heads: int, n_tokens: int) -> int:
    """Pixels the model view needs, from the sizes in bertviz's model_view.js, plus the controls."""
    thumb = n_tokens * 7 * 12 / n_heads + 10
    return int(max(n_layers * thumb + 38, n_tokens * 18 + 55) + 70)


def iframe(doc: str, height: int) -> str:
    """Embed a page so its scripts run (gr.HTML alone does not run them) in a sandbox of its own."""
    return (f'<iframe srcdoc="{html.escape(doc, quote=True)}" sandbox="allow-scripts" '
            f'style="width:100%;height:{int(height)}px;border:0;background:white" '
            f'title="bertviz attention view"></iframe>')
