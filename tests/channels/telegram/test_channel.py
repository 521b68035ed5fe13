"""The Telegram channel end to end: real aiogram against the fake Bot API on 127.0.0.1, the
daemon's real wiring (build_app from config) and the fake LLM server."""

from __future__ import annotations

import asyncio
import json

import aiohttp
import pytest

from bruce.app import build_app
from bruce.errors import ConfigError
from bruce.turns.commands import COMMANDS, help_text
from channels.telegram.updates import ABOUT
from tests.fakes.llm_server import Step
from tests.fakes.telegram_api import FakeTelegramAPI, render_html
from tests.helpers import rows

OWNER = 111
STRANGER = 666


@pytest.fixture
async def api():
    async with FakeTelegramAPI() as fake:
        yield fake


@pytest.fixture
def tg_config(platform_config, api):
    def make(**telegram):
        section = {"enabled": True, "token": api.token, "api_base": api.base_url, "allowed_users": [OWNER],
                   "poll_timeout_s": 1, **telegram}
        return platform_config("telegram", section)
    return make


@pytest.fixture
def started(tg_config, start_app):
    """Start an app with this platform enabled; keyword arguments go into its section."""
    return lambda **telegram: start_app(tg_config(**telegram))


async def replies(api: FakeTelegramAPI, chat: int, count: int, timeout: float = 20) -> list[str]:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        texts = [c["text"] for c in api.calls_to("sendMessage") if int(c["chat_id"]) == chat]
        if len(texts) >= count:
            return texts
        assert asyncio.get_running_loop().time() < deadline, f"{len(texts)} of {count} replies: {texts}"
        await asyncio.sleep(0.02)


async def test_an_allow_listed_user_gets_typing_a_draft_then_the_reply(started, api, fake_llm):
    await started()
    fake_llm.add(Step.tool_calls(("math_calculate", {"expression": "19*23"})), Step.text("19 times 23 is **437**."))
    api.push_message(OWNER, OWNER, "what is 19*23?")
    (reply,) = await replies(api, OWNER, 1)
    assert reply == "19 times 23 is <b>437</b>."
    (sent,) = api.calls_to("sendMessage")
    assert sent["parse_mode"] == "HTML"
    assert api.calls_to("sendChatAction")[0]["action"] == "typing"
    drafts = [c["text"] for c in api.calls_to("sendMessageDraft")]
    assert drafts and drafts[0] == "Calculating…"  # the tool step, shown while it ran
    methods = [c.method for c in api.calls]
    assert methods.index("sendChatAction") < methods.index("sendMessage")
    assert methods.index("sendMessageDraft") < methods.index("sendMessage")


async def test_start_up_deletes_the_webhook_and_registers_the_commands(started, api):
    await started()
    await api.wait_for("getUpdates")
    assert api.calls_to("deleteWebhook") and api.webhook is None
    (commands,) = api.calls_to("setMyCommands")
    assert [c["command"] for c in commands["commands"]] == ["help", "id", "approve", "deny", "new", "jobs", "usage",
                                                               "memory", "forget"]


async def test_the_command_list_and_help_come_from_the_command_table(started, api):
    await started()
    (commands,) = await asyncio.wait_for(_set_commands(api), 20)
    assert commands["commands"] == [{"command": s.name, "description": s.menu_line("Telegram")} for s in COMMANDS]
    api.push_message(OWNER, OWNER, "/help")
    (reply,) = await replies(api, OWNER, 1)
    assert reply == help_text("Bruce", about=ABOUT, platform="Telegram")
    assert all(spec.usage in reply for spec in COMMANDS)


async def _set_commands(api):
    while not api.calls_to("setMyCommands"):
        await asyncio.sleep(0.02)
    return api.calls_to("setMyCommands")


async def test_new_starts_a_fresh_conversation_with_a_summary(started, api, fake_llm):
    await started()
    fake_llm.add(Step.text("Nice to meet you, Ana."))
    api.push_message(OWNER, OWNER, "my name is Ana")
    await replies(api, OWNER, 1)
    fake_llm.add(Step.text("The user is called Ana."))
    api.push_message(OWNER, OWNER, "/new@bruce_test_bot")
    texts = await replies(api, OWNER, 2)
    assert texts[1] == "Started a fresh conversation. I keep a short summary of what came before."
    fake_llm.add(Step.text("Hi Ana."))
    api.push_message(OWNER, OWNER, "hi")
    await replies(api, OWNER, 3)
    last = fake_llm.requests[-1]
    assert [(m["role"], m["content"]) for m in last["messages"][1:]] == [("user", "hi")]
    assert "The user is called Ana." in last["messages"][0]["content"]
    assert len(fake_llm.requests) == 3


async def test_a_saved_document_arrives_as_a_file_after_the_reply(started, api, fake_llm, tmp_path):
    await started()
    fake_llm.add(Step.tool_calls(("artifact_save", {"filename": "trip plan.html", "content": "<h1>Trip</h1>",
                                                    "title": "Trip plan"})),
                 Step.text("Here is your trip plan."))
    api.push_message(OWNER, OWNER, "plan my trip")
    assert await replies(api, OWNER, 1) == ["Here is your trip plan."]
    (document,) = await api.wait_for("sendDocument")
    assert int(document["chat_id"]) == OWNER and document["caption"] == "Trip plan"
    assert (document["document"]["filename"], document["document"]["data"]) == ("trip-plan.html", b"<h1>Trip</h1>")
    methods = [c.method for c in api.calls]
    assert methods.index("sendMessage") < methods.index("sendDocument")


async def test_a_revoked_token_is_a_start_up_error_naming_the_key(tg_config, clock, api):
    api.revoked = True
    app = await build_app(tg_config(), clock=clock, environ={})
    try:
        with pytest.raises(ConfigError, match=r"channels\.telegram\.token was refused by Telegram \(401"):
            await app.start()
    finally:
        await app.stop()


async def test_a_malformed_token_is_named(tg_config, clock):
    with pytest.raises(ConfigError, match=r"channels\.telegram\.token: not a Telegram bot token"):
        await build_app(tg_config(token="not-a-token"), clock=clock, environ={})


async def test_a_long_answer_arrives_as_well_formed_pieces(started, api, fake_llm):
    await started()
    paragraph = ("Bruce keeps every message and every action in one database. " * 12).strip()
    answer = "\n\n".join(f"{i}. {paragraph}" for i in range(12))
    assert 8500 < len(answer) < 9500
    fake_llm.add(Step.text(answer))
    api.push_message(OWNER, OWNER, "tell me everything")
    texts = await replies(api, OWNER, 3)
    await asyncio.sleep(0.3)
    texts = [c["text"] for c in api.calls_to("sendMessage")]
    assert len(texts) == 3 and all(len(t) <= 4096 for t in texts)
    assert "".join(texts).replace("\n", "").replace(" ", "") == answer.replace("\n", "").replace(" ", "")


async def test_malformed_markdown_still_arrives(started, api, fake_llm):
    await started()
    fake_llm.add(Step.text("**unclosed bold and <script>alert(1)</script> and `tick"))
    api.push_message(OWNER, OWNER, "go")
    (reply,) = await replies(api, OWNER, 1)
    assert "<script>" not in reply and "&lt;script&gt;" in reply


async def test_html_telegram_cannot_parse_falls_back_to_plain_text(started, api, fake_llm):
    app = await started()
    api.fail_next("sendMessage", status=400, description="Bad Request: can't parse entities: Unsupported start tag")
    fake_llm.add(Step.text("Here is **bold** text."))
    api.push_message(OWNER, OWNER, "go")
    texts = await replies(api, OWNER, 2)
    assert texts == ["Here is <b>bold</b> text.", "Here is bold text."]
    assert "parse_mode" not in api.calls_to("sendMessage")[-1]
    for _ in range(200):
        (row,) = await rows(app, "SELECT status FROM messages WHERE direction = 'out'")
        if row["status"] != "pending":
            break
        await asyncio.sleep(0.02)
    assert row["status"] == "sent"


async def test_a_button_press_runs_the_tool_once(started, api, fake_llm, tmp_path):
    app = await started()
    (tmp_path / "notes").mkdir()
    fake_llm.add(Step.tool_calls(("files_write", {"path": "todo.md", "content": "milk\n"})),
                 Step.text("I need your approval to write todo.md."))
    api.push_message(OWNER, OWNER, "note: milk")
    request = await api.wait_for("sendMessage", count=2)
    asking = next(c for c in request if "reply_markup" in c)
    buttons = asking["reply_markup"]["inline_keyboard"][0]
    assert [b["text"] for b in buttons] == ["Approve", "Deny"]
    assert "Expires at 09:10 -03 (America/Sao_Paulo)." in asking["text"]  # ten minutes, in the owner's zone
    rid = buttons[0]["callback_data"].split(":", 1)[1]
    assert buttons[0]["callback_data"] == f"approve:{rid}" and len(rid) == 8
    message_id = next(m["message_id"] for m in api.sent_messages[OWNER] if m.get("reply_markup"))

    api.push_callback(OWNER, STRANGER, f"approve:{rid}", message_id)  # someone else's press
    answer = (await api.wait_for("answerCallbackQuery"))[0]
    assert answer.get("show_alert") is True
    assert not (tmp_path / "notes" / "todo.md").exists()

    fake_llm.add(Step.text("Written."))
    api.push_callback(OWNER, OWNER, f"approve:{rid}", message_id)
    await api.wait_for("editMessageText")
    for _ in range(500):
        if (tmp_path / "notes" / "todo.md").exists():
            break
        await asyncio.sleep(0.02)
    assert (tmp_path / "notes" / "todo.md").read_text() == "milk\n"
    texts = await replies(api, OWNER, 4)  # the request, its reply, the outcome, the model's follow-up
    assert f"Done: files.write ran (request {rid})." in texts and texts[-1] == "Written."
    edited = api.calls_to("editMessageText")[-1]
    assert "reply_markup" not in edited or not edited["reply_markup"]
    # the edit keeps the request's formatting (bold title, code spans, the preview's <pre>) and adds the outcome
    assert edited["parse_mode"] == "HTML"
    sent_text, sent_entities = render_html(asking["text"])
    edit_text, edit_entities = render_html(edited["text"])
    assert edit_text.startswith(sent_text + "\n\n")
    assert edit_entities[:len(sent_entities)] == sent_entities
    assert {e["type"] for e in sent_entities} >= {"bold", "code", "pre"}
    assert edit_entities[len(sent_entities):] == [
        {"type": "bold", "offset": len(sent_text) + 2, "length": len(edit_text) - len(sent_text) - 2}]
    assert "&lt;" not in edited["text"]  # no tag of the request written out as text

    api.push_callback(OWNER, OWNER, f"approve:{rid}", message_id)  # a second press
    answers = await api.wait_for("answerCallbackQuery", count=3)
    assert answers[-1].get("show_alert") is True
    await asyncio.sleep(0.2)
    (execution,) = await rows(app, "SELECT status FROM tool_executions WHERE source = 'confirmation'")
    assert execution["status"] == "ok"


async def test_an_approval_request_telegram_refused_for_now_arrives_with_its_buttons(started, api, fake_llm, clock,
                                                                                      tmp_path):
    app = await started()
    (tmp_path / "notes").mkdir()
    api.fail_next("sendMessage", status=429, description="Too Many Requests: retry after 2", retry_after=2,
                  having="reply_markup")  # the reply goes through; the request with buttons is refused once
    fake_llm.add(Step.tool_calls(("files_write", {"path": "todo.md", "content": "milk\n"})),
                 Step.text("I need your approval to write todo.md."))
    api.push_message(OWNER, OWNER, "note: milk")
    await replies(api, OWNER, 3)  # the reply, the request refused, the request again
    sent = api.calls_to("sendMessage")
    assert sent[0]["text"] == "I need your approval to write todo.md."
    refused, asking = sent[1:]
    assert refused["text"] == asking["text"] and 2 in clock.sleeps
    assert [b["text"] for b in asking["reply_markup"]["inline_keyboard"][0]] == ["Approve", "Deny"]
    assert api.sent_messages[OWNER][-1].get("reply_markup")  # it arrived
    for _ in range(500):
        found = await rows(app, "SELECT payload_kind, status FROM messages WHERE direction = 'out' ORDER BY id")
        if [r["status"] for r in found] == ["sent", "sent"]:
            break
        await asyncio.sleep(0.02)
    assert [r["payload_kind"] for r in found] == ["text", "confirmation"] and found[1]["status"] == "sent"


async def test_a_document_telegram_could_not_take_at_first_arrives_once(started, api, fake_llm, clock):
    await started()
    api.fail_next("sendDocument", status=502, description="Bad Gateway")
    fake_llm.add(Step.tool_calls(("artifact_save", {"filename": "plan.html", "content": "<h1>Plan</h1>"})),
                 Step.text("Here is your plan."))
    api.push_message(OWNER, OWNER, "plan it")
    assert await replies(api, OWNER, 1) == ["Here is your plan."]
    refused, document = await api.wait_for("sendDocument", count=2)
    assert document["document"]["data"] == b"<h1>Plan</h1>" == refused["document"]["data"]
    await asyncio.sleep(0.2)
    assert len(api.calls_to("sendDocument")) == 2 and clock.sleeps


async def test_a_step_up_request_has_no_approve_button(started, api, fake_llm):
    await started()
    fake_llm.add(Step.tool_calls(("http_post", {"url": "https://example.org/hook", "json": {}})),
                 Step.text("That needs the owner."))
    api.push_message(OWNER, OWNER, "post it")
    sent = await api.wait_for("sendMessage", count=2)
    asking = [c for c in sent if "reply_markup" in c]
    buttons = asking[0]["reply_markup"]["inline_keyboard"][0]
    assert [b["text"] for b in buttons] == ["Deny"] and "bruce approve" in asking[0]["text"]


async def test_a_rate_limit_is_honoured_and_the_reply_arrives_once(started, api, fake_llm, clock):
    await started()
    api.fail_next("sendMessage", status=429, description="Too Many Requests: retry after 3", retry_after=3)
    fake_llm.add(Step.text("Patience pays."))
    api.push_message(OWNER, OWNER, "hello")
    await replies(api, OWNER, 2)
    await asyncio.sleep(0.2)
    assert [c["text"] for c in api.calls_to("sendMessage")] == ["Patience pays.", "Patience pays."]  # refused, then once
    assert 3 in clock.sleeps


async def test_a_reply_telegram_took_without_answering_is_delivered_again_never_lost(started, api, fake_llm):
    """Telegram stores the reply but its answer never comes: the send gives up after
    ``send_timeout_s``, the outbox tries again, and the chat gets the reply twice. The Bot API has
    no idempotency key: this one duplicate is the documented at-least-once case; losing the reply
    is not."""
    app = await started(send_timeout_s=0.3)
    api.hang_next_answer("sendMessage")
    fake_llm.add(Step.text("Delivered."))
    api.push_message(OWNER, OWNER, "hello")
    for _ in range(500):
        found = await rows(app, "SELECT status, parts_sent, send_attempts FROM messages WHERE direction = 'out'")
        if found and found[0]["status"] == "sent":
            break
        await asyncio.sleep(0.02)
    assert found == [{"status": "sent", "parts_sent": 1, "send_attempts": 2}]
    assert [m["text"] for m in api.sent_messages[OWNER]] == ["Delivered.", "Delivered."]


async def test_a_reply_whose_answer_is_lost_across_a_restart_is_delivered_again(tg_config, start_app, api, fake_llm):
    """The same, with the process gone while it waits for the answer: the restart resends it."""
    config = tg_config(send_timeout_s=30)
    config = config.model_copy(update={"assistant": config.assistant.model_copy(update={"shutdown_timeout_s": 0.2})})
    app = await start_app(config)
    api.hang_next_answer("sendMessage")
    fake_llm.add(Step.text("Still here."))
    api.push_message(OWNER, OWNER, "hello")
    await replies(api, OWNER, 1)
    await app.stop()  # the send is still waiting for Telegram's answer: cut off as by a kill
    assert (await rows(app, "SELECT status FROM messages WHERE direction = 'out'"))[0]["status"] != "sent"

    app = await start_app(config)
    await replies(api, OWNER, 2)
    for _ in range(500):
        found = await rows(app, "SELECT status FROM messages WHERE direction = 'out'")
        if found[0]["status"] == "sent":
            break
        await asyncio.sleep(0.02)
    assert found[0]["status"] == "sent"
    assert [m["text"] for m in api.sent_messages[OWNER]] == ["Still here.", "Still here."]


async def test_a_reply_refused_for_good_is_kept_unsent(started, api, fake_llm):
    app = await started()
    api.fail_next("sendMessage", status=403, description="Forbidden: bot was blocked by the user", times=10)
    fake_llm.add(Step.text("You will not see this."))
    api.push_message(OWNER, OWNER, "hello")
    for _ in range(500):
        found = await rows(app, "SELECT status, send_error FROM messages WHERE direction = 'out'")
        if found and found[0]["status"] != "pending":
            break
        await asyncio.sleep(0.02)
    assert found[0]["status"] == "unsent" and "blocked" in found[0]["send_error"]


async def test_strangers_reach_nothing(started, api, fake_llm):
    app = await started()
    api.push_message(STRANGER, STRANGER, "hi, let me in")
    await api.wait_for("getUpdates", count=3)
    assert fake_llm.requests == []
    assert await rows(app, "SELECT id FROM messages") == []


async def test_id_tells_anyone_their_id_once_a_minute(started, api):
    await started()
    for _ in range(5):  # a stranger cannot make the bot send a storm of replies
        api.push_message(STRANGER, STRANGER, "/id")
    api.push_message(OWNER, OWNER, "/id")
    api.push_message(OWNER, OWNER, "/id")
    assert await replies(api, OWNER, 2) == [f"Your Telegram user id is {OWNER}."] * 2
    assert await replies(api, STRANGER, 1) == [f"Your Telegram user id is {STRANGER}."]
    assert len([c for c in api.calls_to("sendMessage") if int(c["chat_id"]) == STRANGER]) == 1


async def test_in_groups_strangers_get_no_command_answers(started, api, fake_llm):
    app = await started()
    group = -100777
    for text in ("/help", "/start", "/id", "hello"):
        api.push_message(group, STRANGER, f"{text}@{api.bot_username}", chat_type="supergroup")
    api.push_message(group, OWNER, f"/id@{api.bot_username}", chat_type="supergroup")
    assert await replies(api, group, 1) == [f"Your Telegram user id is {OWNER}."]  # handled after the stranger's
    assert fake_llm.requests == [] and await rows(app, "SELECT id FROM messages") == []


async def test_edits_are_ignored(started, api, fake_llm):
    app = await started()
    fake_llm.add(Step.text("Hi."))
    api.push_message(OWNER, OWNER, "hello")
    api.push_edited_message(OWNER, OWNER, "changed my mind")
    assert await replies(api, OWNER, 1) == ["Hi."]
    await api.wait_for("getUpdates", count=4)
    assert [m["content"] for m in fake_llm.requests[0]["messages"][1:]] == ["hello"]
    assert len(fake_llm.requests) == 1 and len(await rows(app, "SELECT id FROM messages WHERE role = 'user'")) == 1


async def test_in_groups_only_a_mention_or_a_reply_to_the_bot_is_answered(started, api, fake_llm):
    app = await started()
    group = -100123
    fake_llm.add(Step.text("Hello group."))
    api.push_message(group, OWNER, "just chatting", chat_type="supergroup")
    api.push_message(group, OWNER, f"ask @{api.bot_username}x instead", chat_type="supergroup")  # another bot
    api.push_message(group, OWNER, f"@{api.bot_username} hello", chat_type="supergroup")
    (reply,) = await replies(api, group, 1)
    assert reply == "Hello group."
    stored = await rows(app, "SELECT text FROM messages WHERE direction = 'in'")
    assert stored == [{"text": "hello"}]
    assert fake_llm.requests[0]["messages"][-1]["content"] == "hello"


async def test_a_burst_in_one_chat_is_stored_in_order(started, api, fake_llm):
    app = await started()
    for i in range(20):
        fake_llm.add(Step.text(f"ok {i}"))
    for i in range(20):
        api.push_message(OWNER, OWNER, f"message {i}")
    await replies(api, OWNER, 20, timeout=60)
    stored = await rows(app, "SELECT text FROM messages WHERE direction = 'in' ORDER BY id")
    assert [r["text"] for r in stored] == [f"message {i}" for i in range(20)]


async def test_polling_survives_conflicts_and_a_hang(started, api, fake_llm):
    await started()
    await api.wait_for("getUpdates")
    api.fail_next("getUpdates", status=409, description="Conflict: terminated by other getUpdates request", times=5)
    api.hang_next_get_updates(15)  # past the 1 s poll time-out + 10 s margin
    await api.wait_for("getUpdates", count=8, timeout=60)
    fake_llm.add(Step.text("Still here."))
    api.push_message(OWNER, OWNER, "are you alive?")
    assert await replies(api, OWNER, 1, timeout=60) == ["Still here."]


async def test_polling_survives_answers_that_are_not_updates(started, api, fake_llm):
    await started()
    await api.wait_for("getUpdates")
    api.answer_next_raw("getUpdates", "<html>502 from a proxy</html>", status=502)
    api.answer_next_raw("getUpdates", '{"ok": true, "result": ' + "[" * 100_000 + "]" * 100_000 + "}")
    api.answer_next_raw("getUpdates", '{"ok": true, "result": {"not": "a list"}}')
    await api.wait_for("getUpdates", count=5, timeout=60)
    fake_llm.add(Step.text("Still here."))
    api.push_message(OWNER, OWNER, "are you alive?")
    assert await replies(api, OWNER, 1, timeout=60) == ["Still here."]


async def test_webhook_mode_checks_the_secret_token(started, api, fake_llm):
    app = await started(mode="webhook", webhook={"url": "https://bruce.example.org/tg", "secret_token": "s3cret-token",
                                                  "port": 0})
    assert api.webhook["url"] == "https://bruce.example.org/tg"
    assert api.webhook["secret_token"] == "s3cret-token"
    port = app.channels["telegram"].webhook_port
    update = {"update_id": 1, "message": {"message_id": 1, "date": 1_700_000_000, "text": "via webhook",
                                          "chat": {"id": OWNER, "type": "private"},
                                          "from": {"id": OWNER, "is_bot": False, "first_name": "Ana"}}}
    url = f"http://127.0.0.1:{port}/telegram/webhook"
    async with aiohttp.ClientSession() as http:
        async with http.post(url, json=update) as response:
            assert response.status == 401
        async with http.post(url, json=update, headers={"X-Telegram-Bot-Api-Secret-Token": "wrong"}) as response:
            assert response.status == 401
        secret = {"X-Telegram-Bot-Api-Secret-Token": "s3cret-token", "Content-Type": "application/json"}
        for bad in ("not json", "[" * 100_000 + "]" * 100_000, '{"update_id": "x"}'):
            async with http.post(url, data=bad, headers=secret) as response:
                assert response.status == 400
        assert fake_llm.requests == []
        fake_llm.add(Step.text("Got it."))
        async with http.post(url, data=json.dumps(update), headers={
                "X-Telegram-Bot-Api-Secret-Token": "s3cret-token", "Content-Type": "application/json"}) as response:
            assert response.status == 200
    assert await replies(api, OWNER, 1) == ["Got it."]
    assert api.calls_to("getUpdates") == []


async def test_webhook_mode_needs_its_url_and_secret(tg_config):
    with pytest.raises(ConfigError, match="webhook mode needs channels.telegram.webhook.url and webhook.secret_token"):
        tg_config(mode="webhook")


async def test_an_unknown_user_pairs_and_is_then_answered(started, api, fake_llm, tmp_path, clock, monkeypatch):
    import re

    import yaml

    from bruce.cli.main import main

    app = await started(pairing=True)
    api.push_message(STRANGER, STRANGER, "hello?", first_name="Bob")
    (told,) = await replies(api, STRANGER, 1)
    code = re.search(r"bruce pairing approve ([A-Z0-9]{8}) \(expires in 1 hour\)", told).group(1)
    assert fake_llm.requests == [] and await rows(app, "SELECT id FROM messages") == []

    config = tmp_path / "pairing.yml"
    config.write_text(yaml.safe_dump({"storage": {"path": str(app.config.storage.path)}}))
    monkeypatch.setattr("bruce.cli.pairing.SystemClock", lambda: clock)  # the code was made on the test's clock
    assert await asyncio.to_thread(main, ["--config", str(config), "pairing", "approve", code]) == 0

    fake_llm.add(Step.text("Nice to meet you, Bob."))
    api.push_message(STRANGER, STRANGER, "hello again")
    assert (await replies(api, STRANGER, 2))[-1] == "Nice to meet you, Bob."


async def test_markdown_that_renders_to_nothing_is_sent_as_written(started, api, fake_llm):
    await started()
    fake_llm.add(Step.text("[x]: https://example.org/a-link-definition"))  # Markdown that shows nothing
    api.push_message(OWNER, OWNER, "go")
    (reply,) = await replies(api, OWNER, 1)
    assert reply == "[x]: https://example.org/a-link-definition"


async def test_groups_can_be_turned_off(started, api, fake_llm):
    app = await started(groups=False)
    api.push_message(-100555, OWNER, f"@{api.bot_username} hello", chat_type="supergroup")
    api.push_message(OWNER, OWNER, "and in private?")
    fake_llm.add(Step.text("Private only."))
    assert await replies(api, OWNER, 1) == ["Private only."]
    assert [r["text"] for r in await rows(app, "SELECT text FROM messages WHERE direction = 'in'")] == [
        "and in private?"]


async def test_a_server_without_drafts_gets_typing_alone(started, api, fake_llm):
    api.refuse_method("sendMessageDraft")
    await started()
    fake_llm.add(Step.tool_calls(("clock_now", {})), Step.text("It is noon."))
    api.push_message(OWNER, OWNER, "time?")
    assert await replies(api, OWNER, 1) == ["It is noon."]
    fake_llm.add(Step.tool_calls(("clock_now", {})), Step.text("Still noon."))
    api.push_message(OWNER, OWNER, "and now?")
    assert (await replies(api, OWNER, 2))[-1] == "Still noon."
    assert len(api.calls_to("sendMessageDraft")) == 1  # refused once, then never tried again
    assert len(api.calls_to("sendChatAction")) >= 2


async def test_one_chat_refusing_a_draft_does_not_turn_drafts_off_for_everyone(started, api, fake_llm):
    await started(allowed_users=[OWNER, 222])
    api.fail_next("sendMessageDraft", status=403, description="Forbidden: bot was blocked by the user")
    fake_llm.add(Step.tool_calls(("clock_now", {})), Step.text("It is noon."))
    api.push_message(222, 222, "time?")
    assert await replies(api, 222, 1) == ["It is noon."]
    assert len(api.calls_to("sendMessageDraft")) == 1  # refused: that turn goes on with typing alone
    fake_llm.add(Step.tool_calls(("clock_now", {})), Step.text("Still noon."))
    api.push_message(OWNER, OWNER, "and for me?")
    assert await replies(api, OWNER, 1) == ["Still noon."]
    assert [int(c["chat_id"]) for c in api.calls_to("sendMessageDraft")][1:2] == [OWNER]  # the owner still sees drafts


async def test_telegram_down_at_boot_does_not_end_the_channel(started, api, fake_llm, clock):
    api.fail_next("getMe", status=502, description="Bad Gateway", times=3)
    await started()  # start-up does not wait for Telegram
    await api.wait_for("getUpdates", timeout=30)
    assert len(api.calls_to("getMe")) == 4 and clock.sleeps[:3] == [1.0, 2.0, 4.0]
    fake_llm.add(Step.text("Up now."))
    api.push_message(OWNER, OWNER, "hello")
    assert await replies(api, OWNER, 1) == ["Up now."]


async def test_doctor_asks_the_running_daemon_when_telegram_last_received(tg_config, clock, api, tmp_path):
    from bruce.app import socket_console
    from bruce.cli.checks.platforms import check_daemon

    config = tg_config().model_copy(update={"console": tg_config().console.model_copy(
        update={"socket_path": tmp_path / "bruce.sock"})})
    assert [f.line() for f in await check_daemon(config)] == [f"– daemon: none answers at {tmp_path / 'bruce.sock'}"]
    app = await build_app(config, clock=clock, environ={}, extra_channels=[socket_console(config, clock)])
    await app.start()
    try:
        await api.wait_for("getUpdates", count=2)  # the first one completed
        lines = [f.line() for f in await check_daemon(config)]
    finally:
        await app.stop()
    assert lines == [f"✓ daemon: running, console socket {tmp_path / 'bruce.sock'}",
                     "✓ telegram: last received from the platform at 2026-12-02 09:00:00 -03 (America/Sao_Paulo)"]


async def test_an_update_aiogram_cannot_read_is_skipped_and_receiving_goes_on(started, api, fake_llm):
    await started()
    await api.wait_for("getUpdates")
    api.push_update({"message": {"message_id": 1, "date": 1_700_000_000, "text": {"not": "text"},
                                 "chat": {"id": OWNER, "type": "private"},
                                 "from": {"id": OWNER, "is_bot": False, "first_name": "Ana"}}})
    fake_llm.add(Step.text("Still listening."))
    api.push_message(OWNER, OWNER, "after the odd one")
    assert await replies(api, OWNER, 1, timeout=30) == ["Still listening."]


async def test_an_update_delivered_again_after_a_crash_is_answered_once(started, api, fake_llm):
    """Telegram sends an update again when the process died before confirming it (kill -9)."""
    app = await started()
    message = {"message_id": 41, "date": 1_700_000_000, "text": "only once, please",
               "chat": {"id": OWNER, "type": "private"}, "from": {"id": OWNER, "is_bot": False, "first_name": "Ana"}}
    fake_llm.add(Step.text("Once."))
    api.push_update({"message": message})
    api.push_update({"message": message})
    assert await replies(api, OWNER, 1) == ["Once."]
    await asyncio.sleep(0.5)
    assert [c["text"] for c in api.calls_to("sendMessage")] == ["Once."] and len(fake_llm.requests) == 1
    assert len(await rows(app, "SELECT id FROM messages WHERE direction = 'in'")) == 1


async def test_a_message_arriving_while_the_database_is_locked_is_kept_by_telegram(tg_config, clock, api, fake_llm):
    """Another process holds the write lock: the update is not confirmed (no next offset), so
    Telegram keeps it; once the lock is gone it is stored and answered, once."""
    from tests.store.test_store_failures import Locker

    config = tg_config()
    config = config.model_copy(update={"storage": config.storage.model_copy(update={"busy_timeout_ms": 50})})
    app = await build_app(config, clock=clock, environ={})
    await app.start()
    await api.wait_for("getUpdates")
    locker = Locker(app.config.storage.path)
    try:
        locker.lock()
        api.push_message(OWNER, OWNER, "written during a backup")
        polls = len(api.calls_to("getUpdates"))
        await api.wait_for("getUpdates", count=polls + 2, timeout=60)  # tried while locked
        assert await rows(app, "SELECT id FROM messages") == []  # (WAL: reading goes on under the lock)
        assert api.pending_updates, "the update must stay with Telegram while it cannot be stored"
        fake_llm.add(Step.text("Stored and answered."))
        locker.unlock()
        assert await replies(api, OWNER, 1, timeout=60) == ["Stored and answered."]
        await asyncio.sleep(0.3)
        assert [c["text"] for c in api.calls_to("sendMessage")] == ["Stored and answered."]
        assert len(await rows(app, "SELECT id FROM messages WHERE direction = 'in'")) == 1
    finally:
        locker.close()
        await app.stop()


def test_the_channel_starts_without_importing_aiogram():
    """aiogram costs seconds of CPU to import: neither the app nor the Telegram channel module
    may import it, so receiving starts at once (channels.telegram.bot loads it in a thread)."""
    import subprocess
    import sys

    code = ("import sys, bruce.app, channels.telegram.channel; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'aiogram'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"


async def test_a_get_me_refused_for_another_reason_names_the_keys_to_check(tg_config, clock, api):
    api.fail_next("getMe", status=404, description="Not Found")
    app = await build_app(tg_config(), clock=clock, environ={})
    try:
        with pytest.raises(ConfigError, match=r"getMe was refused \(404 Not Found\).*channels\.telegram\.api_base"):
            await app.start()
    finally:
        await app.stop()


async def test_a_rate_limited_poll_waits_as_long_as_telegram_asks(started, api, fake_llm, clock):
    await started()
    await api.wait_for("getUpdates")
    api.fail_next("getUpdates", status=429, description="Too Many Requests: retry after 7", retry_after=7)
    polls = len(api.calls_to("getUpdates"))
    await api.wait_for("getUpdates", count=polls + 2)
    assert 7.0 in clock.sleeps
    fake_llm.add(Step.text("Back."))
    api.push_message(OWNER, OWNER, "there?")
    assert await replies(api, OWNER, 1) == ["Back."]


async def test_a_bad_gateway_while_polling_is_logged_backed_off_and_polling_goes_on(started, api, fake_llm, clock):
    """A proxy in front of the Bot API failing for a while: each failure logged with its status, then answered."""
    from structlog.testing import capture_logs

    with capture_logs() as logs:
        await started()
        await api.wait_for("getUpdates")
        api.fail_next("getUpdates", status=502, description="Bad Gateway", times=2)
        polls = len(api.calls_to("getUpdates"))
        await api.wait_for("getUpdates", count=polls + 3)
        fake_llm.add(Step.text("Fine."))
        api.push_message(OWNER, OWNER, "ok?")
        assert await replies(api, OWNER, 1) == ["Fine."]
    failed = [e for e in logs if e["event"] == "telegram.poll_failed"]
    assert [e["attempt"] for e in failed][:2] == [1, 2] and "502" in failed[0]["error"]


async def test_a_reply_to_a_channel_that_is_not_running_is_kept_for_later(tg_config, clock):
    """Before start or after stop there is no bot to send with: the outbox is told to try again later."""
    from bruce.errors import ChannelSendError
    from channels.telegram.channel import TelegramChannel

    channel = TelegramChannel(tg_config().channels.telegram, clock=clock)
    with pytest.raises(ChannelSendError, match="not running") as raised:
        await channel.send_text("111", "hello")
    assert raised.value.retryable
