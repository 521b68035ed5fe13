"""The shim over aiosqlite's private API: a batch runs on the connection's thread in one trip,
and an aiosqlite upgrade that removes or changes what it relies on fails here, by name."""

from __future__ import annotations

import inspect
import re
import sqlite3
import threading
from importlib.metadata import version
from pathlib import Path

import aiosqlite
import pytest

from bruce.store._aiosqlite_shim import run_on_connection_thread

ROOT = Path(__file__).resolve().parents[2]


def test_aiosqlite_still_has_the_private_names_the_shim_uses():
    assert inspect.iscoroutinefunction(aiosqlite.Connection._execute)
    assert list(inspect.signature(aiosqlite.Connection._execute).parameters) == ["self", "fn", "args", "kwargs"]
    assert isinstance(inspect.getattr_static(aiosqlite.Connection, "_conn"), property)


def test_the_installed_aiosqlite_is_inside_the_pinned_range():
    pin = re.search(r'"aiosqlite>=([\d.]+),<([\d.]+)"', (ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert pin is not None, "pyproject.toml must pin aiosqlite's upper bound (the shim uses its internals)"

    def parts(text: str) -> tuple[int, ...]:
        return tuple(int(p) for p in re.findall(r"\d+", text)[:3])

    assert parts(pin[1]) <= parts(version("aiosqlite")) < parts(pin[2])


async def test_work_runs_on_the_connections_thread_with_the_sqlite3_connection(tmp_path):
    async with aiosqlite.connect(tmp_path / "t.db") as connection:
        seen: dict[str, object] = {}

        def work(conn: sqlite3.Connection) -> int:
            seen["thread"] = threading.get_ident()
            seen["type"] = type(conn)
            conn.execute("CREATE TABLE t (x INTEGER)")
            conn.executemany("INSERT INTO t VALUES (?)", [(1,), (2,)])
            conn.commit()
            return int(conn.execute("SELECT SUM(x) FROM t").fetchone()[0])

        assert await run_on_connection_thread(connection, work) == 3
        assert seen["type"] is sqlite3.Connection and seen["thread"] != threading.get_ident()
        assert await connection.execute_fetchall("SELECT x FROM t ORDER BY x") == [(1,), (2,)]


async def test_an_exception_in_the_work_reaches_the_caller(tmp_path):
    async with aiosqlite.connect(tmp_path / "t.db") as connection:
        with pytest.raises(sqlite3.OperationalError, match="no such table"):
            await run_on_connection_thread(connection, lambda conn: conn.execute("SELECT * FROM missing"))


async def test_a_closed_connection_refuses_the_work(tmp_path):
    connection = await aiosqlite.connect(tmp_path / "t.db")
    await connection.close()
    with pytest.raises(ValueError):
        await run_on_connection_thread(connection, lambda conn: None)
