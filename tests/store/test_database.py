"""The one connection: opening (clear errors for an unusable file, ``create=False``), a write
whole or not at all even when its caller is cancelled, several reads in one trip, closing after
the writes under way, a failing read as a StoreError."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from bruce.errors import StoreBusy, StoreError
from bruce.store import Store
from bruce.store.migrations import MIGRATIONS
from bruce.values import TurnSource
from tests.helpers import db_rows


async def test_unopenable_path_is_a_store_error(tmp_path, clock):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(StoreError, match="cannot open database"):
        await Store.open(blocker / "sub" / "b.db", clock)


async def test_closing_waits_for_a_write_under_way(tmp_path, clock):
    """A write shielded from a cancelled caller (shutdown) still lands before the file closes."""
    import asyncio

    path = tmp_path / "b.db"
    store = await Store.open(path, clock)
    await store.messages.ensure_conversation("test:1", "test", "1")
    writes = [asyncio.ensure_future(store.outbound.add("test:1", f"reply {i}", turn_id=None))
              for i in range(20)]
    await asyncio.sleep(0)
    await store.close()
    assert all(w.done() and not w.exception() for w in writes)
    assert len(db_rows(path, "SELECT id FROM messages")) == 20


async def test_a_file_that_is_not_a_database_is_a_clear_error(tmp_path, clock):
    path = tmp_path / "notes.txt"
    path.write_text("shopping list\n" * 500)
    with pytest.raises(StoreError) as info:
        await Store.open(path, clock)
    assert str(path) in str(info.value) and "not a Bruce database" in str(info.value)


async def test_open_without_create_refuses_a_missing_file_and_creates_nothing(tmp_path, clock, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StoreError) as info:
        await Store.open(Path("data") / "bruce.db", clock, create=False)
    assert str(info.value) == f"no database at {tmp_path.resolve() / 'data' / 'bruce.db'}"
    assert list(tmp_path.iterdir()) == []  # neither the file nor its folder
    store = await Store.open(tmp_path / "data" / "bruce.db", clock)  # the default creates both
    await store.close()
    store = await Store.open(tmp_path / "data" / "bruce.db", clock, create=False)  # now it is there
    assert await store.migrate() == len(MIGRATIONS)
    await store.close()


async def test_a_failing_statement_rolls_back_the_whole_write(tmp_path, clock):
    """complete_turn writes the reply, closes the message and the turn in one trip: a failure in
    the last statement leaves none of them (no reply without its turn, no message closed twice)."""
    path = tmp_path / "b.db"
    store = await Store.open(path, clock)
    await store.messages.ensure_conversation("test:1", "test", "1")
    inbound, _ = await store.messages.add_inbound("test:1", sender_id="u", text="hi", platform_message_id="p1")
    db_path = str(path)
    blocker = sqlite3.connect(db_path)
    blocker.execute("CREATE TRIGGER no_turns BEFORE UPDATE ON turns BEGIN SELECT RAISE(ABORT, 'turns are frozen'); END")
    blocker.commit()
    blocker.close()
    await store.messages.start_turn("t1", "test:1", source=TurnSource.CHAT, inbound_message_id=inbound)
    with pytest.raises(StoreError, match="turns are frozen"):
        await store.messages.complete_turn("t1", conversation_id="test:1", reply="hello", llm_calls=1, tool_calls=0,
                                           inbound_id=inbound)
    await store.close()
    assert db_rows(path, "SELECT direction, status FROM messages") == [{"direction": "in", "status": "pending"}]
    assert db_rows(path, "SELECT status FROM turns") == [{"status": "running"}]


async def test_a_write_whose_caller_is_cancelled_lands_whole(tmp_path, clock):
    """A reply and the message it closes are one transaction: cancelling the caller mid-trip
    (shutdown) never leaves the reply stored with its message still pending, or the reverse."""
    import asyncio

    path = tmp_path / "b.db"
    store = await Store.open(path, clock)
    await store.messages.ensure_conversation("test:1", "test", "1")
    ids = [(await store.messages.add_inbound("test:1", sender_id="u", text=f"m{i}", platform_message_id=f"p{i}"))[0]
           for i in range(30)]
    writes = [asyncio.ensure_future(store.outbound.add("test:1", f"reply {i}", turn_id=None, inbound_id=m))
              for i, m in enumerate(ids)]
    for delay, write in enumerate(writes):
        if delay % 3:
            write.cancel()
        await asyncio.sleep(0)
    await asyncio.gather(*writes, return_exceptions=True)
    await store.close()
    replies = {r["text"] for r in db_rows(path, "SELECT text FROM messages WHERE direction = 'out'")}
    for i, m in enumerate(ids):
        (status,) = db_rows(path, "SELECT status FROM messages WHERE id = ?", m)
        assert (status["status"] == "done") == (f"reply {i}" in replies), i


async def test_several_reads_in_one_trip_see_one_conversation(tmp_path, clock):
    """A turn's summary, previous message time and history come from one read."""
    path = tmp_path / "b.db"
    store = await Store.open(path, clock)
    await store.messages.ensure_conversation("test:1", "test", "1")
    first, _ = await store.messages.add_inbound("test:1", sender_id="u", text="one", platform_message_id="p1")
    await store.outbound.add("test:1", "reply one", turn_id=None, inbound_id=first)
    await store.messages.add_summary("test:1", "they said one", up_to_message_id=first)
    second, _ = await store.messages.add_inbound("test:1", sender_id="u", text="two", platform_message_id="p2")
    view = await store.messages.turn_view("test:1", limit=10, inbound_id=second)
    await store.close()
    assert view.summary is not None and view.summary.summary == "they said one"
    assert view.previous_at is not None
    assert [m.text for m in view.history] == ["reply one", "two"]


async def test_a_failing_read_is_a_store_error_naming_the_failure(tmp_path, clock):
    """Callers catch StoreError (the outbox keeps replies stored and tries later); a raw
    sqlite3 error from a read used to pass them by."""
    store = await Store.open(tmp_path / "b.db", clock)
    try:
        with pytest.raises(StoreError, match="database read failed: no such table: nowhere"):
            await store.database.rows("SELECT * FROM nowhere")
        with pytest.raises(StoreError, match="no such column"):
            await store.database.row("SELECT no_column FROM messages")
    finally:
        await store.close()


async def test_a_write_returns_what_its_work_returned_and_execute_the_rows_it_changed(store):
    def work(conn: sqlite3.Connection) -> int:
        conn.execute("INSERT INTO conversations (id, channel, chat_id, created_at) VALUES ('a:1', 'a', '1', 'now')")
        conn.execute("INSERT INTO conversations (id, channel, chat_id, created_at) VALUES ('a:2', 'a', '2', 'now')")
        return 2

    assert await store.database.write(work) == 2
    _, changed = await store.database.execute("UPDATE conversations SET session_start_id = 5")
    assert changed == 2
    assert [r["id"] for r in await store.database.read(lambda c: c.execute(
        "SELECT id FROM conversations ORDER BY id").fetchall())] == ["a:1", "a:2"]


async def test_a_database_locked_by_another_process_is_store_busy_after_two_more_tries(tmp_path, clock):
    path = tmp_path / "b.db"
    store = await Store.open(path, clock, busy_timeout_ms=1)
    other = sqlite3.connect(path)
    other.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(StoreBusy, match="locked"):
            await store.messages.ensure_conversation("test:1", "test", "1")
    finally:
        other.rollback()
        other.close()
    await store.messages.ensure_conversation("test:1", "test", "1")  # the lock gone, the same write lands
    await store.close()
    assert db_rows(path, "SELECT id FROM conversations") == [{"id": "test:1"}]


async def test_a_failing_transaction_is_rolled_back_whole_as_a_store_error(store):
    with pytest.raises(StoreError, match="UNIQUE"):
        async with store.database.transaction() as db:
            await db.execute("INSERT INTO conversations (id, channel, chat_id, created_at) VALUES ('a:1', 'a', '1', 'x')")
            await db.execute("INSERT INTO conversations (id, channel, chat_id, created_at) VALUES ('a:1', 'a', '1', 'x')")
    assert await store.database.rows("SELECT id FROM conversations") == []


async def test_the_wal_is_bounded_by_journal_size_limit(tmp_path, clock):
    from bruce.store.database import WAL_SIZE_LIMIT

    store = await Store.open(tmp_path / "b.db", clock)
    (limit,) = await store.database.rows("PRAGMA journal_size_limit")
    await store.close()
    assert limit[0] == WAL_SIZE_LIMIT


async def test_after_a_full_disk_the_wal_is_checkpointed_and_emptied(tmp_path, clock):
    """A write refused for lack of space (SQLITE_FULL, made here with max_page_count instead of a
    full filesystem) is followed by a TRUNCATE checkpoint: the WAL gives its space back."""
    path = tmp_path / "b.db"
    store = await Store.open(path, clock)
    await store.messages.ensure_conversation("test:1", "test", "1")
    for i in range(20):
        await store.outbound.add("test:1", f"reply {i} " + "x" * 2000, turn_id=None)
    wal = Path(f"{path}-wal")
    assert wal.stat().st_size > 0
    (pages,) = await store.database.rows("PRAGMA page_count")
    await store.database.rows(f"PRAGMA max_page_count={pages[0]}")  # "the disk": no page more
    with pytest.raises(StoreError, match="full"):
        await store.outbound.add("test:1", "y" * 200_000, turn_id=None)
    assert wal.stat().st_size == 0
    await store.database.rows("PRAGMA max_page_count=1073741823")  # space freed: writes go on
    await store.outbound.add("test:1", "after", turn_id=None)
    await store.close()
    assert db_rows(path, "SELECT text FROM messages ORDER BY id DESC LIMIT 1")[0]["text"] == "after"


async def test_after_a_full_disk_in_a_transaction_the_wal_is_emptied_too(tmp_path, clock):
    path = tmp_path / "b.db"
    store = await Store.open(path, clock)
    await store.messages.ensure_conversation("test:1", "test", "1")
    for i in range(20):
        await store.outbound.add("test:1", f"reply {i} " + "x" * 2000, turn_id=None)
    (pages,) = await store.database.rows("PRAGMA page_count")
    await store.database.rows(f"PRAGMA max_page_count={pages[0]}")
    with pytest.raises(StoreError, match="full"):
        async with store.database.transaction() as db:
            await db.execute("UPDATE messages SET text = ? WHERE id = 1", ("z" * 200_000,))
    assert Path(f"{path}-wal").stat().st_size == 0
    await store.close()


async def test_a_broken_constraint_is_no_reason_to_checkpoint(tmp_path, clock):
    path = tmp_path / "b.db"
    store = await Store.open(path, clock)
    await store.messages.ensure_conversation("test:1", "test", "1")
    await store.outbound.add("test:1", "kept in the WAL", turn_id=None)
    with pytest.raises(StoreError):
        await store.database.execute("INSERT INTO messages (id, conversation_id) VALUES (1, 'test:1')")
    assert Path(f"{path}-wal").stat().st_size > 0
    await store.close()
