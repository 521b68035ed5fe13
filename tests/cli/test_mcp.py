"""``bruce mcp status`` and ``bruce mcp serve``'s arguments, in-process: what the operator reads
and the exit status a script watches. (Both commands as subprocesses, status from a running
daemon, and serving: tests/tools/mcp/test_serve.py.)"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import mcp.client.stdio  # noqa: F401  (see below)
import pytest
import yaml

from bruce.cli.main import main
from tests.tools.mcp.test_bridge import stdio_server

# mcp's stdio client takes ``errlog=sys.stderr`` as a default argument, bound when the module is
# first imported: imported first inside a test that captures with capsys, every later stdio client
# in this process (tests/tools/mcp/test_serve.py) would write a server's errors to that test's
# closed capture and fail to start. Imported here, it binds the session's standard error.


def write_config(tmp_path: Path, mcp_servers: dict[str, Any] | None = None) -> Path:
    path = tmp_path / "config.yml"
    data: dict[str, Any] = {"storage": {"path": str(tmp_path / "bruce.db")}, "assistant": {"timezone": "Asia/Tokyo"},
                            "console": {"socket_path": str(tmp_path / "bruce.sock")}}  # no daemon listens there
    if mcp_servers is not None:
        data["mcp_servers"] = mcp_servers
    path.write_text(yaml.safe_dump(data))
    return path


def bruce(capsys: pytest.CaptureFixture[str], config: Path, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["--config", str(config), "mcp", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_status_without_servers_says_where_they_would_be_configured(capsys: pytest.CaptureFixture[str],
                                                                    tmp_path: Path) -> None:
    code, out, _ = bruce(capsys, write_config(tmp_path), "status")
    assert (code, out.strip()) == (0, "No MCP servers are configured (mcp_servers in the config).")


@pytest.mark.parametrize("port", ["-1", "65536"])
def test_serve_refuses_a_port_out_of_range(capsys: pytest.CaptureFixture[str], tmp_path: Path, port: str) -> None:
    code, _, err = bruce(capsys, write_config(tmp_path), "serve", "--transport", "http", "--port", port)
    assert code == 2 and f"--port {port}: give a port from 0 to 65535" in err


def test_status_exits_1_while_an_enabled_server_is_not_ready(capsys: pytest.CaptureFixture[str],
                                                            tmp_path: Path) -> None:
    config = write_config(tmp_path, {"fake": stdio_server(tool_risk={"echo": "low"}),
                                     "gone": {"command": sys.executable, "args": ["-c", "raise SystemExit(3)"],
                                              "connect_timeout_s": 5.0},
                                     "off": {**stdio_server(), "enabled": False}})
    code, out, _ = bruce(capsys, config, "status")
    assert code == 1
    assert out.startswith("No daemon is running; connected to each server just now:")
    assert "mcp.fake.echo  risk low  (the model sees mcp_fake_echo)" in out
    assert re.search(r"\d\d:\d\d:\d\d JST", out) and "UTC" not in out  # since: the owner's zone, named
    code, out, _ = bruce(capsys, config, "status", "--json")
    report = json.loads(out)
    assert report["daemon"] is False
    states = {s["server"]: s["state"] for s in report["servers"]}
    assert states["fake"] == "ready" and states["off"] == "disabled" and states["gone"] not in ("ready", "disabled")


def test_status_exits_0_when_every_enabled_server_is_ready(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    config = write_config(tmp_path, {"fake": stdio_server(), "off": {**stdio_server(), "enabled": False}})
    code, out, _ = bruce(capsys, config, "status", "--json")
    assert code == 0
    assert {s["server"]: s["state"] for s in json.loads(out)["servers"]} == {"fake": "ready", "off": "disabled"}
