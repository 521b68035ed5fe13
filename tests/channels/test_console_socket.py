"""The daemon's console socket: `bruce chat` and `bruce approve` reaching the running daemon.

The daemon runs in this process (a real App with the fake LLM); terminals attach over a real
Unix socket, in-process (``attach`` with a console driver) or as real `bruce` subprocesses.
"""

from __future__ import annotations

import asyncio
import json
import os
import stat
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from bruce.app import build_app, socket_console
from bruce.cli.daemon import attach_console
from bruce.errors import BruceError
from bruce.runtime.daemon import App
from tests.cli.test_main import BRUCE, clean_env, wait_for_request
from tests.fakes.console import ConsoleDriver, request_id
from tests.fakes.llm_server import Step
from tests.helpers import db_rows


@pytest.fixture
def daemon_config(make_config, tmp_path, notes, receiver):
    url, _ = receiver
    return make_config(
        console={"socket_path": str(tmp_path / "bruce.sock")},
        # local approvals are polled only once a minute here: anything faster came over the socket
        tools={"files": {"notes_dir": str(notes)}, "http_post": {"allowed_urls": [url]}, "approval_poll_s": 60},
    )


@pytest.fixture
async def daemon(daemon_config, clock):
    clock.set(datetime.now(UTC))  # `bruce approve` subprocesses read the real clock
    app = await build_app(daemon_config, clock=clock, environ={},
                          extra_channels=[socket_console(daemon_config, clock)])
    await app.start()
    yield app
    await app.stop()


class Terminal:
    """`bruce chat` attached to the daemon, in this process: a console driver over the socket."""

    def __init__(self, app: App, clock) -> None:
        self.driver = ConsoleDriver(clock)
        self.stop = asyncio.Event()
        self.task = asyncio.create_task(attach_console(app.config, self.driver.channel, self.stop))

    async def attached(self) -> Terminal:
        for _ in range(500):
            if self.driver.channel._inbound is not None:
                return self
            assert not self.task.done(), f"attach ended: {self.task.result()!r}"
            await asyncio.sleep(0.01)
        raise AssertionError("the terminal never attached")

    async def wait_for(self, text: str, timeout: float = 30) -> str:
        deadline = asyncio.get_running_loop().time() + timeout
        while text not in self.driver.stdout.getvalue():
            assert asyncio.get_running_loop().time() < deadline, f"{text!r} not in {self.driver.stdout.getvalue()!r}"
            await asyncio.sleep(0.01)
        return self.driver.stdout.getvalue()

    async def leave(self) -> int | None:
        self.stop.set()
        code = await asyncio.wait_for(self.task, 30)
        await self.driver.close()
        return code


@pytest.fixture
async def terminal(daemon, clock):
    term = await Terminal(daemon, clock).attached()
    yield term
    if not term.task.done():
        await term.leave()


async def test_an_attached_terminal_is_a_channel_of_the_daemon(daemon, terminal, fake_llm, daemon_config):
    fake_llm.add(Step.tool_calls(("math_calculate", {"expression": "19*23"})), Step.text("19 times 23 is 437."))
    out = await terminal.driver.say("what is 19*23?")
    assert out.strip().splitlines() == ["Bruce> 19 times 23 is 437."]
    assert "  · math.calculate: ok" in terminal.driver.steps.getvalue()  # progress reached the terminal
    db = daemon_config.storage.path
    assert [(m["conversation_id"], m["direction"], m["status"], m["text"])
            for m in db_rows(db, "SELECT conversation_id, direction, status, text FROM messages ORDER BY id")] == [
        ("console:local", "in", "done", "what is 19*23?"),
        ("console:local", "out", "sent", "19 times 23 is 437."),
    ]
    (execution,) = db_rows(db, "SELECT tool_name, status FROM tool_executions")
    assert execution == {"tool_name": "math.calculate", "status": "ok"}


async def test_an_approval_typed_in_the_attached_terminal_runs_once(daemon, terminal, fake_llm, notes):
    fake_llm.add(Step.tool_calls(("files_write", {"path": "todo.md", "content": "buy milk\n"})),
                 Step.text("I need your approval to write todo.md."))
    out = await terminal.driver.say("note: buy milk")
    assert "[approval needed]" in out and "files.write" in out
    rid = request_id(out)
    assert not (notes / "todo.md").exists()
    fake_llm.add(Step.text("Written."))
    await terminal.driver.say(f"/approve {rid}")
    await terminal.wait_for(f"Done: files.write ran (request {rid}).")
    assert (notes / "todo.md").read_text() == "buy milk\n"


async def test_bruce_approve_reaches_the_daemon_at_once_over_the_socket(daemon, terminal, fake_llm, receiver,
                                                                         daemon_config, tmp_path):
    url, received = receiver
    fake_llm.add(Step.tool_calls(("http_post", {"url": url, "json": {"lights": "off"}})),
                 Step.text("I need the owner's approval for that."))
    out = await terminal.driver.say("turn off the lights")
    rid = request_id(out)
    assert f"bruce approve {rid}" in out
    config_path = tmp_path / "config.yml"
    config_path.write_text(json.dumps(daemon_config.model_dump(mode="json", exclude={"llm"})))
    fake_llm.add(Step.text("The lights webhook accepted it."))
    proc = await asyncio.create_subprocess_exec(
        *BRUCE, "--config", str(config_path), "approve", rid,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=clean_env(), cwd="/")
    stdout, stderr = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, stderr.decode()
    assert stdout.decode().strip() == "approved: http.post runs now in the running Bruce; the user is told the outcome"
    await terminal.wait_for(f"Done: http.post ran (request {rid}).", timeout=30)  # well before the 60 s poll
    assert received == [{"lights": "off"}]
    (row,) = db_rows(daemon_config.storage.path, "SELECT status, decided_via FROM pending_confirmations")
    assert row == {"status": "executed", "decided_via": "cli"}


async def test_a_reply_while_no_terminal_is_attached_waits_for_the_next_one(daemon, clock, fake_llm, daemon_config):
    first = await Terminal(daemon, clock).attached()
    fake_llm.add(Step.delay(1.0, Step.text("Here is the slow answer.")))
    first.driver.type("take your time")
    await asyncio.wait_for(wait_for_request(fake_llm), 30)
    assert await first.leave() == 0  # left while the turn was in flight; the daemon goes on
    db = daemon_config.storage.path
    for _ in range(500):
        out = db_rows(db, "SELECT status FROM messages WHERE direction = 'out'")
        if out and out[0]["status"] != "pending":  # stored, and its send tried
            break
        await asyncio.sleep(0.01)
    assert out == [{"status": "unsent"}]  # stored, not lost, not claimed as sent
    second = await Terminal(daemon, clock).attached()
    try:
        await second.wait_for("Bruce> Here is the slow answer.")
        assert db_rows(db, "SELECT status FROM messages WHERE direction = 'out'") == [{"status": "sent"}]
    finally:
        await second.leave()


async def test_the_daemon_going_away_ends_the_attached_chat(daemon_config, clock):
    app = await build_app(daemon_config, clock=clock, environ={}, extra_channels=[socket_console(daemon_config, clock)])
    await app.start()
    term = await Terminal(app, clock).attached()
    await app.stop()
    assert await asyncio.wait_for(term.task, 30) == 1
    assert "(the Bruce daemon stopped; leaving)" in term.driver.steps.getvalue()
    await term.driver.close()
    assert not daemon_config.console.socket_path.exists()  # the socket goes with the daemon


async def test_no_daemon_means_no_attachment(make_config, clock, tmp_path):
    config = make_config(console={"socket_path": str(tmp_path / "none.sock")})
    driver = ConsoleDriver(clock)
    try:
        assert await attach_console(config, driver.channel, asyncio.Event()) is None
    finally:
        await driver.close()


# --- the socket itself: owner-only, and it reads what it is sent carefully ------------------------

async def test_the_socket_is_owner_only_and_a_stale_one_is_replaced(daemon_config, clock):
    path = daemon_config.console.socket_path
    import socket as sockets

    stale = sockets.socket(sockets.AF_UNIX)
    stale.bind(str(path))  # what a daemon killed with -9 leaves
    stale.close()
    app = await build_app(daemon_config, clock=clock, environ={}, extra_channels=[socket_console(daemon_config, clock)])
    await app.start()
    try:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        reader, writer = await asyncio.open_unix_connection(str(path))
        writer.write(b'{"op": "hello", "version": 1}\n')
        assert json.loads(await reader.readline()) == {"ev": "hello", "version": 1, "name": "Bruce"}
        writer.close()
    finally:
        await app.stop()


async def test_something_else_at_the_socket_path_stops_start_up(daemon_config, clock):
    path = daemon_config.console.socket_path
    path.write_text("my notes")
    app = await build_app(daemon_config, clock=clock, environ={}, extra_channels=[socket_console(daemon_config, clock)])
    try:
        with pytest.raises(BruceError, match="exists and is not a socket"):
            await app.start()
    finally:
        await app.stop()
    assert path.read_text() == "my notes"


async def test_a_socket_path_too_long_is_named(make_config, clock, tmp_path):
    long_dir = tmp_path / ("d" * 120)
    config = make_config(console={"socket_path": str(long_dir / "bruce.sock")})
    app = await build_app(config, clock=clock, environ={}, extra_channels=[socket_console(config, clock)])
    try:
        with pytest.raises(BruceError, match="console.socket_path is too long for a Unix socket"):
            await app.start()
    finally:
        await app.stop()


async def request_lines(path: Path, *lines: bytes) -> list[dict]:
    reader, writer = await asyncio.open_unix_connection(str(path))
    answers = []
    try:
        for line in lines:
            try:
                writer.write(line + b"\n")
                await writer.drain()
                raw = await asyncio.wait_for(reader.readline(), 10)
            except ConnectionResetError:  # the daemon hung up on us
                raw = b""
            answers.append(json.loads(raw) if raw else None)
    finally:
        writer.close()
    return answers


async def test_bad_requests_are_answered_with_what_was_wrong(daemon, daemon_config):
    answers = await request_lines(
        daemon_config.console.socket_path,
        b"this is not json",
        b"[1, 2]",
        b'{"op": "fly", "ref": 3}',
        b'{"op": "message", "ref": 4}',
        b'{"op": "message", "ref": 5, "text": 42}',
        b'{"op": "decide", "ref": 6, "id": "abcd1234", "approve": "yes", "local": true}',
        b'{"op": "hello", "version": 1}',  # the connection survived all of that
    )
    assert [a["ev"] for a in answers] == ["error"] * 6 + ["hello"]
    assert answers[1]["error"] == "a request must be a JSON object"
    assert answers[2] == {"ev": "error", "ref": 3, "error": "unknown op 'fly'"}
    assert answers[3] == {"ev": "error", "ref": 4, "error": "missing 'text'"}
    assert answers[4] == {"ev": "error", "ref": 5, "error": "text must be a string"}
    assert answers[5]["error"] == "id must be a string and approve true or false"
    assert db_rows(daemon_config.storage.path, "SELECT id FROM messages") == []  # nothing was stored


async def test_a_request_longer_than_the_limit_closes_that_connection_only(daemon_config, clock):
    console = socket_console(daemon_config, clock)
    console._line_limit = 4096
    app = await build_app(daemon_config, clock=clock, environ={}, extra_channels=[console])
    await app.start()
    try:
        (answer,) = await request_lines(daemon_config.console.socket_path, b'{"op": "message", "text": "' + b"x" * 10_000 + b'"}')
        assert answer == {"ev": "error", "error": "a request is longer than 4096 bytes"}
        (hello,) = await request_lines(daemon_config.console.socket_path, b'{"op": "hello", "version": 1}')
        assert hello["ev"] == "hello"
    finally:
        await app.stop()


async def test_a_local_decision_on_an_unknown_request_says_so(daemon, daemon_config):
    (answer,) = await request_lines(daemon_config.console.socket_path,
                                    b'{"op": "decide", "ref": 1, "id": "abcd1234", "approve": true, "local": true}')
    assert answer["ev"] == "decided" and answer["outcome"] == "not_found"


# --- the real commands ----------------------------------------------------------------------------

def write_config(tmp_path: Path, fake_llm) -> Path:
    path = tmp_path / "config.yml"
    path.write_text(yaml.safe_dump({
        "llm": {"model": "openai/primary", "api_base": fake_llm.base_url, "api_key": "sk-test-123456",
                "retry_backoff_s": 0, "timeout_s": 10},
        "storage": {"path": "data/bruce.db"},  # relative: next to the config, wherever the commands run
        "admin": {"port": 0},
    }))
    return path


async def test_bruce_chat_attaches_to_bruce_run(tmp_path, fake_llm):
    config = write_config(tmp_path, fake_llm)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    daemon = await asyncio.create_subprocess_exec(
        *BRUCE, "--config", str(config), "run",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=clean_env(), cwd=elsewhere)
    try:
        while True:
            raw = await asyncio.wait_for(daemon.stderr.readline(), 60)
            assert raw, "bruce run exited early"
            if json.loads(raw).get("event") == "app.started":
                break
        assert stat.S_IMODE((tmp_path / "data" / "bruce.sock").stat().st_mode) == 0o600
        fake_llm.add(Step.tool_calls(("math_calculate", {"expression": "19*23"})), Step.text("It is 437."))
        chat = await asyncio.create_subprocess_exec(
            *BRUCE, "--config", str(config), "chat",
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            env=clean_env(), cwd=elsewhere)
        out, err = await asyncio.wait_for(chat.communicate(b"what is 19*23?\n/quit\n"), 60)
        assert chat.returncode == 0, err.decode()
        assert out.decode().splitlines() == ["Bruce> It is 437."]
        assert "  · math.calculate: ok" in err.decode() and "no daemon" not in err.decode()
        daemon.send_signal(15)
        await asyncio.wait_for(daemon.communicate(), 60)
    finally:
        if daemon.returncode is None:
            daemon.kill()
            await daemon.wait()
    assert daemon.returncode == 0
    assert not (elsewhere / "data").exists()  # nothing was created where the commands ran
    rows = db_rows(tmp_path / "data" / "bruce.db", "SELECT direction, status FROM messages ORDER BY id")
    assert rows == [{"direction": "in", "status": "done"}, {"direction": "out", "status": "sent"}]


async def test_bruce_chat_without_a_daemon_says_so_and_runs_in_process(tmp_path, fake_llm):
    config = write_config(tmp_path, fake_llm)
    fake_llm.add(Step.text("Hello from this process."))
    chat = await asyncio.create_subprocess_exec(
        *BRUCE, "--config", str(config), "chat",
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env=clean_env(), cwd=tmp_path)
    out, err = await asyncio.wait_for(chat.communicate(b"hi\n"), 60)
    assert chat.returncode == 0, err.decode()
    assert out.decode().splitlines() == ["Bruce> Hello from this process."]
    notes = [line for line in err.decode().splitlines() if "no daemon answers" in line]
    assert notes == [f"bruce: no daemon answers at {tmp_path / 'data' / 'bruce.sock'}; chatting in this process "
                     "(start `bruce run` to share one Bruce between terminals and platforms)"]


async def test_a_peer_of_another_user_is_refused(daemon, daemon_config, monkeypatch):
    import channels.console_socket as module

    me = os.getuid()
    monkeypatch.setattr(module.os, "getuid", lambda: me + 1)  # the daemon now runs as someone else
    (answer,) = await request_lines(daemon_config.console.socket_path, b'{"op": "hello", "version": 1}')
    assert answer is None  # closed without a word
    monkeypatch.setattr(module.os, "getuid", lambda: me)
    (answer,) = await request_lines(daemon_config.console.socket_path, b'{"op": "hello", "version": 1}')
    assert answer["ev"] == "hello"


class ChatOnly:
    """The worker's chat doors, and nothing of the owner's control."""

    async def deliver(self, message):
        return None

    async def decide(self, conversation_id, user_id, confirmation_id, approve):
        raise AssertionError("not asked here")


async def test_a_console_started_without_control_serves_chat_and_refuses_the_owners_requests(daemon_config, clock):
    console = socket_console(daemon_config, clock)
    await console.start(ChatOnly())
    try:
        answers = await request_lines(daemon_config.console.socket_path, b'{"op": "hello", "version": 1}',
                                      b'{"op": "health", "ref": 2}', b'{"op": "jobs_changed", "ref": 3}',
                                      b'{"op": "decide", "ref": 4, "id": "abcd1234", "approve": true, "local": true}')
    finally:
        await console.stop()
    assert answers[0]["ev"] == "hello"
    assert [(a["ev"], a["ref"], a["error"]) for a in answers[1:]] == [
        ("error", ref, "this console serves chat only") for ref in (2, 3, 4)]


async def test_the_daemon_answers_health_and_mcp_status_from_its_control(daemon, daemon_config):
    health, servers = await request_lines(daemon_config.console.socket_path, b'{"op": "health", "ref": 1}',
                                          b'{"op": "mcp_status", "ref": 2}')
    assert health == {"ev": "health", "ref": 1, "last_receive": daemon.control.health()}
    assert servers == {"ev": "mcp_status", "ref": 2, "servers": []}  # no MCP server is configured
