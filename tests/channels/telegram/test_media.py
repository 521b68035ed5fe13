"""Media through the Telegram channel: real aiogram reading the fake Bot API's updates (voice,
photos, files, stickers, albums) into the attachments the core gets, and ``fetch`` downloading
their bytes over real sockets (``getFile``, then ``/file/bot<token>/<path>``)."""

from __future__ import annotations

import asyncio

import pytest

from bruce.channel import DecisionReport, IncomingMessage, MediaChannel
from bruce.config.schema import TelegramConfig
from bruce.errors import MediaFetchError
from bruce.values import AttachmentKind, DecisionOutcome
from channels.telegram.channel import TelegramChannel
from tests.fakes.clock import FakeClock
from tests.fakes.media_files import jpeg, ogg_opus, pdf_with_text, png
from tests.fakes.telegram_api import FakeTelegramAPI

OWNER = 111
STRANGER = 666
GROUP = -100500
MB = 2**20


class Core:
    """The core as the channel sees it: every message it was given."""

    def __init__(self) -> None:
        self.delivered: list[IncomingMessage] = []

    async def deliver(self, message: IncomingMessage) -> None:
        self.delivered.append(message)

    async def decide(self, conversation_id: str, user_id: str, confirmation_id: str, approve: bool) -> DecisionReport:
        return DecisionReport(DecisionOutcome.APPROVED, "Approved.")


@pytest.fixture
async def api():
    async with FakeTelegramAPI() as fake:
        yield fake


@pytest.fixture
async def channel(api):
    """Start the channel (polling the fake) with a recording core; yields (channel, core)."""
    started: list[TelegramChannel] = []

    async def start(fetch: float = 2.0, **section) -> tuple[TelegramChannel, Core]:
        config = TelegramConfig(enabled=True, token=api.token, api_base=api.base_url, allowed_users=[str(OWNER)],
                                poll_timeout_s=1, **section)
        made = TelegramChannel(config, clock=FakeClock(), fetch_timeout_s=fetch)
        core = Core()
        await made.start(core)
        started.append(made)
        return made, core

    yield start
    for made in started:
        await made.stop()


async def arrived(core: Core, count: int = 1, timeout: float = 20) -> list[IncomingMessage]:
    async with asyncio.timeout(timeout):
        while len(core.delivered) < count:
            await asyncio.sleep(0.02)
    return core.delivered


async def test_a_voice_note_arrives_as_voice_and_fetches_its_exact_bytes(channel, api):
    telegram, core = await channel()
    voice = ogg_opus(2.0)
    api.push_media(OWNER, OWNER, api.voice(voice, duration=2))
    [message] = await arrived(core)
    [attachment] = message.attachments
    assert (message.text, message.sender_id, message.platform_message_id) == ("", str(OWNER), f"{OWNER}:1")
    assert (attachment.kind, attachment.mime, attachment.size, attachment.name, attachment.duration_s,
            attachment.transcript) == (AttachmentKind.VOICE, "audio/ogg", len(voice), "voice.ogg", 2.0, None)
    assert isinstance(telegram, MediaChannel)
    assert await telegram.fetch(attachment, max_bytes=MB) == voice
    [path] = api.downloads
    assert path.startswith("voice/")


async def test_a_voice_notes_platform_transcript_and_a_missing_mime_type(channel, api):
    """The Bot API has no transcript field: aiogram keeps one a server sends (model_extra)."""
    _, core = await channel()
    api.push_media(OWNER, OWNER, api.voice(ogg_opus(1.0), mime_type=None, transcript="  call mum at six "))
    [message] = await arrived(core)
    [attachment] = message.attachments
    assert (attachment.mime, attachment.transcript) == ("audio/ogg", "call mum at six")


async def test_a_photo_is_its_largest_size_with_the_caption_and_that_size_is_fetched(channel, api):
    telegram, core = await channel()
    small, large, medium = jpeg(), jpeg(4000), jpeg(900)
    api.push_media(OWNER, OWNER, api.photo((90, 67, small), (1280, 960, large), (800, 600, medium)),
                   caption="what is this?")
    [message] = await arrived(core)
    [attachment] = message.attachments
    assert message.text == "what is this?"
    assert (attachment.kind, attachment.mime, attachment.name, attachment.size) == (
        AttachmentKind.IMAGE, "image/jpeg", "photo.jpg", len(large))
    assert await telegram.fetch(attachment, max_bytes=MB) == large
    assert len(api.downloads) == 1 and "1280x960" in api.downloads[0]


async def test_a_pdf_is_a_document_and_an_uncompressed_photo_is_an_image(channel, api):
    telegram, core = await channel()
    pdf = pdf_with_text("Invoice 42")
    api.push_media(OWNER, OWNER, api.document(pdf, file_name="invoice.pdf"), caption="sum it up")
    api.push_media(OWNER, OWNER, api.document(png(), file_name="scan.png", mime_type="image/png"))
    api.push_media(OWNER, OWNER, api.audio(b"ID3" + bytes(500), file_name="talk.mp3", duration=42))
    first, second, third = await arrived(core, 3)
    [document], [image], [audio] = first.attachments, second.attachments, third.attachments
    assert first.text == "sum it up"
    assert (document.kind, document.name, document.mime, document.size) == (
        AttachmentKind.DOCUMENT, "invoice.pdf", "application/pdf", len(pdf))
    assert (image.kind, image.name, image.mime) == (AttachmentKind.IMAGE, "scan.png", "image/png")
    assert (audio.kind, audio.name, audio.mime, audio.duration_s) == (AttachmentKind.AUDIO, "talk.mp3", "audio/mpeg", 42)
    assert await telegram.fetch(document, max_bytes=MB) == pdf


async def test_stickers_locations_and_the_like_are_others_with_nothing_to_fetch(channel, api):
    telegram, core = await channel()
    api.push_media(OWNER, OWNER, api.sticker())
    api.push_media(OWNER, OWNER, api.location())
    api.push_media(OWNER, OWNER, {"contact": {"phone_number": "+100", "first_name": "Bo"}})
    api.push_media(OWNER, OWNER, {"dice": {"emoji": "\N{GAME DIE}", "value": 3}})
    messages = await arrived(core, 4)
    assert [(a.kind, a.label, a.ref) for m in messages for a in m.attachments] == [
        (AttachmentKind.OTHER, label, "") for label in ("sticker", "location", "contact", "dice")]
    with pytest.raises(MediaFetchError, match="nothing to download"):
        await telegram.fetch(messages[0].attachments[0], max_bytes=MB)
    assert api.calls_to("sendMessage") == [] and api.calls_to("getFile") == []


async def test_a_strangers_sticker_goes_to_the_core_like_their_text_which_refuses_it(channel, api):
    """The channel answers nothing itself: the core's allow-list (and pairing) decide, as for text."""
    _, core = await channel()
    api.push_media(STRANGER, STRANGER, api.sticker())
    [message] = await arrived(core)
    assert message.sender_id == str(STRANGER) and message.attachments[0].label == "sticker"
    assert api.calls_to("sendMessage") == []


async def test_an_album_is_one_message_with_every_photo_and_the_caption(channel, api):
    telegram, core = await channel()
    photos = [jpeg(n * 100) for n in (1, 2, 3)]
    api.push_message(OWNER, OWNER, "before")
    ids = api.push_album(OWNER, OWNER, [api.photo((90, 67, b"thumb"), (1280, 960, data)) for data in photos],
                         caption="our trip", caption_on=1)
    api.push_message(OWNER, OWNER, "after")
    before, album, after = await arrived(core, 3)
    assert (before.text, album.text, after.text) == ("before", "our trip", "after")
    assert album.platform_message_id == f"{OWNER}:2"  # the first item's: a redelivery is recognised
    assert [a.name for a in album.attachments] == ["photo-1.jpg", "photo-2.jpg", "photo-3.jpg"]
    assert [await telegram.fetch(a, max_bytes=MB) for a in album.attachments] == photos
    await api.wait_for("getUpdates", count=3)
    assert len(ids) == 3 and api.pending_updates == []


async def test_in_a_group_media_needs_a_mention_in_its_caption(channel, api):
    _, core = await channel()
    api.push_media(GROUP, OWNER, api.photo((90, 67, jpeg())), caption="nice", chat_type="supergroup")
    api.push_media(GROUP, OWNER, api.photo((90, 67, jpeg())), caption=f"@{api.bot_username} what is it",
                   chat_type="supergroup")
    [message] = await arrived(core)
    await api.wait_for("getUpdates", count=3)
    assert (message.text, message.private, len(message.attachments)) == ("what is it", False, 1)
    assert len(core.delivered) == 1


async def test_a_file_larger_than_the_limit_is_refused_without_a_download(channel, api):
    telegram, core = await channel()
    api.push_media(OWNER, OWNER, api.document(pdf_with_text(), file_name="big.pdf", size=5 * MB))
    [message] = await arrived(core)
    with pytest.raises(MediaFetchError, match=r"5\.0 MB, more than the 1\.0 MB"):
        await telegram.fetch(message.attachments[0], max_bytes=MB)
    assert api.calls_to("getFile") and api.downloads == []


async def test_a_hanging_download_gives_up_after_the_channels_fetch_time_out(channel, api):
    telegram, core = await channel(fetch=0.5)
    media = api.voice(ogg_opus(1.0))
    api.break_file(media["voice"]["file_id"], hang=True)
    api.push_media(OWNER, OWNER, media)
    [message] = await arrived(core)
    with pytest.raises(MediaFetchError, match="took longer than 0.5 s"):
        await telegram.fetch(message.attachments[0], max_bytes=MB)
    assert len(api.downloads) == 1


async def test_an_album_posted_to_the_webhook_is_one_message(channel, api):
    telegram, core = await channel(mode="webhook", webhook={"url": "https://bruce.example.org/tg",
                                                            "secret_token": "s3cret-token", "port": 0})
    api.webhook["url"] = f"http://127.0.0.1:{telegram.webhook_port}/telegram/webhook"
    api.push_album(OWNER, OWNER, [api.photo((1280, 960, jpeg(n))) for n in (1, 2)], caption="two")
    items = list(api.pending_updates)
    answers = await asyncio.gather(*(api.deliver_webhook({"message": item["message"]}) for item in items))
    assert [status for status, _ in answers] == [200, 200]
    [album] = core.delivered
    assert (album.text, [a.name for a in album.attachments]) == ("two", ["photo-1.jpg", "photo-2.jpg"])
    assert await telegram.fetch(album.attachments[1], max_bytes=MB) == jpeg(2)
