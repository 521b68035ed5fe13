"""The one place Bruce reaches into aiosqlite's private API.

aiosqlite runs every call on the connection's own thread: each call is one trip there and back
through the event loop (about 60-70 microseconds of CPU). ``Database.write`` and
``Database.read`` run a whole batch (a write's statements and its commit, or several reads) in
one trip, a measured win, and aiosqlite has no public name for that. Two private names give it:

- ``Connection._execute(fn, *args)``: queues ``fn(*args)`` on the connection's thread and
  awaits its result (or its exception);
- ``Connection._conn``: the ``sqlite3.Connection`` aiosqlite wraps, touched on that thread only.

Both are unchanged from aiosqlite 0.20 to 0.22; ``pyproject.toml`` pins ``aiosqlite>=0.20,<0.23``
and ``tests/store/test_aiosqlite_shim.py`` fails if an upgrade removes or changes them.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import aiosqlite

__all__ = ["run_on_connection_thread"]

_T = TypeVar("_T")


async def run_on_connection_thread(connection: aiosqlite.Connection, work: Callable[[sqlite3.Connection], _T]) -> _T:
    """``work(the sqlite3 connection)`` on ``connection``'s thread, in one trip: its result, or
    the exception it raised. ``ValueError`` when the connection is closed (as aiosqlite's own calls)."""
    queue: Callable[..., Awaitable[Any]] = connection._execute  # private: aiosqlite's queue to its thread
    result: _T = await queue(_with_sqlite3_connection, connection, work)
    return result


def _with_sqlite3_connection(connection: aiosqlite.Connection, work: Callable[[sqlite3.Connection], _T]) -> _T:
    """On the connection's thread."""
    return work(connection._conn)  # private: the wrapped sqlite3 connection
