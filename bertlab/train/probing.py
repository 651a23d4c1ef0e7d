"""Probing: what can a small classifier read off each layer's frozen vectors (scored on held-out
sentences)? A probe can memorise, so every task has a control (Hewitt & Liang 2019, see
`control_labels`); selectivity = task accuracy - control accuracy, per layer. A probe measures
what is decodable, not what the model uses."""
from __future__ import annotations

import hashlib
import time
from collections import Counter
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from .. import family
from ..cache import LRU
from ..data import probe as probe_data
from ..data.probe import ProbeData
from ..data.tasks import as_running_text
from ..data.corpus import split_heldout
from ..model import BertForPreTraining, device_of

WORD_FEATURES = ("first", "mean")  # a word's vector: its first piece, or the mean of its pieces
POOLINGS = ("cls", "mean")  # a sentence's vector: [CLS], or the mean of its pieces
PROBES = ("linear", "mlp")
VAL_FRAC = 0.2
CACHE_BYTES = int(600e6)  # features kept in memory (float16), least recently used dropped first


@dataclass
class Features:
    """Frozen vectors of one model on one task: X (L+1, N, H) float16, layer 0 = embeddings."""
    X: torch.Tensor
    y: torch.Tensor  # (N,) label ids
    group: torch.Tensor  # (N,) sentence index: the split is by sentence
    types: torch.Tensor  # (N,) word/token type id, for the control task
    keys: list[str]  # one per sentence (identical sentences share a side of the split)
    dropped: int  # words (texts) the tokenizer left no piece for, or words past the model's length
    flag: torch.Tensor | None = None  # (N,) bool: in the data's `subset` (None: the data has none)

    @property
    def num_layers(self) -> int:
        return self.X.size(0) - 1


_cache = LRU(max_bytes=CACHE_BYTES, size=lambda f: f.X.numel() * 2)


def fingerprint(model, tok) -> str:
    """Content identity of (weights, vocabulary): a strided sample of every tensor, so a retrained
    or re-initialised model never reuses another's cached features; ~10 ms for a mini BERT."""
    h = hashlib.blake2b(digest_size=12)
    for k, v in model.state_dict().items():
        flat = v.detach().reshape(-1)
        h.update(f"{k}{tuple(v.shape)}".encode())
        h.update(flat[:: max(1, flat.numel() // 2048)].float().cpu().numpy().tobytes())
    h.update(tok.backend.to_str().encode())
    return h.hexdigest()


def _items(kind, n_pieces, word_ids, feature):
    """Items of one sentence as (label slot, piece positions); a vector is the mean over positions."""
    if kind == "sentence":
        return [(0, [0] if feature == "cls" else list(range(1, n_pieces + 1)))]
    if kind == "token":
        return [(i, [i + 1]) for i in range(min(n_pieces, probe_data.MAX_POSITION))]
    pieces: dict[int, list[int]] = {}
    for t, w in enumerate(word_ids):
        if w is not None:
            pieces.setdefault(w, []).append(t + 1)  # +1: after [CLS]
    return [(w, ps[:1] if feature == "first" else ps) for w, ps in sorted(pieces.items())]


@torch.no_grad()
def compute_features(model, tok, data: ProbeData, feature: str = "first", batch_size: int = 64,
                     progress=None) -> Features:
    """One forward pass per batch (eval mode, no autograd); each item's vector at every layer."""
    encoder = family.encoder_of(model)
    was_training = encoder.training
    encoder.eval()
    limit = min(tok.model_max_length, encoder.config.max_tokens) - 2
    pretok = data.kind == "word"
    encs = tok.backend.encode_batch([as_running_text(s) for s in data.sentences] if pretok else list(data.sentences),
                                    is_pretokenized=pretok, add_special_tokens=False)  # a word after its space
    cls, sep, pad = tok.cls_token_id, tok.sep_token_id, tok.pad_token_id
    device = device_of(encoder)
    order = sorted(range(len(encs)), key=lambda i: len(encs[i].ids))  # similar lengths: little padding
    chunks, ys, groups, types, flags, dropped = [], [], [], [], [], 0
    vocab: dict[str, int] = {}
    for b0 in range(0, len(order), batch_size):
        idx = order[b0:b0 + batch_size]
        seqs = [[cls] + encs[i].ids[:limit] + [sep] for i in idx]
        T = max(map(len, seqs))
        ids = torch.tensor([s + [pad] * (T - len(s)) for s in seqs], device=device)  # (B, T)
        mask = (torch.arange(T, device=device)[None] < torch.tensor([len(s) for s in seqs], device=device)[:, None]).long()
        hs = encoder(ids, torch.zeros_like(ids), mask, output_hidden_states=True).hidden_states
        h = torch.stack(hs).float().reshape(len(hs), len(idx) * T, -1)  # (L+1, B*T, H)
        rows, cols, vals, start = [], [], [], len(ys)
        for b, i in enumerate(idx):
            e, n = encs[i], len(seqs[b]) - 2  # the pieces the model saw
            items = [(slot, ps) for slot, ps in _items(data.kind, n, e.word_ids[:n], feature)
                     if ps and (data.kind != "word" or data.y[i][slot] != probe_data.IGNORE)]
            labelled = sum(y != probe_data.IGNORE for y in data.y[i]) if data.kind == "word" else data.kind == "sentence"
            dropped += labelled - len(items)
            for slot, ps in items:
                rows += [len(ys) - start] * len(ps)
                cols += [b * T + p for p in ps]
                vals += [1.0 / len(ps)] * len(ps)
                if data.kind == "word":
                    ys.append(data.y[i][slot])
                    types.append(vocab.setdefault(data.sentences[i][slot].lower(), len(vocab)))
                    flags.append(bool(data.subset and data.subset[1][i][slot]))
                elif data.kind == "token":
                    ys.append(slot)  # position slot+1 has label id slot
                    types.append(e.ids[slot])
                else:
                    ys.append(data.y[i])
                    types.append(i)
                groups.append(i)
        w = torch.tensor(vals, device=device)[None, :, None]  # (1, P, 1): each piece's share of its item
        out = h.new_zeros(h.size(0), len(ys) - start, h.size(2))  # (L+1, items, H)
        out.index_add_(1, torch.tensor(rows, device=device), h[:, torch.tensor(cols, device=device)] * w)
        chunks.append(out.half().cpu())
        if progress:
            progress(min(1.0, (b0 + len(idx)) / len(order)), "computing features")
    encoder.train(was_training)
    if not ys:
        raise ValueError(f"{data.name}: no item has a token left after tokenisation")
    keys = [s if isinstance(s, str) else " ".join(s) for s in data.sentences]
    group = torch.tensor(groups)
    order = torch.sort(group, stable=True).indices  # back to the data's order (batches went by length)
    return Features(torch.cat(chunks, 1)[:, order], torch.tensor(ys)[order], group[order],
                    torch.tensor(types)[order], keys, dropped, torch.tensor(flags)[order] if data.subset else None)


def features(model, tok, data: ProbeData, feature: str = "first", model_key: str | None = None,
             progress=None) -> Features:
    """compute_features, cached per (model content, data, feature) in a bounded LRU."""
    key = (model_key or fingerprint(model, tok), data.key, feature if data.kind != "token" else "-")
    hit = _cache.get(key)
    return hit if hit is not None else _cache.put(key, compute_features(model, tok, data, feature, progress=progress))


# ---- probes ----------------------------------------------------------------------------------------
def control_labels(f: Features, train_rows: torch.Tensor, kind: str, seed: int) -> torch.Tensor:
    """Hewitt & Liang: each type draws one fixed label from the task's (training) label
    distribution. Sentence tasks have no recurring types: labels are shuffled instead."""
    g = torch.Generator().manual_seed(seed + 1)
    if kind == "sentence":
        return f.y[torch.randperm(len(f.y), generator=g)]
    C = int(f.y.max()) + 1
    dist = torch.bincount(f.y[train_rows], minlength=C).double()
    per_type = torch.multinomial(dist / dist.sum(), int(f.types.max()) + 1, replacement=True, generator=g)
    return per_type[f.types]


def train_probe(Xtr, ytr, Xva, n_classes: int, kind: str = "linear", seed: int = 0,
                weight_decay: float = 1e-4, hidden: int = 256) -> tuple[torch.Tensor, float]:
    """(validation predictions, training accuracy) on standardised features: linear = logistic regression
    by full-batch L-BFGS; mlp = one ReLU layer, minibatch Adam. Seeded: a rerun gives the same numbers."""
    g = torch.Generator().manual_seed(seed)
    mu, sd = Xtr.mean(0), Xtr.std(0) + 1e-5
    Xtr, Xva = (Xtr - mu) / sd, (Xva - mu) / sd
    H = Xtr.size(1)
    if kind == "linear":
        net = nn.Linear(H, n_classes, dtype=Xtr.dtype)
        nn.init.zeros_(net.weight)  # a convex problem: start at zero, no randomness at all
        nn.init.zeros_(net.bias)
        opt = torch.optim.LBFGS(net.parameters(), lr=1, max_iter=60, history_size=10,
                                line_search_fn="strong_wolfe")

        def closure():
            opt.zero_grad()
            loss = F.cross_entropy(net(Xtr), ytr) + weight_decay * net.weight.pow(2).sum()
            loss.backward()
            return loss
        opt.step(closure)
    else:
        net = nn.Sequential(nn.Linear(H, hidden, dtype=Xtr.dtype), nn.ReLU(), nn.Linear(hidden, n_classes, dtype=Xtr.dtype))
        for m in (net[0], net[2]):  # seeded here, not from the global RNG other threads share
            nn.init.kaiming_uniform_(m.weight, a=5 ** 0.5, generator=g)
            nn.init.zeros_(m.bias)
        opt = torch.optim.AdamW(net.parameters(), lr=2e-3, weight_decay=1e-2)
        bs = 256
        steps = max(200, min(1500, 8 * len(Xtr) // bs))  # ~8 epochs
        for s in range(steps):
            i = torch.randint(len(Xtr), (bs,), generator=g)
            loss = F.cross_entropy(net(Xtr[i]), ytr[i])
            opt.zero_grad()
            loss.backward()
            opt.step()
    with torch.no_grad():
        train_acc = (net(Xtr).argmax(-1) == ytr).float().mean().item()
        return net(Xva).argmax(-1), train_acc


def split_rows(f: Features, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Row indices of the training and validation items; whole sentences go to one side."""
    tr, va = split_heldout(range(len(f.keys)), VAL_FRAC, seed, f.keys)
    held = torch.isin(f.group, torch.tensor(va, dtype=torch.long))
    return (~held).nonzero().squeeze(1), held.nonzero().squeeze(1)


def per_tag(result: dict, layer: int | None = None) -> list[dict]:
    """Per label at one layer (default: the best): count, accuracy, commonest confusion; commonest first."""
    layer = result["best_layer"] if layer is None else int(layer)
    if not 0 <= layer <= result["num_layers"]:
        raise ValueError(f"layer must be between 0 and {result['num_layers']}, got {layer}")
    y, pred = result["_y_val"], result["_pred"][layer]
    names, rows = result["labels"], []
    for c, n in Counter(y.tolist()).most_common():
        mine = pred[y == c]
        wrong = Counter(mine[mine != c].tolist()).most_common(1)
        rows.append({"label": names[c], "count": n, "accuracy": round((mine == c).float().mean().item(), 4),
                     "train share": round(result["_train_share"][c], 4),
                     "most confused with": names[wrong[0][0]] if wrong else ""})
    return rows


def probe(model, tok, task: str | ProbeData = "pos", *, feature: str | None = None, probe: str = "linear",
          sample: int | None = None, seed: int = 0, model_key: str | None = None, name: str = "model",
          text_column: str = "text", label_column: str = "label", progress=None) -> dict:
    """Train a task probe and a control probe on every layer: per-layer accuracies, the majority
    baseline, counts, the best layer and its per-label table; "_" keys hold tensors for per_tag()."""
    t0 = time.time()
    if probe not in PROBES:
        raise ValueError(f"probe must be one of {', '.join(PROBES)}, got {probe!r}")
    data = task if isinstance(task, ProbeData) else probe_data.load(task, sample, seed, text_column, label_column)
    if feature is None:
        feature = "cls" if data.kind == "sentence" else "first"
    allowed = POOLINGS if data.kind == "sentence" else WORD_FEATURES
    if data.kind != "token" and feature not in allowed:
        raise ValueError(f"for a {data.kind} task the feature must be one of {', '.join(allowed)}, got {feature!r}")
    say = progress or (lambda frac, desc: None)
    f = features(model, tok, data, feature, model_key, progress=lambda p, d: say(0.3 * p, d))
    tr, va = split_rows(f, seed)
    if len(va) == 0 or len(tr) < 2 or len(set(f.keys)) < 2:
        raise ValueError(f"{data.name}: too few distinct sentences to hold some out for validation")
    C = len(data.labels)
    ctrl = control_labels(f, tr, data.kind, seed)
    y_tr, y_va = f.y[tr], f.y[va]
    if len(y_tr.unique()) < 2:
        raise ValueError(f"{data.name}: the training split holds only one class; give more examples of each label")
    counts = torch.bincount(y_tr, minlength=C).double()
    majority = (y_va == counts.argmax()).float().mean().item()
    layers, preds = [], []
    L = f.num_layers
    subset = f.flag[va] if f.flag is not None else None
    for layer in range(L + 1):
        X = f.X[layer].float()
        say(0.3 + 0.7 * layer / (L + 1), f"probing layer {layer} of {L}")
        pred, train_acc = train_probe(X[tr], y_tr, X[va], C, probe, seed)
        say(0.3 + 0.7 * (layer + 0.5) / (L + 1), f"control task, layer {layer} of {L}")
        cpred, ctrain = train_probe(X[tr], ctrl[tr], X[va], C, probe, seed)
        acc, cacc = (pred == y_va).float().mean().item(), (cpred == ctrl[va]).float().mean().item()
        layers.append({"layer": layer, "name": "embeddings" if layer == 0 else f"layer {layer}",
                       "acc": round(acc, 4), "control_acc": round(cacc, 4), "selectivity": round(acc - cacc, 4),
                       "train_acc": round(train_acc, 4), "control_train_acc": round(ctrain, 4)})
        if subset is not None and subset.any():
            layers[-1]["subset_acc"] = round((pred == y_va)[subset].float().mean().item(), 4)
        preds.append(pred)
    say(1.0, "done")
    notes = list(data.notes)
    if f.dropped:
        notes.append(f"{f.dropped} {'words' if data.kind == 'word' else 'texts'} were left out "
                     "(no WordPiece piece, or past the model's length)")
    res = {"model": name, "task": data.name, "kind": data.kind, "probe": probe,
           "feature": feature if data.kind != "token" else "token", "num_layers": L,
           "control": "shuffled labels" if data.kind == "sentence" else f"random label per {data.kind} type",
           "layers": layers, "majority": round(majority, 4), "labels": data.labels,
           "best_layer": max(range(L + 1), key=lambda i: (layers[i]["acc"], -i)),
           "most_selective_layer": max(range(L + 1), key=lambda i: (layers[i]["selectivity"], -i)),
           "counts": {"sentences": len(set(f.group.tolist())), "train": len(tr), "validation": len(va),
                      "unit": data.kind + "s", "labels": C, "types": int(len(f.types.unique())), "hidden": f.X.size(2)},
           "seconds": round(time.time() - t0, 2), "notes": notes,
           "subset": None if subset is None else {"name": data.subset[0], "validation": int(subset.sum()),
                                                  "share": round(subset.float().mean().item(), 4)},
           "_y_val": y_va, "_pred": preds, "_train_share": (counts / counts.sum()).tolist()}
    res["per_tag"] = per_tag(res)
    return res


def public(result: dict) -> dict:
    """The result without its tensors (JSON-ready)."""
    return {k: v for k, v in result.items() if not k.startswith("_")}


def random_init(model, seed: int = 0):
    """A model of the same config with BERT's initial random weights (fixed seed): the baseline
    that shows what the architecture alone, untrained, makes decodable."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return BertForPreTraining(model.config).eval()


# ---- the layer story -------------------------------------------------------------------------------
# Tenney et al. 2019 ("BERT Rediscovers the Classical NLP Pipeline"): syntax peaks low, semantics higher,
# the task the model was fine-tuned on at the top. One model, three probes, every layer.
STORY = {"pos": "part of speech (syntax)", "polarity": "word polarity in its sentence (semantics)",
         "sentiment": "sentence sentiment (the fine-tuned task)"}
STORY_SAMPLE = {"pos": 500, "polarity": None, "sentiment": 2000}  # sentences (None: the task's default, all)
# sentiment from the mean of the pieces: at layer 0 a bag of word vectors (the words alone), where [CLS] is
# the same vector for every sentence; so each task's layer 0 is what the words give without context
STORY_FEATURE = {"pos": "first", "polarity": "first", "sentiment": "mean"}


def center_of_gravity(accs: list[float]) -> float | None:
    """Tenney et al.'s expected layer, sum_l l * D_l / sum_l D_l (l = 1..L). Their probe at layer l reads
    layers 0..l, so its score never falls; ours reads layer l alone, so D_l = the gain of the best score
    up to layer l over the best up to layer l-1 (>= 0). None when no layer beats the embeddings."""
    best = [max(accs[:i + 1]) for i in range(len(accs))]
    gains = [b - a for a, b in zip(best, best[1:])]
    return None if sum(gains) <= 0 else round(sum(l * g for l, g in enumerate(gains, 1)) / sum(gains), 2)


def story(results: list[dict]) -> dict:
    """The probe results of one model side by side: per task the per-layer accuracies, control and
    selectivity, `gain` = acc_l - acc_0 (what context adds to the word alone: the embeddings are layer 0),
    its center of gravity, and the accuracy on its subset if it has one."""
    tasks = []
    for r in results:
        col = lambda k: [x.get(k) for x in r["layers"]]  # noqa: E731
        accs = col("acc")
        sub = r.get("subset")
        tasks.append({"task": r["task"], "label": STORY.get(r["task"], r["task"]), "acc": accs,
                      "control_acc": col("control_acc"), "selectivity": col("selectivity"),
                      "gain": [round(a - accs[0], 4) for a in accs],
                      "center": center_of_gravity(accs), "best_layer": r["best_layer"],
                      "most_selective_layer": r["most_selective_layer"], "majority": r["majority"],
                      "subset": sub and {**sub, "acc": col("subset_acc")}, "counts": r["counts"],
                      "seconds": r["seconds"]})
    return {"model": results[0]["model"], "num_layers": results[0]["num_layers"], "probe": results[0]["probe"],
            "tasks": tasks, "seconds": round(sum(r["seconds"] for r in results), 2)}


def layer_story(model, tok, *, probe_kind: str = "linear", seed: int = 0, model_key: str | None = None,
                name: str = "model", samples: dict | None = None, progress=None) -> dict:
    """Probe part of speech, in-context polarity and sentiment at every layer of one model (story());
    `samples`: sentences per task, over STORY_SAMPLE."""
    say, samples = progress or (lambda frac, desc: None), {**STORY_SAMPLE, **(samples or {})}
    runs = []
    for i, task in enumerate(STORY):
        runs.append(probe(model, tok, task, feature=STORY_FEATURE[task], probe=probe_kind, sample=samples[task],
                          seed=seed, model_key=model_key, name=name,
                          progress=lambda p, d, i=i, t=task: say((i + p) / len(STORY), f"{t}: {d}")))
    return story(runs)


def describe(s: dict) -> str:
    """What the story shows on this model, in one sentence a task, from the numbers."""
    out = []
    for t in s["tasks"]:
        a, b = t["acc"], t["best_layer"]
        c = "no layer beats the embeddings" if t["center"] is None else f"center of gravity {t['center']:.2f}"
        line = f"{t['task']} peaks at layer {b} ({100 * a[b]:.1f} %, embeddings {100 * a[0]:.1f} %, {c})"
        sub = t["subset"]
        if sub and sub["acc"][0] is not None:
            line += (f"; on the {sub['validation']} held-out words {sub['name']} ({100 * sub['share']:.1f} %) it scores "
                     f"{100 * sub['acc'][0]:.0f} % at the embeddings, {100 * sub['acc'][-1]:.0f} % at the top layer")
        out.append(line)
    text = "; ".join(out) + "."
    order = sorted((t for t in s["tasks"] if t["center"] is not None), key=lambda t: t["center"])
    if len(order) > 1:
        text += " Centers from low to high: " + " < ".join(f"{t['task']} ({t['center']:.2f})" for t in order) + "."
    return text
