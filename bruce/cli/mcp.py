"""``bruce mcp status [--json]`` and ``bruce mcp serve [--transport stdio|http] [--port N]``.

``status`` asks the running daemon (its servers, as it supervises them); with no daemon it
connects to each configured server now, each bounded by its ``connect_timeout_s``, and says so.
It exits 1 when an enabled server is not ready, so a script can watch it; an enabled server the
config names but the running daemon has not loaded (added since it started) is not ready either:
``status`` names it and says that a restart loads it.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any
from zoneinfo import ZoneInfo

from rich.console import Console
from rich.table import Table
from rich.text import Text

from bruce.clock import local_time
from bruce.config.schema import Config
from bruce.errors import BruceError
from bruce.safe_text import visible, visible_json

__all__ = ["add_arguments", "mcp_command"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="mcp_command", required=True)
    status = sub.add_parser("status", help="each MCP server: state, last error, tools")
    status.add_argument("--json", action="store_true", help="print JSON instead of a table")
    serve = sub.add_parser("serve", help="serve Bruce's own tools to another MCP client")
    serve.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    serve.add_argument("--port", type=int, default=None, help="HTTP port on 127.0.0.1 (default: mcp_serve.port)")


async def mcp_command(config: Config, args: argparse.Namespace) -> int:
    from bruce.app import probe_mcp
    from bruce.cli.daemon import mcp_status_on_daemon

    if args.mcp_command == "serve":
        port = config.mcp_serve.port if args.port is None else args.port
        if not 0 <= port <= 65535:
            print(f"bruce: --port {port}: give a port from 0 to 65535", file=sys.stderr)
            return 2
        await _serve(config, transport=args.transport, port=port)
        return 0
    if not config.mcp_servers:
        print("No MCP servers are configured (mcp_servers in the config).")
        return 0
    servers = await mcp_status_on_daemon(config)
    live = servers is not None
    if servers is None:
        servers = await probe_mcp(config)
    loaded = {s["server"] for s in servers}
    not_loaded = [name for name, server in config.mcp_servers.items() if server.enabled and name not in loaded]
    if args.json:
        print(visible_json({"daemon": live, "servers": servers, "not_loaded": not_loaded}))
    else:
        _table(servers, live, config.assistant.zone)
        if not_loaded:
            print(visible(f"The config names {len(not_loaded)} MCP server(s) the running daemon has not loaded: "
                          f"{', '.join(not_loaded)}. It reads mcp_servers only when it starts: restart it "
                          "(sudo systemctl restart bruce, or stop `bruce run` and start it again) to load them."))
    return 0 if not not_loaded and all(s["state"] in ("ready", "disabled") for s in servers) else 1


async def _serve(config: Config, *, transport: str, port: int) -> None:
    """``bruce mcp serve``: over stdio, or HTTP on 127.0.0.1 with the admin token as a bearer. A
    job made or changed over MCP is told to the running daemon, which arms it at once (none
    running: it waits in the database for the next start)."""
    from bruce.admin.auth import resolve_token
    from bruce.app import tool_server
    from bruce.cli.daemon import jobs_changed_on_daemon

    notices: set[asyncio.Task[bool]] = set()

    def tell_daemon(_job_id: str) -> None:
        task = asyncio.create_task(jobs_changed_on_daemon(config))
        notices.add(task)
        task.add_done_callback(notices.discard)

    async with tool_server(config, transport=transport, on_job_changed=tell_daemon) as served:
        try:
            if transport == "stdio":
                await served.serve_stdio()
                return
            token, generated = resolve_token(config.admin.token.get_secret_value() if config.admin.token else None,
                                             host="127.0.0.1", data_dir=config.storage.path.parent)
            if generated is not None:
                print(f"bruce mcp serve: the bearer token is the admin token, in {generated}", file=sys.stderr)
            try:
                sock = served.bind(port)
            except OSError as exc:
                raise BruceError(f"bruce mcp serve cannot listen on 127.0.0.1:{port} ({exc.strerror or exc}); "
                                 "choose another with --port or mcp_serve.port") from None
            await served.serve_http(sock, token)
        finally:
            if notices:
                await asyncio.wait(notices, timeout=3)


def _shown(text: str) -> Text:
    """A server's own text (its errors, its tools' names) as plain text: escape codes written
    out, and no rich markup read in it."""
    return Text(visible(text))


def _table(servers: list[dict[str, Any]], live: bool, zone: ZoneInfo) -> None:
    console = Console(highlight=False, soft_wrap=True)
    console.print("As the running daemon sees them:" if live else
                  "No daemon is running; connected to each server just now:")
    table = Table(show_lines=False)
    for column in ("server", "transport", "state", "since", "last error", "tools"):
        table.add_column(column, overflow="fold")
    for s in servers:
        since = local_time(s["since"], zone, seconds=True) if s["since"] else "-"
        table.add_row(_shown(s["server"]), s["transport"], s["state"], since,
                      _shown(s["last_error"] or "-"), str(len(s["tools"])))
    console.print(table)
    for s in servers:
        for t in s["tools"]:
            console.print(_shown(f"  {t['name']}  risk {t['risk']}  (the model sees {t['wire_name']})"))
        for remote, why in s.get("skipped", {}).items():
            console.print(_shown(f"  {s['server']}: {remote} is not offered: {why}"))
