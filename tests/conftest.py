from __future__ import annotations

import asyncio
import os

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"

from collections.abc import AsyncIterator, Callable  # noqa: E402
from datetime import UTC, datetime  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402
from aiohttp import web  # noqa: E402

import channels.telegram  # noqa: E402,F401  aiogram's types deferred in the tests as in `bruce run`
from bruce.app import build_app
from bruce.config.loader import parse_config  # noqa: E402
from bruce.config.schema import Config  # noqa: E402
from bruce.runtime.daemon import App  # noqa: E402
from tests.fakes.channel import RecordingChannel  # noqa: E402
from tests.fakes.clock import FakeClock  # noqa: E402
from tests.fakes.llm_server import FakeLLMServer  # noqa: E402

T0 = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)  # a Wednesday; 09:00 in São Paulo


@pytest.fixture
async def fake_llm() -> AsyncIterator[FakeLLMServer]:
    async with FakeLLMServer() as server:
        yield server


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


@pytest.fixture
def make_config(tmp_path: Path, fake_llm: FakeLLMServer) -> Callable[..., Config]:
    """A config pointing at the fake LLM and a database under tmp_path; keyword sections
    are merged over the defaults, e.g. make_config(llm={"fallbacks": ["openai/backup"]})."""

    def make(**sections: dict[str, Any]) -> Config:
        data: dict[str, Any] = {
            "assistant": {"timezone": "America/Sao_Paulo"},  # fixed: the default is the machine's zone
            "llm": {"model": "openai/primary", "api_base": fake_llm.base_url, "api_key": "sk-test-key-123456",
                    "num_retries": 2, "retry_backoff_s": 0, "timeout_s": 5},
            "storage": {"path": str(tmp_path / "bruce.db")},
            "tools": {"timeout_s": 1},
            "memory": {"enabled": False},  # on, it adds a background model call after each turn (tests/memory/test_long_term.py)
        }
        for key, value in sections.items():
            data[key] = {**data.get(key, {}), **value}
        return parse_config(data, environ={})

    return make


@pytest.fixture
def channel() -> RecordingChannel:
    return RecordingChannel("test")


@pytest.fixture
async def app_factory(clock: FakeClock, channel: RecordingChannel, make_config: Callable[..., Config]):
    """Build (and afterwards stop) apps wired to the fake LLM, the fake clock and a recording channel."""
    apps: list[App] = []

    async def build(config: Config | None = None, **sections: Any) -> App:
        app = await build_app(config or make_config(**sections), clock=clock, environ={}, extra_channels=[channel])
        apps.append(app)
        await app.start()
        return app

    yield build
    for app in apps:
        await app.stop()


@pytest.fixture
async def admin(app):
    """The admin page of ``app`` through aiohttp's test client on a real socket (token ADMIN_TOKEN)."""
    from aiohttp.test_utils import TestClient, TestServer

    from bruce.admin import AdminServer
    from tests.helpers import ADMIN_TOKEN

    server = AdminServer(store=app.store, clock=app.clock, token=ADMIN_TOKEN, host="127.0.0.1", port=0,
                         health=app._health, jobs=app.jobs, zone=app.config.assistant.zone)
    client = TestClient(TestServer(server.app))
    await client.start_server()
    yield client
    await client.close()


@pytest.fixture
async def app(app_factory) -> App:
    return await app_factory()


@pytest.fixture(autouse=True, scope="session")
def _no_tool_worker_outlives_the_tests():
    """The calculator's and the page reader's worker processes are stopped after the run."""
    yield
    from tools.builtin import shutdown_tools

    shutdown_tools()


@pytest.fixture
async def receiver():
    """A local HTTP endpoint standing in for a webhook the owner allowed."""
    received: list[dict] = []

    async def hook(request: web.Request) -> web.Response:
        received.append(await request.json())
        return web.json_response({"accepted": True})

    app = web.Application()
    app.router.add_post("/hook", hook)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    yield f"http://127.0.0.1:{port}/hook", received
    await runner.cleanup()


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    """The notes folder files.write may touch, created."""
    path = tmp_path / "notes"
    path.mkdir()
    return path


@pytest.fixture
def platform_config(make_config: Callable[..., Config], tmp_path: Path) -> Callable[[str, dict[str, Any]], Config]:
    """A config with one chat platform's section (``channels.<name>``), quick send retries, and
    tools that can act (notes, artifacts, an allowed webhook URL)."""

    def make(name: str, section: dict[str, Any]) -> Config:
        return make_config(channels={name: section, "send_backoff_s": 0.01},
                           tools={"files": {"notes_dir": str(tmp_path / "notes")},
                                  "artifacts": {"dir": str(tmp_path / "artifacts")},
                                  "http_post": {"allowed_urls": ["https://example.org/hook"]}})

    return make


@pytest.fixture
async def start_app(clock: FakeClock) -> AsyncIterator[Callable[[Config], Any]]:
    """Build and start apps from a config (their channels built from it); all stopped afterwards."""
    apps: list[App] = []

    async def start(config: Config) -> App:
        app = await build_app(config, clock=clock, environ={})
        apps.append(app)
        await app.start()
        return app

    yield start
    for app in apps:
        await app.stop()


# Every async test runs on the loop `bruce run` picks by default (runtime.event_loop: auto, which
# is uvloop where it is installed, and it is a dependency here); the daemon's end-to-end tests on
# Telegram and Discord run once more on asyncio's own loop, the fallback and `event_loop: asyncio`.
_ALSO_ON_ASYNCIO = frozenset({"test_telegram.py", "test_discord.py"})


def pytest_asyncio_loop_factories(config, item):
    from bruce.runtime.event_loop import loop_factory

    name, factory = loop_factory("auto")
    factories = {name: factory}
    if item.path.name in _ALSO_ON_ASYNCIO:
        factories["asyncio"] = asyncio.new_event_loop
    return factories
