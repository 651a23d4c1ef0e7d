"""A small thread-safe LRU cache, bounded by its number of entries and optionally by their bytes."""
from __future__ import annotations

import threading
from collections import OrderedDict
from concurrent.futures import Future


class LRU:
    """Drops the least recently used entries while there are more than `max_items`, or while their
    `size(value)` adds up to more than `max_bytes` (the newest entry stays however big)."""

    def __init__(self, max_items=float("inf"), max_bytes=float("inf"), size=lambda value: 0):
        self.max_items, self.max_bytes, self.size = max_items, max_bytes, size
        self._data, self._bytes, self._lock = OrderedDict(), 0, threading.Lock()
        self._making: dict = {}  # key -> Future of the value one thread is making now

    def get(self, key, default=None):
        """The value under key (now the most recently used), or default."""
        with self._lock:
            if key not in self._data:
                return default
            self._data.move_to_end(key)
            return self._data[key][0]

    def put(self, key, value):
        """Store value under key, replacing any older one; returns value."""
        n = self.size(value)
        with self._lock:
            self._bytes += n - self._data.pop(key, (None, 0))[1]
            self._data[key] = (value, n)
            while len(self._data) > self.max_items or (len(self._data) > 1 and self._bytes > self.max_bytes):
                self._bytes -= self._data.popitem(last=False)[1][1]
        return value

    def get_or_make(self, key, make, fresh=lambda value: True):
        """The value under key if `fresh(value)`, else make()'s, stored. Threads asking for a key that
        another is making wait for that one result instead of making it again: a class that opens
        the page at once loads one model once, not thirty times. make()'s error reaches them all."""
        with self._lock:
            if key in self._data and fresh(self._data[key][0]):
                self._data.move_to_end(key)
                return self._data[key][0]
            pending = self._making.get(key)
            mine = pending is None
            if mine:
                pending = self._making[key] = Future()
        if not mine:
            return pending.result()
        try:
            value = self.put(key, make())
        except BaseException as e:
            pending.set_exception(e)
            raise
        else:
            pending.set_result(value)
            return value
        finally:
            with self._lock:
                self._making.pop(key, None)

    def __len__(self) -> int:
        return len(self._data)
