"""The schema: migrations applied once, in order, keeping the data of an older database; the
tables and columns the audit needs; foreign keys and status values checked by SQLite."""

from __future__ import annotations

import sqlite3

import pytest

from bruce.errors import StoreError
from bruce.store import Store
from bruce.store.migrations import MIGRATIONS, SCHEMA, in_order, versions
from bruce.values import JobRunStatus
from tests.helpers import db_rows


async def test_migrations_run_once_and_are_idempotent(tmp_path, clock):
    path = tmp_path / "db" / "bruce.db"
    store = await Store.open(path, clock)
    await store.messages.ensure_conversation("test:1", "test", "1")
    await store.close()
    store = await Store.open(path, clock)  # second start: nothing re-applied, data intact
    assert await store.migrate() == len(MIGRATIONS)
    await store.close()
    assert db_rows(path, "SELECT id FROM conversations") == [{"id": "test:1"}]
    assert db_rows(path, "PRAGMA user_version") == [{"user_version": len(MIGRATIONS)}]
    assert db_rows(path, "PRAGMA journal_mode") == [{"journal_mode": "wal"}]


async def test_required_tables_and_columns_exist(tmp_path, clock):
    store = await Store.open(tmp_path / "b.db", clock)
    await store.close()
    def columns(table):
        return {r["name"] for r in db_rows(tmp_path / "b.db", f"PRAGMA table_info({table})")}
    assert {"id", "turn_id", "conversation_id", "tool_name", "risk", "input", "output", "status", "error",
            "latency_ms", "source", "created_at"} <= columns("tool_executions")
    assert {"id", "turn_id", "seq", "model", "status", "latency_ms", "prompt_tokens", "completion_tokens",
            "cost_usd", "error", "created_at"} <= columns("llm_calls")
    for table in ("conversations", "messages", "session_summaries", "turns"):
        assert columns(table)


async def test_foreign_keys_are_enforced(tmp_path, clock):
    store = await Store.open(tmp_path / "b.db", clock)
    try:
        with pytest.raises(StoreError, match="FOREIGN KEY"):
            await store.outbound.add("nobody:1", "hi", turn_id=None)
    finally:
        await store.close()


async def test_status_values_are_checked(tmp_path, clock):
    store = await Store.open(tmp_path / "b.db", clock)
    try:
        await store.messages.ensure_conversation("test:1", "test", "1")
        await store.messages.start_turn("t1", "test:1", source="chat", inbound_message_id=None)
        with pytest.raises(StoreError, match="CHECK"):
            await store.messages.finish_turn("t1", status="kinda")
    finally:
        await store.close()


async def test_a_newer_database_is_refused(tmp_path, clock):
    path = tmp_path / "b.db"
    con = sqlite3.connect(path)
    con.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 1}")
    con.close()
    with pytest.raises(StoreError, match="newer than this Bruce"):
        await Store.open(path, clock)


async def test_an_older_database_is_migrated_with_its_data(tmp_path, clock):
    """A database of the previous schema (v2) keeps its turns and audit rows across the upgrade."""
    path = tmp_path / "old.db"
    con = sqlite3.connect(path)
    for script in MIGRATIONS[:2]:
        con.executescript(script)
    con.execute("PRAGMA user_version = 2")
    con.execute("INSERT INTO conversations VALUES ('test:1', 'test', '1', 'now')")
    con.execute("INSERT INTO turns (id, conversation_id, source, status, llm_turns, started_at)"
                " VALUES ('t1', 'test:1', 'chat', 'ok', 3, 'now')")
    con.execute("INSERT INTO tool_executions (turn_id, conversation_id, tool_name, input, status, latency_ms, source,"
                " created_at) VALUES ('t1', 'test:1', 'clock.now', '{}', 'ok', 1.5, 'chat', 'now')")
    con.commit()
    con.close()
    store = await Store.open(path, clock)
    await store.close()
    assert db_rows(path, "SELECT id, llm_calls, job_id FROM turns") == [{"id": "t1", "llm_calls": 3, "job_id": None}]
    assert db_rows(path, "SELECT tool_name, status, latency_ms FROM tool_executions") == [
        {"tool_name": "clock.now", "status": "ok", "latency_ms": 1.5}]
    assert db_rows(path, "PRAGMA user_version") == [{"user_version": len(MIGRATIONS)}]



def test_migrations_are_the_schema_files_in_version_order():
    """Each ``vNN_*.sql`` file is version NN, in its place, with no gap; a second file for one
    version, a misnamed file or a missing number fails here, not on the owner's database."""
    found = versions(SCHEMA)
    assert sorted(path.name for path in SCHEMA.iterdir()) == sorted(path.name for path in found.values())
    assert sorted(found) == list(range(1, len(found) + 1)) and len(MIGRATIONS) == len(found) >= 13
    for number, script in enumerate(MIGRATIONS, start=1):
        assert script == found[number].read_text(encoding="utf-8")


def test_a_missing_version_is_refused(tmp_path):
    """A gap would be an empty step: a database migrated past it never runs the script that fills it later."""
    (tmp_path / "v01_first.sql").write_text("SELECT 1;")
    (tmp_path / "v03_third.sql").write_text("SELECT 3;")
    with pytest.raises(ValueError, match="no schema script for version 2"):
        in_order(versions(tmp_path))


def test_two_scripts_for_one_version_or_a_misnamed_script_are_refused(tmp_path):
    (tmp_path / "v01_first.sql").write_text("SELECT 1;")
    (tmp_path / "v01_again.sql").write_text("SELECT 2;")
    with pytest.raises(ValueError, match="two scripts for version 1"):
        versions(tmp_path)
    (tmp_path / "v01_again.sql").unlink()
    (tmp_path / "v2-bad.sql").write_text("SELECT 2;")
    with pytest.raises(ValueError, match="v2-bad.sql"):
        versions(tmp_path)


async def test_v12_keeps_jobs_and_runs_trusted_and_takes_a_held_run(tmp_path, clock):
    """A database of v11 keeps its jobs (trusted, as they were made by then) and their runs;
    a run may then be recorded ``held``."""
    path = tmp_path / "v11.db"
    con = sqlite3.connect(path)
    for script in MIGRATIONS[:11]:
        con.executescript(script)
    con.execute("PRAGMA user_version = 11")
    con.execute("INSERT INTO conversations (id, channel, chat_id, created_at) VALUES ('test:1', 'test', '1', 'now')")
    con.execute("INSERT INTO proactive_jobs (id, conversation_id, execution_mode, content, schedule_kind,"
                " schedule_value, timezone, description, status, anchor_at, dedup_key, created_at, updated_at)"
                " VALUES ('j1', 'test:1', 'agent', 'brief me', 'every', '60', 'UTC', 'every minute', 'active',"
                " 'now', 'k', 'now', 'now')")
    con.execute("INSERT INTO job_runs (job_id, scheduled_for, started_at, status) VALUES ('j1', 't1', 'now', 'quiet')")
    con.commit()
    con.close()
    store = await Store.open(path, clock)
    try:
        assert (await store.jobs.get("j1")).untrusted is False  # type: ignore[union-attr]
        await store.jobs.claim_run("j1", "t2", lateness_ms=0, status=JobRunStatus.HELD, error="stopped")
        assert [str(r.status) for r in await store.jobs.runs("j1")] == ["held", "quiet"]
    finally:
        await store.close()
