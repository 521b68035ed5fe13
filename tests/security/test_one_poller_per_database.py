"""One poller per channel and one scheduler per database, however the database's path is spelled
(issue 31, point 3). Before, the guard was a lock file beside the configured path: a second
daemon whose config reached the same database through a symlink locked another file, polled the
same bot and ran a second scheduler. Now the guard is a lease in the database itself. Each row
spells the same file another way; the second daemon is refused the Telegram channel, and an owner's
message gets one answer. Through the real Telegram adapter against the fake Bot API."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bruce.errors import BruceError
from tests.fakes.llm_server import Step
from tests.fakes.telegram_api import FakeTelegramAPI

OWNER = 111


def beside(db: Path) -> Path:
    (db.parent / "alias.db").symlink_to(db)
    return db.parent / "alias.db"


def elsewhere(db: Path) -> Path:
    (db.parent / "other").mkdir()
    (db.parent / "other" / "bruce.db").symlink_to(db)
    return db.parent / "other" / "bruce.db"


def through_two_links(db: Path) -> Path:
    (db.parent / "first.db").symlink_to(db)
    (db.parent / "second.db").symlink_to(db.parent / "first.db")
    return db.parent / "second.db"


SPELLINGS = [beside, elsewhere, through_two_links]


@pytest.fixture
async def api():
    async with FakeTelegramAPI() as fake:
        yield fake


@pytest.mark.parametrize("spell", SPELLINGS, ids=[f.__name__ for f in SPELLINGS])
async def test_a_second_daemon_on_another_spelling_of_the_database_is_refused_the_channel(
        spell, platform_config, start_app, api, fake_llm, make_config):
    section = {"enabled": True, "token": api.token, "api_base": api.base_url, "allowed_users": [OWNER],
               "poll_timeout_s": 1}
    first = await start_app(platform_config("telegram", section))
    config = platform_config("telegram", section)
    alias = spell(Path(first.config.storage.path))
    second = config.model_copy(update={"storage": config.storage.model_copy(update={"path": alias})})
    with pytest.raises(BruceError, match="already serving the telegram channel"):
        await start_app(second)
    fake_llm.add(Step.text("Hello once."))
    api.push_message(OWNER, OWNER, "hi")
    async with asyncio.timeout(20):
        while not api.calls_to("sendMessage"):
            await asyncio.sleep(0.02)
    await asyncio.sleep(0.5)
    assert [c["text"] for c in api.calls_to("sendMessage")] == ["Hello once."]
