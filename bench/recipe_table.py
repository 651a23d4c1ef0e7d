"""Held-out masked-token accuracy against steps and wall time for the runs in a folder.

    python bench/recipe_table.py runs/recipe
"""
import json
import sys
from pathlib import Path

root = Path(sys.argv[1] if len(sys.argv) > 1 else "runs/recipe")
for run in sorted(p for p in root.iterdir() if (p / "metrics.jsonl").exists()):
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines() if x.strip()]
    train = [r for r in rows if r["split"] == "train"]
    tps = sorted(r["tokens_per_s"] for r in train)[len(train) // 2] if train else 0
    print(f"\n{run.name}  (median {tps:.0f} tokens/s)")
    print(f"{'step':>6}{'time s':>8}{'acc':>7}{'unigram':>9}{'loss':>7}{'entropy':>9}{'prev':>7}{'next':>7}{'nsp':>6}")
    for r in rows:
        if r["split"] == "eval":
            print(f"{r['step']:>6}{r['time']:>8.0f}{r['mlm_acc']:>7.1%}{r['unigram_acc']:>9.1%}{r['mlm_loss']:>7.2f}"
                  f"{r['attn_entropy']:>9.2f}{r['attn_prev']:>7.3f}{r['attn_next']:>7.3f}{r.get('nsp_acc', float('nan')):>6.2f}")
