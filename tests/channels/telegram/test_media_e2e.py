"""Telegram media through the whole app: real aiogram against the fake Bot API, the daemon's
wiring (build_app), ``bruce.media`` and the turn, with the fake LLM server. What the user sees:
the reply on Telegram; what the model got: the fake LLM's requests (photos decoded back to bytes)."""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.fakes.llm_server import Step, images_in
from tests.fakes.media_files import jpeg, ogg_opus, pdf_with_text
from tests.fakes.telegram_api import FakeTelegramAPI
from tests.helpers import rows

OWNER = 111
STRANGER = 666
MB = 2**20
HEARS = {"transcription_model": "openai/whisper-1", "vision": True}


@pytest.fixture
async def api():
    async with FakeTelegramAPI() as fake:
        yield fake


@pytest.fixture
def started(make_config, start_app, api, tmp_path):
    """Start the daemon with Telegram on the fake Bot API; keyword arguments are the media block."""

    async def start(**media):
        section = {"enabled": True, "token": api.token, "api_base": api.base_url, "allowed_users": [OWNER],
                   "poll_timeout_s": 1}
        return await start_app(make_config(channels={"telegram": section, "send_backoff_s": 0.01}, media=media))

    return start


async def replies(api: FakeTelegramAPI, chat: int, count: int, timeout: float = 20) -> list[str]:
    async with asyncio.timeout(timeout):
        while len(texts := [c["text"] for c in api.calls_to("sendMessage") if int(c["chat_id"]) == chat]) < count:
            await asyncio.sleep(0.02)
    return texts


def user_text(request: dict) -> str:
    """The text of the last user message the model was sent (its text parts, for one with images)."""
    content = [m for m in request["messages"] if m["role"] == "user"][-1]["content"]
    return content if isinstance(content, str) else " ".join(p.get("text", "") for p in content)


async def test_a_voice_notes_transcript_reaches_the_model_and_the_history(started, api, fake_llm):
    app = await started(**HEARS)
    voice, heard = ogg_opus(3.0), "remind me to call the plumber at five"
    fake_llm.add_transcript(heard)
    fake_llm.add(Step.text("Five o'clock it is."))
    api.push_media(OWNER, OWNER, api.voice(voice, duration=3))
    (reply,) = await replies(api, OWNER, 1)
    assert reply.startswith("🎤") and heard in reply and reply.endswith("Five o'clock it is.")
    (transcription,) = fake_llm.transcriptions
    assert transcription.data == voice and transcription.file_name == "voice.ogg"
    (request,) = fake_llm.requests
    assert user_text(request) == heard
    (stored,) = await rows(app, "SELECT text, attachments FROM messages WHERE direction = 'in'")
    assert stored["text"] == heard and json.loads(stored["attachments"])[0]["transcript"] == heard


async def test_a_photos_largest_size_reaches_the_model_byte_for_byte(started, api, fake_llm):
    await started(vision=True)
    thumb, photo = jpeg(), jpeg(3000)
    fake_llm.add(Step.text("A small grey square."))
    api.push_media(OWNER, OWNER, api.photo((90, 67, thumb), (1280, 960, photo)), caption="what is this?")
    assert await replies(api, OWNER, 1) == ["A small grey square."]
    (request,) = fake_llm.requests
    assert images_in(request) == [("image/jpeg", photo)] and "what is this?" in user_text(request)
    assert len(api.downloads) == 1 and "1280x960" in api.downloads[0]


async def test_an_albums_photos_reach_the_model_in_one_turn(started, api, fake_llm):
    await started(vision=True)
    photos = [jpeg(100), jpeg(200)]
    fake_llm.add(Step.text("Two squares."))
    api.push_album(OWNER, OWNER, [api.photo((1280, 960, p)) for p in photos], caption="and these?", caption_on=1)
    assert await replies(api, OWNER, 1) == ["Two squares."]
    (request,) = fake_llm.requests
    assert images_in(request) == [("image/jpeg", p) for p in photos] and "and these?" in user_text(request)


async def test_a_pdfs_text_reaches_the_model(started, api, fake_llm):
    await started()
    fake_llm.add(Step.text("The total is 17.50 EUR."))
    api.push_media(OWNER, OWNER, api.document(pdf_with_text("Invoice 42: total 17.50 EUR"), file_name="invoice.pdf"),
                   caption="what is the total?")
    assert await replies(api, OWNER, 1) == ["The total is 17.50 EUR."]
    (request,) = fake_llm.requests
    assert "Invoice 42: total 17.50 EUR" in user_text(request) and "what is the total?" in user_text(request)


async def test_an_oversized_file_is_refused_with_no_download_and_no_call(started, api, fake_llm):
    await started(max_file_mb=1)
    api.push_media(OWNER, OWNER, api.document(pdf_with_text(), file_name="big.pdf", size=2 * MB))
    (reply,) = await replies(api, OWNER, 1)
    assert "big.pdf" in reply and "media.max_file_mb" in reply
    assert fake_llm.requests == [] and fake_llm.transcriptions == []
    assert api.calls_to("getFile") == [] and api.downloads == []


async def test_a_sticker_is_answered_with_no_call(started, api, fake_llm):
    app = await started()
    api.push_media(OWNER, OWNER, api.sticker())
    (reply,) = await replies(api, OWNER, 1)
    assert "sticker" in reply and "voice notes, photos and documents" in reply
    assert fake_llm.requests == [] and api.calls_to("getFile") == []
    (stored,) = await rows(app, "SELECT attachments FROM messages WHERE direction = 'in'")
    assert json.loads(stored["attachments"])[0]["label"] == "sticker"


async def test_a_strangers_sticker_is_not_stored_nor_sent_to_the_model(started, api, fake_llm):
    app = await started()
    api.push_media(STRANGER, STRANGER, api.sticker())
    fake_llm.add(Step.text("Hi."))
    api.push_message(OWNER, OWNER, "hello")
    assert await replies(api, OWNER, 1) == ["Hi."]  # handled after the stranger's
    assert len(fake_llm.requests) == 1 and api.calls_to("getFile") == []
    assert [r["sender_id"] for r in await rows(app, "SELECT sender_id FROM messages WHERE direction = 'in'")] == [
        str(OWNER)]


async def test_a_photo_to_a_model_that_cannot_see_is_refused_clearly(started, api, fake_llm):
    await started(vision=False)
    api.push_media(OWNER, OWNER, api.photo((1280, 960, jpeg())))
    (reply,) = await replies(api, OWNER, 1)
    assert "cannot see images" in reply and "llm.model" in reply and "media.vision" in reply
    assert fake_llm.requests == [] and api.downloads == []


async def test_a_hanging_download_gets_a_clear_reply_after_media_fetch_timeout_s(started, api, fake_llm):
    app = await started(fetch_timeout_s=0.5)
    media = api.document(pdf_with_text(), file_name="slow.pdf")
    api.break_file(media["document"]["file_id"], hang=True)
    api.push_media(OWNER, OWNER, media)
    (reply,) = await replies(api, OWNER, 1)
    assert "slow.pdf" in reply and fake_llm.requests == []
    (stored,) = await rows(app, "SELECT status FROM messages WHERE direction = 'in'")
    assert stored["status"] == "failed"
