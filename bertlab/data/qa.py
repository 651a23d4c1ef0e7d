"""Extractive question answering data: a SQuAD-format .json -> question/context windows with answer spans.

The file (SQuAD v1.1's layout):
  {"data": [{"title": ..., "paragraphs": [{"context": "...", "qas": [{"id": "...", "question": "...",
            "answers": [{"text": "...", "answer_start": 17}, ...]}]}]}]}
Every question needs an answer found in its context (SQuAD v2's unanswerable questions, with
"is_impossible" or no answers, are skipped with a note). Validation questions may list several
answers: exact match and F1 take the best one, as the SQuAD script does.

The question goes in as segment A and its context as B: [CLS] question [SEP] context [SEP], token types
0 then 1 (RoBERTa: <s> question </s></s> context </s>, all 0), as the tokenizer's own pair layout. A
context longer than the window is cut into windows that overlap by half a window (at most 128 tokens:
BERT's doc_stride), not truncated: a window that holds the whole answer learns its first and last token;
one that does not learns position 0 ([CLS]), as BERT's run_squad. To answer, every window proposes its
best span (start <= end, at most MAX_ANSWER_TOKENS, inside the context), the highest start + end logit
wins, and the tokenizer's character offsets turn it back into the context's own text.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import torch

from ..model import device_of
from .corpus import check_text_file, split_heldout
from .masking import Example

MAX_QUERY_TOKENS = 64  # longer questions are cut (run_squad's max_query_length)
MAX_ANSWER_TOKENS = 30  # the longest span proposed (run_squad's max_answer_length)
MAX_OVERLAP = 128  # windows of a long context overlap by half a window, at most this many tokens


@dataclass
class QAItem:
    """One question on one context; `answers`: the accepted answer texts (the first one trains)."""
    id: str
    question: str
    context: str
    answers: list[str]
    start: int  # character where the first answer starts in the context


@dataclass
class QAWindow:
    """Where an encoded window's context tokens are: ids[ctx_start + k] is context token k, spanning
    context[offsets[k][0]:offsets[k][1]]."""
    item: int  # index of its QAItem
    ctx_start: int
    offsets: list[tuple[int, int]]


def is_squad(path: str | Path) -> bool:
    """True when a .json file looks like SQuAD ({"data": [{"paragraphs": ...): read from its start only."""
    path = Path(path)
    if path.suffix.lower() != ".json" or not path.is_file():
        return False
    with open(path, encoding="utf-8", errors="replace") as f:
        head = f.read(1 << 16)
    return re.match(r'\s*\{[\s\S]*"data"\s*:\s*\[\s*\{[\s\S]*"paragraphs"\s*:', head) is not None


def _bad(path: Path, where: str, what: str) -> ValueError:
    return ValueError(f"{path}: {where}: {what} (SQuAD format: {{\"data\": [{{\"paragraphs\": [{{\"context\": ..., "
                      f"\"qas\": [{{\"id\", \"question\", \"answers\": [{{\"text\", \"answer_start\"}}]}}]}}]}}]}})")


def read_squad(path: str | Path) -> tuple[list[QAItem], list[str]]:
    """(questions, notes) from a SQuAD-format file; anything malformed is one ValueError saying where."""
    path = Path(path)
    check_text_file(path)
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: is not valid JSON ({e.msg} at line {e.lineno})") from None
    if not isinstance(d, dict) or not isinstance(d.get("data"), list):
        raise _bad(path, "the top level", 'needs a "data" list')
    items, unanswerable, moved, seen = [], 0, 0, set()
    for a, article in enumerate(d["data"]):
        paras = article.get("paragraphs") if isinstance(article, dict) else None
        if not isinstance(paras, list):
            raise _bad(path, f"data[{a}]", 'needs a "paragraphs" list')
        for p, para in enumerate(paras):
            where = f"data[{a}].paragraphs[{p}]"
            if not isinstance(para, dict) or not isinstance(para.get("context"), str) or not para["context"].strip():
                raise _bad(path, where, 'needs a non-empty "context" text')
            if not isinstance(para.get("qas"), list):
                raise _bad(path, where, 'needs a "qas" list')
            ctx = para["context"]
            for q, qa in enumerate(para["qas"]):
                w = f"{where}.qas[{q}]"
                if not isinstance(qa, dict) or not isinstance(qa.get("question"), str) or not qa["question"].strip():
                    raise _bad(path, w, 'needs a non-empty "question"')
                qid = str(qa.get("id", w))
                if qid in seen:
                    raise _bad(path, w, f"the id {qid!r} is used twice")
                seen.add(qid)
                answers = qa.get("answers") or []
                if qa.get("is_impossible") or not answers:
                    unanswerable += 1
                    continue
                texts, start = [], None
                for k, ans in enumerate(answers if isinstance(answers, list) else [None]):
                    if not isinstance(ans, dict) or not isinstance(ans.get("text"), str) or not ans["text"].strip() \
                            or isinstance(ans.get("answer_start"), bool) or not isinstance(ans.get("answer_start"), int):
                        raise _bad(path, f"{w}.answers[{k}]", 'needs a "text" and an integer "answer_start"')
                    text, s = ans["text"], ans["answer_start"]
                    if ctx[s:s + len(text)] != text:  # an off-by-some start: the nearest occurrence
                        hits = [m.start() for m in re.finditer(re.escape(text), ctx)]
                        if not hits:
                            raise _bad(path, f"{w}.answers[{k}]", f"the answer {text[:40]!r} is not in the context")
                        s, moved = min(hits, key=lambda h: abs(h - s)), moved + 1
                    texts.append(text)
                    start = s if start is None else start
                items.append(QAItem(qid, " ".join(qa["question"].split()), ctx, texts, start))
    notes = []
    if unanswerable:
        notes.append(f"{path.name}: skipped {unanswerable} questions without an answer (SQuAD v2's unanswerable "
                     f"ones are not supported)")
    if moved:
        notes.append(f"{path.name}: {moved} answers' answer_start did not point at their text; used the nearest "
                     f"occurrence")
    if not items:
        raise ValueError(f"{path}: holds no answerable questions")
    return items, notes


def pair_ids(tokenizer, a: list[int], b: list[int]) -> tuple[list[int], list[int], int]:
    """(ids, token types, where b starts) for pieces a and b in the tokenizer's pair layout."""
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    head = [cls, *a] + [sep] * tokenizer.pair_seps
    second = 1 if tokenizer.layout == "bert" else 0
    return head + b + [sep], [0] * len(head) + [second] * (len(b) + 1), len(head)


def encode_qa(tokenizer, items: list[QAItem], max_len: int, train: bool = True
              ) -> tuple[list[Example], list[QAWindow], int]:
    """Windows of every question: Examples whose label is (start token, end token), (0, 0) where the
    window misses the answer, and where each window's context lies. Also the count of answers whose
    characters became no token (e.g. only spaces), left out of training (`train`) but still scored."""
    n_special = 2 + tokenizer.pair_seps  # [CLS], the separators, the last [SEP]
    qs = tokenizer.backend.encode_batch([it.question for it in items], add_special_tokens=False)
    cs = tokenizer.backend.encode_batch([it.context for it in items], add_special_tokens=False)
    examples, windows, lost = [], [], 0
    for i, (it, q, c) in enumerate(zip(items, qs, cs)):
        q_ids = q.ids[:min(MAX_QUERY_TOKENS, max_len // 2)]
        room = max_len - len(q_ids) - n_special
        if room < 8:
            raise ValueError(f"max_len {max_len} leaves {room} tokens for the context after the question; "
                             f"use a larger max_len (128 or more for question answering)")
        offs = [tuple(o) for o in c.offsets]
        a_s, a_e = it.start, it.start + len(it.answers[0])
        toks = [k for k, (s, e) in enumerate(offs) if e > a_s and s < a_e]  # the answer's tokens
        if not toks:
            lost += 1
            if train:
                continue
        step, n, s = room - min(MAX_OVERLAP, room // 2), len(c.ids), 0
        while n:
            w_ids = c.ids[s:s + room]
            ids, types, ctx = pair_ids(tokenizer, q_ids, w_ids)
            inside = bool(toks) and toks[0] >= s and toks[-1] < s + len(w_ids)
            label = (ctx + toks[0] - s, ctx + toks[-1] - s) if inside else (0, 0)
            examples.append(Example(ids, label, types))
            windows.append(QAWindow(i, ctx, offs[s:s + len(w_ids)]))
            if s + room >= n:
                break
            s += step
    return examples, windows, lost


def split_and_encode(path: Path, items: list[QAItem], tokenizer, max_len: int, val_frac: float, seed: int):
    """(train windows, validation windows, validation questions, their QAWindows, notes): questions on
    one context stay on one side of the split, so no validation context was seen in training."""
    tr, va = split_heldout(range(len(items)), val_frac, seed, [it.context for it in items])
    if not va or len(tr) < 2:
        raise ValueError(f"{path}: its questions share too few contexts to hold some out for validation "
                         f"(questions on one context stay on one side)")
    train, _, lost = encode_qa(tokenizer, [items[i] for i in tr], max_len)
    val_items = [items[i] for i in va]
    val, windows, lost_val = encode_qa(tokenizer, val_items, max_len, train=False)
    if len(train) < 2:
        raise ValueError(f"{path}: no training question kept an answer the tokenizer can point at")
    notes = [f"{path.name}: {lost + lost_val} answers cover no token (left out of training, still scored)"] \
        if lost + lost_val else []
    return train, val, val_items, windows, notes


def best_span(start: torch.Tensor, end: torch.Tensor, w: QAWindow,
              max_answer: int = MAX_ANSWER_TOKENS) -> tuple[float, int, int]:
    """(score, first char, end char) of a window's best span: start <= end, at most max_answer
    tokens, inside the context; the score is start logit + end logit (run_squad's)."""
    n = len(w.offsets)
    s, e = start[w.ctx_start:w.ctx_start + n].float(), end[w.ctx_start:w.ctx_start + n].float()  # (n,)
    ones = torch.ones(n, n, dtype=torch.bool, device=s.device)
    ok = torch.triu(ones) & ~torch.triu(ones, diagonal=max_answer)  # 0 <= j - i < max_answer
    scores = (s[:, None] + e[None, :]).masked_fill(~ok, float("-inf"))  # (n, n)
    k = int(scores.argmax())
    i, j = divmod(k, n)
    return float(scores[i, j]), w.offsets[i][0], w.offsets[j][1]


def predict_answers(starts: list[torch.Tensor], ends: list[torch.Tensor], windows: list[QAWindow],
                    items: list[QAItem]) -> list[dict]:
    """Each question's answer from the logits of all its windows (one (T,) tensor per window)."""
    best: dict[int, tuple[float, int, int]] = {}
    for s, e, w in zip(starts, ends, windows):
        cand = best_span(s, e, w)
        if w.item not in best or cand[0] > best[w.item][0]:
            best[w.item] = cand
    out = []
    for i, it in enumerate(items):
        score, a, b = best.get(i, (float("-inf"), 0, 0))
        out.append({"id": it.id, "answer": it.context[a:b], "start": a, "end": b, "score": score})
    return out


@torch.no_grad()
def answer_question(model, tokenizer, question: str, context: str, max_len: int | None = None) -> dict:
    """A question answerer on one question and context: {"answer", "start", "end", "score"} (the span
    in characters of the context; score = start + end logit)."""
    for name, text in (("question", question), ("context", context)):
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"give a {name}")
    max_len = max_len or min(tokenizer.model_max_length, model.config.max_tokens, 384)
    item = QAItem("q", " ".join(question.split()), context, [context[:1]], 0)
    examples, windows, _ = encode_qa(tokenizer, [item], max_len, train=False)
    dev = device_of(model)
    starts, ends = [], []
    for ex in examples:
        out = model(torch.tensor([ex.ids], device=dev), torch.tensor([ex.token_type_ids], device=dev))
        starts.append(out.start_logits[0].cpu())
        ends.append(out.end_logits[0].cpu())
    res = predict_answers(starts, ends, windows, [item])[0]
    return {k: res[k] for k in ("answer", "start", "end", "score")}
