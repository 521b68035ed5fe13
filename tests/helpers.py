"""Small helpers shared by tests (not fixtures)."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from aiohttp.test_utils import TestClient, TestServer

from bruce.runtime.daemon import App

ADMIN_TOKEN = "a-long-admin-token-0123456789abcdef"  # the ``admin`` fixture's token (tests/conftest.py)
BEARER = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
from bruce.channel import IncomingMessage
from bruce.contracts import Risk, ToolContract


def incoming(app: App, text: str, *, chat: str = "c1", sender: str = "u1", channel: str = "test",
             message_id: str | None = None) -> IncomingMessage:
    return IncomingMessage(channel=channel, chat_id=chat, sender_id=sender, text=text,
                           platform_message_id=message_id, timestamp=app.clock.now())


async def say(app: App, text: str, **kwargs: Any) -> None:
    """Deliver a message and wait until its turn has finished."""
    handle = await app.worker.deliver(incoming(app, text, **kwargs))
    assert handle is not None, "message was refused"
    await handle


async def rows(app: App, sql: str, *params: Any) -> list[dict[str, Any]]:
    """What the database holds now (every write has committed), read as an operator would."""
    return db_rows(app.config.storage.path, sql, *params)


def db_rows(path: Path, sql: str, *params: Any) -> list[dict[str, Any]]:
    """Read the database file directly (as an operator would), outside the app."""
    con = sqlite3.connect(path)
    con.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in con.execute(sql, params)]
    finally:
        con.close()


def contract(name: str, risk: Risk = Risk.LOW, **overrides: Any) -> ToolContract:
    """A test tool's contract: no arguments, reads nothing, with the policy its risk implies; any field overridable."""
    fields: dict[str, Any] = dict(
        name=name, description=f"test tool {name}", category="test", risk=risk,
        input_schema={"type": "object", "properties": {}, "additionalProperties": False},
        output_schema={"type": "object"}, autonomous=risk in (Risk.LOW, Risk.MEDIUM),
        confirmation=risk in (Risk.HIGH, Risk.CRITICAL), step_up=risk is Risk.CRITICAL,
        side_effects="none", audit_event=f"{name}.ran", failure_modes=("error",),
    )
    fields.update(overrides)
    return ToolContract(**fields)


@asynccontextmanager
async def web_chat_app(config: Any, clock: Any, token: str) -> AsyncIterator[tuple[App, TestClient]]:
    """The app with the web chat as its channel, and an HTTP client of the admin page serving it."""
    from bruce.admin import AdminServer
    from bruce.app import build_app, web_chat

    chat = web_chat(config, clock)  # uploads beside the database
    app = await build_app(config, clock=clock, environ={}, extra_channels=[chat])
    await app.start()
    server = AdminServer(store=app.store, clock=clock, token=token, host="127.0.0.1", port=0,
                         chat_routes=chat.routes())
    client = TestClient(TestServer(server.app))
    await client.start_server()
    try:
        yield app, client
    finally:
        await client.close()
        await app.stop()
