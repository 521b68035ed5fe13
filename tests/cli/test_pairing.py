"""Pairing and strangers, through the real App, the fake LLM server and `bruce pairing` in-process."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
import yaml

from bruce.channel import IncomingMessage
from bruce.cli.main import main
from bruce.runtime.daemon import App
from bruce.runtime.pairing import CODE_ALPHABET, new_code
from bruce.texts import PAIRING_FULL, STRANGER_REFUSED
from bruce.values import ConversationId, DecisionOutcome
from tests.fakes.channel import RecordingChannel
from tests.helpers import rows, say

CODE = re.compile(r"bruce pairing approve ([A-Z0-9]{8}) \(expires in 1 hour\)\.$")
PAIRING_ON = {"telegram": {"pairing": True}}


@pytest.fixture
def channel() -> RecordingChannel:
    """The app's channel is 'telegram', which has an access rule (the default 'test' has none)."""
    return RecordingChannel("telegram")


@pytest.fixture
def bruce(tmp_path, clock, monkeypatch):
    """`bruce --config <tmp>/config.yml ...` in-process, on the test's clock; returns (exit code, out, err)."""
    config = tmp_path / "config.yml"
    config.write_text(yaml.safe_dump({"assistant": {"timezone": "America/Sao_Paulo"},
                                      "storage": {"path": str(tmp_path / "bruce.db")}}))
    monkeypatch.setattr("bruce.cli.pairing.SystemClock", lambda: clock)

    async def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
        capsys.readouterr()  # the app's log lines so far
        code = await asyncio.to_thread(main, ["--config", str(config), "pairing", *argv])
        out, err = capsys.readouterr()
        return code, out, err

    return run


async def write(app: App, sender: str, text: str = "hi", *, private: bool = True, name: str | None = None) -> None:
    """A message from ``sender`` in their own chat (or a group), and whatever it set off."""
    message = IncomingMessage(channel="telegram", chat_id=f"chat-{sender}" if private else "group-1", sender_id=sender,
                              text=text, platform_message_id=None, timestamp=app.clock.now(), private=private,
                              sender_name=name)
    handle = await app.worker.deliver(message)
    if handle is not None:
        await handle
    await app.worker.wait_idle()


def code_sent_to(channel: RecordingChannel, sender: str) -> str:
    match = CODE.search(channel.texts(f"chat-{sender}")[-1])
    assert match is not None, channel.texts(f"chat-{sender}")
    return match.group(1)


async def nothing_stored(app: App) -> bool:
    return await rows(app, "SELECT id FROM messages") == [] and await rows(app, "SELECT id FROM turns") == []


def test_codes_are_eight_unambiguous_characters():
    assert not set("0O1I") & set(CODE_ALPHABET)
    codes = {new_code() for _ in range(200)}
    assert len(codes) == 200 and all(len(c) == 8 and set(c) <= set(CODE_ALPHABET) for c in codes)


async def test_a_stranger_gets_a_code_and_no_model_call(app_factory, channel, fake_llm, clock):
    app = await app_factory(channels=PAIRING_ON)
    await write(app, "555", name="Ana")
    code = code_sent_to(channel, "555")
    assert channel.texts() == [f"I don't know you yet. To pair, ask the owner to run: bruce pairing approve {code} "
                               "(expires in 1 hour)."]
    assert fake_llm.requests == [] and await nothing_stored(app)
    (request,) = await rows(app, "SELECT * FROM pairing_requests")
    assert request | {"created_at": None, "expires_at": None} == {
        "code": code, "channel": "telegram", "sender_id": "555", "chat_id": "chat-555", "display_name": "Ana",
        "status": "pending", "created_at": None, "expires_at": None, "decided_at": None}
    assert request["expires_at"].startswith("2026-12-02T13:00:00")  # an hour after T0

    await write(app, "555", "hello?")
    assert len(channel.texts()) == 1  # told at most once per ten minutes (tests/security/test_pairing_replies.py)
    clock.advance(minutes=10)
    await write(app, "555", "hello?")
    assert code_sent_to(channel, "555") == code and len(channel.texts()) == 2  # the same code, no new row
    assert len(await rows(app, "SELECT code FROM pairing_requests")) == 1 and fake_llm.requests == []


async def test_a_fourth_stranger_is_told_to_try_later(app_factory, channel, fake_llm):
    app = await app_factory(channels=PAIRING_ON)
    for sender in ("1", "2", "3"):
        await write(app, sender)
    assert len({code_sent_to(channel, s) for s in ("1", "2", "3")}) == 3
    await write(app, "4")
    assert channel.texts("chat-4") == [PAIRING_FULL]
    await write(app, "4")  # not again within the hour
    assert channel.texts("chat-4") == [PAIRING_FULL]
    assert len(await rows(app, "SELECT code FROM pairing_requests")) == 3
    assert fake_llm.requests == [] and await nothing_stored(app)


async def test_an_approved_sender_is_answered_and_a_revoked_one_is_a_stranger_again(
        app_factory, channel, fake_llm, bruce, capsys, clock):
    app = await app_factory(channels=PAIRING_ON)
    await write(app, "555", name="Ana")
    code = code_sent_to(channel, "555")

    status, out, _ = await bruce(capsys, "list")
    assert status == 0
    header, line = out.splitlines()
    assert header.split() == ["CODE", "CHANNEL", "SENDER", "ID", "NAME", "EXPIRES"]
    assert line.split() == [code, "telegram", "555", "Ana", "2026-12-02", "10:00", "-03", "(America/Sao_Paulo)", "(in", "60",
                            "min)"]

    assert await bruce(capsys, "approve", code.lower()) == (0, "paired: telegram user 555 (Ana); Bruce answers their "
                                                               "next message\n", "")
    await say(app, "hello", channel="telegram", chat="chat-555", sender="555")
    assert channel.texts("chat-555")[-1] == "ok" and len(fake_llm.requests) == 1
    assert (await app.worker.decide(ConversationId("telegram", "chat-555"), "555", "deadbeef", True)).outcome is DecisionOutcome.NOT_FOUND
    assert await bruce(capsys, "approve", code) == (1, "", f"bruce: pairing code {code} was already handled "
                                                           "(approved)\n")
    assert await bruce(capsys, "list") == (0, "no pending pairing requests\n", "")

    status, out, _ = await bruce(capsys, "revoke", "telegram", "555")
    assert status == 0 and out.startswith("revoked: telegram user 555 is a stranger again")
    clock.advance(seconds=31)  # the daemon re-reads paired users this often
    await write(app, "555", "still there?")
    assert code_sent_to(channel, "555") != code and len(fake_llm.requests) == 1
    report = await app.worker.decide(ConversationId("telegram", "chat-555"), "555", "deadbeef", True)
    assert report.outcome is DecisionOutcome.WRONG_USER
    assert await bruce(capsys, "revoke", "telegram", "555") == (1, "", "bruce: telegram user 555 is not paired\n")


async def test_an_expired_code_cannot_be_approved(app_factory, channel, fake_llm, bruce, capsys, clock):
    app = await app_factory(channels=PAIRING_ON)
    await write(app, "555")
    code = code_sent_to(channel, "555")
    clock.advance(hours=1, seconds=1)
    assert await bruce(capsys, "list") == (0, "no pending pairing requests\n", "")
    status, out, err = await bruce(capsys, "approve", code)
    assert status == 1 and out == "" and f"pairing code {code} has expired" in err
    assert [r["status"] for r in await rows(app, "SELECT status FROM pairing_requests")] == ["expired"]
    assert await rows(app, "SELECT * FROM paired_users") == []
    await write(app, "555")  # a new code once the old one expired
    assert code_sent_to(channel, "555") != code and fake_llm.requests == []
    assert await bruce(capsys, "approve", "ZZZZZZZZ") == (1, "", "bruce: no pairing code ZZZZZZZZ\n")


async def test_a_denied_sender_gets_one_refusal_and_no_new_code(app_factory, channel, fake_llm, bruce, capsys):
    app = await app_factory(channels=PAIRING_ON)
    await write(app, "555")
    code = code_sent_to(channel, "555")
    status, out, _ = await bruce(capsys, "deny", code)
    assert status == 0 and out.startswith("denied: telegram user 555 is not paired")
    await write(app, "555")
    await write(app, "555")
    assert channel.texts("chat-555")[1:] == [STRANGER_REFUSED]
    assert len(await rows(app, "SELECT code FROM pairing_requests")) == 1 and fake_llm.requests == []


async def test_with_pairing_off_a_stranger_hears_one_refusal_an_hour(app_factory, channel, fake_llm, clock):
    app = await app_factory(channels={"telegram": {"allowed_users": ["111"]}})
    for text in ("hi", "hello?", "anyone?"):
        await write(app, "555", text)
    assert channel.texts() == [STRANGER_REFUSED]
    clock.advance(minutes=59)
    await write(app, "555")
    assert channel.texts() == [STRANGER_REFUSED]
    clock.advance(minutes=2)
    await write(app, "555")
    assert channel.texts() == [STRANGER_REFUSED, STRANGER_REFUSED]
    assert fake_llm.requests == [] and await nothing_stored(app)
    assert await rows(app, "SELECT * FROM pairing_requests") == []


@pytest.mark.parametrize("pairing", [True, False])
async def test_a_stranger_in_a_group_gets_nothing(app_factory, channel, fake_llm, pairing):
    app = await app_factory(channels={"telegram": {"pairing": pairing}})
    await write(app, "555", private=False)
    await write(app, "555", private=False)
    assert channel.sent == [] and fake_llm.requests == [] and await nothing_stored(app)
    assert await rows(app, "SELECT * FROM pairing_requests") == []


async def test_a_failed_notice_is_swallowed(app_factory, channel, fake_llm):
    app = await app_factory(channels=PAIRING_ON)
    channel.fail_sends = True
    await write(app, "555")
    assert channel.attempts == 1 and channel.sent == [] and fake_llm.requests == []


def test_pairing_refuses_a_missing_database_and_creates_nothing(tmp_path: Path, capsys):
    config = tmp_path / "config.yml"
    config.write_text(yaml.safe_dump({"storage": {"path": "data/bruce.db"}}))
    assert main(["--config", str(config), "pairing", "list"]) == 1
    err = capsys.readouterr().err
    assert f"no database at {tmp_path / 'data' / 'bruce.db'}" in err and "bruce run" in err
    assert not (tmp_path / "data").exists()
