"""MCP servers as Bruce's tools, as the user sees it: real MCP servers (tests/fakes/mcp_server.py,
on the SDK's MCPServer) run as subprocesses over stdio and on 127.0.0.1, Bruce's agent loop
talks to the fake LLM, and every call goes through the registry (policy, confirmation, audit)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.llm_server import Step
from tests.helpers import rows, say

ROOT = Path(__file__).resolve().parents[3]
SLOW_START_S = 20.0  # a Python MCP server imports the SDK (about 2 s on a loaded 2-core machine)


def stdio_server(*extra: str, **options: Any) -> dict[str, Any]:
    return {"command": sys.executable, "args": ["-m", "tests.fakes.mcp_server", *extra], "cwd": str(ROOT),
            "connect_timeout_s": SLOW_START_S, **options}


def offered(request: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in request.get("tools", [])]


def tool_feedback(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [json.loads(m["content"]) for m in request["messages"] if m["role"] == "tool"]


async def until(predicate, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)


async def test_a_stdio_servers_tools_are_offered_from_the_first_turn_and_called_through_the_loop(
        app_factory, channel, fake_llm):
    app = await app_factory(mcp_servers={"fake": stdio_server(tool_risk={"add": "low", "echo": "low"})})
    fake_llm.add(Step.tool_calls(("mcp_fake_add", {"a": 2, "b": 40})), Step.text("2 + 40 is 42."))
    await say(app, "add 2 and 40 with the fake server")
    assert channel.texts() == ["2 + 40 is 42."]
    first = fake_llm.requests[0]
    assert {"mcp_fake_add", "mcp_fake_echo", "mcp_fake_pid"} <= set(offered(first))
    add = next(t["function"] for t in first["tools"] if t["function"]["name"] == "mcp_fake_add")
    assert add["description"].startswith("[MCP server fake] Add two integers.")
    assert add["parameters"]["required"] == ["a", "b"]
    (result,) = tool_feedback(fake_llm.requests[1])
    assert result == {"ok": True, "result": {"content": "42", "structured": {"result": 42}}}
    (audit,) = await rows(app, "SELECT tool_name, status, risk, server, source FROM tool_executions")
    assert audit == {"tool_name": "mcp.fake.add", "status": "ok", "risk": "low", "server": "fake", "source": "chat"}


async def test_an_unsafe_or_long_tool_name_gets_a_safe_wire_name_and_a_capped_description(app_factory):
    app = await app_factory(mcp_servers={"fake": stdio_server()})
    tool = app.registry.get("mcp.fake.a.dotted-name")
    assert tool is not None
    wire = tool.contract.wire_name
    assert wire.startswith("mcp_fake_a_dotted-name_") and len(wire) <= 64 and wire.replace("_", "").replace("-", "").isalnum()
    assert len(tool.contract.description) <= 1024 and tool.contract.description.endswith("…")
    assert tool.contract.risk == "high" and tool.policy.needs_confirmation  # the server's default risk
    (status,) = app.mcp.status()
    assert status["skipped"] == {"dry": "its input has a dry_run field, which Bruce reserves"}
    assert app.registry.get("mcp.fake.dry") is None


async def test_a_server_that_never_answers_the_handshake_leaves_its_tools_out_and_the_others_in(
        app_factory, fake_llm):
    app = await app_factory(mcp_servers={"mute": stdio_server("--hang", connect_timeout_s=1.0),
                                         "fake": stdio_server(tool_risk={"echo": "low"})})
    (mute,) = [s for s in app.mcp.status() if s["server"] == "mute"]
    assert mute["state"] == "unavailable" and mute["tools"] == []
    assert mute["last_error"] in ("no handshake within 1 s", "timed out")
    fake_llm.add(Step.text("Hello."))
    await say(app, "hi")
    names = offered(fake_llm.requests[0])
    assert "mcp_fake_echo" in names and not any(n.startswith("mcp_mute_") for n in names)


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_mute_server_delays_start_up_by_no_more_than_its_connect_bound(app, tmp_path, transport):
    """The bound is the contract here (issue: "delays start-up by no more than the bound"), so
    this one test measures time: how long connecting waits, with the SDK already imported."""
    from tools.mcp.bridge import MCPBridge, preload

    await preload()
    if transport == "stdio":
        server = stdio_server("--hang", connect_timeout_s=1.0)
        proc = None
    else:
        port_file = tmp_path / "port"
        proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "tests.fakes.mcp_server", "--transport",
                                                    "http", "--hang", "--port-file", str(port_file), cwd=ROOT)
        await until(lambda: port_file.exists() and port_file.read_text(), timeout=SLOW_START_S)
        server = {"url": f"http://127.0.0.1:{port_file.read_text()}/mcp", "connect_timeout_s": 1.0}
    config = app.config.model_copy(update={"mcp_servers": {"mute": type(app.config).model_validate(
        {"mcp_servers": {"mute": server}}).mcp_servers["mute"]}})
    bridge = MCPBridge(config.mcp_servers, app.registry, clock=app.clock)
    try:
        started = time.monotonic()
        await bridge.start()
        waited = time.monotonic() - started
        assert waited < 1.0 + 0.5, f"start-up waited {waited:.2f} s for a server bounded at 1 s"
        assert bridge.status()[0]["state"] == "unavailable"
        assert not any(t.contract.name.startswith("mcp.mute.") for t in app.registry.tools())
    finally:
        await bridge.stop()
        if proc is not None:
            proc.terminate()
            await proc.wait()


async def test_a_server_killed_mid_session_is_reported_then_restarted_and_its_tools_come_back(
        app_factory, channel, fake_llm):
    app = await app_factory(mcp_servers={"fake": stdio_server(tool_risk={"pid": "low", "echo": "low"},
                                                              ping_interval_s=0.2)})
    link = app.mcp.links["fake"]
    result = await link.call("pid", {})
    first_pid = result["structured"]["result"]
    os.kill(first_pid, signal.SIGKILL)
    await until(lambda: link.state == "unavailable")
    (status,) = app.mcp.status()
    assert status["state"] == "unavailable" and status["last_error"]

    fake_llm.add(Step.tool_calls(("mcp_fake_echo", {"text": "still there?"})), Step.text("The server is down."))
    await say(app, "echo something")  # restarting takes seconds (the SDK's import): still down here
    assert "mcp_fake_echo" not in offered(fake_llm.requests[-2])  # not offered while down...
    (feedback,) = tool_feedback(fake_llm.requests[-1])  # ...and a model that calls it anyway is told why
    assert feedback["status"] == "error" and feedback["error"].startswith("unavailable: the MCP server fake is unavailable")

    await until(lambda: link.state == "ready", timeout=SLOW_START_S * 2)
    second = await link.call("pid", {})
    assert second["structured"]["result"] != first_pid
    fake_llm.add(Step.text("ok"))
    await say(app, "again")
    assert "mcp_fake_echo" in offered(fake_llm.requests[-1])


async def test_a_call_that_finds_the_process_dead_says_unavailable_and_the_server_is_restarted(
        app_factory, fake_llm):
    app = await app_factory(mcp_servers={"fake": stdio_server(tool_risk={"pid": "low", "echo": "low"},
                                                              ping_interval_s=3600)})  # only the call can notice
    link = app.mcp.links["fake"]
    first_pid = (await link.call("pid", {}))["structured"]["result"]
    os.kill(first_pid, signal.SIGKILL)
    await until(lambda: not Path(f"/proc/{first_pid}").exists() or "zombie" in _proc_state(first_pid))
    fake_llm.add(Step.tool_calls(("mcp_fake_echo", {"text": "hello?"})), Step.text("The calendar is down."))
    await say(app, "echo hello")
    (feedback,) = tool_feedback(fake_llm.requests[-1])
    assert feedback["error"].startswith("unavailable: the MCP server fake went away during the call")
    (audit,) = await rows(app, "SELECT tool_name, status FROM tool_executions")
    assert audit == {"tool_name": "mcp.fake.echo", "status": "error"}
    await until(lambda: link.state == "ready", timeout=SLOW_START_S * 2)
    assert (await link.call("pid", {}))["structured"]["result"] != first_pid


def _proc_state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text().lower()
    except OSError:
        return "zombie"


async def test_a_hanging_tool_times_out_and_is_audited_as_timeout(app_factory, fake_llm, channel):
    app = await app_factory(mcp_servers={"fake": stdio_server(tool_risk={"slow": "low"}, timeout_s=0.5)})
    fake_llm.add(Step.tool_calls(("mcp_fake_slow", {"seconds": 30})), Step.text("It took too long."))
    started = time.monotonic()
    await say(app, "run the slow tool")
    assert time.monotonic() - started < 10
    (feedback,) = tool_feedback(fake_llm.requests[1])
    assert feedback["status"] == "timeout"
    (audit,) = await rows(app, "SELECT tool_name, status FROM tool_executions")
    assert audit == {"tool_name": "mcp.fake.slow", "status": "timeout"}
    echo = await app.mcp.links["fake"].call("echo", {"text": "after"})  # the connection survived the time-out
    assert echo["content"] == "echo: after"


async def test_a_remote_tool_that_needs_confirmation_waits_for_the_users_yes(app_factory, channel, fake_llm, tmp_path):
    notes = tmp_path / "notes.txt"
    app = await app_factory(mcp_servers={"fake": stdio_server(env={"FAKE_MCP_NOTES": str(notes)})})
    fake_llm.add(Step.tool_calls(("mcp_fake_note", {"text": "buy milk"})),
                 Step.text("I asked for your approval to write the note."))
    await say(app, "note: buy milk")
    assert not notes.exists()
    ((_, request),) = channel.confirmations
    assert request.tool_name == "mcp.fake.note"
    fake_llm.add(Step.text("The note is written."))
    await say(app, f"/approve {request.id}")
    assert notes.read_text() == "buy milk\n"
    audits = await rows(app, "SELECT tool_name, status, source, server FROM tool_executions ORDER BY id")
    assert audits == [
        {"tool_name": "mcp.fake.note", "status": "awaiting_confirmation", "source": "chat", "server": "fake"},
        {"tool_name": "mcp.fake.note", "status": "ok", "source": "confirmation", "server": "fake"},
    ]


async def test_a_tool_error_from_the_server_reaches_the_model_as_tool_error(app_factory, fake_llm):
    app = await app_factory(mcp_servers={"fake": stdio_server(tool_risk={"fail": "low"})})
    fake_llm.add(Step.tool_calls(("mcp_fake_fail", {})), Step.text("The tool failed."))
    await say(app, "try the failing tool")
    (feedback,) = tool_feedback(fake_llm.requests[1])
    assert feedback["status"] == "error" and feedback["error"].startswith("tool_error: the MCP server fake reported")


async def test_a_hostile_server_cannot_flood_the_prompt_or_the_reply(app_factory, fake_llm):
    app = await app_factory(mcp_servers={"fake": stdio_server("--many", "300", tool_risk={"big": "low"})})
    (status,) = app.mcp.status()
    assert len(status["tools"]) == 128  # the cap; the rest are listed as skipped, with the way out
    assert sum("more than 128 tools" in why for why in status["skipped"].values()) > 100
    big = await app.mcp.links["fake"].call("big", {})
    assert len(big["content"]) < 16_100 and big["content"].endswith("more characters cut]")
    assert big["structured"].startswith("[structured content of")


async def test_enabled_and_disabled_tools_choose_what_is_offered(app_factory):
    app = await app_factory(mcp_servers={"fake": stdio_server(enabled_tools=["echo", "add"], disabled_tools=["add"])})
    (status,) = app.mcp.status()
    assert [t["name"] for t in status["tools"]] == ["mcp.fake.echo"]
    assert app.registry.get("mcp.fake.add") is None


@pytest.mark.parametrize("transport", ["http", "sse"])
async def test_an_http_server_is_reached_by_streamable_http_or_falls_back_to_sse(
        app_factory, fake_llm, channel, tmp_path, transport):
    port_file = tmp_path / "port"
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "tests.fakes.mcp_server", "--transport", transport,
                                                "--port-file", str(port_file), cwd=ROOT)
    try:
        await until(lambda: port_file.exists() and port_file.read_text(), timeout=SLOW_START_S)
        await asyncio.sleep(0.5)  # uvicorn starts serving right after binding
        path = "/mcp" if transport == "http" else "/sse"
        url = f"http://127.0.0.1:{port_file.read_text()}{path}"
        app = await app_factory(mcp_servers={"web": {"url": url, "tool_risk": {"echo": "low"},
                                                     "connect_timeout_s": SLOW_START_S}})
        (status,) = app.mcp.status()
        assert status["state"] == "ready"
        assert status["transport"] == ("streamable_http" if transport == "http" else "sse")
        fake_llm.add(Step.tool_calls(("mcp_web_echo", {"text": "over http"})), Step.text("It echoed."))
        await say(app, "echo over http")
        (feedback,) = tool_feedback(fake_llm.requests[1])
        assert feedback["result"]["content"] == "echo: over http"
    finally:
        proc.terminate()
        await proc.wait()


def shipped_calendar(db: Path) -> dict[str, Any]:
    """The calendar server exactly as config.yml enables it, with its database under tmp_path."""
    from bruce.config.loader import load_config

    calendar = load_config(ROOT / "config.yml", environ={}).mcp_servers["calendar"]
    args = list(calendar.args)
    args[args.index("--db") + 1] = str(db)
    return {"command": calendar.command, "args": args, "cwd": str(calendar.cwd), "risk": calendar.risk,
            "tool_risk": dict(calendar.tool_risk), "connect_timeout_s": max(calendar.connect_timeout_s, SLOW_START_S)}


async def test_the_calendar_example_proposes_then_creates_with_approval_then_lists(
        app_factory, channel, fake_llm, tmp_path):
    from datetime import datetime, timedelta
    from zoneinfo import ZoneInfo

    db = tmp_path / "calendar.db"
    app = await app_factory(mcp_servers={"calendar": shipped_calendar(db)})
    tools = {t.contract.name: t for t in app.registry.tools() if t.contract.server == "calendar"}
    assert set(tools) == {"mcp.calendar.free_busy", "mcp.calendar.list_upcoming", "mcp.calendar.propose_events",
                          "mcp.calendar.create_events", "mcp.calendar.show_proposal", "mcp.calendar.update_event",
                          "mcp.calendar.delete_event", "mcp.calendar.show_change", "mcp.calendar.show_event"}
    assert sorted(n for n, t in tools.items() if t.policy.needs_confirmation) == [
        "mcp.calendar.create_events", "mcp.calendar.delete_event", "mcp.calendar.update_event"]
    tomorrow = (datetime.now(ZoneInfo("America/Sao_Paulo")) + timedelta(days=1)).date()
    lunch = {"title": "Lunch with Ana", "start": f"{tomorrow}T12:30:00", "duration_minutes": 60}

    fake_llm.add(Step.tool_calls(("mcp_calendar_propose_events", {"events": [lunch]})),
                 Step.text("I can put Lunch with Ana tomorrow 12:30-13:30. Shall I?"))
    await say(app, "book lunch with Ana tomorrow at 12:30")
    (proposal,) = tool_feedback(fake_llm.requests[1])
    assert proposal["ok"] is True and "Lunch with Ana" in proposal["result"]["content"]
    listed = await app.mcp.links["calendar"].call("calendar.list_upcoming", {})
    assert "Lunch with Ana" not in listed["content"]  # a proposal writes nothing

    proposal_id = proposal["result"]["structured"]["proposal_id"]
    fake_llm.add(Step.tool_calls(("mcp_calendar_create_events", {"proposal_id": proposal_id})),
                 Step.text("I asked for your approval to add it."))
    await say(app, "yes")
    ((_, request),) = channel.confirmations
    assert request.tool_name == "mcp.calendar.create_events"
    listed = await app.mcp.links["calendar"].call("calendar.list_upcoming", {})
    assert "Lunch with Ana" not in listed["content"]  # waiting for the yes: nothing written

    fake_llm.add(Step.text("Lunch with Ana is in your calendar."))
    await say(app, f"/approve {request.id}")
    fake_llm.add(Step.tool_calls(("mcp_calendar_list_upcoming", {})), Step.text("Tomorrow: Lunch with Ana at 12:30."))
    await say(app, "what is coming up?")
    (upcoming,) = tool_feedback(fake_llm.requests[-1])
    assert "Lunch with Ana" in upcoming["result"]["content"]
    assert f"{tomorrow}T12:30" in upcoming["result"]["content"]
    assert channel.texts()[-1] == "Tomorrow: Lunch with Ana at 12:30."
    audit = await rows(app, "SELECT tool_name, status, source FROM tool_executions ORDER BY id")
    assert [(a["tool_name"], a["status"], a["source"]) for a in audit] == [
        ("mcp.calendar.propose_events", "ok", "chat"),
        ("mcp.calendar.create_events", "awaiting_confirmation", "chat"),
        ("mcp.calendar.create_events", "ok", "confirmation"),
        ("mcp.calendar.list_upcoming", "ok", "chat"),
    ]
