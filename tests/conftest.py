import os

for k, v in {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "GRADIO_ANALYTICS_ENABLED": "False",
             "HF_HUB_DISABLE_TELEMETRY": "1", "TOKENIZERS_PARALLELISM": "false"}.items():
    os.environ.setdefault(k, v)

import pytest  # noqa: E402

WORDS = ("the a an film movie was is were acting plot story great good bad terrible boring fun i you "
         "it this that and but not very really would recommend watch love hate of to in on bank river "
         "money . , ! ? ' actor actress scene end").split()


@pytest.fixture(scope="session")
def vocab_tokenizer(tmp_path_factory):
    """A small hand-made WordPiece vocabulary: fast and the same on every run."""
    from bertlab.tokenizer import WordPieceTokenizer
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)] + [str(d) for d in range(10)]
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS + letters + ["##" + c for c in letters]
    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    path.write_text("\n".join(dict.fromkeys(vocab)) + "\n", encoding="utf-8")
    return WordPieceTokenizer.from_vocab(str(path), lowercase=True)
