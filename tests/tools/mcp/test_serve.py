"""``bruce mcp serve`` and ``bruce mcp status``, as an MCP client and an operator see them: the
real ``bruce`` command in a subprocess, reached through the SDK's own client over stdio and over
HTTP on 127.0.0.1; what lands in the database is read as an operator would."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from bruce.app import build_app, socket_console
from bruce.cli.daemon import mcp_status_on_daemon
from tests.helpers import db_rows
from tests.tools.mcp.test_bridge import ROOT, SLOW_START_S, stdio_server

BRUCE = [sys.executable, "-m", "bruce.cli.main"]
TOKEN = "an-admin-token-of-32-characters!"


def write_config(tmp_path: Path, **sections: Any) -> Path:
    data: dict[str, Any] = {
        "assistant": {"timezone": "America/Sao_Paulo"},
        "llm": {"model": "openai/primary", "api_base": "http://127.0.0.1:9/v1", "api_key": "sk-test-123456"},
        "storage": {"path": str(tmp_path / "bruce.db")},
        "console": {"socket_path": str(tmp_path / "bruce.sock")},
        "admin": {"token": TOKEN},
        "tools": {"files": {"notes_dir": str(tmp_path / "notes")},
                  "overrides": {"web.search": {"enabled": False}, "clock.now": {"require_confirmation": True}}},
        "mcp_serve": {"conversation": "telegram:42"},
    }
    for key, value in sections.items():
        data[key] = {**data.get(key, {}), **value}
    path = tmp_path / "config.yml"
    path.write_text(yaml.safe_dump(data))
    return path


def stdio_client(config: Path):
    from mcp import Client, StdioServerParameters

    return Client(StdioServerParameters(command=sys.executable, args=["-m", "bruce.cli.main", "--config", str(config),
                                                                      "mcp", "serve"], cwd=str(ROOT)))


def payload(result: Any) -> dict[str, Any]:
    return json.loads(result.content[0].text)


async def test_serve_over_stdio_lists_only_safe_tools_and_a_reminder_lands_in_the_database(tmp_path):
    config = write_config(tmp_path)
    async with stdio_client(config) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert {"math.calculate", "proactive.create", "proactive.list", "web.read_url", "artifact.save"} <= names
        # needs confirmation (files.write, http.post, clock.now by override) or is disabled (web.search): hidden
        assert not names & {"files.write", "http.post", "clock.now", "web.search"}
        assert not any(n.startswith("mcp.") for n in names)

        sum_ = await client.call_tool("math.calculate", {"expression": "2 + 3 * 4"})
        assert not sum_.is_error and payload(sum_)["result"]["result"] == 14

        made = await client.call_tool("proactive.create", {"execution_mode": "message", "content": "Call Ana",
                                                           "in_seconds": 3600})
        assert not made.is_error, made.content[0].text
        job_id = payload(made)["result"]["job_id"]

        hidden = await client.call_tool("files.write", {"path": "todo.md", "content": "x"})
        assert hidden.is_error and payload(hidden)["status"] == "unknown_tool"
        bad = await client.call_tool("math.calculate", {"expression": 5})
        assert bad.is_error and payload(bad)["status"] == "invalid_args"

    db = tmp_path / "bruce.db"
    (job,) = db_rows(db, "SELECT id, conversation_id, content, status FROM proactive_jobs")
    assert job == {"id": job_id, "conversation_id": "telegram:42", "content": "Call Ana", "status": "active"}
    audit = db_rows(db, "SELECT tool_name, status, source, turn_id FROM tool_executions ORDER BY id")
    assert audit == [
        {"tool_name": "math.calculate", "status": "ok", "source": "mcp", "turn_id": None},
        {"tool_name": "proactive.create", "status": "ok", "source": "mcp", "turn_id": None},
        {"tool_name": "math.calculate", "status": "invalid_args", "source": "mcp", "turn_id": None},
    ]
    assert not (tmp_path / "notes" / "todo.md").exists()


async def test_a_trusted_client_gets_the_confirmation_tools_but_never_a_step_up_one(tmp_path):
    config = write_config(tmp_path, mcp_serve={"trusted": True, "conversation": "telegram:42"})
    async with stdio_client(config) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert {"files.write", "clock.now"} <= names and "web.search" not in names
        wrote = await client.call_tool("files.write", {"path": "todo.md", "content": "buy milk\n"})
        assert not wrote.is_error, wrote.content[0].text
    assert (tmp_path / "notes" / "todo.md").read_text() == "buy milk\n"
    (audit,) = db_rows(tmp_path / "bruce.db", "SELECT tool_name, status, source FROM tool_executions")
    assert audit == {"tool_name": "files.write", "status": "ok", "source": "mcp"}


async def test_serve_over_http_binds_loopback_and_wants_the_admin_token(tmp_path):
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    config = write_config(tmp_path)
    proc = await asyncio.create_subprocess_exec(*BRUCE, "--config", str(config), "mcp", "serve", "--transport", "http",
                                                "--port", "0", cwd=ROOT, stderr=asyncio.subprocess.PIPE)
    try:
        url = None
        async with asyncio.timeout(SLOW_START_S * 2):
            while url is None:
                line = (await proc.stderr.readline()).decode()
                assert line, "bruce mcp serve ended before listening"
                if "listening on " in line:
                    url = line.split("listening on ")[1].split()[0]
        assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp")
        async with httpx.AsyncClient() as http:
            refused = await http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
            assert refused.status_code == 401
            wrong = await http.post(url, json={}, headers={"Authorization": "Bearer not-the-token"})
            assert wrong.status_code == 401
        async with create_mcp_http_client(headers={"Authorization": f"Bearer {TOKEN}"}) as http:
            async with Client(streamable_http_client(url, http_client=http)) as client:
                names = {t.name for t in (await client.list_tools()).tools}
                assert "proactive.create" in names and "files.write" not in names
                now = await client.call_tool("math.calculate", {"expression": "7 * 6"})
                assert payload(now)["result"]["result"] == 42
    finally:
        proc.terminate()
        await proc.wait()


async def test_forbidden_disabled_and_step_up_tools_are_never_exposed_even_to_a_trusted_client(app_factory):
    from dataclasses import replace

    from tools.mcp.serve import exposed

    app = await app_factory(tools={"overrides": {"web.search": {"enabled": False}}})
    calc = app.registry.get("math.calculate").contract
    app.registry.register(replace(calc, name="test.forbidden", risk="forbidden", autonomous=False, confirmation=True,
                                  side_effects="deletes everything", step_up=True),
                          lambda args, ctx: None)
    for trusted in (False, True):
        names = set(exposed(app.registry, trusted=trusted))
        assert not names & {"test.forbidden", "web.search", "http.post"}  # http.post is critical: step-up
        assert ("files.write" in names) is trusted
        assert {"math.calculate", "clock.now", "proactive.create"} <= names


def run_status(config: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*BRUCE, "--config", str(config), "mcp", "status", *extra], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)


def test_status_without_a_daemon_connects_now_and_reports_each_server(tmp_path):
    config = write_config(tmp_path, mcp_servers={"fake": stdio_server(tool_risk={"echo": "low"}),
                                                 "mute": stdio_server("--hang", connect_timeout_s=1.0)})
    done = run_status(config, "--json")
    assert done.returncode == 1, done.stderr  # one enabled server is not ready
    report = json.loads(done.stdout)
    assert report["daemon"] is False
    servers = {s["server"]: s for s in report["servers"]}
    assert servers["fake"]["state"] == "ready" and servers["fake"]["last_error"] is None
    echo = next(t for t in servers["fake"]["tools"] if t["name"] == "mcp.fake.echo")
    assert echo == {"name": "mcp.fake.echo", "wire_name": "mcp_fake_echo", "remote": "echo", "risk": "low"}
    assert servers["mute"]["state"] == "unavailable" and servers["mute"]["tools"] == []

    table = run_status(write_config(tmp_path, mcp_servers={"fake": stdio_server()}))
    assert table.returncode == 0, table.stderr
    assert "No daemon is running" in table.stdout and "mcp.fake.echo  risk high  (the model sees mcp_fake_echo)" in table.stdout
    assert "warning" not in table.stderr


async def test_status_asks_the_running_daemon_over_its_console_socket(make_config, tmp_path, clock):
    config = make_config(console={"socket_path": str(tmp_path / "bruce.sock")},
                         mcp_servers={"fake": stdio_server()})
    app = await build_app(config, clock=clock, environ={}, extra_channels=[socket_console(config, clock)])
    await app.start()
    try:
        servers = await mcp_status_on_daemon(config)
    finally:
        await app.stop()
    assert servers is not None
    (fake,) = servers
    assert fake["state"] == "ready" and "mcp.fake.add" in [t["name"] for t in fake["tools"]]
    assert await mcp_status_on_daemon(config) is None  # the daemon is gone


async def test_status_names_a_server_added_since_the_daemon_started_and_asks_for_a_restart(tmp_path, clock):
    """The newcomer's case: the daemon runs, a server is added to the config, and `bruce mcp
    status` showed an empty table with exit 0. Now it names the server and the restart."""
    from bruce.config.loader import load_config

    started = load_config(write_config(tmp_path), {})  # the daemon starts with no MCP server
    app = await build_app(started, clock=clock, environ={}, extra_channels=[socket_console(started, clock)])
    await app.start()
    try:
        config = write_config(tmp_path, mcp_servers={"fake": stdio_server(), "off": {**stdio_server(), "enabled": False}})
        table = await asyncio.to_thread(run_status, config)
        report = await asyncio.to_thread(run_status, config, "--json")
    finally:
        await app.stop()
    assert table.returncode == 1, table.stderr
    assert table.stdout.startswith("As the running daemon sees them:")
    assert ("The config names 1 MCP server(s) the running daemon has not loaded: fake. It reads mcp_servers only "
            "when it starts: restart it (sudo systemctl restart bruce, or stop `bruce run` and start it again) to "
            "load them.") in " ".join(table.stdout.split())
    assert report.returncode == 1
    assert json.loads(report.stdout) == {"daemon": True, "servers": [], "not_loaded": ["fake"]}


@pytest.mark.parametrize(("mcp_serve", "error"), [
    ({"conversation": "not a conversation"}, "mcp_serve.conversation"),
    ({"port": 70000}, "mcp_serve.port"),
])
def test_a_bad_mcp_serve_setting_is_named(tmp_path, mcp_serve, error):
    done = subprocess.run([*BRUCE, "--config", str(write_config(tmp_path, mcp_serve=mcp_serve)), "mcp", "serve"],
                          capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert done.returncode == 2 and error in done.stderr
