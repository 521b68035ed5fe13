"""channels.discord.media through the channel: real discord.py against the fake Discord on 127.0.0.1,
messages with files, voice messages and stickers arriving as the core's attachments, and their bytes
fetched from the fake's file server."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator

import pytest

from bruce.channel import Attachment, IncomingMessage
from bruce.config.schema import DiscordConfig
from bruce.errors import MediaFetchError
from bruce.values import AttachmentKind
from channels.discord.channel import DiscordChannel
from tests.fakes.clock import FakeClock
from tests.fakes.discord_api import FakeDiscord, voice_attachment
from tests.fakes.media_files import jpeg, ogg_opus, pdf_with_text

OWNER = 111
MB = 1024 * 1024


class Inbox:
    """The core's door, recording what the channel delivers."""

    def __init__(self) -> None:
        self.messages: asyncio.Queue[IncomingMessage] = asyncio.Queue()

    async def deliver(self, message: IncomingMessage) -> None:
        await self.messages.put(message)

    async def decide(self, *args: object) -> None:
        raise AssertionError("no decisions here")

    async def next(self) -> IncomingMessage:
        return await asyncio.wait_for(self.messages.get(), 10)


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as server:
        yield server


@pytest.fixture
async def channel(fake: FakeDiscord) -> AsyncIterator[tuple[DiscordChannel, Inbox]]:
    section = DiscordConfig(enabled=True, token=fake.token, api_base=fake.api_base, gateway_url=fake.gateway_url,
                            allowed_users=[str(OWNER)], allowed_channels=[str(fake.guild_channel_id)])
    dc = DiscordChannel(section, clock=FakeClock(), fetch_timeout_s=0.5)
    inbox = Inbox()
    await dc.start(inbox)  # type: ignore[arg-type]
    try:
        yield dc, inbox
    finally:
        await dc.stop()


async def test_a_voice_message_arrives_as_voice_and_its_bytes_are_fetched_exactly(fake, channel):
    dc, inbox = channel
    voice = ogg_opus(4.0)
    fake.dm(OWNER, "", attachments=[voice_attachment(voice, 4.0)])
    message = await inbox.next()
    (attachment,) = message.attachments
    assert (message.text, attachment.kind, attachment.mime, attachment.size, attachment.duration_s) == (
        "", AttachmentKind.VOICE, "audio/ogg", len(voice), 4.0)
    assert attachment.ref.startswith(fake.base_url + "/attachments/") and attachment.name == "voice-message.ogg"
    assert await dc.fetch(attachment, max_bytes=20 * MB) == voice
    (download,) = fake.downloads
    assert "Authorization" not in download.headers  # the bot token stays with the API


async def test_several_files_are_one_message_each_of_its_kind(fake, channel):
    dc, inbox = channel
    files = {"photo.jpg": ("image/jpeg", jpeg()), "invoice.pdf": ("application/pdf", pdf_with_text()),
             "song.mp3": ("audio/mpeg", b"ID3 an mp3"), "notes.txt": ("text/plain; charset=utf-8", b"milk, eggs")}
    fake.dm(OWNER, "what are these?", attachments=[{"filename": name, "content_type": mime, "data": data}
                                                   for name, (mime, data) in files.items()])
    message = await inbox.next()
    assert message.text == "what are these?" and inbox.messages.empty()
    assert [(a.kind, a.name, a.mime) for a in message.attachments] == [
        (AttachmentKind.IMAGE, "photo.jpg", "image/jpeg"), (AttachmentKind.DOCUMENT, "invoice.pdf", "application/pdf"),
        (AttachmentKind.AUDIO, "song.mp3", "audio/mpeg"), (AttachmentKind.DOCUMENT, "notes.txt", "text/plain")]
    fetched = [await dc.fetch(a, max_bytes=MB) for a in message.attachments]
    assert fetched == [data for _, data in files.values()]


async def test_a_file_without_a_content_type_is_known_by_its_name(fake, channel):
    _, inbox = channel
    fake.dm(OWNER, "", attachments=[{"filename": "scan.PDF", "data": pdf_with_text()},
                                    {"filename": "blob", "data": b"?"}])
    pdf, blob = (await inbox.next()).attachments
    assert (pdf.kind, pdf.mime) == (AttachmentKind.DOCUMENT, "application/pdf")
    assert (blob.kind, blob.mime) == (AttachmentKind.DOCUMENT, None)


async def test_in_a_guild_a_file_counts_only_with_a_mention_which_is_removed(fake, channel):
    _, inbox = channel
    fake.guild_message(OWNER, "not for the bot", attachments=[{"filename": "a.jpg", "content_type": "image/jpeg",
                                                                "data": jpeg()}])
    fake.guild_message(OWNER, "look at this", mention_bot=True,
                       attachments=[{"filename": "b.jpg", "content_type": "image/jpeg", "data": jpeg()}])
    message = await inbox.next()
    assert (message.text, message.private, [a.name for a in message.attachments]) == ("look at this", False, ["b.jpg"])
    assert inbox.messages.empty()


async def test_a_sticker_and_an_embed_only_message_are_other_with_a_label(fake, channel):
    _, inbox = channel
    fake.dm(OWNER, "", stickers=["wave"])
    fake.dm(OWNER, "", embeds=[{"type": "rich", "title": "A card"}])
    fake.dm(OWNER, "a link", embeds=[{"type": "link", "url": "https://example.org"}])
    sticker, embed, link = [await inbox.next() for _ in range(3)]
    (item,) = sticker.attachments
    assert (item.kind, item.label, item.name) == (AttachmentKind.OTHER, "sticker", None)  # no file name: "the sticker"
    assert item.ref.endswith(".png")
    assert [(a.kind, a.label) for a in embed.attachments] == [(AttachmentKind.OTHER, "embed")]
    assert (link.text, link.attachments) == ("a link", ())


async def test_an_oversized_file_is_refused_before_any_download(fake, channel):
    dc, inbox = channel
    fake.dm(OWNER, "", attachments=[{"filename": "big.jpg", "content_type": "image/jpeg", "data": jpeg(extra=3 * MB)}])
    (attachment,) = (await inbox.next()).attachments
    with pytest.raises(MediaFetchError, match=r"^it is too large \(3.0 MB; the limit is 2.0 MB\)$"):
        await dc.fetch(attachment, max_bytes=2 * MB)
    assert fake.downloads == []
    unknown = dataclasses.replace(attachment, size=None)  # no size given: the server's Content-Length decides
    with pytest.raises(MediaFetchError, match="too large"):
        await dc.fetch(unknown, max_bytes=2 * MB)
    fake.break_file(attachment.ref, chunked=True)  # no length at all: reading stops at the limit
    with pytest.raises(MediaFetchError, match="^it is larger than the limit of 2.0 MB$"):
        await dc.fetch(unknown, max_bytes=2 * MB)
    assert await dc.fetch(unknown, max_bytes=4 * MB) == jpeg(extra=3 * MB)


async def test_gone_failing_cut_and_hanging_downloads_fail_with_a_reason(fake, channel):
    dc, inbox = channel
    data = pdf_with_text() * 20
    fake.dm(OWNER, "", attachments=[{"filename": f"{n}.pdf", "content_type": "application/pdf", "data": data}
                                    for n in ("gone", "down", "cut", "hung")])
    gone, down, cut, hung = (await inbox.next()).attachments
    fake.break_file(gone.ref, status=404)
    fake.break_file(down.ref, status=502)
    fake.break_file(cut.ref, cut_at=100)
    fake.break_file(hung.ref, hang=True)
    reasons = []
    for attachment in (gone, down, cut, hung):
        with pytest.raises(MediaFetchError) as failed:
            await dc.fetch(attachment, max_bytes=MB)
        reasons.append(str(failed.value))
    assert reasons[0] == ("it is no longer available on Discord (its link expires after about a day, or the message "
                          "was deleted); please send it again")
    assert reasons[1] == "Discord failed to send it (502)"
    assert reasons[2].startswith("the download from Discord broke off (")
    assert reasons[3] == "Discord did not send it within 0.5 s"
    fake.dm(OWNER, "", attachments=[{"filename": "ok.pdf", "data": data}])
    (ok,) = (await inbox.next()).attachments
    assert await dc.fetch(ok, max_bytes=MB) == data


async def test_only_web_addresses_are_fetched(fake, channel):
    dc, _ = channel
    for ref in ("file:///etc/passwd", "ftp://127.0.0.1/x", "not a url"):
        with pytest.raises(MediaFetchError, match="no web address"):
            await dc.fetch(Attachment(AttachmentKind.DOCUMENT, ref, name="x"), max_bytes=MB)
    assert fake.downloads == []
