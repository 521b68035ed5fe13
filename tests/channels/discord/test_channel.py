"""The Discord channel end to end: real discord.py against the fake Discord (REST and gateway) on
127.0.0.1, the daemon's real wiring (build_app from config) and the fake LLM server."""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from bruce.app import build_app
from bruce.errors import ConfigError
from bruce.turns.commands import COMMANDS, help_text
from channels.discord.format import fences_balanced
from channels.discord.interactions import ABOUT, ANSWERED_HERE
from tests.fakes.discord_api import FakeDiscord
from tests.fakes.llm_server import Step
from tests.fakes.media_files import pdf_with_text, png
from tests.helpers import rows

OWNER = 111
FRIEND = 222  # allowed too
STRANGER = 666
OTHER_CHANNEL = 800000000000000077
MESSAGES = r"^/channels/\d+/messages$"


@pytest.fixture
async def fake():
    async with FakeDiscord() as server:
        yield server


@pytest.fixture
def dc_config(platform_config, fake):
    def make(**discord):
        section = {"enabled": True, "token": fake.token, "api_base": fake.api_base, "gateway_url": fake.gateway_url,
                   "allowed_users": [OWNER, FRIEND], "allowed_channels": [fake.guild_channel_id],
                   "ready_timeout_s": 20, **discord}
        return platform_config("discord", section)
    return make


@pytest.fixture
def started(dc_config, start_app):
    """Start an app with this platform enabled; keyword arguments go into its section."""
    return lambda **discord: start_app(dc_config(**discord))


def bot_texts(fake: FakeDiscord, channel_id: int | str) -> list[str]:
    """What the bot posted in the channel (as sent, in order)."""
    return [c.json["content"] for c in fake.calls_to("POST", MESSAGES)
            if c.path == f"/channels/{channel_id}/messages" and isinstance(c.json, dict) and c.json.get("content")]


async def replies(fake: FakeDiscord, channel_id: int | str, count: int, timeout: float = 20) -> list[str]:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        texts = bot_texts(fake, channel_id)
        if len(texts) >= count:
            return texts
        assert asyncio.get_running_loop().time() < deadline, f"{len(texts)} of {count} replies: {texts}"
        await asyncio.sleep(0.02)


def posted(fake: FakeDiscord, channel_id: int | str) -> list[str]:
    """The bot's messages in the channel now (edits applied, deleted ones gone), oldest first."""
    return [m["content"] for m in fake.messages.values() if m["channel_id"] == str(channel_id)]


def dm_channel(message: dict) -> int:
    return int(message["channel_id"])


def buttons(message: dict) -> list[dict]:
    return [b for row in message.get("components", []) for b in row.get("components", [])]


async def until(predicate, timeout: float = 20) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.02)


async def test_a_dm_from_an_allowed_user_gets_typing_and_a_reply(started, fake, fake_llm):
    app = await started()
    fake_llm.add(Step.text("Hello, Ana."))
    channel = dm_channel(fake.dm(OWNER, "hi there"))
    assert await replies(fake, channel, 1) == ["Hello, Ana."]
    assert channel in fake.typing
    paths = [(c.method, c.path) for c in fake.calls]
    assert paths.index(("POST", f"/channels/{channel}/typing")) < paths.index(("POST", f"/channels/{channel}/messages"))
    assert fake_llm.requests[0]["messages"][-1]["content"] == "hi there"
    (stored,) = await rows(app, "SELECT conversation_id FROM messages WHERE direction = 'in'")
    assert stored["conversation_id"] == f"discord:{channel}"
    assert app.control.health()["discord"] is not None  # last_receive, for `bruce doctor`


async def test_start_up_registers_the_slash_commands_with_the_intents(started, fake):
    await started()
    assert [c["name"] for c in fake.commands] == ["new", "jobs", "usage", "help", "id"]
    assert fake.intents == (1 << 0) | (1 << 9) | (1 << 12) | (1 << 15)  # guilds, guild and DM messages, content


async def test_the_slash_tree_and_help_come_from_the_command_table(started, fake):
    await started()
    menu = [spec for spec in COMMANDS if spec.in_menu]
    passed_on = [spec for spec in menu if spec.name not in ANSWERED_HERE]
    answered_here = [spec for spec in menu if spec.name in ANSWERED_HERE]
    assert [(c["name"], c["description"]) for c in fake.commands] == [
        (spec.name, spec.describe("Discord")) for spec in passed_on + answered_here]
    fake.slash_command(OWNER, "help")
    await until(lambda: len(fake.interaction_responses) == 1)
    (answer,) = fake.interaction_responses
    assert answer.json["data"]["content"] == help_text("Bruce", about=ABOUT, platform="Discord")


async def test_in_a_guild_only_a_mention_or_a_reply_in_an_allowed_channel_is_answered(started, fake, fake_llm):
    app = await started()
    fake_llm.add(Step.text("Hello guild."), Step.text("Replying to your reply."))
    fake.guild_message(OWNER, "just chatting")
    fake.guild_message(OWNER, "hello there", channel_id=OTHER_CHANNEL, mention_bot=True)  # not an allowed channel
    fake.guild_message(OWNER, "hello bot", mention_bot=True)
    assert await replies(fake, fake.guild_channel_id, 1) == ["Hello guild."]
    ours = next(int(c) for c, m in fake.messages.items() if m["content"] == "Hello guild.")
    fake.guild_message(OWNER, "and this?", reply_to_bot_message=ours, reply_ping=False)
    assert (await replies(fake, fake.guild_channel_id, 2))[-1] == "Replying to your reply."
    stored = await rows(app, "SELECT text FROM messages WHERE direction = 'in' ORDER BY id")
    assert [r["text"] for r in stored] == ["hello bot", "and this?"]  # the mention is removed
    assert bot_texts(fake, OTHER_CHANNEL) == [] and len(fake_llm.requests) == 2


async def test_a_stranger_in_a_guild_hears_nothing(started, fake, fake_llm):
    app = await started(pairing=True)
    fake.guild_message(STRANGER, "let me in", mention_bot=True)
    fake_llm.add(Step.text("Hi owner."))
    fake.guild_message(OWNER, "hi", mention_bot=True)
    assert await replies(fake, fake.guild_channel_id, 1) == ["Hi owner."]
    assert [r["text"] for r in await rows(app, "SELECT text FROM messages WHERE direction = 'in'")] == ["hi"]


async def test_an_unknown_user_gets_a_pairing_code_and_no_model_call_then_pairs(
        started, fake, fake_llm, tmp_path, clock, monkeypatch):
    import yaml

    from bruce.cli.main import main

    app = await started(pairing=True)
    channel = dm_channel(fake.dm(STRANGER, "hello?", username="bob"))
    (told,) = await replies(fake, channel, 1)
    code = re.search(r"bruce pairing approve ([A-Z0-9]{8}) \(expires in 1 hour\)", told).group(1)
    assert fake_llm.requests == [] and await rows(app, "SELECT id FROM messages") == []
    (request,) = await rows(app, "SELECT channel, sender_id, display_name FROM pairing_requests")
    assert request == {"channel": "discord", "sender_id": str(STRANGER), "display_name": "Bob"}

    config = tmp_path / "pairing.yml"
    config.write_text(yaml.safe_dump({"storage": {"path": str(app.config.storage.path)}}))
    monkeypatch.setattr("bruce.cli.pairing.SystemClock", lambda: clock)  # the code was made on the test's clock
    assert await asyncio.to_thread(main, ["--config", str(config), "pairing", "approve", "telegram", code]) == 1
    assert await asyncio.to_thread(main, ["--config", str(config), "pairing", "approve", "discord", code]) == 0

    fake_llm.add(Step.text("Nice to meet you, Bob."))
    fake.dm(STRANGER, "hello again", username="bob")
    assert (await replies(fake, channel, 2))[-1] == "Nice to meet you, Bob."


async def test_a_long_answer_with_a_code_block_arrives_as_valid_parts(started, fake, fake_llm):
    await started()
    code = "\n".join(f"    total += item_{i} * weight({i})  # step {i}" for i in range(70))
    answer = ("Here is the script. " * 50 + "\n\n```python\ndef score(items):\n    total = 0\n" + code
              + "\n    return total\n```\n\n" + "It adds the weighted items. " * 35)
    assert 4900 < len(answer) < 5600
    fake_llm.add(Step.text(answer))
    channel = dm_channel(fake.dm(OWNER, "write the script"))
    parts = await replies(fake, channel, 4)
    await asyncio.sleep(0.3)
    parts = bot_texts(fake, channel)
    assert len(parts) == 4 and all(len(p) <= 2000 and fences_balanced(p) for p in parts)
    assert parts[2].startswith("```python\n    total += item_")  # the block reopened with its language
    joined = "\n".join(parts).replace("\n```\n```python\n", "\n")  # without the fences added at the cut
    assert re.sub(r"\s+", "", joined) == re.sub(r"\s+", "", answer)


async def test_everyone_in_the_model_text_pings_nobody(started, fake, fake_llm):
    await started()
    fake_llm.add(Step.text(f"Hey @everyone and @here and <@{FRIEND}>!"))
    channel = dm_channel(fake.dm(OWNER, "shout"))
    await replies(fake, channel, 1)
    (sent,) = [c for c in fake.calls_to("POST", MESSAGES) if c.json.get("content", "").startswith("Hey")]
    assert sent.json["allowed_mentions"] == {"parse": []}
    assert sent.json["content"] == f"Hey @everyone and @here and <@{FRIEND}>!"


async def test_a_rate_limit_is_honoured_and_the_reply_arrives_once(started, fake, fake_llm):
    await started()
    fake.fail_next("POST", MESSAGES, status=429, retry_after=0.3)
    fake_llm.add(Step.text("Patience pays."))
    channel = dm_channel(fake.dm(OWNER, "hello"))
    await until(lambda: posted(fake, channel) == ["Patience pays."])
    await asyncio.sleep(0.2)
    posts = fake.calls_to("POST", rf"^/channels/{channel}/messages$")
    assert len(posts) == 2 and posts[1].at - posts[0].at >= 0.3  # refused, waited, then once
    assert [m["content"] for m in fake.messages.values()] == ["Patience pays."]


async def test_a_long_rate_limit_goes_back_to_the_outbox_with_its_wait(started, fake, fake_llm, clock):
    await started()
    fake.fail_next("POST", MESSAGES, status=429, retry_after=45)  # past what discord.py waits out itself
    fake_llm.add(Step.text("Later."))
    fake.dm(OWNER, "hello")
    await until(lambda: [m["content"] for m in fake.messages.values()] == ["Later."])
    assert 45 in clock.sleeps and len(fake.calls_to("POST", MESSAGES)) == 2


async def test_a_reply_discord_took_before_a_crash_is_not_doubled_by_the_resend(dc_config, start_app, fake, fake_llm):
    """Discord creates the reply but its answer never arrives (the process dies before the outbox
    records it): after the restart the outbox sends it again with the same nonce, and Discord
    answers with the message it already made."""
    config = dc_config()
    config = config.model_copy(update={"assistant": config.assistant.model_copy(update={"shutdown_timeout_s": 0.2})})
    app = await start_app(config)
    fake.hang_next("POST", MESSAGES)
    fake_llm.add(Step.text("Said once."))
    channel = dm_channel(fake.dm(OWNER, "hello"))
    await until(lambda: posted(fake, channel) == ["Said once."])
    await app.stop()  # the send is still waiting for Discord's answer: cut off as by a kill

    app = await start_app(config)
    await until(lambda: len(fake.calls_to("POST", rf"^/channels/{channel}/messages$")) == 2)
    for _ in range(500):
        found = await rows(app, "SELECT id, status FROM messages WHERE direction = 'out'")
        if found[0]["status"] == "sent":
            break
        await asyncio.sleep(0.02)
    assert found[0]["status"] == "sent"
    assert posted(fake, channel) == ["Said once."]
    nonces = [c.json["nonce"] for c in fake.calls_to("POST", rf"^/channels/{channel}/messages$")]
    assert nonces == [f"bruce.{found[0]['id']}.0"] * 2


async def test_a_channel_refused_for_good_keeps_the_reply_unsent(started, fake, fake_llm):
    app = await started()
    fake.fail_next("POST", MESSAGES, status=403, times=10)
    fake_llm.add(Step.text("You will not see this."))
    fake.dm(OWNER, "hello")
    for _ in range(500):
        found = await rows(app, "SELECT status, send_error FROM messages WHERE direction = 'out'")
        if found and found[0]["status"] != "pending":
            break
        await asyncio.sleep(0.02)
    assert found[0]["status"] == "unsent" and "Missing Access" in found[0]["send_error"]
    assert len(fake.calls_to("POST", MESSAGES)) == 1  # permanent: not tried again at once


async def test_a_bad_token_is_a_start_up_error_naming_the_key(dc_config, clock, fake):
    fake.revoked = True
    app = await build_app(dc_config(), clock=clock, environ={})
    try:
        with pytest.raises(ConfigError, match=r"channels\.discord\.token was refused by Discord"):
            await app.start()
    finally:
        await app.stop()


async def test_a_missing_token_is_named(dc_config, clock):
    with pytest.raises(ConfigError, match=r"channels\.discord\.token: required"):
        await build_app(dc_config(token=None), clock=clock, environ={})


async def test_the_message_content_intent_refused_is_a_clear_error(dc_config, clock, fake):
    fake.refuse_privileged_intents = True
    app = await build_app(dc_config(), clock=clock, environ={})
    try:
        with pytest.raises(ConfigError, match="Message Content intent"):
            await app.start()
    finally:
        await app.stop()


async def test_a_tool_turn_shows_a_status_message_deleted_when_the_answer_is_sent(started, fake, fake_llm):
    await started()
    fake_llm.add(Step.tool_calls(("math_calculate", {"expression": "19*23"})), Step.text("19 times 23 is **437**."))
    channel = dm_channel(fake.dm(OWNER, "what is 19*23?"))
    await until(lambda: posted(fake, channel) == ["19 times 23 is **437**."])
    status = next(c for c in fake.calls_to("POST", MESSAGES) if "Calculating" in c.json.get("content", ""))
    deletes = fake.calls_to("DELETE", rf"^/channels/{channel}/messages/\d+$")
    assert len(deletes) == 1
    status_id = int(deletes[0].path.rsplit("/", 1)[1])
    assert status_id in fake.deleted and status_id not in fake.messages
    order = fake.calls
    assert order.index(status) < order.index(deletes[0]) < order.index(fake.calls_to("POST", MESSAGES)[-1])
    assert [m["content"] for m in fake.messages.values()] == ["19 times 23 is **437**."]


async def test_an_approval_button_runs_the_tool_once_and_only_for_the_requester(started, fake, fake_llm, tmp_path):
    app = await started()
    (tmp_path / "notes").mkdir()
    fake_llm.add(Step.tool_calls(("files_write", {"path": "todo.md", "content": "milk\n"})),
                 Step.text("I need your approval to write todo.md."))
    channel = dm_channel(fake.dm(OWNER, "note: milk"))
    await until(lambda: any(buttons(m) for m in fake.messages.values()))
    asking_id, asking = next((i, m) for i, m in fake.messages.items() if buttons(m))
    labels = [(b["label"], b["custom_id"]) for b in buttons(asking)]
    rid = labels[0][1].rsplit(":", 1)[1]
    assert labels == [("Approve", f"bruce:approve:{rid}"), ("Deny", f"bruce:deny:{rid}")]
    assert "Approval needed" in asking["content"]

    fake.press_button(FRIEND, f"bruce:approve:{rid}", asking_id, channel_id=channel)  # someone else's press
    fake.press_button(STRANGER, f"bruce:approve:{rid}", asking_id, channel_id=channel)
    await until(lambda: len(fake.interaction_responses) == 2)
    refusals = [r.json for r in fake.interaction_responses]
    assert all(r["type"] == 4 and r["data"]["flags"] & 64 for r in refusals)  # ephemeral
    assert {r["data"]["content"] for r in refusals} == {
        f"Only the person who asked can decide on request {rid}. Nothing was run.",
        "You are not allowed to decide on this request."}
    assert not (tmp_path / "notes" / "todo.md").exists()

    fake_llm.add(Step.text("Written."))
    fake.press_button(OWNER, f"bruce:approve:{rid}", asking_id, channel_id=channel)
    await until(lambda: (tmp_path / "notes" / "todo.md").exists())
    assert (tmp_path / "notes" / "todo.md").read_text() == "milk\n"
    await until(lambda: posted(fake, channel)[-1:] == ["Written."])
    assert f"Done: files.write ran (request {rid})." in posted(fake, channel)
    decided = fake.interaction_responses[2].json
    assert decided["type"] == 7 and "Approved" in decided["data"]["content"]
    assert all(b["disabled"] for b in buttons(fake.messages[asking_id]))

    fake.press_button(OWNER, f"bruce:approve:{rid}", asking_id, channel_id=channel)  # a second press
    await until(lambda: len(fake.interaction_responses) == 4)
    again = fake.interaction_responses[3].json
    assert again["type"] == 4 and again["data"]["flags"] & 64 and "already handled" in again["data"]["content"]
    await asyncio.sleep(0.2)
    (execution,) = await rows(app, "SELECT status FROM tool_executions WHERE source = 'confirmation'")
    assert execution["status"] == "ok"


async def test_a_press_after_a_restart_still_decides(started, fake, fake_llm, tmp_path):
    app = await started()
    (tmp_path / "notes").mkdir()
    fake_llm.add(Step.tool_calls(("files_write", {"path": "later.md", "content": "eggs\n"})),
                 Step.text("Waiting for your approval."))
    channel = dm_channel(fake.dm(OWNER, "note: eggs"))
    await until(lambda: any(buttons(m) for m in fake.messages.values()))
    asking_id, asking = next((i, m) for i, m in fake.messages.items() if buttons(m))
    rid = buttons(asking)[0]["custom_id"].rsplit(":", 1)[1]
    await app.stop()

    await started()
    fake_llm.add(Step.text("Written after the restart."))
    fake.press_button(OWNER, f"bruce:approve:{rid}", asking_id, channel_id=channel)
    await until(lambda: (tmp_path / "notes" / "later.md").exists())
    assert (tmp_path / "notes" / "later.md").read_text() == "eggs\n"
    assert fake.interaction_responses[-1].json["type"] == 7
    assert "Approved" in fake.messages[asking_id]["content"]
    assert all(b["disabled"] for b in buttons(fake.messages[asking_id]))
    await until(lambda: posted(fake, channel)[-1:] == ["Written after the restart."])


async def test_a_step_up_request_has_no_approve_button(started, fake, fake_llm):
    await started()
    fake_llm.add(Step.tool_calls(("http_post", {"url": "https://example.org/hook", "json": {}})),
                 Step.text("That needs the owner."))
    fake.dm(OWNER, "post it")
    await until(lambda: any(buttons(m) for m in fake.messages.values()))
    asking = next(m for m in fake.messages.values() if buttons(m))
    assert [b["label"] for b in buttons(asking)] == ["Deny"] and "bruce approve" in asking["content"]


async def test_slash_commands(started, fake, fake_llm):
    await started()
    fake.slash_command(STRANGER, "id")
    fake.slash_command(OWNER, "help")
    await until(lambda: len(fake.interaction_responses) == 2)
    answers = {r.json["data"]["content"]: r.json["data"]["flags"] for r in fake.interaction_responses}
    assert answers[f"Your Discord user id is {STRANGER}."] & 64
    assert any(text.startswith("I'm Bruce") for text in answers)
    assert fake_llm.requests == []

    fake_llm.add(Step.text("Nice to meet you, Ana."))
    channel = dm_channel(fake.dm(OWNER, "my name is Ana"))
    await replies(fake, channel, 1)
    fake_llm.add(Step.text("The user is called Ana."))
    fake.slash_command(OWNER, "new")
    texts = await replies(fake, channel, 2)
    assert texts[1] == "Started a fresh conversation. I keep a short summary of what came before."
    assert fake.interaction_responses[-1].json["data"]["flags"] & 64  # the short ack, only for them
    fake.slash_command(OWNER, "jobs")
    texts = await replies(fake, channel, 3)
    assert texts[2] == "No active jobs in this conversation."


async def test_a_file_goes_in_with_its_message_and_a_strangers_costs_nothing(started, fake, fake_llm):
    app = await started()
    fake_llm.add(Step.text("A receipt."))
    channel = dm_channel(fake.dm(OWNER, "what is this?", attachments=[
        {"filename": "receipt.pdf", "content_type": "application/pdf", "data": pdf_with_text()}]))
    assert await replies(fake, channel, 1) == ["A receipt."]
    (stored,) = await rows(app, "SELECT text, attachments FROM messages WHERE direction = 'in'")
    (attachment,) = json.loads(stored["attachments"])
    assert stored["text"] == "what is this?\n\n[document: receipt.pdf]\nInvoice 42: total 17.50 EUR"  # read once
    assert (attachment["kind"], attachment["name"], attachment["mime"]) == ("document", "receipt.pdf", "application/pdf")
    assert attachment["ref"].startswith(fake.base_url) and len(fake.downloads) == 1
    downloads = len(fake.downloads)
    stranger = fake.dm(STRANGER, "", attachments=[{"filename": "cat.png", "content_type": "image/png", "data": png()}],
            stickers=["wave"])
    await asyncio.sleep(0.3)
    assert len(fake_llm.requests) == 1 and len(await rows(app, "SELECT id FROM messages")) == 2
    assert len(fake.downloads) == downloads  # nothing fetched
    assert posted(fake, dm_channel(stranger)) == ["Sorry, I only talk to my owner."]  # as for a text


async def test_a_saved_document_arrives_as_a_file_after_the_reply(started, fake, fake_llm):
    await started()
    fake_llm.add(Step.tool_calls(("artifact_save", {"filename": "trip plan.html", "content": "<h1>Trip</h1>",
                                                    "title": "Trip plan"})),
                 Step.text("Here is your trip plan."))
    channel = dm_channel(fake.dm(OWNER, "plan my trip"))
    await until(lambda: any(c.files for c in fake.calls_to("POST", MESSAGES)))
    upload = next(c for c in fake.calls_to("POST", MESSAGES) if c.files)
    assert upload.json["content"] == "Trip plan" and upload.files[0]["data"] == b"<h1>Trip</h1>"
    assert upload.files[0]["filename"] == "trip-plan.html"
    texts = bot_texts(fake, channel)
    assert texts.index("Here is your trip plan.") < texts.index("Trip plan")


async def test_at_expiry_the_buttons_are_disabled(dc_config, clock, fake, fake_llm, tmp_path):
    config = dc_config()
    config = config.model_copy(update={"tools": config.tools.model_copy(update={"confirmation_ttl_s": 1.0})})
    app = await build_app(config, clock=clock, environ={})
    await app.start()
    try:
        (tmp_path / "notes").mkdir()
        fake_llm.add(Step.tool_calls(("files_write", {"path": "soon.md", "content": "x\n"})),
                     Step.text("Approve within a second."))
        fake.dm(OWNER, "note: x")
        await until(lambda: any(buttons(m) for m in fake.messages.values()))
        asking = next(i for i, m in fake.messages.items() if buttons(m))
        assert not any(b.get("disabled") for b in buttons(fake.messages[asking]))
        await until(lambda: all(b.get("disabled") for b in buttons(fake.messages[asking])), timeout=10)
    finally:
        await app.stop()


async def test_a_gateway_that_never_gets_ready_fails_start_up_clearly(dc_config, clock):
    from bruce.errors import BruceError

    app = await build_app(dc_config(gateway_url="ws://127.0.0.1:9/gateway", ready_timeout_s=1), clock=clock,
                          environ={})
    try:
        with pytest.raises(BruceError, match=r"Discord did not get ready within 1 s"):
            await app.start()
    finally:
        await app.stop()


async def test_discord_down_at_boot_is_retried_until_it_answers(started, fake, fake_llm):
    fake.fail_next("GET", r"^/users/@me$", status=502, message="Bad Gateway", times=2)
    app = await started()  # start-up waits (up to ready_timeout_s) while the login is tried again
    assert len(fake.calls_to("GET", r"^/users/@me$")) == 3
    fake_llm.add(Step.text("Up now."))
    channel = dm_channel(fake.dm(OWNER, "hello"))
    assert await replies(fake, channel, 1) == ["Up now."]
    assert app.control.health()["discord"] is not None
