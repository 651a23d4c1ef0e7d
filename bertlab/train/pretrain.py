"""Pre-training BERT, RoBERTa, ALBERT or ELECTRA: corpus → tokenizer → examples → masked batches → the shared
Trainer. The architecture (`spec.arch`) decides the tokenizer (RoBERTa: byte-level BPE; DeBERTa-v3: Unigram),
the model class (bertlab.family) and the default pair task; masking, loss, checkpoints and resume are shared.
ELECTRA trains a generator and a discriminator together (train/electra.py).

Everything a run needs to resume exactly lives in its folder: the tokenizer it trained (WordPiece
training is not deterministic), the tokenized examples, the settings and the checkpoints.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
from pathlib import Path

import torch
import torch.distributed as dist

from ..analysis.attention import layer_diagnostics
from ..analysis.predict import fill_mask
from ..checkpoint import load_model, resolve_folder, save_pretrained, write_model_files
from .. import family
from ..config import BertConfig, preset
from ..model import fix_sinusoidal_positions, set_gradient_checkpointing
from ..data.corpus import (
    OBJECTIVES,
    Example,
    load_documents,
    make_pretraining_examples,
    split_heldout,
    tokenize_documents,
)
from ..data.masking import Batcher, word_continuation
from ..data.tasks import TASK_CORPUS, adaptation_texts
from ..tokenizer import BPETokenizer, SubwordTokenizer, UnigramTokenizer, WordPieceTokenizer
from . import electra, objectives, runs
from .loop import Trainer, rank_world
from .specs import CAUSAL, FinetuneSpec, PretrainSpec

# a member record's `tokenizer` -> the class that trains it and its name in the run's log
TOKENIZERS = {"wordpiece": (WordPieceTokenizer, "WordPiece"), "byte-level-bpe": (BPETokenizer, "byte-level BPE"),
              "unigram": (UnigramTokenizer, "Unigram")}
PROBES = ["the acting was [MASK] .", "i would [MASK] recommend this film .",
          "this is one of the worst [MASK] i have ever seen .", "the [MASK] was slow but the ending was great ."]


# ---- data, cached in the run folder ---------------------------------------------------------------

def pack_examples(examples: list[Example]) -> dict[str, torch.Tensor]:
    """Examples as flat tensors: loads with torch.load(weights_only=True), ~10x smaller than JSON."""
    lens = torch.tensor([len(e.ids) for e in examples], dtype=torch.long)
    return {"ids": torch.tensor([i for e in examples for i in e.ids], dtype=torch.int32),
            "tt": torch.tensor([t for e in examples for t in e.token_type_ids], dtype=torch.int8),
            "offsets": torch.cat([torch.zeros(1, dtype=torch.long), lens.cumsum(0)]),
            "labels": torch.tensor([e.label for e in examples], dtype=torch.long)}


def unpack_examples(d: dict[str, torch.Tensor]) -> list[Example]:
    ids, tt, off, lab = d["ids"].tolist(), d["tt"].tolist(), d["offsets"].tolist(), d["labels"].tolist()
    return [Example(ids[a:b], y, tt[a:b]) for a, b, y in zip(off[:-1], off[1:], lab)]


def cache_dir(spec: PretrainSpec) -> Path | None:
    """Prepared data is shared by runs with the same corpus and data settings: faster starts, and
    runs that differ only in model or optimisation see the very same vocabulary and examples."""
    corpus = Path(spec.corpus)
    if spec.init_from or (corpus.exists() and not corpus.is_file()):
        return None
    stamp = [spec.corpus, spec.text_column, spec.max_docs, spec.vocab_size, spec.max_len,
             "mlm" if spec.objective == CAUSAL else spec.objective,  # causal reads MLM's examples
             spec.heldout, spec.seed, *((corpus.resolve().as_posix(), corpus.stat().st_size, corpus.stat().st_mtime)
                                   if corpus.is_file() else ())]
    if (kind := family.MEMBERS[spec.arch].tokenizer) != "wordpiece":  # another tokenizer; WordPiece's members
        stamp.append(kind)  # share their data (and old cache keys)
    key = hashlib.sha1(json.dumps(stamp, default=str).encode()).hexdigest()[:16]
    root = Path(os.environ.get("BERTLAB_CACHE", Path.home() / ".cache" / "bertlab"))
    return root / "pretrain-data" / key


def prune_cache(root: Path, keep: Path | None = None, budget_mb: float | None = None) -> list[str]:
    """Remove the least recently used prepared-data entries until the cache fits BERTLAB_CACHE_MB
    (2000): every corpus and data setting made one more, for good. `keep` stays. The names removed."""
    if budget_mb is None:
        raw = os.environ.get("BERTLAB_CACHE_MB", "").strip()
        budget_mb = float(raw) if raw.replace(".", "", 1).isdigit() else 2000.0
    entries = []
    for d in root.iterdir() if root.is_dir() else []:
        with contextlib.suppress(OSError):
            if d.is_dir() and not d.is_symlink():
                entries.append((d.stat().st_mtime, sum(f.stat().st_size for f in d.rglob("*") if f.is_file()), d))
    total, removed = sum(size for _, size, _ in entries), []
    for _, size, d in sorted(entries, key=lambda e: e[0]):
        if total <= budget_mb * 1e6:
            break
        if keep is not None and d == keep:
            continue
        shutil.rmtree(d, ignore_errors=True)
        total -= size
        removed.append(d.name)
    return removed


def prepare_data(run_dir: Path, spec: PretrainSpec, log=print, phase=None):
    """Tokenizer + train/held-out examples, built once per run and read back on resume. `phase(text)`
    hears each step in words (the run's status shows them: a cold start takes a while)."""
    data, tmp, cache = run_dir / "data", run_dir / ".data-tmp", cache_dir(spec)
    phase = phase or (lambda text: None)
    once = " (once: cached for next time)" if cache is not None else ""
    if not (data / "examples.pt").exists() and cache is not None and (cache / "examples.pt").exists():
        log(f"reusing prepared data from {cache}")
        phase("reusing the vocabulary and examples an earlier run prepared (cached) ...")
        with contextlib.suppress(OSError):
            os.utime(cache)  # recently used: pruned last
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(cache, tmp)
        os.replace(tmp, data)
    if (data / "examples.pt").exists():
        old = runs.Run(run_dir).spec() or spec  # none yet: data just copied from the cache
        differ = [k for k in PretrainSpec.DATA if getattr(old, k) != getattr(spec, k)]
        if differ:
            raise ValueError(f"run {run_dir.name} already holds data prepared with other settings "
                             f"({', '.join(differ)}): resume it as it was, or pick another run name")
        tok = SubwordTokenizer.from_pretrained(data)  # the kind the folder holds
        phase("reading the prepared examples ...")
        blob = torch.load(data / "examples.pt", weights_only=True)
        return tok, unpack_examples(blob["train"]), unpack_examples(blob["heldout"]), blob["unigram"].tolist()
    log(f"loading corpus {spec.corpus!r} ...")
    phase(f"preparing the data{once}: reading {'the IMDB reviews' if spec.corpus == 'imdb' else 'the corpus'} ...")
    docs = task_documents(spec) if spec.corpus.startswith(TASK_CORPUS) else \
        load_documents(spec.corpus, spec.text_column, spec.max_docs)
    train_docs, held_docs = split_heldout(docs, spec.heldout, spec.seed)
    if not held_docs or len(train_docs) < 2:
        raise ValueError(f"{spec.corpus}: {len(docs)} documents are too few to hold some out for "
                         f"evaluation; give at least 3 documents (separate them with blank lines)")
    if spec.init_from:  # keep the model's own vocabulary
        tok = SubwordTokenizer.from_pretrained(resolve_folder(spec.init_from))
    else:  # the vocabulary the member's record names
        kind, name = TOKENIZERS[family.MEMBERS[spec.arch].tokenizer]
        log(f"training a {spec.vocab_size}-token {name} vocabulary on {len(train_docs)} documents ...")
        phase(f"preparing the data{once}: training a {name} vocabulary of {spec.vocab_size:,} tokens on "
              f"{len(train_docs):,} documents ...")
        tok = kind.train(train_docs, vocab_size=spec.vocab_size)
    tok.model_max_length = spec.max_len
    log("splitting sentences and tokenizing ...")
    phase(f"preparing the data{once}: splitting {len(docs):,} documents into sentences, tokenising them and "
          f"building {spec.max_len}-token examples ...")
    train_tok, held_tok = tokenize_documents(train_docs, tok), tokenize_documents(held_docs, tok)
    kw = dict(max_len=spec.max_len, objective=spec.objective if spec.objective in OBJECTIVES else "mlm",  # rtd: MLM's examples
              cls_id=tok.cls_token_id, sep_id=tok.sep_token_id)
    train = make_pretraining_examples(train_tok, seed=spec.seed, **kw)
    # NSP draws random B's from another document: a single held-out document borrows one to draw from.
    held = make_pretraining_examples(held_tok if len(held_tok) >= 2 else held_tok + train_tok[:1],
                                     seed=spec.seed + 1, **kw)
    if not train or not held:
        raise ValueError(f"{spec.corpus}: no training examples could be built (is the text too short?)")
    counts = torch.bincount(torch.tensor([i for d in train_tok for s in d for i in s], dtype=torch.long),
                            minlength=tok.vocab_size)
    counts[sorted(tok.special_ids)] = 0
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    tok.save_pretrained(tmp)
    torch.save({"train": pack_examples(train), "heldout": pack_examples(held), "unigram": counts}, tmp / "examples.pt")
    if cache is not None:  # best effort: a full disk or a race with another run only costs speed
        ctmp = cache.parent / f".{cache.name}.tmp-{os.getpid()}"
        try:
            cache.parent.mkdir(parents=True, exist_ok=True)
            shutil.copytree(tmp, ctmp, dirs_exist_ok=True)
            os.replace(ctmp, cache)
            prune_cache(cache.parent, keep=cache)
        except OSError:
            shutil.rmtree(ctmp, ignore_errors=True)
    os.replace(tmp, data)
    log(f"{len(train)} training and {len(held)} held-out examples of up to {spec.max_len} tokens")
    return tok, train, held, counts.tolist()


def task_documents(spec: PretrainSpec) -> list[str]:
    """Corpus "task:<task>": that task's own texts but those its fine-tuning holds out (FinetuneSpec's
    default share and seed, all of the task), one document each: task-adaptive pre-training."""
    task = spec.corpus.removeprefix(TASK_CORPUS)
    ft = FinetuneSpec.__dataclass_fields__
    try:  # the split needs the rows fine-tuning keeps: those with a label, in fine-tuning's default column
        docs, _ = adaptation_texts(task, text_column=spec.text_column, label_column=ft["label_column"].default,
                                   val_frac=ft["val_frac"].default, seed=ft["seed"].default)
    except ValueError as e:
        raise ValueError(f"corpus {spec.corpus[:80]}: {e}") from None
    return docs[:spec.max_docs]


def warm_cache(spec: PretrainSpec, log=print) -> Path | None:
    """Prepare `spec`'s data into the shared cache, unless it is there already; returns the entry. A
    server does it for its default recipe as it starts, so that a class's first run shows a curve
    within seconds instead of after preparing the data itself (a minute on a busy 2-core machine)."""
    cache = cache_dir(spec)
    if cache is None or (cache / "examples.pt").exists():
        return cache
    cache.parent.mkdir(parents=True, exist_ok=True)
    scratch = cache.parent.parent / f".warm-{os.getpid()}"  # not among the entries prune_cache weighs
    try:
        prepare_data(scratch, spec, log)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return cache


def model_config(spec: PretrainSpec, tok: SubwordTokenizer) -> BertConfig:
    """The new model's config: the spec's preset and overrides, and the tokenizer's ids. RoBERTa numbers
    positions from pad_token_id + 1, so its table has that many more rows than tokens it can take."""
    c = spec.config_overrides()
    if spec.arch == "bert":
        return preset(spec.preset, vocab_size=tok.vocab_size, **c)
    c |= dict(vocab_size=tok.vocab_size, pad_token_id=tok.pad_token_id, bos_token_id=tok.cls_token_id,
              eos_token_id=tok.sep_token_id)
    if family.MEMBERS[spec.arch].pad_offset:
        c["max_position_embeddings"] += tok.pad_token_id + 1  # type_vocab_size 1 comes with the preset
    return preset(spec.preset, spec.arch, **c)


def build_model(spec: PretrainSpec, tok: SubwordTokenizer):
    """BertForPreTraining, RobertaForMaskedLM or AlbertForPreTraining (bertlab.family picks the class),
    or ELECTRA's generator + discriminator pair."""
    overrides = spec.config_overrides()
    if spec.init_from:  # a continued model keeps its shape; only its dropout may change (e.g. 0 for a last stage)
        folder = resolve_folder(spec.init_from)
        config = BertConfig.from_json_file(folder / "config.json")
        if not family.MEMBERS[config.model_type].continues:  # ELECTRA, DistilBERT: other jobs
            raise ValueError(f"{folder.name}: a {config.model_type} model; pre-training continues BERT, RoBERTa "
                             f"and ALBERT models")  # the records with `continues`
        if config.model_type != spec.arch:  # its tokenizer, heads and objective are its own architecture's
            raise ValueError(f"{folder.name}: a {config.model_type} model; continue it with arch "
                             f"{config.model_type!r}, not {spec.arch!r}")
        model = load_model(folder, config.replace(**overrides))
    elif trainer := family.MEMBERS[spec.arch].pair(spec.objective):  # ELECTRA's (DeBERTa-v3's) generator + discriminator
        model = family.load(trainer)(model_config(spec, tok), spec.generator_size, spec.rtd_weight)
    else:
        model = family.build(model_config(spec, tok))
    if model.config.max_tokens < spec.max_len:
        raise ValueError(f"max_len {spec.max_len} exceeds the model's {model.config.max_tokens} positions")
    if spec.positions == "sinusoidal":  # on a resume the checkpoint then loads the same values
        fix_sinusoidal_positions(model)
    return set_gradient_checkpointing(model, spec.grad_checkpointing)


# ---- loss and evaluation -------------------------------------------------------------------------

class Evaluator:
    """Held-out loss and accuracy on fixed masks (comparable across steps), the unigram baseline on
    the same masks, per-layer attention diagnostics, and the probe sentences' top guesses."""

    def __init__(self, batcher: Batcher, examples: list[Example], n_batches: int, unigram: list[int],
                 tok: SubwordTokenizer, run_dir: Path | None = None, causal: bool = False):
        bs = batcher.batch_size
        chunks = [examples[i:i + bs] for i in range(0, min(len(examples), n_batches * bs), bs)]
        self.batches = [batcher.make_batch(c, torch.Generator().manual_seed(1234 + k)) for k, c in enumerate(chunks)]
        self.top_unigram = int(torch.tensor(unigram).argmax())
        self.tok, self.run_dir, self.causal = tok, run_dir, causal  # causal: next-token scores, no fill-in probes

    @torch.no_grad()
    def __call__(self, model) -> dict[str, float]:
        if isinstance(model, electra.ElectraPair):
            res = electra.evaluate_pair(model, self.batches, self.top_unigram)
        else:
            res = self._next(model) if self.causal else self._mlm(model)
        dev = next(model.parameters()).device
        b = {k: v.to(dev) for k, v in self.batches[0].items()}
        att = model(b["input_ids"], b["token_type_ids"], b["attention_mask"], output_attentions=True).attentions
        for k, per_layer in layer_diagnostics(att, b["attention_mask"]).items():
            res[k] = sum(per_layer) / len(per_layer)
            res.update({f"{k}_L{i}": v for i, v in enumerate(per_layer)})
        if self.run_dir is not None and not self.causal:
            self._probe(getattr(model, "generator", model))  # ELECTRA: the generator fills in blanks
        return res

    @torch.no_grad()
    def mlm(self, model) -> dict[str, float]:
        """Only the masked-word scores (mlm_loss, mlm_acc, unigram_acc; nsp_acc where the model has NSP)."""
        return self._next(model) if self.causal else self._mlm(model)

    def _next(self, model) -> dict[str, float]:
        """A causal run's held-out next-token loss and accuracy (under the masked words' names, as its
        training rows), and the most frequent token's accuracy as the baseline."""
        n = loss = correct = uni = 0.0
        for b in self.batches:
            b = {k: v.to(next(model.parameters()).device) for k, v in b.items()}
            _, m = objectives.next_token(model, b)
            y = b["input_ids"][:, 1:][b["attention_mask"][:, 1:].bool()]  # (N,): every next token
            loss, correct = loss + float(m["mlm_loss"]) * len(y), correct + float(m["mlm_acc"]) * len(y)
            uni, n = uni + float((y == self.top_unigram).sum()), n + len(y)
        return {"mlm_loss": loss / n, "mlm_acc": correct / n, "unigram_acc": uni / n}

    def _mlm(self, model) -> dict[str, float]:
        dev = next(model.parameters()).device
        n = loss = correct = uni = nsp_ok = nsp_n = 0.0
        for b in self.batches:
            b = {k: v.to(dev) for k, v in b.items()}
            out = model(b["input_ids"], b["token_type_ids"], b["attention_mask"], labels=b["labels"],
                        next_sentence_label=b.get("next_sentence_label"), sparse_mlm=True)
            y = b["labels"][b["labels"] != -100]
            loss += float(out.mlm_loss) * len(y)
            correct += float((out.mlm_logits.argmax(-1) == y).sum())
            uni += float((y == self.top_unigram).sum())
            n += len(y)
            if out.nsp_loss is not None:
                nsp_ok += float((out.nsp_logits.argmax(-1) == b["next_sentence_label"]).sum())
                nsp_n += len(b["next_sentence_label"])
        res = {"mlm_loss": loss / n, "mlm_acc": correct / n, "unigram_acc": uni / n}
        if nsp_n:
            res["nsp_acc"] = nsp_ok / nsp_n
        return res

    def _probe(self, model) -> None:
        rows = {}
        for s in PROBES:
            s = s.replace("[MASK]", self.tok.mask_token)  # RoBERTa's <mask>
            try:
                rows[s] = [c["token_str"] for c in fill_mask(model, self.tok, s, top_k=3)[0]]
            except ValueError:
                continue
        with open(self.run_dir / "probes.jsonl", "a", encoding="utf-8") as f:
            f.write(json.dumps({"step": int(runs.read_status(self.run_dir).get("step", 0)), "top3": rows}) + "\n")


def make_batcher(spec: PretrainSpec, tok: SubwordTokenizer, train: list[Example], rank: int = 0,
                 world: int = 1) -> Batcher:
    """The training batches: masked afresh each time (dynamic) or from `static_masks` fixed copies."""
    cont = None
    if spec.whole_word or spec.span_masking:  # SpanBERT's spans are runs of whole words
        cont = word_continuation(tok)  # '##ing' continues a word; 'Ġfilm' and '▁film' start one
    mask_frac, random_frac = family.MASK_RULES[spec.mask_rule]  # [MASK], random; kept
    return Batcher.from_tokenizer(train, spec.batch_size, tok, mask=spec.objective != CAUSAL,  # causal: plain text
                                  rate=spec.mask_rate, seed=spec.seed, rank=rank, world_size=world, is_continuation=cont, drop_last=True,
                                  static_masks=spec.static_masks, mask_frac=mask_frac, random_frac=random_frac,
                                  spans=spec.span_masking)


def _starting(run_dir: Path):
    """A phase of a starting run, shown in its status. No pid yet: until the Trainer says "running",
    the job manager judges the process itself, so one that dies here never reads "starting" forever."""
    def say(text: str) -> None:
        runs.write_status(run_dir, state="starting", message=text, pid=None)
    return say


# ---- the whole run -------------------------------------------------------------------------------

def pretrain(run_dir: str | os.PathLike, spec: PretrainSpec, resume: bool = False, log=print,
             stop_event=None, callbacks=()) -> dict:
    """Train (or resume) the run in `run_dir`; returns the final status. Resuming keeps the run's own
    spec but for the fields a resume may change (more steps, logging, device). Under torchrun, every
    rank calls this after `init_distributed()`; rank 0 prepares the data, the others wait and read it."""
    run = runs.Run(run_dir)
    run.path.mkdir(parents=True, exist_ok=True)
    rank, world = rank_world()
    if resume and (saved := run.spec()) is not None:
        spec, _ = saved.resumed({k: getattr(spec, k) for k in spec.RESUMABLE})  # the run's own data and model
    if rank == 0:
        if not resume and (ckpt := runs.latest_checkpoint(run.path)) is not None:  # the Trainer's refusal, before
            raise ValueError(f"run {run.path.name} already has checkpoints (newest {ckpt.name}): "  # any status
                             f"resume it, or delete the folder to start over")
        say = _starting(run.path)
        try:
            tok, train, held, unigram = prepare_data(run.path, spec, log, phase=say)
            run.write_spec(spec)
            say("building the model and the held-out batches ...")
        except BaseException as e:
            runs.write_status(run.path, state="failed", message=f"{type(e).__name__}: {e}", pid=os.getpid())
            raise
    if world > 1:
        dist.barrier()
    if rank != 0:
        tok, train, held, unigram = prepare_data(run.path, spec, log=lambda *_: None)
    torch.manual_seed(spec.seed)  # the same initial weights on every rank
    model = build_model(spec, tok)
    batcher = make_batcher(spec, tok, train, rank, world)
    evaluate = Evaluator(batcher, held, spec.eval_batches, unigram, tok, run.path if rank == 0 else None,
                         causal=spec.objective == CAUSAL)
    loss = objectives.next_token if spec.objective == CAUSAL else objectives.get(spec.loss).fn
    pair = isinstance(model, electra.ElectraPair)
    trainer = Trainer(model, batcher, spec, run.path, electra.compute_loss if pair else loss, evaluate,
                      on_save=lambda m, folder: (electra.save_pair if pair else write_model_files)(folder, m, tok),
                      on_load=electra.load_pair if pair else None, log_fn=log, stop_event=stop_event,
                      find_unused_parameters=spec.objective not in ("nsp", "sop"), callbacks=callbacks)
    status = trainer.fit(resume=resume)
    if rank == 0 and status.get("state") in ("finished", "stopped"):  # the run's latest model, where pickers look
        if pair:  # the discriminator is the model; its generator sits beside it
            save_pretrained(model.generator, tok, run.path / electra.GENERATOR)
        with model.folded() if pair else contextlib.nullcontext():  # DeBERTa-v3: E_Δ into the word table
            save_pretrained(model.discriminator if pair else model, tok, run.path / runs.MODEL)
    return status
