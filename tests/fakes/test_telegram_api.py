"""Prove FakeTelegramAPI works end to end through a real aiogram 3 Bot."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiogram import Bot
from aiogram.client.session.aiohttp import AiohttpSession
from aiogram.client.telegram import TelegramAPIServer
from aiogram.exceptions import (
    TelegramBadRequest,
    TelegramConflictError,
    TelegramForbiddenError,
    TelegramNetworkError,
    TelegramNotFound,
    TelegramRetryAfter,
    TelegramServerError,
    TelegramUnauthorizedError,
)
from aiogram.types import BotCommand, BufferedInputFile, InlineKeyboardButton, InlineKeyboardMarkup, Update

from tests.fakes.telegram_api import FakeTelegramAPI

KEYBOARD = InlineKeyboardMarkup(inline_keyboard=[[InlineKeyboardButton(text="Yes", callback_data="ok:1")]])


@pytest.fixture
async def api() -> AsyncIterator[FakeTelegramAPI]:
    async with FakeTelegramAPI() as server:
        yield server


def make_bot(api: FakeTelegramAPI, token: str | None = None) -> Bot:
    return Bot(token or api.token, session=AiohttpSession(api=TelegramAPIServer.from_base(api.base_url)))


@pytest.fixture
async def bot(api: FakeTelegramAPI) -> AsyncIterator[Bot]:
    client = make_bot(api)
    yield client
    await client.session.close()


async def test_get_me(api: FakeTelegramAPI, bot: Bot) -> None:
    me = await bot.get_me()
    assert (me.id, me.is_bot, me.username, me.first_name) == (999, True, "bruce_test_bot", "Bruce")
    assert me.can_join_groups is True and me.can_read_all_group_messages is False
    assert [call.method for call in api.calls] == ["getMe"]
    assert api.calls_to("GETME") == [{}]


async def test_send_message_ids_and_recorded_params(api: FakeTelegramAPI, bot: Bot) -> None:
    first = await bot.send_message(42, "hello <b>you</b>", parse_mode="HTML", reply_markup=KEYBOARD)
    second = await bot.send_message(42, "again")
    other = await bot.send_message(-1007, "123")
    assert (first.message_id, second.message_id, other.message_id) == (1, 2, 1)
    assert first.text == "hello <b>you</b>" and first.chat.id == 42 and first.from_user is not None
    assert first.from_user.id == 999
    assert first.reply_markup is not None and second.reply_markup is None
    assert first.reply_markup.inline_keyboard[0][0].callback_data == "ok:1"
    assert other.chat.type == "supergroup"
    params = (await api.wait_for("sendmessage", 3))[0]
    assert params["chat_id"] == 42 and params["parse_mode"] == "HTML"
    assert params["reply_markup"] == {"inline_keyboard": [[{"text": "Yes", "callback_data": "ok:1"}]]}
    assert api.calls_to("sendMessage")[2]["text"] == "123"  # a text field stays a string
    assert [m["text"] for m in api.sent_messages[42]] == ["hello <b>you</b>", "again"]


async def test_send_message_checks_text_and_reply(api: FakeTelegramAPI, bot: Bot) -> None:
    with pytest.raises(TelegramBadRequest, match="message is too long"):
        await bot.send_message(42, "x" * 4097)
    await bot.send_message(42, "<b>" + "x" * 4096 + "</b>", parse_mode="HTML")  # tags are not counted
    with pytest.raises(TelegramBadRequest, match="message to be replied not found"):
        await bot.send_message(42, "hi", reply_to_message_id=77)
    api.push_message(42, 42, "question")
    reply = await bot.send_message(42, "answer", reply_to_message_id=2)
    assert reply.reply_to_message is not None and reply.reply_to_message.text == "question"
    api.blocked.add(42)
    with pytest.raises(TelegramForbiddenError, match="blocked"):
        await bot.send_message(42, "still there?")


async def test_get_updates_long_polls_for_pushed_message(api: FakeTelegramAPI, bot: Bot) -> None:
    poll = asyncio.create_task(bot.get_updates(timeout=20, allowed_updates=["message", "callback_query"]))
    await api.wait_for("getUpdates")
    await asyncio.sleep(0.2)
    assert not poll.done()  # waiting for an update
    update_id = api.push_message(42, 7, "hi Bruce", username="ana", first_name="Ana")
    updates = await asyncio.wait_for(poll, 10)
    assert [u.update_id for u in updates] == [update_id]
    message = updates[0].message
    assert isinstance(updates[0], Update) and message is not None
    assert (message.chat.id, message.chat.type, message.text, message.message_id) == (42, "private", "hi Bruce", 1)
    assert message.from_user is not None and (message.from_user.id, message.from_user.username) == (7, "ana")
    assert api.calls_to("getUpdates")[0]["allowed_updates"] == ["message", "callback_query"]
    assert api.allowed_updates == ["message", "callback_query"]


async def test_get_updates_times_out_empty(api: FakeTelegramAPI, bot: Bot) -> None:
    assert await bot.get_updates(timeout=1) == []
    assert api.calls_to("getUpdates") == [{"timeout": 1}]


async def test_offset_confirms_updates(api: FakeTelegramAPI, bot: Bot) -> None:
    ids = [api.push_message(42, 42, f"m{i}") for i in range(3)]
    assert [u.update_id for u in await bot.get_updates()] == ids
    assert [u.update_id for u in await bot.get_updates()] == ids  # not confirmed yet: again
    assert [u.update_id for u in await bot.get_updates(offset=ids[1])] == ids[1:]
    assert [u.update_id for u in await bot.get_updates(limit=1)] == ids[1:2]
    assert await bot.get_updates(offset=ids[2] + 1) == []
    assert api.pending_updates == []
    later = api.push_message(42, 42, "later")
    assert later == ids[2] + 1
    updates = await bot.get_updates(offset=ids[2] + 1)
    assert updates[0].message is not None and updates[0].message.message_id == 4


async def test_allowed_updates_filter(api: FakeTelegramAPI, bot: Bot) -> None:
    api.push_edited_message(42, 42, "edited")
    wanted = api.push_message(42, 42, "new")
    assert [u.update_id for u in await bot.get_updates(allowed_updates=["message"])] == [wanted]


async def test_edited_message_and_group_message(api: FakeTelegramAPI, bot: Bot) -> None:
    sent = await bot.send_message(-100, "from the bot")
    api.push_message(-100, 7, "@bruce_test_bot look", chat_type="supergroup", reply_to_message_id=sent.message_id,
                     photo=True)
    api.push_message(-100, 7, "/start@bruce_test_bot", chat_type="supergroup")
    api.push_edited_message(-100, 7, "/help")
    photo, command, edited = [u for u in await bot.get_updates()]
    assert photo.message is not None and photo.message.chat.type == "supergroup" and photo.message.chat.title
    assert photo.message.caption == "@bruce_test_bot look" and len(photo.message.photo or []) == 2
    replied = photo.message.reply_to_message
    assert replied is not None and replied.from_user is not None and replied.from_user.id == 999
    assert [(e.type, e.offset, e.length) for e in photo.message.caption_entities or []] == [("mention", 0, 15)]
    assert command.message is not None
    assert [(e.type, e.length) for e in command.message.entities or []] == [("bot_command", 21)]
    assert edited.edited_message is not None and edited.edited_message.message_id == command.message.message_id
    assert edited.edited_message.text == "/help" and edited.edited_message.edit_date is not None


async def test_callback_query(api: FakeTelegramAPI, bot: Bot) -> None:
    sent = await bot.send_message(42, "approve?", reply_markup=KEYBOARD)
    first = api.push_callback(42, 42, "ok:1", sent.message_id)
    second = api.push_callback(42, 42, "ok:1", sent.message_id)
    updates = await bot.get_updates(offset=first)
    queries = [u.callback_query for u in updates]
    assert [u.update_id for u in updates] == [first, second]
    assert queries[0] is not None and queries[1] is not None and queries[0].id != queries[1].id
    assert queries[0].data == "ok:1" and queries[0].message is not None
    assert queries[0].message.message_id == sent.message_id
    assert queries[0].message.reply_markup is not None  # type: ignore[union-attr]
    assert await bot.answer_callback_query(queries[0].id, text="done") is True
    assert api.calls_to("answerCallbackQuery")[0] == {"callback_query_id": queries[0].id, "text": "done"}
    with pytest.raises(TelegramBadRequest, match="query is too old"):
        await bot.answer_callback_query("nope")


async def test_retry_after(api: FakeTelegramAPI, bot: Bot) -> None:
    api.fail_next("sendMessage", status=429, description="Too Many Requests: retry after 7", retry_after=7)
    with pytest.raises(TelegramRetryAfter) as info:
        await bot.send_message(42, "hi")
    assert info.value.retry_after == 7
    assert (await bot.send_message(42, "hi")).message_id == 1  # only the next call failed
    assert len(api.calls_to("sendMessage")) == 2


async def test_cant_parse_entities(api: FakeTelegramAPI, bot: Bot) -> None:
    api.fail_next("sendMessage", status=400,
                  description='Bad Request: can\'t parse entities: Unsupported start tag "x" at byte offset 0')
    with pytest.raises(TelegramBadRequest, match="can't parse entities"):
        await bot.send_message(42, "<x>", parse_mode="HTML")
    await bot.send_message(42, "x")


async def test_fail_times_and_server_error(api: FakeTelegramAPI, bot: Bot) -> None:
    api.fail_next("getMe", times=2)
    for _ in range(2):
        with pytest.raises(TelegramServerError):
            await bot.get_me()
    assert (await bot.get_me()).id == 999


async def test_revoked_and_wrong_token(api: FakeTelegramAPI, bot: Bot) -> None:
    api.revoked = True
    with pytest.raises(TelegramUnauthorizedError, match="Unauthorized"):
        await bot.get_me()
    api.revoked = False
    stranger = make_bot(api, token="42:some-other-token")
    try:
        with pytest.raises(TelegramUnauthorizedError):
            await stranger.send_message(42, "hi")
    finally:
        await stranger.session.close()
    assert [call.method for call in api.calls] == ["getMe", "sendMessage"]


async def test_send_document(api: FakeTelegramAPI, bot: Bot) -> None:
    sent = await bot.send_document(42, BufferedInputFile(b"col\n1\n", filename="report.csv"), caption="here")
    assert sent.document is not None and sent.document.file_name == "report.csv" and sent.caption == "here"
    assert sent.document.file_id and sent.document.file_unique_id
    params = api.calls_to("sendDocument")[0]
    assert params["chat_id"] == 42 and params["caption"] == "here"
    assert (params["document"]["filename"], params["document"]["size"]) == ("report.csv", 6)
    assert params["document"]["data"] == b"col\n1\n"
    assert set(params) == {"chat_id", "caption", "document"}  # the attach:// part is folded in
    assert api.sent_messages[42][0]["document"]["file_name"] == "report.csv"


async def test_refused_method(api: FakeTelegramAPI, bot: Bot) -> None:
    assert await bot.send_message_draft(42, draft_id=1, text="typing...") is True
    api.refuse_method("sendMessageDraft")
    with pytest.raises(TelegramNotFound, match="method not found"):
        await bot.send_message_draft(42, draft_id=1, text="more")
    assert [p["text"] for p in api.calls_to("sendMessageDraft")] == ["typing...", "more"]


async def test_hanging_get_updates(api: FakeTelegramAPI, bot: Bot) -> None:
    api.hang_next_get_updates(30)
    api.push_message(42, 42, "waiting")
    with pytest.raises(TelegramNetworkError, match="timeout"):
        await bot.get_updates(timeout=0, request_timeout=1)
    assert len(await bot.get_updates(timeout=0)) == 1  # the next poll answers; nothing was lost


async def test_edit_message_reply_markup(api: FakeTelegramAPI, bot: Bot) -> None:
    sent = await bot.send_message(42, "approve?", reply_markup=KEYBOARD)
    edited = await bot.edit_message_reply_markup(chat_id=42, message_id=sent.message_id)
    assert not isinstance(edited, bool) and edited.reply_markup is None
    assert "reply_markup" not in api.sent_messages[42][0]
    with pytest.raises(TelegramBadRequest, match="message is not modified"):
        await bot.edit_message_reply_markup(chat_id=42, message_id=sent.message_id)
    other = InlineKeyboardMarkup(inline_keyboard=[[InlineKeyboardButton(text="No", callback_data="no")]])
    await bot.edit_message_reply_markup(chat_id=42, message_id=sent.message_id, reply_markup=other)
    assert api.sent_messages[42][0]["reply_markup"]["inline_keyboard"][0][0]["text"] == "No"
    with pytest.raises(TelegramBadRequest, match="message to edit not found"):
        await bot.edit_message_reply_markup(chat_id=42, message_id=99)


async def test_edit_message_text_and_delete(api: FakeTelegramAPI, bot: Bot) -> None:
    sent = await bot.send_message(42, "draft", reply_markup=KEYBOARD)
    edited = await bot.edit_message_text("final", chat_id=42, message_id=sent.message_id)
    assert not isinstance(edited, bool) and edited.text == "final" and edited.reply_markup is None
    assert api.sent_messages[42][0]["text"] == "final" and api.sent_messages[42][0]["edit_date"]
    with pytest.raises(TelegramBadRequest, match="not modified"):
        await bot.edit_message_text("final", chat_id=42, message_id=sent.message_id)
    api.push_message(42, 42, "mine")
    with pytest.raises(TelegramBadRequest, match="can't be edited"):
        await bot.edit_message_text("theirs", chat_id=42, message_id=2)
    assert await bot.delete_message(42, sent.message_id) is True
    assert api.sent_messages[42] == []
    with pytest.raises(TelegramBadRequest, match="message to delete not found"):
        await bot.delete_message(42, sent.message_id)


async def test_other_methods(api: FakeTelegramAPI, bot: Bot) -> None:
    assert await bot.send_chat_action(42, "typing") is True
    assert await bot.set_my_commands([BotCommand(command="help", description="what I can do")]) is True
    assert [c.command for c in await bot.get_my_commands()] == ["help"]
    assert api.commands == [{"command": "help", "description": "what I can do"}]
    assert await bot.delete_my_commands() is True and api.commands == []
    assert api.calls_to("sendChatAction") == [{"chat_id": 42, "action": "typing"}]


async def test_webhook(api: FakeTelegramAPI, bot: Bot) -> None:
    api.push_message(42, 42, "queued")
    assert await bot.set_webhook("https://bruce.example/tg", secret_token="s3cret",
                                 allowed_updates=["message"]) is True
    assert api.webhook is not None and api.webhook["url"] == "https://bruce.example/tg"
    assert api.webhook["allowed_updates"] == ["message"] and api.webhook["secret_token"] == "s3cret"
    info = await bot.get_webhook_info()
    assert (info.url, info.has_custom_certificate, info.pending_update_count) == ("https://bruce.example/tg", False, 1)
    with pytest.raises(TelegramConflictError, match="webhook is active"):
        await bot.get_updates()
    assert await bot.delete_webhook(drop_pending_updates=True) is True
    assert api.webhook is None and (await bot.get_webhook_info()).url == ""
    assert await bot.get_updates() == []


async def test_deliver_webhook(api: FakeTelegramAPI, bot: Bot) -> None:
    got: list[tuple[str, dict]] = []

    async def hook(request: aiohttp.web.Request) -> aiohttp.web.Response:
        got.append((request.headers.get("X-Telegram-Bot-Api-Secret-Token", ""), await request.json()))
        return aiohttp.web.json_response({"ok": True})

    app = aiohttp.web.Application()
    app.router.add_post("/tg", hook)
    runner = aiohttp.web.AppRunner(app)
    await runner.setup()
    await aiohttp.web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        await bot.set_webhook(f"http://127.0.0.1:{runner.addresses[0][1]}/tg", secret_token="s3cret")
        status, _ = await api.deliver_webhook({"message": {"message_id": 1, "date": 0, "chat": {"id": 1, "type": "private"}}})
        assert status == 200 and got[0][0] == "s3cret" and got[0][1]["update_id"] == 1
    finally:
        await runner.cleanup()


async def test_second_poller_conflicts(api: FakeTelegramAPI, bot: Bot) -> None:
    first = asyncio.create_task(bot.get_updates(timeout=20))
    await api.wait_for("getUpdates")
    second = asyncio.create_task(bot.get_updates(timeout=20))
    with pytest.raises(TelegramConflictError, match="terminated by other getUpdates"):
        await asyncio.wait_for(first, 10)
    api.push_message(42, 42, "hi")
    assert len(await asyncio.wait_for(second, 10)) == 1


async def test_raw_requests() -> None:
    async with FakeTelegramAPI(token="1:abc", bot_username="other_bot", bot_id=5) as api:
        async with aiohttp.ClientSession() as http:
            async with http.post(f"{api.base_url}/bot1:abc/sendMessage",
                                 json={"chat_id": "7", "text": "json", "reply_markup": '{"inline_keyboard": []}'}) as r:
                body = await r.json()
                assert r.status == 200 and body["result"]["chat"]["id"] == 7 and body["result"]["from"]["id"] == 5
            async with http.get(f"{api.base_url}/bot1:abc/getme") as r:
                assert (await r.json())["result"]["username"] == "other_bot"
            async with http.post(f"{api.base_url}/bot1:abc/noSuchMethod") as r:
                assert r.status == 404
                assert await r.json() == {"ok": False, "error_code": 404, "description": "Not Found"}
            async with http.post(f"{api.base_url}/bot2:xyz/getMe") as r:
                assert r.status == 401
                assert await r.json() == {"ok": False, "error_code": 401, "description": "Unauthorized"}
        assert api.calls_to("sendMessage")[0]["reply_markup"] == {"inline_keyboard": []}
        assert [c.method for c in api.calls] == ["sendMessage", "getMe", "noSuchMethod", "getMe"]


async def test_wait_for_reports_what_it_saw(api: FakeTelegramAPI, bot: Bot) -> None:
    await bot.send_message(42, "one")
    with pytest.raises(AssertionError, match=r"saw 1.*'one'"):
        await api.wait_for("sendMessage", 2, timeout=0.3)
    later = asyncio.create_task(api.wait_for("sendMessage", 2))
    await bot.send_message(42, "two")
    assert [p["text"] for p in await asyncio.wait_for(later, 5)] == ["one", "two"]


async def test_close_ends_long_poll_and_leaves_no_task() -> None:
    api = FakeTelegramAPI()
    await api.start()
    bot = make_bot(api)
    try:
        poll = asyncio.create_task(bot.get_updates(timeout=30))
        await api.wait_for("getUpdates")
        await asyncio.wait_for(api.close(), 5)
        assert await asyncio.wait_for(poll, 5) == []
    finally:
        await bot.session.close()
    others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    assert others == []


async def test_a_send_taken_but_never_answered_times_out_with_the_message_delivered(api: FakeTelegramAPI) -> None:
    bot = Bot(api.token, session=AiohttpSession(api=TelegramAPIServer.from_base(api.base_url), timeout=0.3))
    api.hang_next_answer("sendMessage")
    with pytest.raises(TelegramNetworkError):
        await bot.send_message(42, "taken")
    assert [m["text"] for m in api.sent_messages[42]] == ["taken"]
    await bot.send_message(42, "answered")  # only the next call was hung
    assert [m["text"] for m in api.sent_messages[42]] == ["taken", "answered"]
    await bot.session.close()


async def test_get_file_and_its_download_serve_the_registered_bytes(api: FakeTelegramAPI, bot: Bot) -> None:
    file_id = api.add_file(b"%PDF-1.4 hello", name="a.pdf")
    info = await bot.get_file(file_id)
    assert (info.file_id, info.file_size) == (file_id, 14) and info.file_path
    downloaded = await bot.download_file(info.file_path)
    assert downloaded is not None and downloaded.read() == b"%PDF-1.4 hello"
    assert api.downloads == [info.file_path]


async def test_get_file_refuses_an_unknown_id_and_a_file_over_20_mb(api: FakeTelegramAPI, bot: Bot) -> None:
    with pytest.raises(TelegramBadRequest, match="invalid file_id"):
        await bot.get_file("nope")
    with pytest.raises(TelegramBadRequest, match="file is too big"):
        await bot.get_file(api.add_file(b"x", size=21 * 2**20))


async def test_a_broken_download_answers_its_status_is_cut_short_or_hangs(api: FakeTelegramAPI) -> None:
    gone, failing, cut, hanging = (api.add_file(bytes(10_000)) for _ in range(4))
    api.break_file(gone, status=404)
    api.break_file(failing, status=500)
    api.break_file(cut, cut_at=100)
    api.break_file(hanging, hang=True)
    url = f"{api.base_url}/file/bot{api.token}/" + "{}"
    async with aiohttp.ClientSession() as session:
        for file_id, status in ((gone, 404), (failing, 500)):
            async with session.get(url.format(api.files[file_id].path)) as response:
                assert response.status == status
        async with session.get(url.format(api.files[cut].path)) as response:
            assert response.content_length == 10_000
            with pytest.raises(aiohttp.ClientPayloadError):
                await response.read()
        with pytest.raises(TimeoutError):
            async with session.get(url.format(api.files[hanging].path), timeout=aiohttp.ClientTimeout(total=0.3)):
                pass
        async with session.get(f"{api.base_url}/file/botWRONG:token/{api.files[gone].path}") as response:
            assert response.status == 401
    assert len(api.downloads) == 5


async def test_media_updates_and_an_album_read_as_aiogram_types(api: FakeTelegramAPI, bot: Bot) -> None:
    api.push_media(42, 42, api.voice(b"OggS", duration=4, transcript="hi there"))
    api.push_media(42, 42, api.document(b"%PDF", file_name="x.pdf"), caption="see @bruce_test_bot")
    api.push_album(42, 42, [api.photo((90, 60, b"s"), (800, 600, b"large")), api.photo((90, 60, b"t"))],
                   caption="trip", caption_on=1)
    api.push_media(-100, 42, api.location(), chat_type="supergroup")
    voice, document, first, second, location = await bot.get_updates()
    assert voice.message and voice.message.voice and voice.message.voice.duration == 4
    assert voice.message.voice.model_extra == {"transcript": "hi there"}
    assert document.message and document.message.document and document.message.document.file_name == "x.pdf"
    assert [(e.type, e.offset) for e in document.message.caption_entities or []] == [("mention", 4)]
    assert first.message and second.message and first.message.media_group_id == second.message.media_group_id
    assert (first.message.caption, second.message.caption) == (None, "trip")
    assert [p.width for p in first.message.photo or []] == [90, 800]
    assert location.message and location.message.location and location.message.chat.type == "supergroup"
    large = (first.message.photo or [])[-1]
    info = await bot.get_file(large.file_id)
    assert info.file_path and (await bot.download_file(info.file_path)).read() == b"large"  # type: ignore[union-attr]


def test_render_html_gives_the_visible_text_and_entities_as_telegram_does():
    from tests.fakes.telegram_api import render_html

    text, entities = render_html('<b>Approval</b> é <code>a&lt;b</code>\n<a href="https://x.org">link</a>')
    assert text == "Approval é a<b\nlink"
    assert entities == [{"type": "bold", "offset": 0, "length": 8}, {"type": "code", "offset": 11, "length": 3},
                        {"type": "text_link", "offset": 15, "length": 4, "url": "https://x.org"}]
