"""A small thread-safe LRU cache, bounded by its number of entries and optionally by their bytes."""
from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable


class LRU:
    """Drops the least recently used entries once there are more than `max_items` of them, or once
    their `size(value)` adds up to more than `max_bytes` (the newest entry stays however big)."""

    def __init__(self, max_items: int | None = None, max_bytes: int | None = None,
                 size: Callable[[object], int] | None = None):
        if max_bytes is not None and size is None:
            raise ValueError("an LRU bounded by bytes needs a size function")
        self.max_items, self.max_bytes, self._size = max_items, max_bytes, size
        self._data: OrderedDict[Hashable, tuple[object, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: Hashable, default=None):
        """The value stored under key (now the most recently used), or default."""
        with self._lock:
            if key not in self._data:
                return default
            self._data.move_to_end(key)
            return self._data[key][0]

    def put(self, key: Hashable, value):
        """Store value under key, replacing any older one; returns value."""
        n = self._size(value) if self._size else 0
        with self._lock:
            if key in self._data:
                self._bytes -= self._data.pop(key)[1]
            self._data[key] = (value, n)
            self._bytes += n
            while self._data and ((self.max_items is not None and len(self._data) > self.max_items)
                                  or (self.max_bytes is not None and len(self._data) > 1
                                      and self._bytes > self.max_bytes)):
                self._bytes -= self._data.popitem(last=False)[1][1]
        return value

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._data
