import os

for k, v in {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "GRADIO_ANALYTICS_ENABLED": "False",
             "HF_HUB_DISABLE_TELEMETRY": "1", "TOKENIZERS_PARALLELISM": "false"}.items():
    os.environ.setdefault(k, v)

import tempfile  # noqa: E402

os.environ.setdefault("BERTLAB_CACHE", tempfile.mkdtemp(prefix="bertlab-cache-"))  # never the user's cache
# A served app prepares the default recipe's data as it starts: 20-50 s of a core the browser tests need.
# tests/test_pretrain.py checks the warm-up itself.
os.environ.setdefault("BERTLAB_WARM_CACHE", "0")
# Visitor ids are the server's own (bertlab/app/identity.py): one secret for the tests and the servers
# they start, so a test can mint the id a browser would have been given.
os.environ.setdefault("BERTLAB_SECRET", "bertlab-tests-secret")

import pytest  # noqa: E402

# Fixtures that start the app (a real server, and with it often a browser): every test that uses one is slow,
# marked here once instead of test by test, so `python -m pytest -m "not slow"` never starts a server.
SERVERS = {"plain_app", "server", "client", "laptop", "distill_server", "race_server", "classroom_app", "hostile",
           "family_server"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if SERVERS & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


def pytest_runtest_logreport(report):
    """BERTLAB_TIMELINE=FILE: one line per test phase (worker, end time, seconds, phase, test), to see how
    the two workers' loads balance (sort by worker and time)."""
    path = os.environ.get("BERTLAB_TIMELINE")
    if path and not hasattr(report, "node"):  # xdist's controller hears each worker's report again
        import time
        with open(path, "a", encoding="utf-8") as f:
            f.write(f"{os.environ.get('PYTEST_XDIST_WORKER', 'main')}\t{time.time():.1f}\t{report.duration:.1f}\t"
                    f"{report.when}\t{report.nodeid}\n")


def pytest_unconfigure(config):
    import sys
    if "browser" in sys.modules:  # tests/browser.py, when a test used it
        sys.modules["browser"].close_shared_browser()


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


TOPICS = {
    "film": "the film was {a} . the acting was {a} and the plot was {b} . i would {c} recommend it .",
    "bank": "we walked along the river bank . the water was {a} and the trees were {b} . it was {c} quiet .",
    "food": "the soup was {a} . the bread was {b} and the wine was {a} . we will {c} come back .",
}


def write_corpus(path, n_docs=60):
    """Small documents of several sentences, separated by blank lines, with learnable regularities."""
    import random
    rng = random.Random(0)
    words = ["great", "good", "bad", "boring", "fine", "slow", "warm", "cold"]
    docs = []
    for i in range(n_docs):
        t = list(TOPICS.values())[i % len(TOPICS)]
        docs.append(" ".join(t.format(a=rng.choice(words), b=rng.choice(words), c=rng.choice(["really", "never", "not"]))
                             for _ in range(3)))
    path.write_text("\n\n".join(docs) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def small_corpus(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("corpus") / "docs.txt")


# Gradio's launch() asks for its own page once (httpx.head, 3 s time-out) and quit when a busy machine
# answered later. The shared app starts with every such check timing out, as on the busiest machine:
# it must serve all the same (serving.patient_start_check).
SLOW_HEAD = """
import httpx

_head = httpx.head


def head(url, *args, **kwargs):
    if "127.0.0.1" in str(url) or "localhost" in str(url):
        raise httpx.ReadTimeout("this test makes the start-up check time out")
    return _head(url, *args, **kwargs)


httpx.head = head
"""


@pytest.fixture(scope="session")
def plain_app(tmp_path_factory):
    """(url, log path, runs folder): the app as `python app.py` serves it, once per test process (an
    xdist worker) for every module that uses `server`; tests seed the runs they need into its folder."""
    from browser import serving
    folder = tmp_path_factory.mktemp("app")
    (folder / "slow_head").mkdir()
    (folder / "slow_head" / "sitecustomize.py").write_text(SLOW_HEAD)
    path = os.pathsep.join(p for p in (str(folder / "slow_head"), os.environ.get("PYTHONPATH")) if p)
    with serving(["app.py"], folder, {"PYTHONPATH": path}) as (url, log):
        yield url, log, folder / "runs"


def log_since(log, start: int) -> str:
    with open(log, "rb") as f:
        f.seek(start)
        return f.read().decode(errors="replace")


@pytest.fixture(scope="module")
def server(plain_app):
    """The shared app's url for one test module. At the module's end its runs stop, and its slice of the
    server log must hold no traceback: a user's bad input is a message, never a traceback; anything
    else is a bug."""
    from browser import kill_runs_under
    url, log, runs = plain_app
    start = log.stat().st_size
    yield url
    kill_runs_under(runs)
    text = log_since(log, start)
    assert "Traceback" not in text, text[-4000:]


@pytest.fixture(scope="session")
def plain_runs(plain_app):
    """The shared app's runs folder, where a test puts a finished run it wants the page to offer."""
    plain_app[2].mkdir(parents=True, exist_ok=True)
    return plain_app[2]


@pytest.fixture(scope="module")
def client(server):
    from gradio_client import Client
    return Client(server, verbose=False, analytics_enabled=False, download_files=False)


@pytest.fixture
def one_thread():
    """One torch thread for this test: tiny models on shared cores run faster, and summation order (so
    every bit of a result) depends on the thread count."""
    import torch  # here: most test modules never need it
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def single_thread():
    """Tiny models on a shared 2-core machine: a second thread only adds contention."""
    import torch  # here: most test modules never need it
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
