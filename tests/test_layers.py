"""The package's layers, read from its imports: core <- data <- train <- app, analysis on core only.

Every import inside bertlab/ is resolved to the module it names; a module may import its own layer
or a layer below it, never above, and the import graph has no cycle. Function-level imports are
allowed only for optional or heavy third-party packages, each marked with a reason in a comment.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "bertlab"
CORE = {"config", "model", "fast", "tokenizer", "checkpoint", "heads", "heads_family", "cache", "family"}
CORE_PACKAGES = {"variants", "methods"}  # the family's models and the fine-tuning methods: core like model.py
# what each layer may import (besides itself)
ALLOWED = {"core": {"core"}, "analysis": {"core"}, "data": {"core"}, "train": {"core", "data", "analysis"},
           "app": {"core", "data", "analysis", "train"}}


def layer(module: str) -> str:
    """'bertlab.data.masking' -> 'data'; top-level modules are core (the package root re-exports core)."""
    parts = module.split(".")[1:]
    if parts == ["__main__"]:  # `python -m bertlab` is the command line
        return "app"
    if parts and parts[0] in CORE_PACKAGES:
        return "core"
    if len(parts) >= 2 or (parts and parts[0] in ALLOWED):
        return parts[0]
    assert not parts or parts[0] in CORE, f"{module}: a top-level module outside the core list"
    return "core"


def modules() -> dict[str, Path]:
    out = {}
    for path in PKG.rglob("*.py"):
        rel = path.relative_to(PKG.parent).with_suffix("")
        name = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        out[name] = path
    return out


def imports(name: str, path: Path) -> list[tuple[str, int, bool]]:
    """(imported bertlab module, line, inside a function) for every import of our own package."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []

    def visit(node, in_function):
        for child in ast.iter_child_nodes(node):
            nested = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            if isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package.split(".")
                    base = base[:len(base) - child.level + 1]
                    target = ".".join(base + ([child.module] if child.module else []))
                else:
                    target = child.module or ""
                if target.split(".")[0] == "bertlab":
                    for alias in child.names:  # `from . import runs` names a module
                        sub = f"{target}.{alias.name}"
                        found.append((sub if sub in known else target, child.lineno, in_function))
            elif isinstance(child, ast.Import):
                found.extend((a.name, child.lineno, in_function) for a in child.names if a.name.split(".")[0] == "bertlab")
            visit(child, nested)
    known = set(modules())
    visit(tree, False)
    return found


def test_no_upward_imports():
    bad = []
    for name, path in modules().items():
        for target, line, _ in imports(name, path):
            src, dst = layer(name), layer(target)
            if dst != src and dst not in ALLOWED[src]:
                bad.append(f"{path.relative_to(PKG.parent)}:{line} ({src}) imports {target} ({dst})")
    assert not bad, "upward or sideways imports:\n" + "\n".join(bad)


def test_no_import_cycles():
    mods = modules()
    graph = {n: {t for t, _, _ in imports(n, p) if t in mods and t != n} for n, p in mods.items()}
    # the package root and sub-package __init__ files re-export; their children never import them
    state, stack = {}, []

    def dfs(n):
        state[n] = "open"
        stack.append(n)
        for m in sorted(graph[n]):
            if state.get(m) == "open":
                raise AssertionError("import cycle: " + " -> ".join(stack[stack.index(m):] + [m]))
            if m not in state:
                dfs(m)
        stack.pop()
        state[n] = "done"
    for n in sorted(graph):
        if n not in state:
            dfs(n)


def test_function_level_imports_of_our_own_code_are_gone():
    """Imports of bertlab itself belong at the top of a module, where the layer test sees them."""
    hidden = [f"{p.relative_to(PKG.parent)}:{line} imports {t}" for n, p in modules().items()
              for t, line, inner in imports(n, p) if inner]
    assert not hidden, "\n".join(hidden)


def private_uses(path: Path) -> list[str]:
    """`from .x import _name` and `x._name`, where x is one of our own modules, in one file."""
    tree, ours, found = ast.parse(path.read_text(encoding="utf-8")), set(), []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("bertlab")):
            for a in node.names:
                ours.add(a.asname or a.name)
                if a.name.startswith("_") and not a.name.startswith("__"):
                    found.append(f"{node.lineno}: from {'.' * node.level}{node.module or ''} import {a.name}")
        elif isinstance(node, ast.Import):
            ours |= {(a.asname or a.name).split(".")[0] for a in node.names if a.name.startswith("bertlab")}
    found += [f"{n.lineno}: {n.value.id}.{n.attr}" for n in ast.walk(tree) if isinstance(n, ast.Attribute)
              and isinstance(n.value, ast.Name) and n.value.id in ours and n.attr.startswith("_")
              and not n.attr.startswith("__")]
    return found


def test_no_module_uses_another_modules_private_names():
    """A name one module needs from another is public there: two halves that import each other's private
    names are one idea split by length (issue 29, item 6). `from .x import _y` and `x._y` are refused."""
    paths = [*modules().values(), PKG.parent / "app.py"]
    found = [f"{p.relative_to(PKG.parent)}:{use}" for p in paths for use in private_uses(p)]
    assert not found, "\n".join(found)


def test_the_web_pages_do_not_call_the_command_line():
    """A page's logic and a command's both come from the library: ui/ imports no app/*_cli.py (issue 29)."""
    found = [f"{p.relative_to(PKG.parent)} imports {t}" for n, p in modules().items() if n.startswith("bertlab.app.ui")
             for t, _, _ in imports(n, p) if t.startswith("bertlab.app.") and t.endswith("_cli")]
    assert not found, "\n".join(found)


def test_the_private_name_check_sees_both_forms(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from .corpus import _check\nfrom . import runs\nimport os\nruns._read(1)\nos._exit(0)\n")
    assert private_uses(bad) == ["1: from .corpus import _check", "4: runs._read"]


@pytest.mark.parametrize("module,expected", [("bertlab.model", "core"), ("bertlab.data.masking", "data"),
                                             ("bertlab.app.ui.shared.common", "app"), ("bertlab", "core")])
def test_layer_names(module, expected):
    assert layer(module) == expected


def test_no_handler_takes_more_than_eight_parameters():
    """A handler with a long positional list is a form read by position (issue 29): a form's handler
    takes its fields by name (**form, Gradio's inputs_kwargs)."""
    import inspect

    import app
    demo = app.build_app()
    long = {}
    for block_fn in demo.fns.values():
        fn = block_fn.fn
        while fn is not None and (getattr(fn, "original", None) or getattr(fn, "__wrapped__", None)):
            fn = getattr(fn, "original", None) or fn.__wrapped__
        if fn is None:
            continue
        named = [p for p in inspect.signature(fn).parameters.values()
                 if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        if len(named) > 8:
            long[f"{fn.__module__}.{fn.__qualname__}"] = len(named)
    assert not long, long
