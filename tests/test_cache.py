"""The caches behind models, probes and indexes: a burst of the same request makes its value once."""
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from bertlab.cache import LRU


def _burst(cache, key, make, n=8):
    start = threading.Barrier(n)

    def ask(_):
        start.wait()
        return cache.get_or_make(key, make)
    with ThreadPoolExecutor(n) as pool:
        return [pool.submit(ask, i) for i in range(n)]


def test_a_burst_makes_the_value_once_and_everyone_gets_it():
    made = []

    def make():
        made.append(1)
        time.sleep(0.3)  # long enough that every thread asks while it is being made
        return object()
    c = LRU(4)
    values = {id(f.result()) for f in _burst(c, "model", make)}
    assert len(made) == 1 and len(values) == 1
    assert c.get_or_make("model", make) is c.get("model") and len(made) == 1  # now a plain hit


def test_an_error_reaches_every_waiter_and_nothing_is_kept():
    calls = []

    def make():
        calls.append(1)
        time.sleep(0.3)
        raise ValueError("this model is too big for this server")
    c = LRU(4)
    for f in _burst(c, "big", make):
        with pytest.raises(ValueError, match="too big"):
            f.result()
    assert len(calls) == 1 and c.get("big") is None and len(c) == 0
    with pytest.raises(ValueError):  # asked again later: tried again, not a remembered failure
        c.get_or_make("big", make)
    assert len(calls) == 2


def test_a_stale_value_is_made_again_and_replaced():
    c = LRU(4)
    c.put("run", ("stamp 1", "old weights"))
    fresh = lambda v: v[0] == "stamp 2"  # noqa: E731
    assert c.get_or_make("run", lambda: ("stamp 2", "new weights"), fresh) == ("stamp 2", "new weights")
    assert c.get("run") == ("stamp 2", "new weights") and len(c) == 1
    assert c.get_or_make("run", lambda: pytest.fail("made again"), fresh)[1] == "new weights"


def test_the_bounds_still_hold():
    c = LRU(2)
    for k in "abc":
        c.get_or_make(k, lambda k=k: k.upper())
    assert len(c) == 2 and c.get("a") is None and c.get("c") == "C"
