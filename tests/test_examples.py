"""The course in examples/: every lessonNN script runs as a student runs it (a fresh Python process,
offline, from another folder) within a minute, and prints what its lesson is about; each test checks
a key line against the library computed here. The notebook runs in a real Jupyter kernel (nbclient +
ipykernel) and is stored without outputs.

The scripts run two at a time, one torch thread each (2 cores), in the background from the first
test on; each test waits for its own. A script's CPU time is what we hold to the minute: on an idle
core it is its wall time, while on a machine shared by many jobs the wall time says more about the
neighbours than about the script (it is printed beside, and a hung script is killed at HANG_S)."""
from __future__ import annotations

import math
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
NOTEBOOK = EXAMPLES / "course.ipynb"
LESSONS = ["lesson01_tokens", "lesson02_masking", "lesson03_fill_mask", "lesson04_next_sentence",
           "lesson05_attention", "lesson06_embeddings", "lesson07_pretrain", "lesson08_finetune",
           "lesson09_probing", "lesson10_variants_scaling", "lesson11_sarcasm"]  # the Lessons tab links to these names
LIMIT_S = 60  # CPU seconds a script may take (the issue: under a minute on 2 cores)
HANG_S = 900  # wall seconds after which a hung script is killed (a cap, not a speed check)
OUT_ARG = {"lesson07_pretrain", "lesson08_finetune", "lesson11_sarcasm"}  # the training lessons write where --out says
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1",
       "GRADIO_ANALYTICS_ENABLED": "False", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
       "PYTHONIOENCODING": "utf-8", "PYTHONPATH": ""}


def run_script(name: str, work: Path) -> dict:
    """Run examples/<name>.py in `work`; its output, exit code, wall and CPU seconds (os.wait4's usage)."""
    work.mkdir(parents=True, exist_ok=True)
    args = ["--out", str(work / "out")] if name in OUT_ARG else []
    with open(work / "stdout", "w+b") as out, open(work / "stderr", "w+b") as err:
        t = time.monotonic()
        p = subprocess.Popen([sys.executable, str(EXAMPLES / f"{name}.py"), *args], cwd=work, env=ENV,
                             stdout=out, stderr=err)
        killer = threading.Timer(HANG_S, p.kill)
        killer.start()
        _, status, usage = os.wait4(p.pid, 0)
        killer.cancel()
        p.returncode = os.waitstatus_to_exitcode(status)  # reaped here: tell Popen
        wall = time.monotonic() - t
        out.seek(0)
        err.seek(0)
        return {"rc": p.returncode, "out": out.read().decode(), "err": err.read().decode()[-3000:],
                "wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "dir": work}


def run_notebook(work: Path) -> dict:
    """Execute the notebook's cells in order in a python3 kernel started in examples/."""
    import nbformat
    from nbclient import NotebookClient
    nb = nbformat.read(NOTEBOOK, as_version=4)
    t = time.monotonic()
    saved = dict(os.environ)
    os.environ.update(ENV)  # the kernel inherits them
    try:
        NotebookClient(nb, timeout=HANG_S, kernel_name="python3",
                       resources={"metadata": {"path": str(EXAMPLES)}}).execute()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return {"nb": nb, "wall": time.monotonic() - t}


@pytest.fixture(scope="module")
def results(request, tmp_path_factory):
    """name -> future: the selected scripts (and the notebook) start at once, two at a time."""
    root = tmp_path_factory.mktemp("examples")
    pool = ThreadPoolExecutor(max_workers=2)
    futures = {}

    def get(name):
        if name not in futures:
            futures[name] = pool.submit(run_notebook, root / "nb") if name == "notebook" else \
                pool.submit(run_script, name, root / name)
        return futures[name]

    here = [i for i in request.session.items if i.path == Path(__file__)]
    if any(i.name.startswith("test_notebook_runs") for i in here):
        get("notebook")  # the longest job first
    for i in here:
        if hasattr(i, "callspec") and "name" in i.callspec.params:
            get(i.callspec.params["name"])
    yield lambda name: get(name).result()
    pool.shutdown(cancel_futures=True)


@pytest.fixture(scope="module")
def shipped():
    import bertlab
    return bertlab.load_pretrained()


def lines_after(out: str, marker: str) -> list[str]:
    return out.split(marker, 1)[1].splitlines()


def block(out: str, header: str) -> str:
    """The lines after `header`'s line, up to the next blank line."""
    return out.split(header, 1)[1].split("\n", 1)[1].split("\n\n", 1)[0]


def pct(s: str) -> float:
    return float(s.rstrip("%")) / 100


# ---- one check per lesson: a key line of the output, against the library --------------------------
def check_lesson01(r, model, tok):
    text = re.search(r"^text: '(.*)'$", r["out"], re.M).group(1)
    enc = tok.encode(text)
    assert f"\n{len(enc)} tokens (with [CLS] and [SEP])" in r["out"]
    rows = re.findall(r"^\s+(\d+)\s+(\S+)\s+(\d+)\s+(-|\d+)$", r["out"], re.M)
    assert [(t, int(i)) for _, t, i, _ in rows] == list(zip(enc.tokens, enc.ids))
    assert any(t.startswith("##") for t in enc.tokens)  # the example shows a word cut into pieces
    words = re.findall(r"^  (\w+)\s+(\d+)  (.+)$", block(r["out"], "pieces per word:"), re.M)
    assert len(words) == 4
    for word, n, pieces in words:
        assert pieces.split() == tok.encode(word).tokens[1:-1] and int(n) == len(pieces.split())


def check_lesson02(r, model, tok):
    from bertlab.analysis.draw_score import score_draw
    from bertlab.data.masking_lab import preview
    text = re.search(r"^text: (.*)$", r["out"], re.M).group(1)
    enc = tok.encode(text)
    d = preview(tok, enc.ids, rate=0.15, seed=3)
    loss = score_draw(model, d["input_ids"], d["labels"], d["rule"], enc.token_type_ids)["summary"]["mean_loss"]
    assert f"this draw's MLM loss: {loss:.3f}" in r["out"]
    sel, exp = map(pct, re.search(r"2000 draws: ([\d.]+%) of tokens selected \(expected ([\d.]+%)\)", r["out"]).groups())
    assert abs(sel - exp) < 0.01
    m, rnd, kept = map(pct, re.search(r"observed split: \[MASK\] ([\d.]+%), random ([\d.]+%), kept ([\d.]+%)",
                                      r["out"]).groups())
    assert abs(m - 0.8) < 0.03 and abs(rnd - 0.1) < 0.03 and abs(kept - 0.1) < 0.03
    by_rule = dict(re.findall(r"^  (\[MASK\]|random|kept)\s+([\d.]+)  \(\d+ positions\)$", r["out"], re.M))
    assert float(by_rule["kept"]) < float(by_rule["[MASK]"])  # the answer is in the input
    ablation = re.search(r"^100 % \[MASK\], seed 3: (.*)$", r["out"], re.M).group(1).split()
    assert ablation.count("[MASK]") == sum(x > 0 for x in d["rule"])  # same positions, all [MASK]
    from bertlab.analysis.mlm_gradient import mlm_gradient, top_entries
    g = mlm_gradient(model, d["input_ids"], d["labels"], enc.token_type_ids)
    diff = float(re.search(r"max \|formula - autograd\| = (\S+) over", r["out"]).group(1))
    assert diff < 1e-6 and f"M = {g['M']}" in r["out"]  # the printed check: the formula is autograd's gradient
    assert f"unselected positions the largest |gradient| is {g['unselected_max']:g}" in r["out"]
    pos = int(re.search(r"p - onehot at position (\d+)", r["out"]).group(1))
    assert pos == max(g["selected"], key=lambda i: g["norms"][i])
    shown = re.findall(r"^  (\S+)\s+p ([\d.]+)  p - onehot ([+-][\d.]+)  /M ([+-][\d.]+)", r["out"], re.M)
    want = top_entries(g, pos, k=5)
    assert [(s[0], float(s[2])) for s in shown] == [(tok.id_to_token(e["id"]), round(e["p_minus_onehot"], 4))
                                                    for e in want]
    assert float(shown[0][2]) < 0 < min(float(s[2]) for s in shown[1:])  # the original first, then favourites


def check_lesson03(r, model, tok):
    from bertlab.analysis.predict import fill_mask
    top = fill_mask(model, tok, "the special [MASK] were amazing .", top_k=5)[0]
    assert f"the special [MASK] were amazing .\n  [MASK] #1: {top[0]['token_str']} ({top[0]['score']:.0%})" in r["out"]
    both = re.findall(r"both sides: (.*)$", r["out"], re.M)
    left = re.findall(r"left only:  (.*)$", r["out"], re.M)
    assert len(both) == len(left) == 2 and both[0] != both[1] and left[0] == left[1]
    lens = lines_after(r["out"], "logit lens on")[1:]
    first = fill_mask(model, tok, "the acting was [MASK] .", top_k=1)[0][0]["token_str"]  # the lens' sentence
    assert len(lens) == model.config.num_hidden_layers + 1 and lens[-1].split()[2] == first  # its last row


def check_lesson04(r, model, tok):
    from bertlab.analysis.predict import nsp_scores
    first = re.search(r"^A: (.*)$", r["out"], re.M).group(1)
    ranked = re.findall(r"^  \d\. P\(IsNext\) ([\d.]+)  B: (.*)$", r["out"], re.M)
    scores = nsp_scores(model, tok, first, [b for _, b in ranked])
    assert [f"{s:.2f}" for s in scores] == [p for p, _ in ranked] and scores == sorted(scores, reverse=True)
    acc = pct(re.search(r"held-out NSP accuracy: ([\d.]+%) on 200 pairs", r["out"]).group(1))
    nn, rn = map(pct, re.search(r"says 'next' for (\d+%) of true next sentences and (\d+%)", r["out"]).groups())
    assert abs(acc - (nn + 1 - rn) / 2) < 0.011  # 100 true and 100 random pairs
    assert re.search(r"sentence order on 50 true pairs: 'next' for \d+% in order, \d+% swapped", r["out"])


def check_lesson05(r, model, tok):
    from bertlab.analysis import head_finder
    from bertlab.analysis.attention_views import run_attention
    text = r["out"].splitlines()[0]
    run = run_attention(model, tok, text)
    grid = head_finder.pair_grid(run.attentions, run.tokens.index("were"), run.tokens.index("actors"))
    layer, head = divmod(int(grid.argmax()), run.num_heads)
    assert f"strongest: layer {layer + 1}, head {head + 1} ({float(grid.max()):.2f};" in r["out"]
    rows = re.findall(r"^\s+\d+\s+\d+  (\S+)\s+[\d.]+", block(r["out"], "layer head  pattern"), re.M)
    assert len(rows) == run.num_layers * run.num_heads
    best = re.search(r"neighbours:\n    layer \d head \d  \S+ word\s+mean attention ([\d.]+) \(even spread: ([\d.]+)\)",
                     r["out"])
    assert float(best.group(1)) > 3 * float(best.group(2))  # a neighbour head, far above an even spread
    from bertlab.analysis import sparse
    from bertlab.config import preset
    keep = sparse.pattern(len(run.tokens), "longformer", window=2, n_global=1)
    assert f"keeps {float(sparse.coverage(run.attentions, keep).mean()):.0%} of the attention" in r["out"]
    rows = re.findall(r"^\s+(\d+) tokens  (\S+)\s+pairs\s+([\d.]+)%  saved\s+([\d.]+)%$", r["out"], re.M)
    assert rows == [(str(x["tokens"]), x["pattern"], f"{100 * x['pair_share']:.1f}", f"{100 * x['saved']:.1f}")
                    for x in sparse.flops_table(preset("base"))]
    from bertlab.analysis import attention_views, padding  # the padded batch, then the head-averaged map
    pad = block(r["out"], "into one batch of")
    res = padding.padding_study(model, tok, re.findall(r"^  \d\. (.+)$", pad, re.M))
    near = lambda printed, x, tol: abs(float(printed) - x) <= tol  # noqa: E731 (another thread count, other rounding)
    m = re.search(r"largest attention on a \[PAD\] (\S+), max \|diff\| from each sentence run alone (\S+)$", pad, re.M)
    assert float(m[1]) == 0.0 == max(max(x) for x in res["pad_max_masked"]) and float(m[2]) < 1e-5
    shares = re.search(r"share of attention on pads per layer: (.+)$", pad, re.M)[1].split()
    assert len(shares) == len(res["pad_share_layers"]) and all(near(a, b, 2e-3) for a, b in
                                                                 zip(shares, res["pad_share_layers"]))
    s, g = res["sentences"][0], res["sentences"][0]["mask"]
    m = re.search(r"max \|diff\| ([\d.]+), lowest cosine ([\d.]+)", pad)
    assert near(m[1], s["max_diff_unmasked"], 2e-3) and near(m[2], s["min_cos_unmasked"], 2e-3) and float(m[1]) > 0.1
    m = re.search(r"alone '(.+)' p=([\d.]+); without the mask p=([\d.]+), first guess '(.+)' p=([\d.]+)", pad)
    assert m[1] == g["guess"] and near(m[2], g["prob_alone"], 2e-3) and near(m[3], g["prob_unmasked"], 2e-3)
    assert m[4] == g["guess_unmasked"] and near(m[5], g["prob_guess_unmasked"], 2e-3)
    avg = attention_views.layer_average(run, run.num_layers)
    i, j, w = attention_views.strongest_pair(avg, run.special)
    assert f"strongest link '{run.tokens[i]}' (token {i}) -> '{run.tokens[j]}' (token {j}), {w:.2f}" in r["out"]


def check_lesson06(r, model, tok):
    from bertlab.analysis.embeddings import cosine_matrix, hidden_states, pool
    rows = re.findall(r"^(embeddings|layer \d+)\s+([\d.]+)\s+([\d.]+)\s+([+-][\d.]+)$", r["out"], re.M)
    assert len(rows) == model.config.num_hidden_layers + 1
    gaps = [float(g) for *_, g in rows]
    for _, same, other, gap in rows:
        assert abs(float(same) - float(other) - float(gap)) < 0.011
    assert max(gaps[1:]) > gaps[0] + 0.05  # the senses move apart after the embeddings
    sentences = re.findall(r"^  \d\. ([a-z].*)$", r["out"], re.M)
    m = cosine_matrix(pool(hidden_states(model, tok, sentences), layer=-1, how="mean"))
    printed = re.findall(r"^  1\. (1\.00 .*)$", r["out"], re.M)[0].split()
    assert printed == [f"{v:.2f}" for v in m[0].tolist()]
    from bertlab.analysis.static_vectors import static_vs_contextual  # static against contextual
    sv = static_vs_contextual(model, tok, "bank", ["we had a picnic on the river bank .",
                                                   "the bank refused to lend them any money ."])
    assert "table rows identical: True, cosine 1.000" in r["out"] and sv["static"]["identical"]
    near = ", ".join(f"{n['token']} {n['cosine']:.2f}" for n in sv["static"]["spellings"][0]["neighbours"])
    assert f"its nearest rows in the table (no special tokens): {near}\n" in r["out"]
    by_layer = [float(c) for c in re.findall(r"^  after (?:the embeddings|layer \d+): ([\d.]+)$", r["out"], re.M)]
    want = sv["pairs"][0]["similarity"]  # another thread count, other rounding: within the printed digit
    assert len(by_layer) == len(want) and all(abs(a - b) < 1.5e-3 for a, b in zip(by_layer, want)), (by_layer, want)
    assert max(by_layer[1:]) < by_layer[0] < 1.0  # below 1 once positions are in, lower above
    from bertlab.analysis.positions import shuffle_test
    res = shuffle_test(model, tok, "the man bit the dog .")
    rows = re.findall(r"^(\S+)\s+(-?[\d.]+)\s+(-?[\d.]+)$", r["out"].split("cos, positions off")[1], re.M)
    assert rows == [(x["token"], f"{x['with_positions']:.3f}", f"{x['without_positions']:.3f}") for x in res["rows"]]
    assert all(off == "1.000" for *_, off in rows) and any(float(on) < 0.9 for _, on, _ in rows)


def check_lesson07(r, model, tok):
    import bertlab
    from bertlab.analysis.predict import fill_mask
    from bertlab.train.runs import read_metrics
    run = r["dir"] / "out"
    assert "finished at step 100" in r["out"] and (run / "model" / "config.json").is_file()
    evals = [e for e in read_metrics(run)[0] if e.get("split") == "eval"]
    printed = re.findall(r"^step\s+(\d+)\s+([\d.]+)\s", r["out"], re.M)
    assert printed == [(str(e["step"]), f"{e['mlm_loss']:.3f}") for e in evals]
    assert evals[-1]["mlm_loss"] < evals[0]["mlm_loss"] < math.log(2000)
    trained, ttok = bertlab.load_pretrained(run)
    guesses = [g["token_str"] for g in fill_mask(trained, ttok, "the movie was [MASK] .", top_k=5)[0]]
    assert f"its guesses for 'the movie was [MASK] .': {', '.join(guesses)}" in r["out"]


def check_lesson08(r, model, tok):
    from bertlab.train.finetune import trainable_estimate
    from bertlab.train.specs import FinetuneSpec
    counts = dict(re.findall(r"^(\w+)\s+([\d,]+) of [\d,]+  \(", r["out"], re.M))
    assert set(counts) == set(FinetuneSpec.METHODS)
    for method, n in counts.items():
        assert int(n.replace(",", "")) == trainable_estimate(model.config, "sequence", 2, FinetuneSpec(method=method))[0]
    final = dict((m, (pct(s), pct(a))) for m, s, a in
                 re.findall(r"^(frozen|lora|full)\s+([\d.]+%)\s+([\d.]+%)\s+[\d.]+$", r["out"], re.M))
    assert set(final) == {"frozen", "lora", "full"} and final["frozen"][0] < final["lora"][0] < final["full"][0] == 1
    assert all(0 <= acc <= 1 for _, acc in final.values())
    for method in final:
        assert (r["dir"] / "out" / method / "model" / "config.json").is_file()
    pooled = dict((p, (int(n.replace(",", "")), pct(a))) for p, n, a in
                  re.findall(r"^(pooler|cls|mean|last4)\s+([\d,]+) trained\s+([\d.]+%)$", r["out"], re.M))
    assert list(pooled) == ["pooler", "cls", "mean", "last4"]
    for pooling, (n, acc) in pooled.items():  # the head's size as counted before training, last4's 4H wide
        assert n == trainable_estimate(model.config, "sequence", 2, FinetuneSpec(method="frozen", pooling=pooling))[0]
        assert 0 <= acc <= 1
    assert pooled["last4"][0] == 2 * min(4, model.config.num_hidden_layers) * model.config.hidden_size + 2


def check_lesson09(r, model, tok):
    rows = re.findall(r"^(embeddings|layer \d+)\s+" + r"\s+".join([r"([\d.]+)%"] * 2 + [r"([+-][\d.]+)%"]
                                                                  + [r"([\d.]+)%"] * 2 + [r"([+-][\d.]+)%"]) + "$",
                      r["out"], re.M)
    assert len(rows) == model.config.num_hidden_layers + 1
    x = [[float(v) for v in row[1:]] for row in rows]
    for acc, ctrl, sel, racc, rctrl, rsel in x:
        assert abs(acc - ctrl - sel) < 0.15 and abs(racc - rctrl - rsel) < 0.15
    assert max(r_[2] for r_ in x) > max(r_[5] for r_ in x)  # pre-training made the tags readable
    best = max(range(len(x)), key=lambda i: (x[i][2], -i))
    assert f"most selective layer of the shipped model: {rows[best][0]} " in r["out"]


def check_lesson10(r, model, tok):
    from bertlab.analysis import compute, sizing
    for name in sizing.KNOWN_MODELS:
        n = sizing.param_counts(sizing.known_config(name), heads=False)["encoder_total"]
        assert re.search(rf"^{re.escape(name)}\s+.*\s{re.escape(sizing.humanize(n))}\s", r["out"], re.M), name
    mine = sizing.param_counts(model.config, heads=False)["encoder_total"]
    assert re.search(rf"^shipped default \(mini\)\s+.*\s{re.escape(sizing.humanize(mine))}\s", r["out"], re.M)
    rule = compute.worked_example("bert-base")["chinchilla_rule"]
    assert f"N = {rule['n'] / 1e6:.0f}M parameters on D = {rule['d']:.3g} tokens" in r["out"]
    from bertlab.analysis import shapes
    pair = shapes.pretraining_pair(512)
    assert f"T5 at {pair['inputs']} in, {pair['targets']} out" in r["out"]
    for x in shapes.shapes(512, pair["targets"]):  # each row's total and FLOPs a token, the library's
        total, f = sizing.humanize(x["params"]["total"]), sizing.humanize(x["flops_per_token"]["total"], "FLOP")
        assert re.search(rf"^{re.escape(x['name'])}\s+{x['kind']}\s.*\s{re.escape(total)}\s.*\s{re.escape(f)}$",
                         r["out"], re.M), x["name"]
    assert f"the released weights hold {shapes.gpt2_params(*shapes.GPT2['GPT-2 small'])['total']:,}." in r["out"]


def check_lesson11(r, model, tok):
    """The split is the Fine-tune form's, the line to beat is its commonest label's share, and each mistake
    printed is a held-out sentence with its own label, as many as the full run's accuracy leaves."""
    import csv

    from bertlab.app.ui.training import finetune_form
    d = finetune_form.example_split("example-sarcasm", tok=tok)
    held = ", ".join(f"{n} {label}" for label, n in sorted(d["held_counts"].items()))
    assert f"{d['texts'] - d['held']} training and {d['held']} held-out sentences; held out: {held}" in r["out"]
    rows = dict(re.findall(r"^(always the commonest|bag of words|frozen, mean|lora|full)\s+([\d.]+%)", r["out"], re.M))
    assert list(rows) == ["always the commonest", "bag of words", "frozen, mean", "lora", "full"]
    assert rows["always the commonest"] == f"{d['majority']:.1%}" and all(0 <= pct(a) <= 1 for a in rows.values())
    for run in ("frozen-mean", "lora", "full"):
        assert (r["dir"] / "out" / run / "model" / "config.json").is_file()
    n_wrong = int(re.search(r"full fine-tuning got (\d+) of (\d+) held-out sentences wrong", r["out"])[1])
    assert abs(n_wrong - (1 - pct(rows["full"])) * d["held"]) < 0.6
    with open(EXAMPLES / "sarcasm.csv", newline="") as f:
        label = {x["text"]: x["label"] for x in csv.DictReader(f)}
    shown = re.findall(r"^  \[(sarcastic|sincere), read as (sarcastic|sincere) \d+%\] (.+)$", r["out"], re.M)
    assert len(shown) == min(4, n_wrong)
    for truth, said, text in shown:
        assert text in d["held_texts"] and label[text] == truth != said


CHECKS = {name: globals()[f"check_{name.split('_')[0]}"] for name in LESSONS}


def test_the_lesson_scripts_are_the_ones_the_lessons_name():
    assert sorted(p.stem for p in EXAMPLES.glob("lesson[0-9][0-9]_*.py")) == LESSONS


def test_every_script_the_docs_name_is_shipped():
    """A lesson or a README that sends a student to examples/NAME.py sends them to a file that exists."""
    import dataclasses

    from bertlab.app.lessons import LESSONS as COURSE
    texts = [str(dataclasses.asdict(lesson)) for lesson in COURSE]
    texts += [(ROOT / f).read_text(encoding="utf-8") for f in ("README.md", "examples/README.md", "bench/FINETUNE.md")]
    named = {m for t in texts for m in re.findall(r"examples/(\w+)\.py", t)}
    assert {"domain_adaptation", "custom_objective", "lesson11_sarcasm"} <= named
    assert not [n for n in named if not (EXAMPLES / f"{n}.py").exists()]


@pytest.mark.slow
@pytest.mark.parametrize("name", LESSONS)
def test_lesson_script_runs(name, results, shipped):
    r = results(name)
    assert r["rc"] == 0, f"{name} failed:\n{r['err']}"
    assert r["cpu"] < LIMIT_S, f"{name} took {r['cpu']:.0f} CPU seconds ({r['wall']:.0f} s wall)"
    assert not (r["dir"] / "runs").exists()  # nothing written beside the caller
    print(f"{name}: {r['cpu']:.1f} s CPU, {r['wall']:.1f} s wall")
    CHECKS[name](r, *shipped)


def test_notebook_is_stored_valid_and_without_outputs():
    import nbformat
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    assert nb.nbformat == 4
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(not c.outputs and c.execution_count is None for c in code)
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    for n, topic in enumerate(["Tokens", "Masking", "Fill-mask", "Next sentence", "Attention heads", "Embeddings",
                               "Pre-train", "Fine-tune", "Probing", "Variants and scaling", "A sarcasm detector"], 1):
        assert f"## {n}. {topic}" in text  # the course's order and numbering


@pytest.mark.slow
def test_notebook_runs(results, shipped):
    r = results("notebook")
    outs = ["".join(o.get("text", "") for o in c.outputs) for c in r["nb"].cells if c.cell_type == "code"]
    _, tok = shipped
    n = len(tok.encode("The heartwarming film was misunderstood by critics!"))
    assert outs[1].startswith(f"{n} tokens: [CLS]")
    assert re.search(r"called 'next': \d+% of the pairs in order, \d+% swapped", "\n".join(outs))
    from bertlab.analysis import compute
    rule = compute.worked_example("bert-base")["chinchilla_rule"]
    assert f"Chinchilla would train {rule['n'] / 1e6:.0f}M parameters" in outs[-2]
    line, frozen = re.search(r"always the commonest label scores ([\d.]+%)\nfrozen encoder, mean of the tokens: "
                             r"([\d.]+%) on the same 60 sentences", outs[-1]).groups()
    assert 0.5 <= pct(line) < 0.6 and 0 < pct(frozen) <= 1
    assert not any(o.get("output_type") == "error" for c in r["nb"].cells for o in c.get("outputs", []))
    print(f"notebook: {r['wall']:.1f} s wall")


if __name__ == "__main__":  # time every script once, one after another: python tests/test_examples.py
    for name in LESSONS:
        with tempfile.TemporaryDirectory() as d:
            r = run_script(name, Path(d))
            print(f"{name:<28} rc {r['rc']}  {r['cpu']:5.1f} s CPU  {r['wall']:5.1f} s wall")


def announced_s(out):
    """The wall seconds a script says it takes before it starts ("... about N s")."""
    return int(re.search(r"about (\d+) s$", out.splitlines()[0])[1])


def within_announced(r):
    """A script keeps to the time it announces, give or take the CPU: on 2 cores CPU seconds run about
    twice the wall's, so 3x the announced seconds allows a CPU half again slower than the one it was timed on
    (CI's EPYC ran pretraining_worth 1.9x as long as this Xeon's wall)."""
    return r["cpu"] < 3 * announced_s(r["out"])


@pytest.mark.slow
@pytest.mark.parametrize("name", ["pretraining_worth"])
def test_what_pretraining_is_worth(name, results):
    """issue 32, item 9: the learning curves by labelled examples, pre-trained against random weights, on
    one held-out set; the gap is each row's difference, and the pre-trained model ahead where labels are many."""
    r = results(name)
    assert r["rc"] == 0, f"{name} failed:\n{r['err']}"
    assert r["out"].splitlines()[0].endswith("about 60 s")
    assert within_announced(r), f"{name} took {r['cpu']:.0f} CPU seconds ({r['wall']:.0f} s wall)"
    assert not (r["dir"] / "runs").exists()
    runs = re.findall(r"^(pretrained|random)\s+(\d+) labelled\s+([\d.]+%)\s+\(held out: (\d+),", r["out"], re.M)
    assert [(i, int(n)) for i, n, _, _ in runs] == [(i, n) for i in ("pretrained", "random") for n in (50, 200, 400)]
    assert {held for *_, held in runs} == {"300"}
    table = re.findall(r"^\s+(\d+)\s+([\d.]+%)\s+([\d.]+%)\s+([+-][\d.]+)%$", r["out"], re.M)
    assert [int(n) for n, *_ in table] == [50, 200, 400]
    for n, pre, rnd, gap in table:
        assert abs(pct(pre) - pct(rnd) - float(gap) / 100) < 0.0015
    assert pct(table[-1][1]) > pct(table[-1][2])  # 400 labelled: pre-training is worth something


@pytest.mark.slow
@pytest.mark.parametrize("name", ["forgetting"])
def test_what_fine_tuning_forgot(name, results):
    """issue 32, item 4: four runs' masked-word accuracy after fine-tuning; the frozen encoder keeps it
    all, ten times full fine-tuning's rate keeps the least, and each "kept" is after / before."""
    r = results(name)
    assert r["rc"] == 0, f"{name} failed:\n{r['err']}"
    assert r["out"].splitlines()[0].endswith("about 50 s")
    assert within_announced(r), f"{name} took {r['cpu']:.0f} CPU seconds ({r['wall']:.0f} s wall)"
    assert not (r["dir"] / "runs").exists()
    before = pct(re.search(r"before fine-tuning: ([\d.]+%)", r["out"])[1])
    rows = {n: (float(lr), pct(a), pct(after), pct(kept)) for n, lr, a, after, kept in re.findall(
        r"^(frozen|lora|full|full, lr x10)\s+([\d.e-]+)\s+([\d.]+%)\s+([\d.]+%)\s+(\d+%)$", r["out"], re.M)}
    assert list(rows) == ["frozen", "lora", "full", "full, lr x10"]
    assert rows["frozen"][2] == before and rows["frozen"][3] == 1
    assert rows["full, lr x10"][0] == pytest.approx(10 * rows["full"][0])
    assert rows["full, lr x10"][3] == min(k for *_, k in rows.values()) < 0.5
    for lr, acc, after, kept in rows.values():
        assert abs(after / before - kept) < 0.006 and 0 <= acc <= 1


@pytest.mark.slow
@pytest.mark.parametrize("name", ["facts"])
def test_what_bert_knows(name, results, shipped):
    """issue 44, item 9: the shipped model's quiz on the factual prompts; every relation's row, every prompt's
    rank and the closing counts are the library's own (facts.score here)."""
    from collections import Counter

    from bertlab.analysis import facts
    r = results(name)
    assert r["rc"] == 0, f"{name} failed:\n{r['err']}"
    assert r["out"].splitlines()[0].endswith("about 5 s")
    assert within_announced(r), f"{name} took {r['cpu']:.0f} CPU seconds ({r['wall']:.0f} s wall)"
    res = facts.score(*shipped)
    share = lambda p: f"{p:.1%}".replace(".0%", "%")  # noqa: E731
    for x in [*res["relations"], {"relation": "all", **res["overall"]}]:
        assert re.search(rf"^{x['relation']}\s+{x['prompts']}\s+{share(x['p_at_1'])}\s+{share(x['p_at_10'])}\s+"
                         rf"{x['out_of_vocab']}$", r["out"], re.M), x
    printed = re.findall(r"^(.+ \[MASK\] .*?)\s+([a-z]+)\s+([\d,]+|-)\s+(\S+)\s+(.+)$", r["out"], re.M)
    assert [(p, a) for p, a, *_ in printed] == [(x["cloze"], x["answer"]) for x in res["rows"]]
    for (_, _, rank, _, guesses), x in zip(printed, res["rows"]):
        assert rank == (f"{x['rank']:,}" if x["in_vocab"] else "-") and guesses == ", ".join(x["guesses"]), x
    rows, o = res["rows"], res["overall"]
    assert (f"right at the first guess: {sum(x['rank'] == 1 for x in rows)} of {o['prompts']}; within the first ten: "
            f"{sum(x['rank'] is not None and x['rank'] <= 10 for x in rows)}; answers not in its vocabulary: "
            f"{o['out_of_vocab']}") in r["out"]
    first, times = Counter(x["guesses"][0] for x in rows).most_common(1)[0]
    assert f"its commonest first guess: {first} ({times} of {o['prompts']} prompts)" in r["out"]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["learning_rates"])
def test_the_learning_rate_sweep(name, results):
    """issue 32, item 12: five rates from BERT-base's 3e-5 to 3e-3, each run's accuracy and the masked-word
    skill it kept; the highest rate keeps the least, and the best rate named is the table's best."""
    r = results(name)
    assert r["rc"] == 0, f"{name} failed:\n{r['err']}"
    assert r["out"].splitlines()[0].endswith("about 70 s")
    assert within_announced(r), f"{name} took {r['cpu']:.0f} CPU seconds ({r['wall']:.0f} s wall)"
    assert not (r["dir"] / "runs").exists()
    rows = [(float(lr), pct(a), pct(k)) for lr, a, k in
            re.findall(r"^([\d.e-]+)\s+([\d.]+%)\s+(\d+%)$", r["out"], re.M)]
    assert [lr for lr, _, _ in rows] == [3e-5, 1e-4, 3e-4, 1e-3, 3e-3]
    assert rows[-1][2] == min(k for *_, k in rows) < 0.8
    best = max(rows, key=lambda x: x[1])
    assert f"best rate here: {best[0]:g} ({best[1]:.1%})" in r["out"]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["custom_objective"])
def test_a_custom_objective_races_bert(name, results):
    """issue 32, item 15: a loss registered by the script itself trains beside BERT's and all-tokens, judged
    on the same held-out masked words; the best named is the table's best and the cost ratio is all-tokens'."""
    r = results(name)
    assert r["rc"] == 0, f"{name} failed:\n{r['err']}"
    assert within_announced(r), f"{name} took {r['cpu']:.0f} CPU seconds ({r['wall']:.0f} s wall)"
    assert not (r["dir"] / "runs").exists()
    rows = {n: (pct(a), float(s)) for n, a, s in
            re.findall(r"^(mlm|all-tokens|smoothed)\s.*held-out masked words\s+([\d.]+%) \(loss [\d.]+; (\d+) s\)$",
                       r["out"], re.M)}
    assert list(rows) == ["mlm", "all-tokens", "smoothed"]
    best = max(rows, key=lambda n: rows[n][0])
    assert f"best on the held-out masked words after 150 steps: {best} ({rows[best][0]:.1%})" in r["out"]
    unigram = pct(re.search(r"the most frequent word alone scores ([\d.]+%)", r["out"])[1])
    assert 0 < unigram < 0.2 and all(0 <= a <= 1 for a, _ in rows.values())
    assert rows["all-tokens"][1] > rows["mlm"][1]  # a vocabulary projection at every position costs time


@pytest.mark.slow
@pytest.mark.parametrize("name", ["layer_story"])
def test_the_layer_story(name, results):
    """issue 32, item 13: pos, polarity and sentiment probed at every layer of the shipped model; each printed
    center of gravity is the formula's on the printed accuracies (to their rounding)."""
    from bertlab.train.probing import center_of_gravity
    r = results(name)
    assert r["rc"] == 0, f"{name} failed:\n{r['err']}"
    assert r["out"].splitlines()[0].endswith("about 50 s")
    assert within_announced(r), f"{name} took {r['cpu']:.0f} CPU seconds ({r['wall']:.0f} s wall)"
    assert re.search(r"^layer\s+pos\s+polarity\s+sentiment$", r["out"], re.M)
    rows = [[pct(x) for x in m.split()] for m in re.findall(r"^(?:emb|\d)\s+((?:[\d.]+%\s*){3})$", r["out"], re.M)]
    assert len(rows) == 5 and all(0 < a <= 1 for row in rows for a in row)  # the shipped model: 4 layers
    centers = dict(re.findall(r"(pos|polarity|sentiment) (-|[\d.]+)", r["out"].split("center of gravity: ")[1]))
    for i, task in enumerate(("pos", "polarity", "sentiment")):
        c = center_of_gravity([row[i] for row in rows])
        assert centers[task] == "-" if c is None else abs(float(centers[task]) - c) < 0.25, (task, centers, c)
    assert "flipped by a negator" in r["out"] and "peaks at layer" in r["out"]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["domain_adaptation"])
def test_domain_adaptation(name, results):
    """issue 32, items 10 and 15: task-adaptive pre-training, then the shipped and the adapted model fine-tuned
    alike on the same held-out sentences; each gain printed is the difference of the accuracies printed, and
    each standard error is the binomial one of the counts printed."""
    r = results(name)
    assert r["rc"] == 0, f"{name} failed:\n{r['err']}"
    assert r["out"].splitlines()[0].endswith("about 90 s")
    assert within_announced(r), f"{name} took {r['cpu']:.0f} CPU seconds ({r['wall']:.0f} s wall)"
    assert not (r["dir"] / "runs").exists()
    shipped, adapted, masked = re.search(
        r"masked words on held-out sentiment text: shipped ([\d.]+%), adapted ([\d.]+%) \((\d+) masked words\)",
        r["out"]).groups()
    runs = re.findall(r"^(shipped|adapted)\s+fine-tuned on (\d+) labelled:\s+([\d.]+%) \(held out: (\d+),", r["out"], re.M)
    assert [n for n, *_ in runs] == ["shipped", "adapted"] and {n for _, n, _, _ in runs} == {"500"}
    assert runs[0][3] == runs[1][3]  # judged on the same sentences
    acc = {n: pct(a) for n, _, a, _ in runs}
    gains = re.search(r"adaptation's gain: masked words ([+-][\d.]+)% \(one standard error ([\d.]+)%\), "
                      r"sentiment ([+-][\d.]+)% \(one standard error ([\d.]+)%\)", r["out"]).groups()
    assert abs(float(gains[0]) / 100 - (pct(adapted) - pct(shipped))) < 0.0015
    assert abs(float(gains[2]) / 100 - (acc["adapted"] - acc["shipped"])) < 0.0015
    p, n = pct(shipped), int(masked)
    assert abs(float(gains[1]) / 100 - (2 * p * (1 - p) / n) ** 0.5) < 0.0006
    p, n = acc["shipped"], int(runs[0][3])
    assert abs(float(gains[3]) / 100 - (2 * p * (1 - p) / n) ** 0.5) < 0.0006
    assert 0.5 < acc["shipped"] < 1 and 0.5 < acc["adapted"] < 1 and 0.2 < pct(shipped) < 0.7
