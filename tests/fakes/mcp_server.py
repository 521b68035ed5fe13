"""A real MCP server for the tests, built on the SDK's ``MCPServer``, run as a subprocess:

    python -m tests.fakes.mcp_server [--transport stdio|http|sse] [--port-file F] [--hang]

Tools: ``echo``, ``add`` (structured), ``slow`` (sleeps), ``fail`` (a tool error), ``note``
(appends to the file named by ``FAKE_MCP_NOTES``: a side effect a test can see), ``fetch`` (takes
a ``url`` and writes ``fetched <url>`` to that file instead of fetching it), ``pid`` (so
a test can kill the process), ``a.dotted-name`` (a name that needs making safe), ``big`` (a
huge answer), ``dry`` (defines ``dry_run``), and with ``--many N`` N more.
``--hang``: accept the connection and never answer the handshake. ``--port-file``: the HTTP
transports bind 127.0.0.1 on a free port and write it there.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import sys
import time
from pathlib import Path

from mcp.server import MCPServer

server = MCPServer("fake")


@server.tool(description="Repeat the text back.")
def echo(text: str) -> str:
    return f"echo: {text}"


@server.tool(description="Add two integers.")
def add(a: int, b: int) -> int:
    return a + b


@server.tool(description="Wait the given number of seconds, then answer.")
async def slow(seconds: float) -> str:
    await asyncio.sleep(seconds)
    return f"slept {seconds}"


@server.tool(description="Always fails.")
def fail() -> str:
    raise ValueError("the fake tool failed on purpose")


@server.tool(description="Write a note (a side effect).")
def note(text: str) -> str:
    path = Path(os.environ["FAKE_MCP_NOTES"])
    with path.open("a", encoding="utf-8") as handle:
        handle.write(text + "\n")
    return f"noted: {text}"


@server.tool(description="Fetch a URL (here: only write down that it was asked for).")
def fetch(url: str) -> str:
    path = Path(os.environ["FAKE_MCP_NOTES"])
    with path.open("a", encoding="utf-8") as handle:
        handle.write(f"fetched {url}\n")
    return f"fetched {len(url)} characters of URL"


@server.tool(description="The server's process id.")
def pid() -> int:
    return os.getpid()


@server.tool(name="a.dotted-name", description="A tool whose name needs making safe. " + "x" * 3000)
def dotted() -> str:
    return "dotted"


@server.tool(description="A huge answer: 100 000 characters of text and of structured content.")
def big() -> dict[str, str]:
    return {"blob": "x" * 100_000}


@server.tool(description="A tool that defines dry_run itself (Bruce reserves that name).")
def dry(dry_run: bool) -> str:
    return f"dry_run={dry_run}"


def _many(count: int) -> None:
    for i in range(count):
        server.add_tool(lambda i=i: i, name=f"t{i:03d}", description=f"Tool number {i}.")


def _bound_socket(port_file: str) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    Path(port_file).write_text(str(sock.getsockname()[1]))
    return sock


async def _serve_http(transport: str, port_file: str, hang: bool) -> None:
    import uvicorn

    sock = _bound_socket(port_file)
    if hang:  # accept connections, read, never answer
        sock.listen()
        sock.setblocking(False)
        loop = asyncio.get_running_loop()
        held = []
        while True:
            conn, _ = await loop.sock_accept(sock)
            held.append(conn)
    app = server.streamable_http_app() if transport == "http" else server.sse_app()
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve(sockets=[sock])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--transport", choices=("stdio", "http", "sse"), default="stdio")
    parser.add_argument("--port-file")
    parser.add_argument("--hang", action="store_true")
    parser.add_argument("--many", type=int, default=0, help="add this many extra tools t000, t001...")
    args = parser.parse_args()
    _many(args.many)
    if args.transport == "stdio":
        if args.hang:
            while True:  # read the handshake and never answer it
                sys.stdin.buffer.readline()
                time.sleep(0.01)
        asyncio.run(server.run_stdio_async())
    else:
        asyncio.run(_serve_http(args.transport, args.port_file, args.hang))


if __name__ == "__main__":
    main()
