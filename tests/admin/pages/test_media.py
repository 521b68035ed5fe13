"""What a message carried, on its turn's trace (``bruce.admin.pages.media``): a kept photo as a
thumbnail served behind the gate from the data folder's ``media/`` only, a voice note's
transcript, a document's name, size and characters read, everything escaped."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from bruce.admin import AdminServer
from bruce.admin.server import CSP
from bruce.runtime.daemon import App
from tests.fakes.media_files import jpeg, png
from tests.helpers import ADMIN_TOKEN, BEARER, rows, say

Client = TestClient[Any, Any]


@pytest.fixture
async def page(app: App, tmp_path: Path) -> AsyncIterator[Client]:
    """The admin page of ``app`` with the data folder (``storage.path``'s: tmp_path) wired."""
    server = AdminServer(store=app.store, clock=app.clock, token=ADMIN_TOKEN, host="127.0.0.1", port=0,
                         data_dir=app.config.storage.path.parent)
    client: Client = TestClient(TestServer(server.app))
    await client.start_server()
    yield client
    await client.close()


@pytest.fixture
def turn_with(app: App) -> Callable[..., Any]:
    """Answer a message, then store ``entries`` as its attachments' JSON (as the core does);
    returns (message id, turn id)."""

    async def make(entries: Any, text: str = "what is this?") -> tuple[int, str]:
        await say(app, text)
        (message,) = await rows(app, "SELECT id, turn_id FROM messages WHERE direction = 'in' ORDER BY id DESC"
                                     " LIMIT 1")
        stored = entries if isinstance(entries, str) else json.dumps(entries)
        await app.store.media.set_media(message["id"], text=text, attachments=stored)
        (turn,) = await rows(app, "SELECT id FROM turns WHERE inbound_message_id = ?", message["id"])
        return message["id"], turn["id"]

    return make


def keep(data: Path, relative: str, body: bytes) -> Path:
    path = data / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(body)
    return path


async def test_a_kept_photo_is_a_thumbnail_served_with_its_type_behind_the_gate(app, page, turn_with, tmp_path):
    photo = jpeg()
    keep(tmp_path, "media/2026-12/1-0.jpg", photo)
    message_id, turn_id = await turn_with([{"kind": "image", "ref": "file-1", "mime": "image/jpeg", "size": 2048,
                                            "name": "receipt.jpg", "saved": "media/2026-12/1-0.jpg"}])
    html = await (await page.get(f"/turns/{turn_id}", headers=BEARER)).text()
    assert f'<img class="thumb" src="/media/{message_id}/0" alt="receipt.jpg">' in html
    assert "receipt.jpg, 2 KB, image/jpeg" in html
    served = await page.get(f"/media/{message_id}/0", headers=BEARER)
    assert served.status == 200 and await served.read() == photo
    assert served.headers["Content-Type"] == "image/jpeg"
    assert served.headers["X-Content-Type-Options"] == "nosniff"
    assert served.headers["Content-Security-Policy"] == CSP  # the page's own policy, unchanged
    anonymous = await page.get(f"/media/{message_id}/0", allow_redirects=False)
    assert anonymous.status == 303 and anonymous.headers["Location"] == "/login"
    trace = await (await page.get(f"/api/turns/{turn_id}", headers=BEARER)).json()
    (item,) = trace["message"]["attachments"]
    assert item["url"] == f"/media/{message_id}/0" and item["kept"] is True and item["name"] == "receipt.jpg"


async def test_a_png_is_served_as_png(page, turn_with, tmp_path):
    keep(tmp_path, "media/2026-12/2-1.png", png())
    message_id, _ = await turn_with([{"kind": "document", "ref": "d", "name": "a.txt", "chars": 5},
                                     {"kind": "image", "ref": "p", "saved": "media/2026-12/2-1.png"}])
    served = await page.get(f"/media/{message_id}/1", headers=BEARER)
    assert served.status == 200 and served.headers["Content-Type"] == "image/png"
    assert (await page.get(f"/media/{message_id}/0", headers=BEARER)).status == 404  # a document is never served
    assert (await page.get(f"/media/{message_id}/2", headers=BEARER)).status == 404
    assert (await page.get(f"/media/{message_id + 99}/0", headers=BEARER)).status == 404


@pytest.mark.parametrize("saved", ["media/../secret.jpg", "../secret.jpg", "media/2026-12/../../secret.jpg",
                                   "/tmp/secret.jpg", "media/link.jpg", "media/2026-12/notes.txt"])
async def test_a_stored_path_out_of_the_media_folder_or_not_an_image_is_refused(page, turn_with, tmp_path,
                                                                               saved):
    keep(tmp_path, "secret.jpg", b"the owner's private file")
    keep(tmp_path, "media/2026-12/notes.txt", b"not a photo")
    (tmp_path / "media" / "link.jpg").symlink_to(tmp_path / "secret.jpg")  # a link out of the folder
    if saved.startswith("/tmp/"):
        saved = str(tmp_path / "secret.jpg")
    message_id, turn_id = await turn_with([{"kind": "image", "ref": "x", "name": "x.jpg", "saved": saved}])
    served = await page.get(f"/media/{message_id}/0", headers=BEARER)
    assert served.status == 404 and b"private" not in await served.read()
    html = await (await page.get(f"/turns/{turn_id}", headers=BEARER)).text()
    assert "<img" not in html and "no longer kept" in html


async def test_a_photo_deleted_by_keep_days_shows_no_longer_kept(page, turn_with, tmp_path):
    kept = keep(tmp_path, "media/2026-11/3-0.jpg", jpeg())
    message_id, turn_id = await turn_with([{"kind": "image", "ref": "x", "saved": "media/2026-11/3-0.jpg"}])
    kept.unlink()  # the clean-up of media.keep_days
    html = await (await page.get(f"/turns/{turn_id}", headers=BEARER)).text()
    assert "no longer kept (media.keep_days)" in html and "<img" not in html
    served = await page.get(f"/media/{message_id}/0", headers=BEARER)
    assert served.status == 404 and "no longer kept" in await served.text()


async def test_without_a_data_folder_no_photo_is_served(app, turn_with, tmp_path):
    keep(tmp_path, "media/2026-12/1-0.jpg", jpeg())
    message_id, _ = await turn_with([{"kind": "image", "ref": "x", "saved": "media/2026-12/1-0.jpg"}])
    server = AdminServer(store=app.store, clock=app.clock, token=ADMIN_TOKEN, host="127.0.0.1", port=0)
    async with TestClient(TestServer(server.app)) as client:
        assert (await client.get(f"/media/{message_id}/0", headers=BEARER)).status == 404


async def test_voice_shows_its_transcript_and_a_document_its_name_size_and_characters_read(page, turn_with):
    _, turn_id = await turn_with([
        {"kind": "voice", "ref": "v", "mime": "audio/ogg", "size": 5120, "duration_s": 4.2,
         "transcript": "remind me to call the plumber at five"},
        {"kind": "document", "ref": "d", "mime": "application/pdf", "size": 3 * 1024 * 1024, "name": "lease.pdf",
         "chars": 20000, "cut": True},
        {"kind": "other", "ref": "s", "label": "sticker", "error": "stickers are not read"},
    ])
    html = await (await page.get(f"/turns/{turn_id}", headers=BEARER)).text()
    assert "<strong>Voice</strong>, 5 KB, audio/ogg, 4 s" in html
    assert '<blockquote class="transcript">remind me to call the plumber at five</blockquote>' in html
    assert "<strong>Document</strong> lease.pdf, 3.0 MB, application/pdf" in html
    assert "20,000 characters read (cut at media.max_document_chars)" in html
    assert "<strong>Other</strong> (sticker)" in html and '<span class="error">stickers are not read</span>' in html


async def test_everything_stored_is_escaped(page, turn_with):
    evil = '<script>alert(1)</script>"'
    _, turn_id = await turn_with([{"kind": "voice", "ref": "v", "transcript": evil},
                                  {"kind": "document", "ref": "d", "name": evil, "error": evil},
                                  {"kind": "image", "ref": "i", "name": evil, "saved": "media/x\"onerror=.jpg"}])
    html = await (await page.get(f"/turns/{turn_id}", headers=BEARER)).text()
    assert "<script>alert(1)" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;&#34;" in html
    assert 'onerror=' not in html.replace("x&#34;onerror=", "")


@pytest.mark.parametrize("stored", ["not json", '{"kind": "image"}', '[1, 2]'])
async def test_stored_json_that_cannot_be_read_shows_a_note_not_an_error(page, turn_with, stored):
    message_id, turn_id = await turn_with(stored)
    answer = await page.get(f"/turns/{turn_id}", headers=BEARER)
    assert answer.status == 200 and "the stored attachments could not be read" in await answer.text()
    assert (await page.get(f"/media/{message_id}/0", headers=BEARER)).status == 404


async def test_a_text_message_shows_no_attachments(page, app):
    await say(app, "just text")
    (turn,) = await rows(app, "SELECT id FROM turns")
    html = await (await page.get(f"/turns/{turn['id']}", headers=BEARER)).text()
    assert "just text" in html and 'id="attachments"' not in html
    trace = await (await page.get(f"/api/turns/{turn['id']}", headers=BEARER)).json()
    assert trace["message"]["attachments"] == []


async def test_bruce_run_serves_photos_kept_in_the_data_folder(app_factory, tmp_path):
    import aiohttp

    app = await app_factory(admin={"port": 0, "token": ADMIN_TOKEN})  # storage.path: tmp_path/bruce.db
    photo = jpeg(extra=64)
    keep(tmp_path, "media/2026-12/7-0.jpg", photo)
    await say(app, "look")
    (message,) = await rows(app, "SELECT id FROM messages WHERE direction = 'in'")
    await app.store.media.set_media(message["id"], text="look", attachments=json.dumps(
        [{"kind": "image", "ref": "x", "saved": "media/2026-12/7-0.jpg"}]))
    url = await app.start_admin()
    async with aiohttp.ClientSession() as session, \
            session.get(f"{url}/media/{message['id']}/0", headers=BEARER) as response:
        assert response.status == 200 and await response.read() == photo
