"""BERT's 80/10/10 masking, drawn fresh for every batch (or from N fixed copies per example), and one
`Example`, `collate` and `Batcher` for pre-training and fine-tuning alike. Every random number comes
from one seeded generator, drawn in a fixed order and amount, so a resumed run gets the same masks.
Special ids come from the tokenizer."""
from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import Iterable, Iterator, Sequence

import numpy as np
import torch

from ..tokenizer import SpecialIds, special_token_ids

# What happened to each position; stored in `MaskResult.rule` so a UI can colour it.
NOT_SELECTED, MASKED, RANDOM, KEPT = 0, 1, 2, 3
IGNORE_INDEX = -100  # the label PyTorch's cross_entropy skips


@dataclass
class Example:
    """One sequence and its label(s), for pre-training and fine-tuning alike."""
    ids: list[int]  # [CLS] A [SEP] (B [SEP])
    # One per sequence (NSP: 1 = B is random, 0 = B follows A; SOP: 1 = swapped; a class id; -100: none)
    # or one per token (a tag id; -100 where none).
    label: int | list[int]
    token_type_ids: list[int] | None = None  # 0 for [CLS] A [SEP], 1 for B [SEP]; None: all 0

    def __post_init__(self):
        if self.token_type_ids is None:
            self.token_type_ids = [0] * len(self.ids)
        elif len(self.token_type_ids) != len(self.ids):
            raise ValueError(f"{len(self.token_type_ids)} token types for {len(self.ids)} ids")


@dataclass
class MaskResult:
    input_ids: torch.Tensor  # (B, T) long: the corrupted input the model sees
    labels: torch.Tensor  # (B, T) long: original id where selected, else -100
    rule: torch.Tensor  # (B, T) int8: 0 not selected, 1 [MASK], 2 random token, 3 kept as is


def special_tokens_mask(input_ids: torch.Tensor, special_ids: Iterable[int]) -> torch.Tensor:
    """True where the id is a special token ([CLS], [SEP], [PAD], ...): never a prediction target."""
    ids = torch.as_tensor(list(special_ids), dtype=input_ids.dtype, device=input_ids.device)
    return torch.isin(input_ids, ids)


def word_ids_from_pieces(input_ids: torch.Tensor, is_continuation: torch.Tensor,
                         special_mask: torch.Tensor) -> torch.Tensor:
    """Word index per position (-1 at specials) from a (V,) bool table marking the pieces that continue a
    word (`word_continuation`), so whole-word masking works on examples that only kept their token ids."""
    cont = is_continuation.to(input_ids.device)[input_ids] & ~special_mask  # (B, T)
    start = ~cont & ~special_mask  # a word begins at every ordinary token that does not continue one
    word = start.long().cumsum(-1) - 1  # (B, T)
    return torch.where(special_mask, torch.full_like(word, -1), word.clamp(min=0))


# How a kind of vocabulary (`SubwordTokenizer.kind`) marks words: the marker, and whether it marks a word's
# first piece (byte-level BPE's 'Ġfilm', SentencePiece's '▁film') rather than its later ones (WordPiece's '##ing').
WORD_MARKS = {"wordpiece": ("##", False), "bpe": ("\u0120", True), "unigram": ("\u2581", True)}


def continuation_table(vocab: Sequence[str], prefix: str = "##", marks_start: bool = False) -> torch.Tensor:
    """(V,) bool: which vocabulary entries continue a word: those with `prefix` (WordPiece's '##ing'), or
    with `marks_start` those without it."""
    return torch.tensor([t.startswith(prefix) != marks_start for t in vocab], dtype=torch.bool)


def word_continuation(tok) -> torch.Tensor:
    """(V,) bool continuation table of a tokenizer, by its kind's marker (WORD_MARKS). An id missing from a
    loaded vocabulary (a gap) counts as a word start."""
    prefix, marks_start = WORD_MARKS[tok.kind]
    pieces = [tok.backend.id_to_token(i) for i in range(tok.vocab_size)]
    return continuation_table([prefix if t is None and marks_start else t or "" for t in pieces], prefix, marks_start)


def _check(input_ids, special_mask, word_ids, mask_token_id, random_ids, rate, mask_frac, random_frac):
    if input_ids.dtype not in (torch.int64, torch.int32):
        raise ValueError(f"input_ids must be an integer tensor, got {input_ids.dtype}")
    if input_ids.dim() != 2:
        raise ValueError(f"input_ids must be (B, T), got shape {tuple(input_ids.shape)}")
    if special_mask.shape != input_ids.shape or special_mask.dtype != torch.bool:
        raise ValueError(f"special_mask must be a bool tensor of shape {tuple(input_ids.shape)}, "
                         f"got {special_mask.dtype} {tuple(special_mask.shape)}")
    if word_ids is not None and word_ids.shape != input_ids.shape:
        raise ValueError(f"word_ids must have shape {tuple(input_ids.shape)}, got {tuple(word_ids.shape)}")
    if not 0.0 < rate <= 1.0:
        raise ValueError(f"rate must be in (0, 1], got {rate}")
    for name, v in (("mask_frac", mask_frac), ("random_frac", random_frac)):
        if not 0.0 <= v <= 1.0:
            raise ValueError(f"{name} must be in [0, 1], got {v}")
    if mask_frac + random_frac > 1.0 + 1e-9:
        raise ValueError(f"mask_frac + random_frac must be <= 1, got {mask_frac} + {random_frac}")
    if isinstance(mask_token_id, bool) or not isinstance(mask_token_id, int) or mask_token_id < 0:
        raise ValueError(f"mask_token_id must be a token id (an integer >= 0), got {mask_token_id!r}")
    if random_ids.dim() != 1 or random_ids.dtype != torch.long:
        raise ValueError(f"random_ids must be a 1-D long tensor, got {random_ids.dtype} {tuple(random_ids.shape)}")
    if random_frac > 0 and len(random_ids) == 0:
        raise ValueError("no ordinary tokens to draw random replacements from (random_ids is empty)")


SPAN_P, SPAN_MAX = 0.2, 10  # SpanBERT's span lengths: geometric(0.2) over 1..10 words, mean 3.8


def span_lengths(shape, generator: torch.Generator | None = None, p: float = SPAN_P,
                 longest: int = SPAN_MAX) -> torch.Tensor:
    """Span lengths in words, drawn from the geometric distribution P(l) ∝ p(1-p)^(l-1) cut to
    1..longest (renormalised, as SpanBERT draws them): by inverting its distribution function."""
    q = 1.0 - p
    u = torch.rand(shape, generator=generator, dtype=torch.float64)
    lengths = torch.floor(torch.log1p(-u * (1.0 - q ** longest)) / math.log(q)) + 1
    return lengths.clamp(1, longest).long()


def mask_tokens(input_ids: torch.Tensor, special_mask: torch.Tensor, *, mask_token_id: int,
                random_ids: torch.Tensor, rate: float = 0.15, mask_frac: float = 0.8,
                random_frac: float = 0.1, word_ids: torch.Tensor | None = None,
                generator: torch.Generator | None = None, spans: bool = False) -> MaskResult:
    """Select each eligible token (or, with `word_ids` (-1 at specials), whole word: one rule per
    word) with probability `rate`; of those, `mask_frac` become [MASK], `random_frac` a token drawn
    from `random_ids` (never a special one), the rest stay. Every sequence with an eligible token
    gets at least one selection, so a batch never has zero labels. `spans` (SpanBERT): the words
    (tokens without `word_ids`) are first cut into runs of span_lengths() words; runs are then taken
    in a random order until a budget of round(rate × eligible tokens) is spent, the last run cut short
    to fit, as SpanBERT samples spans until 15 % of the sequence is masked. Each run gets one rule. A
    word is taken whole, when at least half of its pieces fit the budget, so with words of several
    pieces a row's count may miss the budget by less than half a word."""
    squeeze = input_ids.dim() == 1
    if squeeze:  # a single (T,) sequence is fine too
        input_ids, special_mask = input_ids[None], special_mask[None]
        word_ids = None if word_ids is None else word_ids[None]
    _check(input_ids, special_mask, word_ids, mask_token_id, random_ids, rate, mask_frac, random_frac)
    B, T = input_ids.shape
    dev = input_ids.device
    eligible = ~special_mask  # (B, T)
    if word_ids is None:
        group = torch.arange(T, device=dev).expand(B, T)  # every token is its own "word"
    else:
        word_ids = word_ids.to(dev)
        eligible = eligible & (word_ids >= 0)
        prev = torch.cat([torch.full_like(word_ids[:, :1], -1), word_ids[:, :-1]], 1)
        start = eligible & ((word_ids != prev) | (prev < 0))  # first piece of each word
        group = (start.long().cumsum(1) - 1).clamp(min=0)  # (B, T) word index, < T
    if spans:  # one more draw first: the span lengths, then each word's span = the run it falls in
        if word_ids is None:  # tokens are the words, counted over eligible positions only
            group = (eligible.long().cumsum(1) - 1).clamp(min=0)
        word = group  # (B, T) the word each token belongs to
        ends = span_lengths((B, T), generator).cumsum(1).to(dev)  # (B, T): span s ends before word ends[s]
        group = torch.searchsorted(ends, group.contiguous(), right=True)  # (B, T) span index, < T
    # Four fixed-size draws, always in this order: same generator state -> same masks.
    u_sel = torch.rand(B, T, generator=generator).to(dev).gather(1, group)  # one draw per word
    u_rule = torch.rand(B, T, generator=generator).to(dev).gather(1, group)
    pick = torch.randint(max(len(random_ids), 1), (B, T), generator=generator)  # an index into random_ids
    rand_ids = (random_ids.cpu()[pick] if len(random_ids) else pick).to(dev)
    score = torch.rand(B, T, generator=generator).to(dev)

    selected = _span_budget(eligible, word, u_sel, rate) if spans else eligible & (u_sel < rate)  # (B, T)
    need = eligible.any(1) & ~selected.any(1)  # (B,) rows that drew nothing
    if need.any():  # force one random eligible word (with spans: one word, not a whole run) in those rows
        unit = word if spans else group  # (B, T)
        pick = score.masked_fill(~eligible, -1.0).argmax(1, keepdim=True)  # (B, 1)
        selected |= eligible & (unit == unit.gather(1, pick)) & need[:, None]

    rule = torch.zeros(B, T, dtype=torch.int8, device=dev)
    rule[selected & (u_rule < mask_frac)] = MASKED
    rule[selected & (u_rule >= mask_frac) & (u_rule < mask_frac + random_frac)] = RANDOM
    rule[selected & (u_rule >= mask_frac + random_frac)] = KEPT
    out = input_ids.clone()
    out[rule == MASKED] = mask_token_id
    out = torch.where(rule == RANDOM, rand_ids.to(out.dtype), out)
    labels = torch.where(selected, input_ids.long(), torch.full_like(input_ids, IGNORE_INDEX).long())
    return MaskResult(out[0], labels[0], rule[0]) if squeeze else MaskResult(out, labels, rule)


def _span_budget(eligible: torch.Tensor, word: torch.Tensor, key: torch.Tensor, rate: float) -> torch.Tensor:
    """(B, T) selected: the runs in the order of their draws (`key`, one value per run), each in reading
    order, until round(rate × eligible) tokens; then rounded to whole words (in when half or more fit)."""
    B, T = eligible.shape
    n = eligible.sum(1)  # (B,)
    budget = (rate * n.double()).round().long().clamp(min=1)  # (B,)
    order = torch.sort(key.masked_fill(~eligible, 2.0), dim=1, stable=True).indices  # (B, T)
    first_k = torch.arange(T, device=key.device).expand(B, T) < budget[:, None]  # (B, T) in drawn order
    within = torch.zeros_like(eligible).scatter(1, order, first_k) & eligible  # (B, T) back in reading order
    inside = torch.zeros(B, T, device=key.device).scatter_add(1, word, within.float()).gather(1, word)
    size = torch.zeros(B, T, device=key.device).scatter_add(1, word, eligible.float()).gather(1, word)
    return eligible & (inside > 0) & (2 * inside >= size)  # none: mask_tokens forces one word


def taught_per_example(length: int, rate: float = 0.15, draws: int = 2000, seed: int = 0) -> float:
    """How many positions of a full example of `length` tokens ([CLS] ... [SEP]) the masked-word loss
    learns from, on average over `draws` draws of `mask_tokens` (at least one per example). ELECTRA's
    discriminator learns from all `length`."""
    ids = torch.full((draws, length), 5)
    special = torch.zeros(draws, length, dtype=torch.bool)
    special[:, 0] = special[:, -1] = True
    res = mask_tokens(ids, special, mask_token_id=4, random_ids=torch.arange(5, 50), rate=rate,
                      generator=torch.Generator().manual_seed(seed))
    return (res.labels != IGNORE_INDEX).sum().item() / draws


# ---- batches: collate, mask, shuffle, shard, resume ---------------------------------------------
def collate(examples: Sequence[Example], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-pad to the longest example in the batch (no attention wasted on a global max_len); labels
    are (B,) one per example, or (B, T) one per token padded with -100. Rows are written into numpy
    arrays: torch.tensor on nested lists took 20 ms for 128 x 128 tokens, long enough to starve a GPU."""
    if not examples:
        raise ValueError("cannot collate an empty list of examples")
    B, T = len(examples), max(len(e.ids) for e in examples)
    ids, types = np.full((B, T), pad_id, dtype=np.int64), np.zeros((B, T), dtype=np.int64)
    per_token = isinstance(examples[0].label, list)
    labels = np.full((B, T) if per_token else (B,), IGNORE_INDEX, dtype=np.int64)
    for i, e in enumerate(examples):
        n = len(e.ids)
        ids[i, :n], types[i, :n] = e.ids, e.token_type_ids
        if per_token:
            labels[i, :len(e.label)] = e.label
        else:
            labels[i] = e.label
    lengths = torch.tensor([len(e.ids) for e in examples])
    return {"input_ids": torch.from_numpy(ids),  # (B, T)
            "token_type_ids": torch.from_numpy(types),  # (B, T)
            "attention_mask": (torch.arange(T)[None, :] < lengths[:, None]).long(),  # (B, T)
            "labels": torch.from_numpy(labels)}  # (B,) or (B, T)


def _seed(*xs: int) -> int:
    """A 63-bit seed from several integers, so (seed, rank, epoch, step) never collide."""
    return int.from_bytes(hashlib.blake2b(repr(xs).encode(), digest_size=8).digest(), "little") >> 1


class Batcher:
    """Shuffled, sharded batches that resume exactly; masked afresh when pre-training (`mask`: the
    tokenizer's special ids; labels become MLM targets, the examples' own go to next_sentence_label).
    Epoch e's order is seeded by (seed, e) as in older run folders; rank r takes a contiguous share;
    batch k's masks are seeded by (seed, rank, epoch, k). So (epoch, position) is the whole state.
    `static_masks` N > 0: each example's masks are instead seeded by (seed, its index, epoch mod N), so
    it is seen with the same N masked copies in turn, as original BERT's data files held them
    (RoBERTa found dynamic masking, the default, slightly better)."""

    def __init__(self, examples: Sequence[Example], batch_size: int, pad_id: int, *,
                 mask: SpecialIds | None = None, rate: float = 0.15, mask_frac: float = 0.8,
                 random_frac: float = 0.1, is_continuation: torch.Tensor | None = None,
                 shuffle: bool = True, drop_last: bool = False, seed: int = 0, rank: int = 0,
                 world_size: int = 1, static_masks: int = 0, spans: bool = False):
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        if not 0 <= rank < world_size:
            raise ValueError(f"rank must be in [0, world_size={world_size}), got {rank}")
        if not examples or len(examples) < world_size:
            raise ValueError(f"{len(examples)} examples cannot be shared among {world_size} ranks")
        self.examples, self.batch_size, self.pad_id, self.mask = examples, batch_size, pad_id, mask
        self.drop_last, self.shuffle, self.is_continuation = drop_last, shuffle, is_continuation
        self.seed, self.rank, self.world_size = seed, rank, world_size
        if isinstance(static_masks, bool) or not isinstance(static_masks, int) or static_masks < 0:
            raise ValueError(f"static_masks must be an integer >= 0, got {static_masks!r}")
        self.static_masks = static_masks
        self.mask_kw = dict(rate=rate, mask_frac=mask_frac, random_frac=random_frac, spans=bool(spans))
        if mask is not None:  # bad settings fail here, not at the first batch
            self.mask_kw.update(mask_token_id=mask.mask, random_ids=mask.random)
            mask_tokens(torch.zeros(1, 1, dtype=torch.long), torch.ones(1, 1, dtype=torch.bool), **self.mask_kw)
        self.epoch, self.position = 0, 0  # position = batches of this epoch already handed out
        self.per_rank = len(examples) // world_size

    @classmethod
    def from_tokenizer(cls, examples: Sequence[Example], batch_size: int, tokenizer, *, mask: bool = True,
                       **kw) -> "Batcher":
        """[PAD] and, to mask (pre-training), the special ids from the tokenizer."""
        special = special_token_ids(tokenizer)
        return cls(examples, batch_size, special.pad, mask=special if mask else None, **kw)

    def __len__(self) -> int:
        """Batches per epoch (the same on every rank, so distributed steps stay in lock-step)."""
        n, bs = self.per_rank, self.batch_size
        return n // bs if self.drop_last else math.ceil(n / bs)

    def indices(self, epoch: int) -> list[int]:
        """This rank's example indices for `epoch`, in order."""
        n = len(self.examples)
        seed = _seed(self.seed, epoch) if self.mask is not None else self.seed * 1_000_003 + epoch
        order = torch.randperm(n, generator=torch.Generator().manual_seed(seed)) if self.shuffle else torch.arange(n)
        return order[self.rank * self.per_rank:(self.rank + 1) * self.per_rank].tolist()

    def make_batch(self, examples: Sequence[Example], generator: torch.Generator | None = None,
                   row_seeds: Sequence[int] | None = None) -> dict:
        """Collate (and mask) a list of examples; also handy on its own, e.g. for fixed eval masks.
        `row_seeds`: mask each example alone from its own seed, whatever else is in the batch."""
        b = collate(examples, self.pad_id)
        if self.mask is None:
            return b
        special = special_tokens_mask(b["input_ids"], self.mask.all) | (b["attention_mask"] == 0)  # (B, T)
        word_ids = None if self.is_continuation is None else \
            word_ids_from_pieces(b["input_ids"], self.is_continuation, special)
        if row_seeds is None:
            m = mask_tokens(b["input_ids"], special, word_ids=word_ids, generator=generator, **self.mask_kw)
        else:
            m = self._mask_rows(b["input_ids"], special, word_ids, b["attention_mask"].sum(1).tolist(), row_seeds)
        pair_labels = b.pop("labels")  # (B,)
        if not bool((pair_labels == IGNORE_INDEX).all()):
            b["next_sentence_label"] = pair_labels
        b["input_ids"], b["labels"] = m.input_ids, m.labels  # (B, T) each
        return b

    def _mask_rows(self, ids, special, word_ids, lengths, row_seeds) -> MaskResult:
        """Each row masked over its own length (padding never shifts a draw) from its own generator."""
        out = MaskResult(ids.clone(), torch.full_like(ids, IGNORE_INDEX).long(),
                         torch.zeros_like(ids, dtype=torch.int8))
        for r, (n, s) in enumerate(zip(lengths, row_seeds)):
            w = None if word_ids is None else word_ids[r:r + 1, :n]
            m = mask_tokens(ids[r:r + 1, :n], special[r:r + 1, :n], word_ids=w,
                            generator=torch.Generator().manual_seed(s), **self.mask_kw)
            out.input_ids[r, :n], out.labels[r, :n], out.rule[r, :n] = m.input_ids[0], m.labels[0], m.rule[0]
        return out

    def __iter__(self) -> Iterator[dict]:
        """The rest of the current epoch; the next `iter()` starts the following one."""
        if self.position >= len(self):
            self.epoch, self.position = self.epoch + 1, 0
        order, bs = self.indices(self.epoch), self.batch_size
        while self.position < len(self):
            k = self.position
            g = torch.Generator().manual_seed(_seed(self.seed, self.rank, self.epoch, k))
            idx = order[k * bs:(k + 1) * bs]
            seeds = [_seed(self.seed, -1, i, self.epoch % self.static_masks) for i in idx] \
                if self.static_masks and self.mask is not None else None  # -1: never a rank
            batch = self.make_batch([self.examples[i] for i in idx], g, row_seeds=seeds)
            self.position += 1  # count it before handing it out: a checkpoint then skips it
            yield batch

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "position": self.position, "seed": self.seed,
                "world_size": self.world_size, "num_examples": len(self.examples),
                "batch_size": self.batch_size}

    def load_state_dict(self, state: dict) -> None:
        """Also takes the state of an older run folder (fine-tuning's saved no world_size)."""
        mine = self.state_dict()
        for k in ("seed", "world_size", "num_examples", "batch_size"):
            if k in state and state[k] != mine[k]:
                raise ValueError(f"cannot resume exactly: saved {k}={state[k]}, this Batcher has {mine[k]}")
        self.epoch, self.position = int(state["epoch"]), int(state["position"])
