"""Sending files from the admin page's chat in a real browser (Playwright driving Debian's chromium,
as tests/e2e/test_admin_browser.py does): the owner picks a photo and a PDF, writes a caption and
sends; the message shows the files (the photo as a small preview) at once, the reply arrives, the
history after a reload names the files, and the core got one message with both attachments. A file past ``media.max_file_mb`` is refused
with the reason shown on the page."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from playwright.async_api import async_playwright

from bruce.admin import AdminServer
from bruce.app import build_app, web_chat
from tests.e2e.browser import chromium, console_errors, log_in
from tests.fakes.llm_server import Step
from tests.fakes.media_files import jpeg, pdf_with_text
from tests.helpers import rows

TOKEN = "browser-upload-admin-token-0123456789"


@pytest.fixture
async def app(make_config, clock):
    config = make_config(media={"max_file_mb": 1, "vision": True})  # the model is shown the photo
    built = await build_app(config, clock=clock, environ={}, extra_channels=[web_chat(config, clock)])
    await built.start()
    yield built
    await built.stop()


async def test_the_owner_sends_a_photo_and_a_pdf_with_a_caption_from_the_browser(app, fake_llm, tmp_path: Path):
    (tmp_path / "receipt.jpg").write_bytes(jpeg())
    (tmp_path / "invoice.pdf").write_bytes(pdf_with_text())
    (tmp_path / "huge.pdf").write_bytes(b"%PDF-1.4\n" + b"0" * (1024 * 1024))
    server = AdminServer(store=app.store, clock=app.clock, token=TOKEN, host="127.0.0.1", port=0,
                         chat_routes=app.channels["web"].routes())
    base = await server.start()
    try:
        async with async_playwright() as p:
            browser = await p.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
            page = await browser.new_page(viewport={"width": 1280, "height": 720})
            errors = console_errors(page)
            await log_in(page, base, TOKEN)
            await page.goto(f"{base}/chat")
            await page.wait_for_selector("#chat-form")

            fake_llm.add(Step.text("Thanks, I have the receipt and the invoice."))
            await page.set_input_files("#chat-files", [str(tmp_path / "receipt.jpg"), str(tmp_path / "invoice.pdf")])
            await page.fill("#chat-text", "for the expenses")
            await page.click("#chat-form button")
            sent = page.locator(".msg.you").last
            await sent.locator(".attachment:has-text('invoice.pdf')").wait_for()
            assert "receipt.jpg" in await sent.inner_text() and "for the expenses" in await sent.inner_text()
            preview = sent.locator(".attachment img")
            await page.wait_for_function("() => (document.querySelector('.msg.you .attachment img') || {}).naturalWidth > 0")
            assert (await preview.get_attribute("src")).startswith("data:image/jpeg")
            await page.wait_for_selector(".msg.bruce:has-text('I have the receipt and the invoice')")
            assert await page.input_value("#chat-files") == ""  # the picked files went with the message
            await page.screenshot(path=str(tmp_path / "web-chat-upload.png"))
            await page.reload()  # the history keeps the file names with the caption
            await page.wait_for_selector(".msg.you .attachment:has-text('receipt.jpg') ~ .attachment:has-text('invoice.pdf')")

            await page.set_input_files("#chat-files", str(tmp_path / "huge.pdf"))
            await page.click("#chat-form button")
            await page.wait_for_selector(".msg.notice:has-text('huge.pdf is larger than media.max_file_mb (1 MB)')")
            assert errors == [] or all("413" in e for e in errors)  # the refused POST is the only complaint
            await browser.close()
    finally:
        await server.stop()
    await app.worker.wait_idle()
    (row,) = await rows(app, "SELECT text, attachments FROM messages WHERE direction = 'in'")
    assert row["text"].startswith("for the expenses")  # the core adds what it made of the files
    assert [(a["name"], a["kind"], a["mime"]) for a in json.loads(row["attachments"])] == [
        ("receipt.jpg", "image", "image/jpeg"), ("invoice.pdf", "document", "application/pdf")]
    assert len(list((tmp_path / "uploads").iterdir())) == 2  # the refused file left nothing
