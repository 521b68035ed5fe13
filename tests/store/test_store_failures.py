"""A database locked by another process (a backup, another tool) or failing: nothing is lost,
nothing is answered twice, and the user is not told of a failure that a retry fixed."""

from __future__ import annotations

import sqlite3
import threading

import pytest

from bruce.errors import StoreError
from tests.fakes.llm_server import Step
from tests.helpers import incoming, rows, say


class Locker:
    """Another process holding the database's write lock."""

    def __init__(self, path):
        self._con = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._lock = threading.Lock()

    def lock(self):
        self._con.execute("BEGIN EXCLUSIVE")

    def unlock(self):
        with self._lock:
            if self._con.in_transaction:
                self._con.execute("ROLLBACK")

    def unlock_after(self, seconds):
        threading.Timer(seconds, self.unlock).start()

    def close(self):
        self.unlock()
        self._con.close()


@pytest.fixture
async def locked_app(app_factory):
    app = await app_factory(storage={"busy_timeout_ms": 50})
    locker = Locker(app.config.storage.path)
    yield app, locker
    locker.close()


async def test_a_short_lock_during_a_turn_keeps_the_audit_row_and_the_answer(locked_app, fake_llm, channel):
    app, locker = locked_app

    def responder(body):
        locker.lock()
        locker.unlock_after(0.15)  # shorter than the write retries
        return Step.text("answer")

    fake_llm.responder = responder
    await say(app, "hi")
    assert channel.texts() == ["answer"]
    assert [r["status"] for r in await rows(app, "SELECT status FROM llm_calls")] == ["ok"]
    assert [r["status"] for r in await rows(app, "SELECT status FROM turns")] == ["ok"]
    assert [r["status"] for r in await rows(app, "SELECT status FROM messages WHERE direction='in'")] == ["done"]


async def test_a_turn_that_fails_on_the_database_is_tried_again_not_failed(locked_app, fake_llm, channel, clock):
    app, locker = locked_app
    calls = []

    def responder(body):
        calls.append(body)
        if len(calls) == 1:
            locker.lock()  # held past every write retry: the turn fails on the database
            clock.on_sleep.append(locker.unlock)  # ...until the worker backs off to try again
        return Step.text(f"answer {len(calls)}")

    fake_llm.responder = responder
    await say(app, "hi")
    assert channel.texts() == ["answer 2"]  # one reply, no failure notice
    turns = await rows(app, "SELECT status FROM turns ORDER BY started_at, rowid")
    assert [t["status"] for t in turns] == ["interrupted", "ok"]
    assert [r["status"] for r in await rows(app, "SELECT status FROM messages WHERE direction='in'")] == ["done"]
    assert clock.sleeps == [1.0]


async def test_a_retry_never_redoes_a_tool_that_acted(locked_app, fake_llm, channel, clock, tmp_path):
    app, locker = locked_app

    def responder(body):
        if body["messages"][-1]["role"] == "tool":
            locker.lock()
            clock.on_sleep.append(locker.unlock)
            return Step.text("Saved.")
        return Step.tool_calls(("artifact_save", {"filename": "r.html", "content": "x"}))

    fake_llm.responder = responder
    await say(app, "save it")
    assert len(await rows(app, "SELECT id FROM artifacts")) == 1
    (notice,) = channel.texts()
    assert "artifact.save" in notice and "interrupted" in notice  # told what completed, not redone


async def test_a_message_that_cannot_be_stored_is_refused_loudly(locked_app, fake_llm):
    app, locker = locked_app
    await app.store.messages.ensure_conversation("test:c1", "test", "c1")
    locker.lock()
    with pytest.raises(StoreError, match="locked"):
        await app.worker.deliver(incoming(app, "hi"))  # the channel keeps the message and tries again
    locker.unlock()
    assert fake_llm.requests == []
    handle = await app.worker.deliver(incoming(app, "hi"))
    await handle
    assert [r["text"] for r in await rows(app, "SELECT text FROM messages WHERE direction='in'")] == ["hi"]
