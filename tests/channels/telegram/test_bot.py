"""channels.telegram.bot, the aiogram half of the Telegram channel, against the fake Bot API over
a real socket: what is sent, how Telegram's refusals reach the outbox (retry or not, and when),
and which calls may fail without anyone hearing of it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bruce.errors import ChannelSendError
from channels.telegram.bot import DRAFT_MAX_CHARS, TelegramBot
from tests.fakes.telegram_api import FakeTelegramAPI

CHAT = 42


@pytest.fixture
async def api() -> AsyncIterator[FakeTelegramAPI]:
    async with FakeTelegramAPI() as api:
        yield api


@pytest.fixture
async def bot(api: FakeTelegramAPI) -> AsyncIterator[TelegramBot]:
    bot = TelegramBot(api.token, api.base_url)
    try:
        yield bot
    finally:
        await bot.close()


async def test_html_is_sent_as_html_with_its_buttons_on_one_row(api: FakeTelegramAPI, bot: TelegramBot) -> None:
    await bot.send_html(CHAT, "<b>Approve?</b>", [("Approve", "approve:ab12"), ("Deny", "deny:ab12")])
    (sent,) = api.calls_to("sendMessage")
    assert (sent["chat_id"], sent["text"], sent["parse_mode"]) == (CHAT, "<b>Approve?</b>", "HTML")
    assert sent["reply_markup"] == {"inline_keyboard": [[{"text": "Approve", "callback_data": "approve:ab12"},
                                                          {"text": "Deny", "callback_data": "deny:ab12"}]]}


async def test_html_telegram_cannot_parse_is_sent_again_as_plain_text(api: FakeTelegramAPI, bot: TelegramBot) -> None:
    api.fail_next("sendMessage", status=400, description="Bad Request: can't parse entities: unclosed tag <b>")
    await bot.send_html(CHAT, "<b>bold &amp; open")
    first, second = api.calls_to("sendMessage")
    assert first["parse_mode"] == "HTML"
    assert second["text"] == "bold & open" and "parse_mode" not in second


@pytest.mark.parametrize(("status", "description", "retry_after", "retryable"), [
    (429, "Too Many Requests: retry after 7", 7, True),
    (500, "Internal Server Error", None, True),
    (502, "Bad Gateway", None, True),
    (400, "Bad Request: chat not found", None, False),
])
async def test_a_refused_send_tells_the_outbox_whether_and_when_to_retry(
        api: FakeTelegramAPI, bot: TelegramBot, status: int, description: str, retry_after: int | None,
        retryable: bool) -> None:
    api.fail_next("sendMessage", status=status, description=description, retry_after=retry_after)
    with pytest.raises(ChannelSendError) as err:
        await bot.send_html(CHAT, "hello")
    assert err.value.retryable is retryable and err.value.retry_after == retry_after
    assert description in err.value.reason


async def test_a_user_who_blocked_the_bot_is_not_retried(api: FakeTelegramAPI, bot: TelegramBot) -> None:
    api.blocked.add(CHAT)
    with pytest.raises(ChannelSendError) as err:
        await bot.send_html(CHAT, "hello")
    assert not err.value.retryable and err.value.reason.startswith("Telegram refused it:")
    with pytest.raises(ChannelSendError):
        await bot.send_document(CHAT, Path(__file__), None)


async def test_a_document_is_uploaded_with_its_caption_cut_to_telegrams_limit(
        api: FakeTelegramAPI, bot: TelegramBot, tmp_path: Path) -> None:
    report = tmp_path / "report.html"
    report.write_text("<h1>Report</h1>")
    await bot.send_document(CHAT, report, "c" * 2000)
    (sent,) = api.calls_to("sendDocument")
    assert sent["document"]["filename"] == "report.html" and sent["document"]["size"] == len("<h1>Report</h1>")
    assert sent["caption"] == "c" * 1024
    await bot.send_document(CHAT, report, None)
    assert "caption" not in api.calls_to("sendDocument")[1]


async def test_best_effort_calls_swallow_a_refusal(api: FakeTelegramAPI, bot: TelegramBot) -> None:
    api.blocked.add(CHAT)
    await bot.send_plain(CHAT, "Your id is 42")
    await bot.typing(CHAT)
    assert len(api.calls_to("sendMessage")) == 1 and api.calls_to("sendChatAction") == [
        {"chat_id": CHAT, "action": "typing"}]


async def test_a_draft_is_shown_refused_or_unsupported(api: FakeTelegramAPI, bot: TelegramBot) -> None:
    assert await bot.draft(CHAT, 7, "x" * (DRAFT_MAX_CHARS + 50)) == "shown"
    (sent,) = api.calls_to("sendMessageDraft")
    assert (sent["draft_id"], len(sent["text"])) == (7, DRAFT_MAX_CHARS)
    api.fail_next("sendMessageDraft", status=400, description="Bad Request: draft can't be sent in this chat")
    assert await bot.draft(CHAT, 7, "more") == "refused"
    api.fail_next("sendMessageDraft", status=500)
    assert await bot.draft(CHAT, 7, "more") == "shown"  # a hiccup: the next one may go through
    api.refuse_method("sendMessageDraft")
    assert await bot.draft(CHAT, 7, "more") == "unsupported"


async def test_a_decided_request_is_edited_to_show_the_outcome_without_its_buttons(
        api: FakeTelegramAPI, bot: TelegramBot) -> None:
    await bot.send_html(CHAT, "Approve files.write <x>?", [("Approve", "approve:ab12")])
    message_id = api.sent_messages[CHAT][-1]["message_id"]
    assert "reply_markup" in api.messages[(CHAT, message_id)]
    api.push_callback(CHAT, CHAT, "approve:ab12", message_id)
    update = bot.read_update(api.pending_updates[-1])
    query = update.callback_query
    assert query is not None and query.data == "approve:ab12" and query.message is not None
    await bot.answer_button(query, "Approved " + "!" * 300, alert=False)
    (answered,) = api.calls_to("answerCallbackQuery")
    assert answered["text"] == ("Approved " + "!" * 300)[:200]
    await bot.show_outcome(query.message, "Approved: <files.write> is running")  # type: ignore[arg-type]
    (edit,) = api.calls_to("editMessageText")
    assert edit["message_id"] == message_id and edit["parse_mode"] == "HTML"
    assert edit["text"].endswith("\n\n<b>Approved: &lt;files.write&gt; is running</b>")
    assert "reply_markup" not in api.messages[(CHAT, message_id)]


def test_an_update_that_does_not_parse_is_a_value_error() -> None:
    bot = TelegramBot("123456:TEST-token-abcdefghij", None)
    with pytest.raises(ValueError):
        bot.read_update({"update_id": "not a number", "message": 5})
