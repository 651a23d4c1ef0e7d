"""`python -m bertlab ...`: the backend from a terminal. Errors print one line, never a traceback."""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import warnings
from pathlib import Path

import torch
from tqdm import tqdm

from .. import family, fast
from ..analysis import facts, sizing
from ..analysis.predict import fill_in_turn, fill_mask
from ..checkpoint import load_pretrained, resolve_folder, save_pretrained
from ..config import PRESETS, BertConfig, preset
from ..train import runs, specs
from ..train.compare import spec_of
from ..train.evaluate import evaluate_model, mlm_left
from ..train.finetune import CONFUSION_FILE
from ..train.kinds import KINDS, execute
from ..train.loop import init_distributed, resolve_device
from ..train.runs import read_metrics
from . import class_cli, compute_cli, finetune_cli, memory_cli
from .stopping import graceful_stop
from .probe_cli import report_probe


def on_device(model, name: str):
    """The model on the device a command asked for (auto: a GPU where PyTorch sees one), in eval mode."""
    return model.to(resolve_device(name)).eval()


def cmd_fill_mask(a) -> int:
    model, tok = load_pretrained(a.model)
    if a.in_turn:
        return _fill_in_turn(fast.optimize(on_device(model, a.device)), tok, a)
    results = fill_mask(fast.optimize(on_device(model, a.device)), tok, a.text, top_k=a.top_k)
    if a.json:
        print(json.dumps(results[0] if len(results) == 1 else results, indent=2))
        return 0
    for i, cands in enumerate(results, 1):
        if len(results) > 1:
            print(f"[MASK] #{i}")
        for c in cands:
            print(f"  {c['score']:6.1%}  {c['token_str']:<15} {c['sequence']}")
    return 0


def _fill_in_turn(model, tok, a) -> int:
    """Two or more [MASK]s filled in one pass (each on its own) and one at a time (the surest first)."""
    res = fill_in_turn(model, tok, a.text)
    if a.json:
        print(json.dumps(res, indent=2))
        return 0
    for key, name in (("independent", "one pass"), ("in_turn", "one at a time")):
        r = res[key]
        print(f"{name:>14}: {r['sequence']}\n{'':>16}alone {' · '.join(f'{p:.1%}' for p in r['alone'])}; "
              f"in turn {' · '.join(f'{p:.1%}' for p in r['chain'])}; together {math.exp(r['chain_log_prob']):.3%}")
    return 0


def cmd_facts(a) -> int:
    """LAMA-style factual cloze prompts (bertlab/data/facts.jsonl): precision@1 and @10 per relation."""
    facts.check_relation(a.relation, facts.load()[0])  # a bad relation is said before a model loads
    model, tok = load_pretrained(a.model)
    res = facts.score(fast.optimize(on_device(model, a.device)), tok, a.relation)
    print(json.dumps(res, indent=2) if a.json else facts.table(res))
    return 0


# when in a training step each of sizing.training_phases' moments is, for `info`'s memory heading
INFO_PEAK = {"head": "the start of backward (at the loss)", "top layer": "backward through the top layer",
             "bottom layer": "backward through the bottom layer", "optimizer": "the optimizer step"}


def info_note(key: str, value: int, phases: dict) -> str:
    """A word on an `info` memory line that would puzzle: no gradients at the peak, all of them, or a
    figure left out of the total."""
    every = phases["optimizer"]["gradients"]
    if key == "gradients" and value == 0:
        return (f"  (none yet: backward makes them after this moment, and the last step's were freed; "
                f"all of them take {sizing.humanize(every, 'B')}, at the optimizer step)")
    if key == "gradients" and value == every:
        return "  (all of them: one a weight)"
    if key == "gradients":
        return f"  (those backward has made so far, of {sizing.humanize(every, 'B')})"
    if key == "weight_copies" and value == 0:
        return "  (half-precision copies of the weights: none in fp32)"
    if key == "activations_per_layer":
        return "  (one layer's, for comparison: not added to the total)"
    if key == "logits" and value:
        return "  (at every position; `pretrain` computes them at the masked 15 % only)"
    return ""


def cmd_info(a) -> int:
    if a.model in PRESETS:
        config, where = preset(a.model), f"preset {a.model!r}"
    else:
        folder = resolve_folder(a.model)
        config, where = BertConfig.from_json_file(folder / "config.json"), str(folder)
    counts = sizing.param_counts(config)
    mem = sizing.memory(config, batch_size=a.batch_size, seq_len=a.seq_len, training=True)
    phases = sizing.training_phases(config, batch_size=a.batch_size, seq_len=a.seq_len)
    peak = max(phases, key=lambda k: phases[k]["total"])  # the phase sizing.memory reports
    fl = sizing.flops(config, seq_len=a.seq_len)
    if a.json:
        print(json.dumps({"source": where, "config": config.to_dict(), "params": counts,
                          "train_memory_bytes": mem, "train_memory_peak": peak, "forward_flops": fl}, indent=2))
        return 0
    print(f"{where}\n")
    for k, v in config.to_dict().items():
        print(f"  {k:<30} {v}")
    print("\nparameters")
    for k, v in counts.items():
        print(f"  {k:<30} {v:>14,}  ({sizing.humanize(v)})")
    print(f"\ntraining memory, batch {a.batch_size} x {a.seq_len} tokens, fp32 + AdamW: what is live at the "
          f"step's peak, {INFO_PEAK[peak]}")
    for k, v in mem.items():
        print(f"  {k:<30} {sizing.humanize(v, 'B')}{info_note(k, v, phases)}")
    print(f"\nforward FLOPs per sequence of {a.seq_len} tokens: {sizing.humanize(fl['total'])}")
    return 0


def _progress(total_hint: int | None):
    """(log, on_row, close): a tqdm bar fed by the trainer's structured rows; messages above it."""
    bar = tqdm(total=total_hint, unit="step", disable=not sys.stderr.isatty(), dynamic_ncols=True)

    def log(msg: str) -> None:
        tqdm.write(msg, file=sys.stderr)

    def on_row(row: dict) -> None:
        if row["event"] == "train" and not bar.disable:
            bar.total = row["total_steps"]
            bar.update(row["step"] - bar.n)
            bar.set_postfix_str(f"loss {row['loss']:.4f}  lr {row['lr']:.2e}  {row['tokens_per_s']:.0f} tok/s")
        elif row["event"] == "train" or row["event"] == "eval":
            shown = {k: v for k, v in row.items() if isinstance(v, float) and "_L" not in k}
            log(f"{row['event']} step {row['step']}: " + "  ".join(f"{k} {v:.4g}" for k, v in shown.items()))
    return log, on_row, bar.close


def _spec(cls, a) -> specs.Spec:
    """The spec the flags describe; resuming, the run's own spec with the changes a resume may make."""
    given = cls.given(a)
    if not getattr(a, "resume", False):
        return cls(**given)
    saved = runs.Run(a.out).spec() if Path(a.out).is_dir() else None
    if saved is None:
        raise ValueError(f"{a.out}: no run to resume there (no spec.json); leave out --resume to start one")
    spec, ignored = saved.resumed(given)
    if ignored:
        warnings.warn(f"resuming keeps the run's own {', '.join(ignored)}")
    return spec


def cmd_pretrain(a) -> int:
    spec = _spec(specs.PretrainSpec, a)
    rank, _ = init_distributed() if "WORLD_SIZE" in os.environ else (0, 1)
    log, on_row, close = _progress(spec.steps) if rank == 0 else (lambda m: None, lambda r: None, lambda: None)
    t = time.time()
    status = execute(spec, a.out, a.resume, log, graceful_stop(log), [on_row])
    close()
    if rank != 0:
        return 0
    evals = [r for r in read_metrics(a.out)[0] if r.get("split") == "eval"]
    print(f"\n{status['state']} at step {status['step']} of {status['total_steps']} "
          f"in {time.time() - t:.0f} s (run time {status.get('elapsed', 0):.0f} s)")
    if evals:
        e = evals[-1]
        gen = "generator's " if family.trains_generator(spec.arch) else ""
        line = f"held-out: {gen}MLM loss {e['mlm_loss']:.3f}, masked-token accuracy {e['mlm_acc']:.1%}"
        line += f" (unigram guess {e['unigram_acc']:.1%})"
        if "nsp_acc" in e:
            line += f", {spec.objective.upper()} accuracy {e['nsp_acc']:.1%}"
        print(line)
        if "rtd_auc" in e:
            print(f"discriminator: {e['rtd_acc']:.1%} of tokens judged right, {e['rtd_recall']:.1%} of replaced "
                  f"ones caught, AUC {e['rtd_auc']:.3f} ({e['replaced_share']:.1%} of tokens replaced)")
    if status["state"] == "failed":
        print(f"error: {status['message']}", file=sys.stderr)
        return 1
    print(f"model: {a.out}/model   (python -m bertlab fill-mask --model {a.out} \"the acting was [MASK] .\")")
    return 0


def cmd_race(a) -> int:
    spec = _spec(specs.RaceSpec, a)
    if (Path(a.out) / "results.json").exists() and a.resume:  # a finished race, re-opened
        print((Path(a.out) / "table.md").read_text(encoding="utf-8"))
        return 0
    res = execute(spec, a.out, a.resume, lambda m: print(m, flush=True), graceful_stop(print))
    if res["state"] != "finished":
        print(f"{res['state']}: {res.get('message', '')}", file=sys.stderr)
        return 1
    print("\n" + (Path(a.out) / "table.md").read_text(encoding="utf-8"))
    return 0


def cmd_finetune(a) -> int:
    if a.compare or (a.resume and spec_of(a.out) is not None):
        return cmd_compare(a)
    if a.seeds is not None:
        raise ValueError("--seeds goes with --compare (one run has one --seed)")
    spec = _spec(specs.FinetuneSpec, a)
    log, on_row, close = _progress(None)
    res = execute(spec, a.out, a.resume, log, graceful_stop(log), [on_row])
    close()
    if res["state"] == "failed":
        print(f"error: {res['message']}", file=sys.stderr)
        return 1
    if a.json:
        print(json.dumps(res, indent=2))
        return 0
    unit = "texts" if res["kind"] == "sequence" else "tokens"
    print(f"\n{res['state']} at step {res['step']} of {res['total_steps']} in {res['seconds']:.0f} s "
          f"({res['method']}: {res['trainable_params']:,} of {res['total_params']:,} parameters trained)")
    others = {"multi": ("accuracy", "micro_f1", "macro_f1"), "regression": ("pearson", "spearman", "rmse"),
              "qa": ("exact_match", "f1")}.get(res.get("problem", "single"))
    if others:  # the problem's own figures (examples/README.md says what each means)
        print("validation: " + "  ".join(f"{k.replace('_', ' ')} {res[k]:.3f}" for k in ("loss", *others) if k in res))
    elif "accuracy" in res:
        print(f"validation: loss {res['loss']:.4f}  accuracy {res['accuracy']:.1%}  macro-F1 {res['macro_f1']:.3f}  "
              f"(always guessing the commonest label: {res['majority_baseline']:.1%} of {sum(res['support'])} {unit})")
        labels = res["labels"]
        if len(labels) <= 8:
            w = max(8, *(len(x) for x in labels))
            print("confusion matrix (rows: true label, columns: predicted):")
            print(" " * (w + 2) + "".join(f"{x:>{w + 1}}" for x in labels))
            for x, row in zip(labels, res["confusion"]):
                print(f"  {x:<{w}}" + "".join(f"{v:>{w + 1}}" for v in row))
        else:
            print(f"confusion matrix ({len(labels)} labels): {Path(a.out) / CONFUSION_FILE}")
    if res["model_dir"]:
        print(f"model: {res['model_dir']}")
    return 0


def cmd_compare(a) -> int:
    """`finetune --compare full,lora,... --seeds N`: every method on the same data and seeds; the ETA
    first, a line as each run starts and ends, then the table (or --json)."""
    spec = finetune_cli.compare_spec(a, specs.FinetuneSpec.given(a))
    log, on_row, close = finetune_cli.compare_progress()
    res = execute(spec, a.out, True, log, graceful_stop(log), [on_row])
    close()
    return finetune_cli.report_compare(res, a.out, a.json)


def cmd_classify(a) -> int:
    return finetune_cli.report_classify(a.model, a.text, a.pair, a.question, a.json, device=a.device)


def cmd_distill(a) -> int:
    spec = _spec(specs.DistillSpec, a)
    res = execute(spec, a.out, a.resume, lambda m: print(m, file=sys.stderr, flush=True), graceful_stop(print))
    evals = [r for r in read_metrics(a.out)[0] if r.get("split") == "eval"]
    print(f"{res['state']} at step {res['step']} of {res['total_steps']}: {res['layers']} layers, "
          f"{res.get('elapsed', 0):.0f} s")
    if evals:
        e = evals[-1]
        print(f"held-out: soft-target KL {e['kl_loss']:.4f}, MLM {e['mlm_loss']:.4f}, cosine {e['cos_loss']:.4f}; "
              f"masked-token accuracy student {e['student_acc']:.1%}, teacher {e['teacher_acc']:.1%}; "
              f"the student's top guess is the teacher's {e['agreement']:.1%} of the time")
    if res["state"] == "failed":
        print(f"error: {res['message']}", file=sys.stderr)
        return 1
    print(f"model: {res['model_dir']}   (loads in transformers as DistilBertForMaskedLM)")
    return 0


def cmd_probe(a) -> int:
    return report_probe(specs.ProbeSpec(**specs.ProbeSpec.given(a)), a.json)


def cmd_run(a) -> int:
    """Execute a run folder's spec.json: what the job manager launches. Resumes when it has checkpoints.
    A failure before training starts (bad corpus, bad task) is written to status.json for the UI."""
    run = runs.Run(a.dir)
    try:
        spec = run.spec()
        if spec is None:
            raise ValueError(f"{a.dir}: no spec.json, so this is not a run folder")
        log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
        res = execute(spec, str(run.path), True, log, graceful_stop(log))
    except (ValueError, OSError) as e:
        if run.path.is_dir():
            runs.write_status(run.path, state="failed", message=str(e), pid=os.getpid())
        raise
    if res["state"] == "failed":
        print(f"error: {res['message']}", file=sys.stderr)
        return 1
    if "step" in res:
        print(f"{res['state']} at step {res['step']} of {res['total_steps']}", file=sys.stderr)
    else:
        print(res["state"], file=sys.stderr)
    return 0


def cmd_evaluate(a) -> int:
    res = evaluate_model(a.model, corpus=a.corpus, max_docs=a.max_docs, batches=a.batches,
                         batch_size=a.batch_size, device=a.device)
    if a.json:
        print(json.dumps(res, indent=2))
        return 0
    print(f"{res['source']}: {res['examples']} held-out examples, {res['masked_tokens']} masked tokens")
    print(f"  MLM loss              {res['mlm_loss']:.4f}")
    print(f"  masked-token accuracy {res['mlm_acc']:.1%}   (always guessing the commonest token: {res['unigram_acc']:.1%})")
    if "nsp_acc" in res:
        print(f"  next-sentence acc.    {res['nsp_acc']:.1%}")
    return 0


def cmd_forgetting(a) -> int:
    rows = mlm_left(a.runs, batches=a.batches)
    if a.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"masked-word accuracy before and after fine-tuning ({a.batches} batches of 32 held-out sequences)")
    print(f"{'run':<28} {'method':<8} {'lr':>8} {'before':>8} {'after':>8} {'left':>7}")
    for r in rows:
        print(f"{r['run'][:28]:<28} {r['method']:<8} {r['lr'] or 0:>8.0e} {r['before']:>8.1%} {r['after']:>8.1%} "
              f"{r['left']:>7.0%}" + ("  (its own modules off: every pre-trained weight kept)" if r["untouched"] else ""))
    return 0


def cmd_export(a) -> int:
    model, tok = load_pretrained(a.source)
    if a.dropout is not None:  # a training setting only: the weights and every eval-mode output stay the same
        model.config = model.config.replace(hidden_dropout_prob=a.dropout, attention_probs_dropout_prob=a.dropout)
    out = save_pretrained(model, tok, a.out, dtype=torch.float16 if a.fp16 else torch.float32,
                          overwrite=a.overwrite)
    size = sum(f.stat().st_size for f in out.iterdir())
    hf = "transformers as MegatronBertForPreTraining (pre-LN)" if model.config.pre_ln else "transformers"
    print(f"wrote {out} ({size / 1e6:.1f} MB; loads with bertlab.load_pretrained and {hf})")
    return 0


DEVICE_HELP = "cpu | cuda | cuda:N | auto (default: a GPU where PyTorch sees one, else the CPU)"


def _positive(text: str) -> int:
    """An argparse type: a whole number of at least 1 (argparse then says what is wrong, in one line)."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {n}")
    return n


def finetune_flags(p: argparse.ArgumentParser) -> None:
    """`finetune`'s flags: the spec's fields, its run folder and --json, and a comparison's two."""
    specs.FinetuneSpec.add_arguments(p)
    p.add_argument("--out", required=True, help="run folder (created; with --resume, continued)")
    p.add_argument("--resume", action="store_true", help="go on from the newest checkpoint")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.add_argument("--compare", default=None, metavar="METHODS",
                   help="compare methods on the same data and seeds, e.g. full,frozen,bitfit,lora,ia3,"
                        "prefix,prompt,adapter (every other flag applies to each); --out holds the runs")
    p.add_argument("--seeds", type=_positive, default=None,
                   help="with --compare: runs per method, seeds --seed, --seed + 1, ... (default 1)")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bertlab", description="See and train BERT end to end.")
    sub = p.add_subparsers(dest="command", required=True)
    f = sub.add_parser("fill-mask", help="predict the words hidden behind [MASK]")
    f.add_argument("text", help='e.g. "the acting was [MASK] ."')
    f.add_argument("--model", default=None, help="model folder or hub id (default: the shipped model)")
    f.add_argument("--top-k", type=_positive, default=5)
    f.add_argument("--json", action="store_true", help="print Hugging Face widget fields as JSON")
    f.add_argument("--in-turn", action="store_true",
                   help="two or more [MASK]s: fill them in one pass (each on its own, as BERT was trained) and one "
                        "at a time (the surest first), and score both fillings")
    f.add_argument("--device", default="auto", help=DEVICE_HELP)
    f.set_defaults(run=cmd_fill_mask)
    q = sub.add_parser("facts", help="what a model knows: factual cloze prompts (LAMA-style), precision@1 and @10")
    q.add_argument("--model", default=None, help="model folder or hub id (default: the shipped model)")
    q.add_argument("--relation", default=None, help="one relation of bertlab/data/facts.jsonl (default: all)")
    q.add_argument("--json", action="store_true", help="print every prompt's rank, probability and guesses as JSON")
    q.add_argument("--device", default="auto", help=DEVICE_HELP)
    q.set_defaults(run=cmd_facts)
    i = sub.add_parser("info", help="a model's config, parameter counts, memory and FLOPs")
    i.add_argument("model", nargs="?", default=None, help="model folder, hub id or preset name")
    i.add_argument("--batch-size", type=_positive, default=32)
    i.add_argument("--seq-len", type=_positive, default=128)
    i.add_argument("--json", action="store_true")
    i.set_defaults(run=cmd_info)
    c = sub.add_parser("classify", help="a fine-tuned model's prediction for a text (full or adapter folder)")
    c.add_argument("text", help="the text (for a question-answering model: the passage holding the answer)")
    c.add_argument("--model", required=True, help="fine-tuned run or model folder, adapter folder or hub id")
    c.add_argument("--pair", default=None, help="the second text of a sentence-pair task (segment B)")
    c.add_argument("--question", default=None, help="the question, for a question-answering model")
    c.add_argument("--json", action="store_true", help="print probabilities and logits (or the answer) as JSON")
    c.add_argument("--device", default="auto", help=DEVICE_HELP)
    c.set_defaults(run=cmd_classify)
    e = sub.add_parser("evaluate", help="held-out MLM loss and masked-token accuracy of a model or run")
    e.add_argument("model", nargs="?", default=None, help="run folder, model folder or hub id (default: shipped)")
    e.add_argument("--corpus", default="imdb", help="ignored for a run folder: its own held-out split is used")
    e.add_argument("--max-docs", type=_positive, default=None)
    e.add_argument("--batches", type=_positive, default=50)
    e.add_argument("--batch-size", type=_positive, default=32)
    e.add_argument("--device", default="auto", help=DEVICE_HELP)
    e.add_argument("--json", action="store_true")
    e.set_defaults(run=cmd_evaluate)
    f = sub.add_parser("forgetting", help="how much masked-word skill fine-tune runs kept (catastrophic forgetting)")
    f.add_argument("runs", nargs="+", help="fine-tune run folders (each is compared with the model it started from)")
    f.add_argument("--batches", type=_positive, default=8, help="held-out batches of 32 sequences (default 8)")
    f.add_argument("--json", action="store_true")
    f.set_defaults(run=cmd_forgetting)
    x = sub.add_parser("export", help="copy a run's (or any) model into a Hugging Face folder")
    x.add_argument("source", help="run folder, model folder or hub id")
    x.add_argument("out", help="a new or empty folder to write (atomically)")
    x.add_argument("--overwrite", action="store_true",
                   help="replace a model folder bertlab wrote there (never any other folder)")
    x.add_argument("--fp16", action="store_true", help="store weights in float16 (half the size)")
    x.add_argument("--dropout", type=float, default=None,
                   help="dropout written to config.json, which fine-tuning uses (e.g. 0.1 after pre-training "
                        "without dropout)")
    x.set_defaults(run=cmd_export)
    for kind in KINDS.values():  # one subcommand per job kind that has one: its record says which
        if not kind.command:
            continue
        j = sub.add_parser(kind.name, help=kind.help, conflict_handler="resolve")  # own flags may replace a field's
        if kind.flags:
            family.load(kind.flags)(j)
        else:  # the flags are the spec's fields
            kind.spec.add_arguments(j)
            if kind.run:
                j.add_argument("--out", required=True, help="run folder (created; with --resume, continued)")
                j.add_argument("--resume", action="store_true", help="go on from the newest checkpoint")
            if kind.json:
                j.add_argument("--json", action="store_true", help="print the results as JSON")
        j.set_defaults(run=family.load(kind.command))
    k = sub.add_parser("compute", help="pre-training FLOPs, time and cost; Kaplan's and Chinchilla's scaling laws")
    compute_cli.add_arguments(k)
    k.set_defaults(run=compute_cli.cmd_compute)
    m = sub.add_parser("memory", help="a training step's peak memory: estimated, and measured with --measure "
                       "(activation checkpointing on and off)")
    memory_cli.add_arguments(m)
    m.set_defaults(run=memory_cli.cmd_memory)
    cl = sub.add_parser("class", help="the class's runs ranked by held-out accuracy; --clear: clear them (teacher)")
    class_cli.add_arguments(cl)
    cl.set_defaults(run=class_cli.cmd_class)
    r = sub.add_parser("run", help="execute a run folder's spec.json (what the web app's job manager launches)")
    r.add_argument("dir", help="run folder holding spec.json")
    r.set_defaults(run=cmd_run)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            warnings.showwarning = lambda m, *a, **k: print(f"warning: {m}", file=sys.stderr)
            return args.run(args)
    except (ValueError, OSError, RuntimeError) as e:  # RuntimeError: a run locked by another process
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
