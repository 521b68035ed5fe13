"""The `bruce` command as a user runs it: a subprocess, real stdin/stdout, real signals."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

import pytest
import yaml

from bruce.turns.commands import COMMANDS
from tests.fakes.llm_server import Step
from tests.helpers import db_rows

BRUCE = [sys.executable, "-m", "bruce.cli.main"]


def write_config(tmp_path: Path, llm: dict) -> Path:
    path = tmp_path / "config.yml"
    path.write_text(yaml.safe_dump({
        "llm": {"retry_backoff_s": 0, "timeout_s": 10, **llm},
        "storage": {"path": str(tmp_path / "bruce.db")},
        "admin": {"port": 0},  # any free port: a test never collides with a real daemon
        "memory": {"enabled": False},  # no background extraction call between the scripted answers
    }))
    return path


def clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k != "BRUCE_CONFIG"}
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    return env


async def test_chat_runs_a_two_step_chain_from_piped_stdin(tmp_path, fake_llm):
    config = write_config(tmp_path, {"model": "openai/primary", "api_base": fake_llm.base_url, "api_key": "sk-test-123456"})
    fake_llm.add(
        Step.tool_calls(("math_calculate", {"expression": "19*23"})),
        Step.text("19 times 23 is 437."),
    )
    proc = await asyncio.create_subprocess_exec(
        *BRUCE, "--config", str(config), "chat",
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env=clean_env(), cwd=tmp_path,
    )
    out, err = await asyncio.wait_for(proc.communicate(b"what is 19*23?\n/quit\n"), 60)
    assert proc.returncode == 0, err.decode()
    assert out.decode().strip().splitlines() == ["Bruce> 19 times 23 is 437."]
    db = tmp_path / "bruce.db"
    assert [r["status"] for r in db_rows(db, "SELECT status FROM llm_calls ORDER BY seq")] == ["ok", "ok"]
    (execution,) = db_rows(db, "SELECT tool_name, status FROM tool_executions")
    assert execution == {"tool_name": "math.calculate", "status": "ok"}
    assert [m["text"] for m in db_rows(db, "SELECT text FROM messages ORDER BY id")] == [
        "what is 19*23?", "19 times 23 is 437."]


async def test_chat_answers_every_command_of_the_table_without_the_model(tmp_path, fake_llm):
    """/help in `bruce chat` is answered as on Telegram, and /id too (there is none here): no
    command of the table reaches the model."""
    config = write_config(tmp_path, {"model": "openai/primary", "api_base": fake_llm.base_url, "api_key": "sk-test-123456"})
    proc = await asyncio.create_subprocess_exec(
        *BRUCE, "--config", str(config), "chat",
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env=clean_env(), cwd=tmp_path,
    )
    out, err = await asyncio.wait_for(proc.communicate(b"/help\n/id\n/jobs\n/quit\n"), 60)
    assert proc.returncode == 0, err.decode()
    shown = out.decode()
    assert shown.startswith("Bruce> I'm Bruce, your assistant.")
    for spec in COMMANDS:
        assert f"\n{spec.usage}: {spec.describe()}\n" in shown
    assert "Bruce> There is no user id to allow-list here: the terminal is on this machine" in shown
    assert "Bruce> No active jobs in this conversation." in shown
    assert fake_llm.requests == []


async def test_run_with_discord_enabled_but_no_token_names_the_key(tmp_path):
    config = write_config(tmp_path, {"api_key": "${OPENAI_API_KEY}"})
    config.write_text(config.read_text() + "channels: {discord: {enabled: true, token: \"${DISCORD_BOT_TOKEN}\"}}\n")
    proc = await asyncio.create_subprocess_exec(
        *BRUCE, "--config", str(config), "run",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=tmp_path,
        env={k: v for k, v in clean_env().items() if k != "DISCORD_BOT_TOKEN"},
    )
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 2
    assert "channels.discord.token: required when channels.discord.enabled is true" in err.decode()


async def test_chat_without_a_key_explains_what_to_set(tmp_path):
    config = write_config(tmp_path, {"api_key": "${OPENAI_API_KEY}"})
    proc = await asyncio.create_subprocess_exec(
        *BRUCE, "--config", str(config), "chat",
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env=clean_env(), cwd=tmp_path,
    )
    out, err = await asyncio.wait_for(proc.communicate(b"hello\n"), 60)
    assert proc.returncode == 0, err.decode()
    assert "OPENAI_API_KEY" in out.decode() and "llm.api_base" in out.decode()


async def test_run_starts_without_keys_says_what_is_missing_and_stops_on_sigterm(tmp_path):
    config = write_config(tmp_path, {"api_key": "${OPENAI_API_KEY}"})
    proc = await asyncio.create_subprocess_exec(
        *BRUCE, "--config", str(config), "run",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env={**clean_env(), "TZ": "Asia/Kathmandu"},
        cwd=tmp_path,
    )
    try:
        events: list[dict] = []
        while not any(e.get("event") == "app.started" for e in events):
            raw = await asyncio.wait_for(proc.stderr.readline(), 60)
            assert raw, "bruce run exited early"
            events.append(json.loads(raw))
        await asyncio.sleep(0.3)
        assert proc.returncode is None, "the daemon must keep running without keys"
        proc.send_signal(signal.SIGTERM)
        _, rest = await asyncio.wait_for(proc.communicate(), 60)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0
    events += [json.loads(line) for line in rest.splitlines()]
    hints = [e["hint"] for e in events if e["event"] == "app.setup_incomplete"]
    assert any("OPENAI_API_KEY" in h for h in hints)
    assert any("bruce chat" in h for h in hints)
    assert "llm.ready" in [e["event"] for e in events]  # litellm was imported off the loop at start
    assert events[-1]["event"] == "app.stopped"
    (started,) = [e for e in events if e["event"] == "app.started"]
    assert started["timezone"] == "Asia/Kathmandu"  # the machine's zone (TZ), as no config sets one


# --- hardening: config errors end the process, signals drain the chat ---------------------------

def _limit_memory() -> None:  # in the child: a runaway allocation fails instead of eating the machine
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (2 * 1024**3, 2 * 1024**3))


async def run_bruce(config: Path, *args: str, stdin: bytes = b"", guard_s: float = 60) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        *BRUCE, "--config", str(config), *args,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env=clean_env(), cwd=config.parent, preexec_fn=_limit_memory,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(stdin), guard_s)
    finally:
        if proc.returncode is None:  # it hung: that is the failure; leave nothing running
            proc.kill()
            await proc.wait()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_an_unusable_allowed_url_stops_run_and_chat_with_exit_2(tmp_path):
    config = write_config(tmp_path, {"api_key": "sk-test-123456"})
    config.write_text(config.read_text() + "tools: {http_post: {allowed_urls: ['https://u:pw@hooks.example/x']}}\n")
    for command in ("config", "run", "chat"):
        args = ("config", "check") if command == "config" else (command,)
        code, _, err = await run_bruce(config, *args, stdin=b"/quit\n", guard_s=30)
        assert code == 2, (command, err)
        assert "tools.http_post.allowed_urls[0]" in err and "Traceback" not in err and "pw@" not in err


async def test_run_refuses_an_unknown_override_as_a_config_error(tmp_path):
    config = write_config(tmp_path, {"api_key": "sk-test-123456"})
    config.write_text(config.read_text() + "tools: {overrides: {web.serch: {enabled: false}}}\n")
    for args in (("config", "check"), ("run",)):
        code, _, err = await run_bruce(config, *args, guard_s=30)
        assert code == 2, err
        assert "tools.overrides.web.serch: unknown tool" in err and "Traceback" not in err


async def test_a_billion_laughs_config_is_refused_without_growing(tmp_path):
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    previous = "a"
    for name in "bcdefghi":
        lines.append(f"{name}: &{name} [" + ",".join([f"*{previous}"] * 9) + "]")
        previous = name
    config = tmp_path / "config.yml"
    config.write_text("\n".join(lines) + "\n")
    code, _, err = await run_bruce(config, "config", "check")
    assert code == 2, err
    assert "aliases" in err and "Traceback" not in err and "MemoryError" not in err


async def wait_for_request(fake_llm) -> None:
    while not fake_llm.requests:
        await asyncio.sleep(0.02)


async def start_chat(config: Path) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        *BRUCE, "--config", str(config), "chat",
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env=clean_env(), cwd=config.parent,
    )


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
async def test_chat_drains_the_turn_in_flight_on_a_signal(tmp_path, fake_llm, signum):
    config = write_config(tmp_path, {"model": "openai/primary", "api_base": fake_llm.base_url, "api_key": "sk-test-123456"})
    fake_llm.add(Step.delay(2.0, Step.text("Still here, as promised.")))
    proc = await start_chat(config)
    try:
        proc.stdin.write(b"are you there?\n")
        await proc.stdin.drain()  # stdin stays open: the session only ends by the signal
        await asyncio.wait_for(wait_for_request(fake_llm), 60)  # the turn is in flight
        proc.send_signal(signum)
        out, err = await asyncio.wait_for(proc.communicate(), 60)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0, err.decode()
    assert "Ctrl-C again" in err.decode()  # the signal arrived while the turn was running
    assert "never awaited" not in err.decode() and "Traceback" not in err.decode()
    assert out.decode().splitlines() == ["Bruce> Still here, as promised."]
    db = tmp_path / "bruce.db"
    assert [(m["direction"], m["status"]) for m in db_rows(db, "SELECT direction, status FROM messages ORDER BY id")] == [
        ("in", "done"), ("out", "sent")]


async def test_a_second_ctrl_c_quits_the_chat_at_once(tmp_path, fake_llm):
    config = write_config(tmp_path, {"model": "openai/primary", "api_base": fake_llm.base_url, "api_key": "sk-test-123456"})
    fake_llm.add(Step.delay(8.0, Step.text("too late")))
    proc = await start_chat(config)
    try:
        proc.stdin.write(b"take your time\n")
        await proc.stdin.drain()
        await asyncio.wait_for(wait_for_request(fake_llm), 60)
        proc.send_signal(signal.SIGINT)
        seen = b""
        while b"Ctrl-C again" not in seen:  # the first one was taken: draining
            line = await asyncio.wait_for(proc.stderr.readline(), 60)
            assert line, "bruce chat exited after the first Ctrl-C"
            seen += line
        proc.send_signal(signal.SIGINT)
        out, err = await asyncio.wait_for(proc.communicate(), 60)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 130, (seen + err).decode()
    assert "too late" not in out.decode() and "Traceback" not in (seen + err).decode()
    db = tmp_path / "bruce.db"
    # cut off before any tool acted: kept pending, answered at the next start
    assert [m["status"] for m in db_rows(db, "SELECT status FROM messages ORDER BY id")] == ["pending"]


async def test_chat_survives_bytes_that_are_not_utf8(tmp_path, fake_llm):
    config = write_config(tmp_path, {"model": "openai/primary", "api_base": fake_llm.base_url, "api_key": "sk-test-123456"})
    fake_llm.add(Step.text("first"), Step.text("second"))
    env = {**clean_env(), "PYTHONIOENCODING": "utf-8:surrogateescape"}  # as under a C locale
    proc = await asyncio.create_subprocess_exec(
        *BRUCE, "--config", str(config), "chat",
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env=env, cwd=tmp_path,
    )
    out, err = await asyncio.wait_for(proc.communicate(b"caf\xe9 \xff please\nand then\n/quit\n"), 60)
    assert proc.returncode == 0, err.decode()
    assert "Traceback" not in err.decode() and "not valid UTF-8" in err.decode()
    assert out.decode().splitlines() == ["Bruce> first", "Bruce> second"]
    texts = [m["text"] for m in db_rows(tmp_path / "bruce.db", "SELECT text FROM messages WHERE direction='in' ORDER BY id")]
    assert texts == ["caf\ufffd \ufffd please", "and then"]


# --- `bruce approve` / `bruce deny` find the database next to the config (issue 8) ---------------

def pending_request(db: Path) -> str:
    """A database with one pending files.write request, made the way the daemon makes it; its id."""
    from bruce.actions.confirmations import Confirmations
    from bruce.clock import SystemClock
    from bruce.store import Store
    from tools.files import files_write_tool

    async def make() -> str:
        clock = SystemClock()  # `bruce approve` reads the real clock
        store = await Store.open(db, clock)
        try:
            await store.messages.ensure_conversation("test:c1", "test", "c1")
            contract, _ = files_write_tool(notes_dir=db.parent / "notes")
            request = await Confirmations(store, clock).request(
                contract, {"path": "a.md", "content": "x"}, conversation_id="test:c1", user_id="u1",
                turn_id=None, call_id=None, preview=None, step_up=True)
        finally:
            await store.close()
        return request.id

    return asyncio.run(make())


@pytest.fixture
def elsewhere(tmp_path, monkeypatch) -> Path:
    """The cwd is a folder that is not the config's; no BRUCE_CONFIG."""
    monkeypatch.delenv("BRUCE_CONFIG", raising=False)
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    return cwd


def test_approve_reaches_the_database_next_to_the_config_from_another_folder(tmp_path, elsewhere, capsys):
    from bruce.cli.main import main

    etc = tmp_path / "etc"
    (etc / "data").mkdir(parents=True)
    (etc / "config.yml").write_text("storage: {path: data/bruce.db}\n")
    cid = pending_request(etc / "data" / "bruce.db")
    assert main(["--config", str(etc / "config.yml"), "approve", cid.upper()]) == 0
    assert "approved: files.write runs within 2s" in capsys.readouterr().out
    (row,) = db_rows(etc / "data" / "bruce.db", "SELECT id, status, decided_via FROM pending_confirmations")
    assert row == {"id": cid, "status": "approved", "decided_via": "cli"}
    assert list(elsewhere.iterdir()) == []  # nothing was made in the cwd


@pytest.mark.parametrize("verb", ["approve", "deny"])
def test_approve_and_deny_refuse_a_missing_database_and_create_nothing(tmp_path, elsewhere, capsys, verb):
    from bruce.cli.main import main

    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "config.yml").write_text("storage: {path: data/bruce.db}\n")
    assert main(["--config", "../etc/config.yml", verb, "abcd1234"]) == 1
    err = capsys.readouterr().err
    db, config = etc.resolve() / "data" / "bruce.db", (elsewhere / ".." / "etc" / "config.yml").resolve()
    assert err == (f"bruce: no database at {db} (storage.path in {config}); start Bruce once with `bruce run`, "
                   "or pass --config with the config file the daemon uses\n")
    assert [p.name for p in etc.iterdir()] == ["config.yml"]  # neither data/ nor data/bruce.db
    assert list(elsewhere.iterdir()) == []


async def test_python_dash_m_bruce_cli_is_the_bruce_command(tmp_path):
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bruce.cli", "--help",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=clean_env(), cwd=tmp_path)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    assert "usage: bruce" in out.decode()


@pytest.mark.parametrize("command", [["tools"], ["tools", "show", "web.read_url"], ["config", "check"]])
def test_a_reader_that_closes_the_pipe_early_gets_no_traceback(tmp_path, command):
    """`bruce tools show X | head`: a real pipe whose reader has gone away (as `head` does once it
    has its lines) before the command writes. It stops quietly, with the status of one killed by SIGPIPE."""
    import subprocess

    config = write_config(tmp_path, {"model": "openai/primary"})
    read_end, write_end = os.pipe()
    proc = subprocess.Popen([*BRUCE, "--config", str(config), *command], stdout=write_end,
                            stderr=subprocess.PIPE, env=clean_env(), cwd=tmp_path)
    os.close(write_end)
    os.close(read_end)  # the command takes a second to start: its first write finds the pipe closed
    _, err = proc.communicate(timeout=60)
    assert err.decode() == ""
    assert proc.returncode == 141
