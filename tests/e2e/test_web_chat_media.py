"""Files sent from the web chat through the whole app (channels/web_chat.py, then ``bruce.media``
and the turn), over real HTTP with the fake LLM server: the photo's bytes reach the model
unchanged, a PDF's text reaches the model, a voice note with no transcription model set up gets a
clear reply with no call, and an upload past ``media.max_file_mb`` is refused at the door with no
model call and nothing stored."""

from __future__ import annotations

import base64

import pytest
from aiohttp import FormData
from aiohttp.test_utils import TestClient

from tests.fakes.llm_server import Step
from tests.fakes.media_files import jpeg, ogg_opus, pdf_with_text
from tests.helpers import rows, web_chat_app

TOKEN = "web-chat-media-admin-token-0123456789abcdef"
BEARER = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
async def web(make_config, clock, tmp_path):
    config = make_config(media={"max_file_mb": 1, "vision": True})
    async with web_chat_app(config, clock, TOKEN) as (app, client):
        yield app, client


async def send(client: TestClient, text: str, name: str, content: bytes, mime: str) -> int:
    data = FormData()
    data.add_field("text", text)
    data.add_field("files", content, filename=name, content_type=mime)
    return (await client.post("/api/chat/messages", data=data, headers=BEARER)).status


def user_content(request: dict) -> list[dict]:
    """The parts of the last user message the model was sent (text as one part)."""
    content = [m for m in request["messages"] if m["role"] == "user"][-1]["content"]
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


async def test_a_photo_reaches_the_model_byte_for_byte(web, fake_llm):
    app, client = web
    photo = jpeg()
    fake_llm.add(Step.text("A small grey square."))
    assert await send(client, "what is this?", "square.jpg", photo, "image/jpeg") == 202
    await app.worker.wait_idle()
    (request,) = fake_llm.requests
    (image,) = [p for p in user_content(request) if p["type"] == "image_url"]
    url = image["image_url"]["url"]
    assert url.startswith("data:image/jpeg;base64,")
    assert base64.b64decode(url.split(",", 1)[1]) == photo
    assert any("what is this?" in p.get("text", "") for p in user_content(request))
    (reply,) = await rows(app, "SELECT text FROM messages WHERE direction = 'out'")
    assert reply["text"] == "A small grey square."


async def test_a_pdfs_text_reaches_the_model(web, fake_llm):
    app, client = web
    fake_llm.add(Step.text("The total is 17.50 EUR."))
    assert await send(client, "what is the total?", "invoice.pdf", pdf_with_text("Invoice 42: total 17.50 EUR"),
                      "application/pdf") == 202
    await app.worker.wait_idle()
    (request,) = fake_llm.requests
    sent = " ".join(p.get("text", "") for p in user_content(request))
    assert "Invoice 42: total 17.50 EUR" in sent and "what is the total?" in sent
    (reply,) = await rows(app, "SELECT text FROM messages WHERE direction = 'out'")
    assert reply["text"] == "The total is 17.50 EUR."


async def test_an_oversized_upload_is_refused_with_no_model_call(web, fake_llm, tmp_path):
    app, client = web
    big = b"%PDF-1.4\n" + b"0" * (1024 * 1024 + 1)
    assert await send(client, "read this", "big.pdf", big, "application/pdf") == 413
    await app.worker.wait_idle()
    assert fake_llm.requests == []
    assert await rows(app, "SELECT id FROM messages") == []
    assert list((tmp_path / "uploads").iterdir()) == []


async def test_a_voice_note_with_no_transcription_model_gets_a_clear_reply_and_no_call(web, fake_llm):
    app, client = web
    assert await send(client, "", "note.ogg", ogg_opus(2.0), "audio/ogg") == 202
    await app.worker.wait_idle()
    assert fake_llm.requests == []
    (reply,) = await rows(app, "SELECT text FROM messages WHERE direction = 'out'")
    assert "note.ogg" in reply["text"] and "media.transcription_model" in reply["text"]
