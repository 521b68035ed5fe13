"""The web chat's uploads folder (channels/web_uploads.py): a stored upload is fetched back exactly
and never past ``max_bytes``; only an upload's id is a ref; what the browser calls a file is only
shown; old uploads and crash leftovers are deleted at start and at most daily after."""

from __future__ import annotations

import os

import pytest
from aiohttp import FormData, web
from aiohttp.test_utils import TestClient, TestServer

from bruce.channel import Attachment
from bruce.errors import MediaFetchError
from bruce.values import AttachmentKind
from channels.web_chat import WebChat
from channels.web_uploads import Uploads, attachment_kind, display_name, mime_type

DAY = 86_400
REF = "0123456789abcdef0123456789abcdef"


@pytest.fixture
def uploads(tmp_path, clock) -> Uploads:
    folder = tmp_path / "uploads"
    folder.mkdir()
    return Uploads(folder, clock=clock, max_file_mb=1, keep_days=30, max_text_chars=100)


def aged(path, clock, seconds: float) -> None:
    """Give ``path`` a modification time ``seconds`` before the fake clock's now."""
    moment = clock.now().timestamp() - seconds
    os.utime(path, (moment, moment))


async def test_fetch_returns_the_bytes_and_refuses_past_max_bytes(uploads):
    (uploads.folder / REF).write_bytes(b"0123456789")
    assert await uploads.fetch(REF, max_bytes=10) == b"0123456789"
    with pytest.raises(MediaFetchError, match="larger than 9 bytes"):
        await uploads.fetch(REF, max_bytes=9)


async def test_fetch_of_a_deleted_upload_or_of_a_path_is_a_clear_error(uploads, tmp_path):
    with pytest.raises(MediaFetchError, match="the upload is gone"):
        await uploads.fetch(REF, max_bytes=10)
    (tmp_path / "secret").write_text("no")
    for ref in ("../secret", "/etc/passwd", REF.upper(), REF + "/..", ""):
        with pytest.raises(MediaFetchError, match="not a web chat upload"):
            await uploads.fetch(ref, max_bytes=10)


async def test_the_web_chat_fetches_from_its_folder_and_without_one_says_so(tmp_path, clock):
    chat = WebChat(clock=clock, uploads=tmp_path / "uploads")
    (tmp_path / "uploads").mkdir()
    (tmp_path / "uploads" / REF).write_bytes(b"%PDF")
    document = Attachment(kind=AttachmentKind.DOCUMENT, ref=REF)
    assert await chat.fetch(document, max_bytes=100) == b"%PDF"
    with pytest.raises(MediaFetchError, match="keeps no uploads"):
        await WebChat(clock=clock).fetch(document, max_bytes=100)


async def test_a_web_chat_without_an_uploads_folder_refuses_files_and_still_takes_text(clock):
    delivered = []

    class Inbound:
        async def deliver(self, message):
            delivered.append(message)

    chat = WebChat(clock=clock)
    await chat.start(Inbound())
    app = web.Application()
    app.router.add_routes(chat.routes())
    async with TestClient(TestServer(app)) as client:
        data = FormData()
        data.add_field("files", b"x", filename="a.txt", content_type="text/plain")
        refused = await client.post("/api/chat/messages", data=data)
        assert refused.status == 400 and (await refused.json())["error"] == "this web chat takes no files"
        assert (await client.post("/api/chat/messages", json={"text": "hi"})).status == 202
    assert [(m.text, m.attachments) for m in delivered] == [("hi", ())]


def test_clean_deletes_old_uploads_and_stale_temporary_files_only(uploads, clock):
    old, fresh, other = uploads.folder / REF, uploads.folder / ("f" * 32), uploads.folder / "README"
    stale, busy = uploads.folder / f".{'a' * 32}.part", uploads.folder / f".{'b' * 32}.part"
    for path in (old, fresh, other, stale, busy):
        path.write_bytes(b"x")
    aged(old, clock, 31 * DAY)
    aged(fresh, clock, 29 * DAY)
    aged(other, clock, 400 * DAY)  # not an upload: never touched
    aged(stale, clock, 2 * 3600)
    aged(busy, clock, 60)  # an upload under way
    assert uploads.clean() == 2
    assert sorted(p.name for p in uploads.folder.iterdir()) == sorted(p.name for p in (fresh, other, busy))


def test_clean_runs_at_most_once_a_day(uploads, clock):
    assert uploads.clean_if_due() == 0
    (uploads.folder / REF).write_bytes(b"x")
    aged(uploads.folder / REF, clock, 31 * DAY)
    assert uploads.clean_if_due() == 0 and (uploads.folder / REF).exists()
    clock.advance(hours=25)
    assert uploads.clean_if_due() == 1 and not (uploads.folder / REF).exists()


async def test_starting_the_web_chat_deletes_old_uploads(tmp_path, clock):
    folder = tmp_path / "uploads"
    folder.mkdir()
    (folder / REF).write_bytes(b"x")
    aged(folder / REF, clock, 8 * DAY)
    chat = WebChat(clock=clock, uploads=folder, keep_days=7)
    await chat.start(object())
    assert list(folder.iterdir()) == []


@pytest.mark.parametrize(("given", "shown"), [
    ("receipt.jpg", "receipt.jpg"), ("../../x", "x"), ("..\\..\\evil.txt", "evil.txt"), ("/etc/passwd", "passwd"),
    (".hidden", "hidden"), ("a\x00b\u202ec.txt", "abc.txt"), ("", "upload"), ("..", "upload"), ("x" * 300, "x" * 120),
])
def test_a_file_name_is_cleaned_for_showing(given, shown):
    assert display_name(given) == shown


@pytest.mark.parametrize(("declared", "name", "mime", "kind"), [
    ("audio/ogg", "note.ogg", "audio/ogg", AttachmentKind.AUDIO),
    ("audio/webm;codecs=opus", "voice.weba", "audio/webm", AttachmentKind.AUDIO),
    ("Audio/MPEG", "song.mp3", "audio/mpeg", AttachmentKind.AUDIO),
    ("application/octet-stream", "note.OGG", "audio/ogg", AttachmentKind.AUDIO),
    (None, "photo.jpeg", "image/jpeg", AttachmentKind.IMAGE),
    ("image/heic", "IMG_1.HEIC", "image/heic", AttachmentKind.IMAGE),
    ("application/pdf", "invoice.pdf", "application/pdf", AttachmentKind.DOCUMENT),
    ("application/octet-stream", "data.bin", "application/octet-stream", AttachmentKind.DOCUMENT),
    (None, "noextension", None, AttachmentKind.DOCUMENT),
    ("audio/flac", "song.flac", "audio/flac", AttachmentKind.DOCUMENT),
])
def test_the_kind_comes_from_the_declared_type_then_the_extension(declared, name, mime, kind):
    assert mime_type(declared, name) == mime
    assert attachment_kind(mime) == kind
