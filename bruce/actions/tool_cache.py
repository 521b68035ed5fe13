"""The read-tool cache: a repeated ``web.search`` or ``web.read_url`` within its contract's
``cache_ttl_s`` is answered from memory, costing no request (and no model-visible difference).

In memory only (a restart empties it), least recently used first out once ``max_entries`` is
reached; a result larger than ``max_entry_chars`` (as JSON) is not kept. The key is the tool
and its canonical arguments (sorted keys), whoever asks. Only successful results are kept. The
registry uses it for contracts with ``cache_ttl_s > 0``, which ``check_contract`` allows only on
low-risk tools without side effects.
"""

from __future__ import annotations

import copy
import json
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["ToolCache"]


class ToolCache:
    def __init__(self, *, monotonic: Callable[[], float], max_entries: int = 512,
                 max_entry_chars: int = 200_000) -> None:
        self._now = monotonic
        self._max_entries = max_entries
        self._max_entry_chars = max_entry_chars
        self._entries: OrderedDict[str, tuple[float, Any]] = OrderedDict()
        self.hits = 0
        self.misses = 0

    @staticmethod
    def key(tool_name: str, arguments: Mapping[str, Any]) -> str:
        return tool_name + "\x00" + json.dumps(arguments, sort_keys=True, ensure_ascii=False, separators=(",", ":"),
                                               default=str)

    def get(self, key: str) -> Any | None:
        """A copy of the kept result, or None (never kept, expired, or pushed out)."""
        found = self._entries.get(key)
        if found is None or found[0] <= self._now():
            if found is not None:
                del self._entries[key]
            self.misses += 1
            return None
        self._entries.move_to_end(key)
        self.hits += 1
        return copy.deepcopy(found[1])  # the caller may change what it gets

    def put(self, key: str, output: Any, ttl_s: float) -> None:
        try:
            size = len(json.dumps(output, ensure_ascii=False, default=str))
        except (TypeError, ValueError, RecursionError, OverflowError):
            return
        if ttl_s <= 0 or size > self._max_entry_chars:
            return
        self._entries[key] = (self._now() + ttl_s, copy.deepcopy(output))
        self._entries.move_to_end(key)
        while len(self._entries) > self._max_entries:
            self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)
