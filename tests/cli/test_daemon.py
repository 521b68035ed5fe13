"""The terminal's side of the console socket when no daemon answers: each question says so
(None, or False), and the command falls back to working on the database itself. With a daemon:
``tests/channels/test_console_socket.py``, ``tests/cli/test_jobs.py``, ``tests/tools/mcp/test_serve.py``."""

from __future__ import annotations

import asyncio

from bruce.cli.daemon import (
    attach_console,
    daemon_health,
    decide_on_daemon,
    jobs_changed_on_daemon,
    mcp_status_on_daemon,
)
from tests.fakes.console import ConsoleDriver


async def test_with_no_daemon_every_question_answers_none(make_config, tmp_path, clock):
    config = make_config(console={"socket_path": str(tmp_path / "nobody.sock")})
    assert await daemon_health(config) is None
    assert await decide_on_daemon(config, "abcd1234", True) is None
    assert await jobs_changed_on_daemon(config) is False
    assert await mcp_status_on_daemon(config) is None
    driver = ConsoleDriver(clock)
    try:
        assert await attach_console(config, driver.channel, asyncio.Event()) is None
    finally:
        await driver.close()


async def test_a_socket_that_is_not_a_bruce_daemon_is_no_daemon(make_config, tmp_path):
    path = tmp_path / "other.sock"

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readline()  # reads the hello, answers nothing a Bruce would
        writer.write(b'{"ev": "something else"}\n')
        await writer.drain()
        writer.close()

    server = await asyncio.start_unix_server(silent, path=str(path))
    try:
        config = make_config(console={"socket_path": str(path)})
        assert await daemon_health(config) is None
        assert await jobs_changed_on_daemon(config) is False
    finally:
        server.close()
        await server.wait_closed()
