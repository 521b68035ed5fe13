"""Web chat (channels/web_chat.py) behind the admin token: a message goes through the worker, the
answer streams as server-sent events and arrives as a reply; a pending confirmation comes
with its id and is decided through the same door as a button; a reply made while no page was
open waits for the next one. Files sent with a message (multipart) are stored under the data
folder and reach the core as attachments it can fetch; a bad upload is refused whole."""

from __future__ import annotations

import asyncio
import json
import stat

import pytest
from aiohttp import FormData

from bruce.admin import AdminServer
from bruce.channel import Attachment
from tests.fakes.llm_server import Step
from tests.fakes.media_files import jpeg, ogg_opus, pdf_with_text
from tests.helpers import rows, web_chat_app

TOKEN = "web-chat-admin-token-0123456789abcdef"
BEARER = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
async def web(make_config, clock, tmp_path):
    (tmp_path / "notes").mkdir()
    config = make_config(tools={"files": {"notes_dir": str(tmp_path / "notes")}}, media={"max_file_mb": 1})
    async with web_chat_app(config, clock, TOKEN) as (app, client):
        yield app, client


async def events_until(response, stop: str, timeout: float = 20) -> list[dict]:
    """Read server-sent events until one of type ``stop`` arrives."""
    seen: list[dict] = []
    async with asyncio.timeout(timeout):
        while True:
            line = (await response.content.readline()).decode()
            if line.startswith("data: "):
                seen.append(json.loads(line[6:]))
                if seen[-1]["type"] == stop:
                    return seen


async def test_a_message_is_answered_and_the_answer_streams_in(web, fake_llm):
    app, client = web
    fake_llm.add(Step.text("Hello! The weather in Recife is sunny today."))
    stream = await client.get("/api/chat/events", headers=BEARER)
    assert stream.headers["Content-Type"] == "text/event-stream"
    sent = await client.post("/api/chat/messages", json={"text": "hi"}, headers=BEARER)
    assert sent.status == 202
    seen = await events_until(stream, "text")
    kinds = [e["type"] for e in seen]
    assert "thinking" in kinds and "delta" in kinds and kinds.index("delta") < kinds.index("text")
    assert "".join(e["text"] for e in seen if e["type"] == "delta") == "Hello! The weather in Recife is sunny today."
    assert seen[-1]["text"] == "Hello! The weather in Recife is sunny today."
    await app.worker.wait_idle()
    stored = await rows(app, "SELECT conversation_id, direction, status FROM messages ORDER BY id")
    assert stored == [{"conversation_id": "web:owner", "direction": "in", "status": "done"},
                      {"conversation_id": "web:owner", "direction": "out", "status": "sent"}]
    stream.close()


async def test_a_tool_step_carries_the_label_of_the_tools_contract(web, fake_llm):
    app, client = web
    fake_llm.add(Step.tool_calls(("clock_now", {})), Step.text("It is nine."))
    stream = await client.get("/api/chat/events", headers=BEARER)
    await client.post("/api/chat/messages", json={"text": "what time is it?"}, headers=BEARER)
    seen = await events_until(stream, "text")
    (started,) = [e for e in seen if e["type"] == "tool_started"]
    assert started == {"type": "tool_started", "tool": "clock.now", "activity": "Checking the time"}
    await app.worker.wait_idle()
    stream.close()


async def test_a_confirmation_is_decided_from_the_page(web, fake_llm, tmp_path):
    app, client = web
    fake_llm.add(Step.tool_calls(("files_write", {"path": "todo.md", "content": "milk\n"})),
                 Step.text("I need your approval to write todo.md."))
    stream = await client.get("/api/chat/events", headers=BEARER)
    await client.post("/api/chat/messages", json={"text": "note: milk"}, headers=BEARER)
    seen = await events_until(stream, "confirmation")
    request = seen[-1]
    assert request["tool_name"] == "files.write" and request["step_up"] is False and len(request["id"]) == 8
    fake_llm.add(Step.text("Written."))
    decided = await client.post("/api/chat/decide", json={"id": request["id"], "approve": True}, headers=BEARER)
    assert decided.status == 200 and (await decided.json())["outcome"] == "approved"
    texts = [e["text"] for e in await events_until(stream, "text") if e["type"] == "text"]
    for _ in range(200):
        if (tmp_path / "notes" / "todo.md").exists():
            break
        await asyncio.sleep(0.02)
    assert (tmp_path / "notes" / "todo.md").read_text() == "milk\n"
    assert texts
    again = await client.post("/api/chat/decide", json={"id": request["id"], "approve": True}, headers=BEARER)
    assert (await again.json())["outcome"] != "approved"  # single use
    stream.close()


async def test_the_pending_requests_are_listed_until_decided_or_expired(web, fake_llm, clock):
    app, client = web
    assert (await (await client.get("/api/chat/pending", headers=BEARER)).json()) == {"items": []}
    stream = await client.get("/api/chat/events", headers=BEARER)
    for name in ("a.md", "b.md"):
        fake_llm.add(Step.tool_calls(("files_write", {"path": name, "content": "milk\n"})), Step.text("Approve?"))
        await client.post("/api/chat/messages", json={"text": f"write {name}"}, headers=BEARER)
        await events_until(stream, "confirmation")
        await app.worker.wait_idle()
    stream.close()
    listed = (await (await client.get("/api/chat/pending", headers=BEARER)).json())["items"]
    assert [(r["type"], r["tool_name"], r["step_up"]) for r in listed] == [("confirmation", "files.write", False)] * 2
    assert '"path": "a.md"' in listed[0]["summary"] and '"path": "b.md"' in listed[1]["summary"]  # as shown, in order
    assert listed[0]["expires_shown"] == "09:10 -03 (America/Sao_Paulo)"  # ten minutes, in the owner's zone
    denied = await client.post("/api/chat/decide", json={"id": listed[0]["id"], "approve": False}, headers=BEARER)
    assert (await denied.json())["outcome"] == "denied"
    await app.worker.wait_idle()
    assert [r["id"] for r in (await (await client.get("/api/chat/pending", headers=BEARER)).json())["items"]] == \
        [listed[1]["id"]]
    clock.advance(minutes=11)  # past the request's ten minutes
    assert (await (await client.get("/api/chat/pending", headers=BEARER)).json()) == {"items": []}
    assert (await client.get("/api/chat/pending")).status == 401  # behind the admin token, as every route


async def test_a_reply_made_with_no_page_open_arrives_when_one_opens(web, fake_llm):
    app, client = web
    fake_llm.add(Step.text("You were away; here it is."))
    await client.post("/api/chat/messages", json={"text": "hi"}, headers=BEARER)
    await app.worker.wait_idle()
    (reply,) = await rows(app, "SELECT status FROM messages WHERE direction = 'out'")
    assert reply["status"] == "unsent"
    stream = await client.get("/api/chat/events", headers=BEARER)
    seen = await events_until(stream, "text")
    assert seen[-1]["text"] == "You were away; here it is."
    stream.close()


@pytest.mark.parametrize(("body", "named"), [
    ({"text": ""}, "text"), ({"text": 5}, "text"), ({}, "text"), ({"text": "x" * 100_001}, "at most"),
])
async def test_bad_messages_are_400_and_nothing_is_stored(web, body, named):
    app, client = web
    response = await client.post("/api/chat/messages", json=body, headers=BEARER)
    assert response.status == 400 and named in (await response.json())["error"]
    assert await rows(app, "SELECT id FROM messages") == []


async def test_a_body_nested_too_deeply_is_400_not_a_crash(web):
    app, client = web
    deep = "[" * 100_000 + "]" * 100_000  # json.loads raises RecursionError, not ValueError
    response = await client.post("/api/chat/messages", data=deep, headers={**BEARER, "Content-Type": "application/json"})
    assert response.status == 400 and "JSON object" in (await response.json())["error"]
    assert await rows(app, "SELECT id FROM messages") == []


async def test_the_chat_needs_the_token_and_a_csrf_token_with_the_cookie(web):
    _, client = web
    assert (await client.post("/api/chat/messages", json={"text": "hi"})).status == 401
    assert (await client.get("/api/chat/events")).status == 401
    await client.post("/login", data={"token": TOKEN})
    assert (await client.post("/api/chat/messages", json={"text": "hi"})).status == 403  # no CSRF header
    page = await (await client.get("/chat")).text()
    csrf = page.split('name="csrf" content="', 1)[1].split('"', 1)[0]
    response = await client.post("/api/chat/messages", json={"text": "hi"}, headers={"X-CSRF-Token": csrf})
    assert response.status == 202
    assert (await client.post("/api/chat/decide", data="not json", headers={"X-CSRF-Token": csrf})).status == 400


# uploads -----------------------------------------------------------------------------------------

def form(text: str, *files: tuple[str, bytes, str]) -> FormData:
    data = FormData(default_to_multipart=True)  # as a browser sends a form with a file input
    data.add_field("text", text)
    for name, content, mime in files:
        data.add_field("files", content, filename=name, content_type=mime)
    return data


def stored_files(tmp_path) -> list[str]:
    folder = tmp_path / "uploads"
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


async def test_a_photo_a_pdf_and_a_voice_note_with_a_caption_reach_the_core_as_one_message(web, fake_llm, tmp_path):
    app, client = web
    fake_llm.add(Step.text("Got your files."), Step.text("Got your files."))
    photo, invoice, voice = jpeg(), pdf_with_text(), ogg_opus(2.0)
    sent = await client.post("/api/chat/messages", headers=BEARER, data=form(
        "the receipt, the invoice and a note", ("receipt.jpg", photo, "image/jpeg"),
        ("invoice.pdf", invoice, "application/pdf"), ("note.ogg", voice, "audio/ogg")))
    assert sent.status == 202
    assert (await sent.json())["attachments"] == [
        {"name": "receipt.jpg", "kind": "image", "size": len(photo)},
        {"name": "invoice.pdf", "kind": "document", "size": len(invoice)},
        {"name": "note.ogg", "kind": "audio", "size": len(voice)}]
    await app.worker.wait_idle()
    (row,) = await rows(app, "SELECT text, attachments FROM messages WHERE direction = 'in'")
    attachments = [Attachment.from_json(a) for a in json.loads(row["attachments"])]
    assert [(a.kind.value, a.mime, a.name, a.size) for a in attachments] == [
        ("image", "image/jpeg", "receipt.jpg", len(photo)), ("document", "application/pdf", "invoice.pdf", len(invoice)),
        ("audio", "audio/ogg", "note.ogg", len(voice))]
    chat = app.channels["web"]
    for attachment, original in zip(attachments, (photo, invoice, voice), strict=True):
        assert await chat.fetch(attachment, max_bytes=1024 * 1024) == original
        on_disk = tmp_path / "uploads" / attachment.ref  # named by a random id, readable by the owner only
        assert len(attachment.ref) == 32 and stat.S_IMODE(on_disk.stat().st_mode) == 0o600
    assert stored_files(tmp_path) == sorted(a.ref for a in attachments)  # no temporary file left


async def test_an_upload_needs_the_token_and_the_csrf_token_like_a_message(web, tmp_path):
    app, client = web
    photo = ("receipt.jpg", jpeg(), "image/jpeg")
    assert (await client.post("/api/chat/messages", data=form("hi", photo))).status == 401
    await client.post("/login", data={"token": TOKEN})
    refused = await client.post("/api/chat/messages", data=form("hi", photo))
    assert refused.status == 403 and "CSRF" in (await refused.json())["error"]
    wrong = await client.post("/api/chat/messages", data=form("hi", photo), headers={"X-CSRF-Token": "not-it"})
    assert wrong.status == 403
    assert stored_files(tmp_path) == [] and await rows(app, "SELECT id FROM messages") == []
    page = await (await client.get("/chat")).text()
    csrf = page.split('name="csrf" content="', 1)[1].split('"', 1)[0]
    assert 'type="file"' in page and "multiple" in page
    taken = await client.post("/api/chat/messages", data=form("hi", photo), headers={"X-CSRF-Token": csrf})
    assert taken.status == 202 and len(stored_files(tmp_path)) == 1


async def test_a_file_past_max_file_mb_is_413_and_nothing_of_the_message_is_kept(web, fake_llm, tmp_path):
    app, client = web
    fake_llm.add(Step.text("Got it."), Step.text("Got it."))
    small, big = ("ok.jpg", jpeg(), "image/jpeg"), ("scan.pdf", b"%PDF-1.4\n" + b"0" * (1024 * 1024), "application/pdf")
    response = await client.post("/api/chat/messages", headers=BEARER, data=form("two files", small, big))
    assert response.status == 413
    error = (await response.json())["error"]
    assert "scan.pdf" in error and "media.max_file_mb (1 MB)" in error and "nothing was sent" in error
    assert stored_files(tmp_path) == []  # the first file, already read, went too
    assert await rows(app, "SELECT id FROM messages") == []
    exactly = ("scan.pdf", b"%PDF-1.4\n" + b"0" * (1024 * 1024 - 9), "application/pdf")  # 1 MB: taken
    taken = await client.post("/api/chat/messages", headers=BEARER, data=form("at the limit", exactly))
    assert taken.status == 202 and (await taken.json())["attachments"][0]["size"] == 1024 * 1024
    await app.worker.wait_idle()


async def test_more_than_ten_files_or_an_empty_file_is_400_and_nothing_is_kept(web, tmp_path):
    app, client = web
    eleven = [(f"p{i}.jpg", jpeg(), "image/jpeg") for i in range(11)]
    many = await client.post("/api/chat/messages", headers=BEARER, data=form("", *eleven))
    assert many.status == 400 and "at most 10 files" in (await many.json())["error"]
    empty = await client.post("/api/chat/messages", headers=BEARER, data=form("see", ("blank.pdf", b"", "application/pdf")))
    assert empty.status == 400 and (await empty.json())["error"] == "blank.pdf is empty (0 bytes); nothing was sent"
    assert stored_files(tmp_path) == [] and await rows(app, "SELECT id FROM messages") == []


@pytest.mark.parametrize(("body", "content_type"), [
    (b"--xyz\r\nContent-Disposition: form-data; name=\"files\"; filename=\"a.jpg\"\r\n\r\nhalf a fi",
     "multipart/form-data; boundary=xyz"),  # cut off before its closing boundary
    (b"not multipart at all", "multipart/form-data; boundary=xyz"),
    (b"--xyz--\r\n", "multipart/form-data"),  # no boundary given
])
async def test_a_malformed_upload_is_400_and_nothing_is_kept(web, tmp_path, body, content_type):
    app, client = web
    response = await client.post("/api/chat/messages", data=body, headers={**BEARER, "Content-Type": content_type})
    assert response.status == 400 and "malformed" in (await response.json())["error"]
    assert stored_files(tmp_path) == [] and await rows(app, "SELECT id FROM messages") == []


async def test_a_file_name_with_a_path_is_only_a_name(web, fake_llm, tmp_path):
    app, client = web
    fake_llm.add(Step.text("Noted."), Step.text("Noted."))
    body = b"".join(  # written by hand: aiohttp's client would percent-encode the slashes, a browser may not
        b'--xyz\r\nContent-Disposition: form-data; name="files"; filename="' + name + b'"\r\n'
        b"Content-Type: text/plain\r\n\r\n" + content + b"\r\n" for name, content in
        ((b"../../x", b"first"), (b"..\\..\\evil.txt", b"second"), (b"/etc/passwd", b"third"))) + b"--xyz--\r\n"
    response = await client.post("/api/chat/messages", data=body,
                                 headers={**BEARER, "Content-Type": "multipart/form-data; boundary=xyz"})
    assert response.status == 202
    assert [a["name"] for a in (await response.json())["attachments"]] == ["x", "evil.txt", "passwd"]
    assert not (tmp_path / "x").exists() and not (tmp_path.parent / "x").exists()
    assert not (tmp_path / "evil.txt").exists()
    files = stored_files(tmp_path)
    assert len(files) == 3 and all(len(name) == 32 for name in files)
    await app.worker.wait_idle()


async def test_a_form_with_only_a_caption_is_a_text_message_and_an_empty_form_is_400(web, fake_llm, tmp_path):
    app, client = web
    fake_llm.add(Step.text("Hi!"))
    empty = await client.post("/api/chat/messages", headers=BEARER, data=form("  "))
    assert empty.status == 400 and "a message, a file, or both" in (await empty.json())["error"]
    text = await client.post("/api/chat/messages", headers=BEARER, data=form("hello"))
    assert text.status == 202
    await app.worker.wait_idle()
    (row,) = await rows(app, "SELECT text, attachments FROM messages WHERE direction = 'in'")
    assert row == {"text": "hello", "attachments": None}


async def test_a_page_that_goes_away_mid_upload_leaves_nothing(web, tmp_path):
    app, _ = web
    server = AdminServer(store=app.store, clock=app.clock, token=TOKEN, host="127.0.0.1", port=0,
                         chat_routes=app.channels["web"].routes())  # served as `bruce run` serves it
    port = int((await server.start()).rsplit(":", 1)[1])
    head = (b'--xyz\r\nContent-Disposition: form-data; name="files"; filename="big.jpg"\r\n'
            b"Content-Type: image/jpeg\r\n\r\n" + b"\xff" * 200_000)
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"POST /api/chat/messages HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     b"Authorization: Bearer " + TOKEN.encode() + b"\r\n"
                     b"Content-Type: multipart/form-data; boundary=xyz\r\nContent-Length: 900000\r\n\r\n" + head)
        await writer.drain()
        for _ in range(250):  # until the part is being written
            if stored_files(tmp_path):
                break
            await asyncio.sleep(0.02)
        assert [name.endswith(".part") for name in stored_files(tmp_path)] == [True]
        writer.close()
        for _ in range(250):
            if not stored_files(tmp_path):
                break
            await asyncio.sleep(0.02)
        assert stored_files(tmp_path) == [] and await rows(app, "SELECT id FROM messages") == []
    finally:
        await server.stop()


@pytest.mark.parametrize(("part", "named"), [
    (b'name="text"\r\n\r\n' + b"x" * 100_001, "text: at most 100000 characters"),
    (b'name="text"\r\n\r\n' + "é".encode() * 100_001, "text: at most 100000 characters"),
    (b'name="text"\r\n\r\n\xff\xfe', "text: the caption must be UTF-8"),
    (b'name="csrf"\r\n\r\nabc', "unknown field 'csrf'"),
])
async def test_a_bad_field_is_400_naming_it(web, tmp_path, part, named):
    app, client = web
    body = (b'--xyz\r\nContent-Disposition: form-data; name="files"; filename="a.txt"\r\n\r\nkept?\r\n'
            b"--xyz\r\nContent-Disposition: form-data; " + part + b"\r\n--xyz--\r\n")
    response = await client.post("/api/chat/messages", data=body,
                                 headers={**BEARER, "Content-Type": "multipart/form-data; boundary=xyz"})
    assert response.status == 400 and named in (await response.json())["error"]
    assert stored_files(tmp_path) == [] and await rows(app, "SELECT id FROM messages") == []
