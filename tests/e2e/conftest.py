"""The browser tests' app: the web chat beside the test channel, and a notes folder files.write may
use (a module that needs another app defines its own ``app``)."""

from __future__ import annotations

import pytest

from bruce.app import build_app
from channels.web_chat import WebChat


@pytest.fixture
async def app(make_config, clock, channel, tmp_path):
    (tmp_path / "notes").mkdir()
    config = make_config(tools={"files": {"notes_dir": str(tmp_path / "notes")}})
    built = await build_app(config, clock=clock, environ={}, extra_channels=[channel, WebChat(clock=clock)])
    await built.start()
    yield built
    await built.stop()
