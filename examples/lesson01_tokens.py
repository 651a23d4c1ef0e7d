"""Lesson 1, tokens: what BERT actually reads. WordPiece cuts text into pieces from a fixed
vocabulary (rare words into several '##' pieces), adds [CLS] and [SEP], and gives every piece an
id and a segment (token type). The model never sees letters, only these ids.

Run:  python examples/lesson01_tokens.py ["your own sentence"]   (about 2 s; no training)
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # a checkout: bertlab sits beside examples/
import bertlab  # noqa: E402

text = sys.argv[1] if len(sys.argv) > 1 else "The heartwarming film was misunderstood by critics!"

# The shipped default model's tokenizer (a WordPiece vocabulary trained on IMDB reviews).
tok = bertlab.SubwordTokenizer.from_pretrained(bertlab.DEFAULT_MODEL_DIR)
print(f"tokenizer: {tok.kind}, {tok.vocab_size:,} pieces, lowercase={tok.lowercase}, "
      f"at most {tok.model_max_length} tokens")

# 1. One sentence: pieces, ids, and which word each piece came from.
enc = tok.encode(text)
print(f"\ntext: {text!r}")
print(f"{len(enc)} tokens (with [CLS] and [SEP])")
print(f"{'#':>3}  {'piece':<15} {'id':>6}  word")
for i, (piece, id_, word) in enumerate(zip(enc.tokens, enc.ids, enc.word_ids)):
    print(f"{i:>3}  {piece:<15} {id_:>6}  {'-' if word is None else word}")
# Notice: the text was lowercased; a word the vocabulary lacks is cut into pieces, and every
# piece after the first starts with '##' (it continues the word before it).

# 2. Rare words cost more pieces than common ones.
print("\npieces per word:")
for word in ["movie", "overacting", "tokenization", "embeddings"]:
    pieces = tok.encode(word).tokens[1:-1]  # drop [CLS] and [SEP]
    print(f"  {word:<15} {len(pieces)}  {' '.join(pieces)}")

# 3. A sentence pair: segment A gets token type 0, segment B type 1 (what next-sentence prediction
# and every pair task read).
pair = tok.encode("the plot was thin .", "the acting saved it .")
print("\npair:", " ".join(f"{t}/{s}" for t, s in zip(pair.tokens, pair.token_type_ids)))

# 4. Ids back to text: decoding glues the '##' pieces on again, but the lowercasing stays.
print(f"\ndecoded: {tok.decode(enc.ids)!r}")
print(f"[CLS]={tok.cls_token_id} [SEP]={tok.sep_token_id} [MASK]={tok.mask_token_id} [PAD]={tok.pad_token_id} "
      f"[UNK]={tok.unk_token_id}")
