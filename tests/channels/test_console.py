"""The console channel (`bruce chat`) against what a terminal, a model or a failing disk can throw
at it: escape codes, bytes that are not text, a database that cannot store the line."""

from __future__ import annotations

import io
import sqlite3
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bruce.app import build_app
from bruce.channel import ConfirmationRequest
from bruce.errors import StoreBusy
from bruce.turns.progress import ToolFinished
from channels.console import ConsoleChannel
from tests.fakes.console import ConsoleDriver, request_id
from tests.fakes.llm_server import Step
from tests.helpers import db_rows

FORGED = "\x1b[2K\x1b[1A\r[approval needed] nothing to see\x07\x7f\x9b31m\u202egnp.exe\u2066"


def raw_controls(text: str) -> list[str]:
    """Characters a terminal would act on instead of showing (newline excepted)."""
    return [c for c in text if (ord(c) < 0x20 and c not in "\n\t") or 0x7F <= ord(c) <= 0x9F
            or c in "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"]


def test_control_characters_are_made_visible():
    from bruce.safe_text import visible

    assert visible("a\x1b[2Kb") == "a^[[2Kb"
    assert visible("\x00\x07\r\x7f") == "^@^G^M^?"
    assert visible("\x9b\u202e\u2066\ud800") == "<U+009B><U+202E><U+2066><U+D800>"
    assert visible("line 1\nline 2\twith a tab, caf\u00e9, \u65e5\u672c, \U0001F44D") == (
        "line 1\nline 2\twith a tab, caf\u00e9, \u65e5\u672c, \U0001F44D")
    assert visible("crlf\r\nline") == "crlf\nline"


@pytest.fixture
def console(clock):
    out, steps = io.StringIO(), io.StringIO()
    return ConsoleChannel(clock=clock, stdin=io.StringIO(""), stdout=out, steps=steps), out, steps


async def test_replies_and_step_lines_cannot_move_the_cursor(console):
    channel, out, steps = console
    await channel.send_text("local", "Done." + FORGED)
    async with channel.progress("local") as sink:
        await sink.emit(ToolFinished(tool="web.search" + FORGED, status="ok\x1b[1A"))
    await channel.send_file("local", Path("/tmp/x\x1b[2K.html"), caption="c\x1b]0;title\x07")
    assert raw_controls(out.getvalue()) == [] and raw_controls(steps.getvalue()) == []
    assert out.getvalue().startswith("Bruce> Done.^[[2K^[[1A^M[approval needed]")
    assert "  · web.search^[[2K" in steps.getvalue()


async def test_the_approval_prompt_is_built_only_from_escaped_text(console):
    channel, out, _ = console
    request = ConfirmationRequest(
        id="ab12cd34", tool_name="files.write" + FORGED, risk="high\x1b[1A", summary="write todo.md" + FORGED,
        side_effects="writes\x1b[2K", preview="--- a/todo.md\n+++ b/todo.md\n+" + FORGED + "\n+Type /approve ab12cd34",
        expires_at=datetime(2026, 12, 2, tzinfo=UTC), step_up=False, expires_shown="21:00 -03 (America/Sao_Paulo)\x1b[2K")
    await channel.send_confirmation("local", request)
    text = out.getvalue()
    assert raw_controls(text) == []
    lines = text.splitlines()
    assert lines[0].startswith("[approval needed] write todo.md^[[2K^[[1A")
    assert lines[-1] == "  Type /approve ab12cd34 or /deny ab12cd34"
    assert lines[3] == "  expires at 21:00 -03 (America/Sao_Paulo)^[[2K"  # the owner's zone
    assert all(line.startswith("    ") for line in lines[5:-1])  # the preview stays indented, under the prompt


@pytest.fixture
async def console_app(make_config, clock, tmp_path):
    notes = tmp_path / "notes"
    notes.mkdir()
    config = make_config(tools={"files": {"notes_dir": str(notes)}}, storage={"busy_timeout_ms": 50})
    driver = ConsoleDriver(clock)
    app = await build_app(config, clock=clock, environ={}, extra_channels=[driver.channel])
    await app.start()
    driver.start()
    yield app, driver
    await driver.close()
    await app.stop()


async def test_a_forged_prompt_in_a_files_write_preview_is_shown_not_obeyed(console_app, fake_llm):
    _, driver = console_app
    fake_llm.add(Step.tool_calls(("files_write", {"path": "todo.md", "content": "milk\n" + FORGED + "\n"})),
                 Step.text("I need your approval to write todo.md."))
    out = await driver.say("add milk to my todo")
    assert raw_controls(out) == [] and "^[[2K^[[1A" in out
    request_id(out)


class Locker:
    """Another process holding the database's write lock (a backup, sqlite3 in a shell)."""

    def __init__(self, path) -> None:
        self._con = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._lock = threading.Lock()

    def lock(self) -> None:
        self._con.execute("BEGIN EXCLUSIVE")

    def unlock(self) -> None:
        with self._lock:
            if self._con.in_transaction:
                self._con.execute("ROLLBACK")

    def close(self) -> None:
        self.unlock()
        self._con.close()


@pytest.fixture
def locker(console_app):
    app, _ = console_app
    held = Locker(app.config.storage.path)
    yield held
    held.close()


async def test_a_line_the_database_cannot_store_is_kept_and_delivered_later(console_app, locker, fake_llm, clock):
    app, driver = console_app
    fake_llm.add(Step.text("Got it."))
    locker.lock()
    # released at the console's third wait: it backs off 1, 2, 4 seconds
    clock.on_sleep.append(lambda: clock.on_sleep.append(lambda: clock.on_sleep.append(locker.unlock)))
    out = await driver.say("remember the milk")
    assert out == "Bruce> Got it.\n"
    assert clock.sleeps[:3] == [1.0, 2.0, 4.0]
    notices = [line for line in driver.steps.getvalue().splitlines() if "not saved" in line]
    assert len(notices) == 1 and "trying again" in notices[0]
    inbound = db_rows(app.config.storage.path, "SELECT text, status FROM messages WHERE direction='in'")
    assert inbound == [{"text": "remember the milk", "status": "done"}]
    assert await driver.say("and eggs") == "Bruce> ok\n"  # the session goes on


async def test_quitting_while_a_line_waits_for_the_database_says_it_was_not_saved(console_app, locker):
    app, driver = console_app
    locker.lock()
    driver.type("this will not be stored")
    await driver.wait_for_notice("trying again")
    driver.type("/quit")
    await driver.close()  # interact() returns: the user may leave
    assert "gave up" in driver.steps.getvalue().splitlines()[-1]
    locker.unlock()
    assert db_rows(app.config.storage.path, "SELECT id FROM messages WHERE direction='in'") == []


class FlakyInbound:
    """Refuses to store the first ``failures`` deliveries, then accepts everything."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.delivered: list[str] = []

    async def deliver(self, message):
        if self.failures:
            self.failures -= 1
            raise StoreBusy("database write failed: database is locked")
        self.delivered.append(message.text)
        return None

    async def decide(self, *args):
        raise AssertionError("not used")


async def test_the_backoff_is_capped(clock):
    inbound = FlakyInbound(failures=7)
    steps = io.StringIO()
    channel = ConsoleChannel(clock=clock, stdin=io.StringIO("hello\n"), stdout=io.StringIO(), steps=steps)
    await channel.start(inbound)
    await channel.interact()
    assert inbound.delivered == ["hello"]
    assert clock.sleeps == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]


async def test_bytes_that_are_not_utf8_are_replaced_and_the_user_told(console_app, fake_llm):
    app, driver = console_app
    fake_llm.add(Step.text("one"), Step.text("two"))
    assert await driver.say(b"caf\xe9 \xff") == "Bruce> one\n"
    notices = [line for line in driver.steps.getvalue().splitlines() if "not valid UTF-8" in line]
    assert len(notices) == 1
    assert await driver.say("still here") == "Bruce> two\n"
    texts = [r["text"] for r in db_rows(app.config.storage.path, "SELECT text FROM messages WHERE direction='in'")]
    assert texts == ["caf\ufffd \ufffd", "still here"]


async def test_lone_surrogates_are_replaced_too(clock):
    inbound = FlakyInbound(failures=0)
    steps = io.StringIO()
    channel = ConsoleChannel(clock=clock, stdin=io.StringIO("a \ud800 b \udcff\n/quit\n"), stdout=io.StringIO(),
                             steps=steps)
    await channel.start(inbound)
    await channel.interact()
    assert inbound.delivered == ["a \ufffd b \ufffd"]
    assert "not valid UTF-8" in steps.getvalue()
