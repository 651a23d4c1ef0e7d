"""Lesson 6, embeddings and word senses: a word's vector starts as a row of the embedding table (the
same for every sentence, plus its position) and each layer mixes in its context. So "fan" (someone
who loves films) and "fan" (the thing that blows air) start almost equal and move apart layer by
layer. We measure it with cosine similarity,

    cos(u, v) = u · v / (|u| |v|)

between the word's vectors in four sentences, two of each sense, at every layer; then compare whole
sentences by their mean-pooled vectors, and set the static table row of "bank" (one vector, as
Word2Vec gives) beside its contextual vectors in two sentences.

Run:  python examples/lesson06_embeddings.py   (about 2 s; no training)
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # a checkout: bertlab sits beside examples/
import bertlab  # noqa: E402
from bertlab.analysis.embeddings import cosine_matrix, hidden_states, pool, word_similarity  # noqa: E402

model, tok = bertlab.load_pretrained()  # the shipped default model

word = "fan"
sentences = ["i am a big fan of his films .",            # 1: a person (sense A)
             "every fan of the series will love it .",    # 2: a person (sense A)
             "turn on the fan , it is hot in here .",     # 3: a machine (sense B)
             "the ceiling fan was spinning slowly ."]     # 4: a machine (sense B)
states = hidden_states(model, tok, sentences)  # every layer's vectors: (layers + 1, sentences, T, H)
sim = word_similarity(tok, states, word)
pair = {(p["a"], p["b"]): p["similarity"] for p in sim["pairs"]}  # (sentence a, sentence b) -> per layer

print(f"'{word}' in {len(sentences)} sentences:")
for i, s in enumerate(sentences, 1):
    print(f"  {i}. {s}")
print("\nlayer       same sense   other sense   gap")
for layer in sim["layers"]:
    same = (pair[(1, 2)][layer] + pair[(3, 4)][layer]) / 2
    other = sum(pair[(a, b)][layer] for a in (1, 2) for b in (3, 4)) / 4
    name = "embeddings" if layer == 0 else f"layer {layer}"
    print(f"{name:<11} {same:10.2f} {other:13.2f} {same - other:+6.2f}")
# Notice: after the embeddings (layer 0) the gap is about zero (only the position differs); it opens
# up in the later layers, where each "fan" has taken in its sentence. Similarities also fall overall.

# Whole sentences: mean of the last layer's token vectors, cosine between every pair.
m = cosine_matrix(pool(states, layer=-1, how="mean"))
print("\nsentence similarity (last layer, mean pooling):")
for i, row in enumerate(m.tolist(), 1):
    print(f"  {i}. " + "  ".join(f"{v:.2f}" for v in row))

# Static against contextual: the table row of "bank" is one vector whatever the sentence (what Word2Vec
# and GloVe give); every layer after it makes the vector from the sentence (what ELMo and BERT give).
from bertlab.analysis.static_vectors import static_vs_contextual  # noqa: E402

sv = static_vs_contextual(model, tok, "bank", ["we had a picnic on the river bank .",
                                               "the bank refused to lend them any money ."])
print(f"\n'bank' by a river and at a lender: table rows identical: {sv['static']['identical']}, "
      f"cosine {sv['static']['pairs'][0]['cosine']:.3f}")
print("its nearest rows in the table (no special tokens): "
      + ", ".join(f"{n['token']} {n['cosine']:.2f}" for n in sv["static"]["spellings"][0]["neighbours"]))
print("its two contextual vectors, cosine by layer:")
for layer, c in zip(sv["layers"], sv["pairs"][0]["similarity"]):
    print(f"  after {'the embeddings' if layer == 0 else f'layer {layer}'}: {c:.3f}")
# Notice: 1.000 in the table; below 1 at layer 0 already (the two positions differ), lower above.

# Positions: the position vector is all that says where a word stands. Zero the position table and
# shuffle the sentence: each word leaves the last layer with the vector it had before (cosine 1.000),
# so [CLS] cannot tell "the man bit the dog" from "the dog bit the man". With positions, all move.
from bertlab.analysis.positions import shuffle_test  # noqa: E402

res = shuffle_test(model, tok, "the man bit the dog .")
print(f"\nshuffled: {' '.join(res['shuffled'])}")
print("token      cos, positions on   cos, positions off")
for r in res["rows"]:
    print(f"{r['token']:<10} {r['with_positions']:17.3f} {r['without_positions']:20.3f}")
