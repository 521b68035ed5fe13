"""Discord attachments through the whole daemon: real discord.py against the fake Discord (REST,
gateway and its file server), the app built from config, the media pipeline, and the fake LLM
(chat and speech to text). What the user sends arrives at the model as it was sent."""

from __future__ import annotations

import asyncio

import pytest

from tests.fakes.discord_api import FakeDiscord, voice_attachment
from tests.fakes.llm_server import Step, images_in
from tests.fakes.media_files import jpeg, ogg_opus, pdf_with_text

OWNER = 111
MB = 1024 * 1024


@pytest.fixture
async def fake():
    async with FakeDiscord() as server:
        yield server


@pytest.fixture
def started(make_config, start_app, fake):
    """An app with Discord on, voice heard through the fake LLM's speech-to-text and images seen."""

    def start(**media):
        section = {"enabled": True, "token": fake.token, "api_base": fake.api_base, "gateway_url": fake.gateway_url,
                   "allowed_users": [OWNER], "ready_timeout_s": 20}
        return start_app(make_config(channels={"discord": section, "send_backoff_s": 0.01},
                                     media={"transcription_model": "openai/whisper-1", "vision": True, **media}))

    return start


async def replies(fake: FakeDiscord, channel_id: int, count: int, timeout: float = 20) -> list[str]:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        texts = [c.json["content"] for c in fake.calls_to("POST", rf"^/channels/{channel_id}/messages$")
                 if isinstance(c.json, dict) and c.json.get("content")]
        if len(texts) >= count:
            return texts
        assert asyncio.get_running_loop().time() < deadline, f"{len(texts)} of {count} replies: {texts}"
        await asyncio.sleep(0.02)


def said_to_model(request: dict) -> str:
    """The text of the last user message of a chat request."""
    content = request["messages"][-1]["content"]
    return content if isinstance(content, str) else " ".join(p["text"] for p in content if p["type"] == "text")


async def test_a_voice_message_is_heard_and_its_transcript_reaches_the_model(started, fake, fake_llm):
    await started()
    voice = ogg_opus(3.0)
    fake_llm.add_transcript("remind me to buy milk")
    fake_llm.add(Step.text("Milk, got it."))
    channel = int(fake.dm(OWNER, "", attachments=[voice_attachment(voice, 3.0)])["channel_id"])
    assert await replies(fake, channel, 1) == ['🎤 "remind me to buy milk"\nMilk, got it.']  # what was heard, quoted
    (heard,) = fake_llm.transcriptions
    assert heard.data == voice and heard.model == "whisper-1"
    assert "remind me to buy milk" in said_to_model(fake_llm.requests[0])


async def test_a_photo_reaches_the_model_byte_for_byte(started, fake, fake_llm):
    await started()
    photo = jpeg(extra=50_000)
    fake_llm.add(Step.text("A tiny picture."))
    channel = int(fake.dm(OWNER, "what is this?", attachments=[
        {"filename": "photo.jpg", "content_type": "image/jpeg", "data": photo}])["channel_id"])
    assert await replies(fake, channel, 1) == ["A tiny picture."]
    assert images_in(fake_llm.requests[0]) == [("image/jpeg", photo)]
    assert "what is this?" in said_to_model(fake_llm.requests[0])


async def test_a_pdfs_text_reaches_the_model(started, fake, fake_llm):
    await started()
    fake_llm.add(Step.text("It is 17.50 EUR."))
    channel = int(fake.dm(OWNER, "how much?", attachments=[
        {"filename": "invoice.pdf", "content_type": "application/pdf",
         "data": pdf_with_text("Invoice 42: total 17.50 EUR")}])["channel_id"])
    assert await replies(fake, channel, 1) == ["It is 17.50 EUR."]
    assert "Invoice 42: total 17.50 EUR" in said_to_model(fake_llm.requests[0])


async def test_an_oversized_file_is_refused_with_no_download_and_no_model_call(started, fake, fake_llm):
    await started(max_file_mb=1)
    channel = int(fake.dm(OWNER, "", attachments=[
        {"filename": "big.jpg", "content_type": "image/jpeg", "data": jpeg(extra=2 * MB)}])["channel_id"])
    assert await replies(fake, channel, 1) == [
        "I did not read big.jpg: it is 2.0 MB, over the 1 MB limit (media.max_file_mb)."]
    assert fake_llm.requests == [] and fake.downloads == []


async def test_a_sticker_is_answered_without_a_model_call(started, fake, fake_llm):
    await started()
    channel = int(fake.dm(OWNER, "", stickers=["wave"])["channel_id"])
    (reply,) = await replies(fake, channel, 1)
    assert reply.startswith("I did not read the sticker: it is a sticker; I only read text, voice notes, photos")
    assert fake_llm.requests == [] and fake.downloads == []


async def test_a_file_discord_no_longer_serves_is_told_with_no_model_call(started, fake, fake_llm):
    await started()
    pdf = pdf_with_text()
    sent = fake.dm(OWNER, "read this", attachments=[{"filename": "old.pdf", "content_type": "application/pdf",
                                                      "data": pdf}])
    fake.break_file(sent["attachments"][0]["url"], status=404)
    assert await replies(fake, int(sent["channel_id"]), 1) == [
        "I could not fetch old.pdf: it is no longer available on Discord (its link expires after about a day, or "
        "the message was deleted); please send it again. Nothing was done."]
    assert fake_llm.requests == [] and len(fake.downloads) == 1
