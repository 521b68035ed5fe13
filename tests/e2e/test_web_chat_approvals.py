"""The web chat's approval cards survive a reload, and the admin page's times are the owner's, in
Chromium (Playwright, Debian's ``/usr/bin/chromium`` as tests/e2e/test_admin_browser.py).

An approval request is asked in ``/chat``; the page is reloaded and opened in a second tab: both
rebuild the Approve / Deny card from the pending list; Approve on the rebuilt card runs the action
once. The tool log shows its rows, and one recorded while it is open, in America/Sao_Paulo (the
tests' ``assistant.timezone``), the zone named, UTC on hover."""

from __future__ import annotations

from pathlib import Path

from playwright.async_api import async_playwright

from bruce.admin import AdminServer
from tests.e2e.browser import chromium, console_errors, log_in
from tests.fakes.llm_server import Step
from tests.helpers import rows, say

TOKEN = "browser-test-admin-token-0123456789"
ZONE = "-03 (America/Sao_Paulo)"


async def test_a_pending_approval_survives_a_reload_and_runs_once(app, fake_llm, tmp_path: Path):
    server = AdminServer(store=app.store, clock=app.clock, token=TOKEN, host="127.0.0.1", port=0, jobs=app.jobs,
                         health=app._health, chat_routes=app.channels["web"].routes(), zone=app.config.assistant.zone)
    base = await server.start()
    try:
        async with async_playwright() as p:
            browser = await p.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
            context = await browser.new_context(viewport={"width": 1280, "height": 720})
            page = await context.new_page()
            errors = console_errors(page)
            await log_in(page, base, TOKEN)
            await page.goto(f"{base}/chat")
            await page.wait_for_selector("#chat-form")

            fake_llm.add(Step.tool_calls(("files_write", {"path": "todo.md", "content": "milk\n"})),
                         Step.text("I need your approval to write todo.md."))
            await page.fill("#chat-text", "note: milk")
            await page.click("#chat-form button")
            await page.wait_for_selector(".msg.confirmation button:has-text('Approve')")
            (request,) = await rows(app, "SELECT id FROM pending_confirmations WHERE status = 'pending'")

            await page.reload()  # the card is rebuilt from the pending list, once
            card = page.locator(f".msg.confirmation[data-id='{request['id']}']")
            await card.locator("button:has-text('Approve')").wait_for()
            assert await page.locator(".msg.confirmation").count() == 1
            assert "files.write" in await card.inner_text() and "todo.md" in await card.inner_text()
            assert await card.locator(".expires").inner_text() == "Expires at 09:10 -03 (America/Sao_Paulo)."
            elsewhere = await context.new_page()  # opened in another tab: the same card
            await elsewhere.goto(f"{base}/chat")
            await elsewhere.locator(f".msg.confirmation[data-id='{request['id']}'] button:has-text('Deny')").wait_for()

            fake_llm.add(Step.text("Written to todo.md."))
            await card.locator("button:has-text('Approve')").click()
            await page.wait_for_selector(".msg.bruce:has-text('Written to todo.md.')")
            assert (tmp_path / "notes" / "todo.md").read_text() == "milk\n"
            await app.worker.wait_idle()
            runs = await rows(app, "SELECT status FROM tool_executions WHERE tool_name = 'files.write'")
            assert [r["status"] for r in runs] == ["awaiting_confirmation", "ok"]  # asked, then ran once
            decided = await rows(app, "SELECT status FROM pending_confirmations WHERE id = ?", request["id"])
            assert decided == [{"status": "executed"}]
            await page.reload()
            await page.wait_for_selector(".msg.bruce:has-text('Written to todo.md.')")
            assert await page.locator(".msg.confirmation").count() == 0  # decided: no card any more

            await page.goto(f"{base}/logs")
            first = page.locator("#executions tbody tr time").first
            assert (await first.inner_text()).endswith(ZONE)
            assert (await first.get_attribute("title") or "").endswith("+00:00 (UTC)")
            fake_llm.add(Step.tool_calls(("clock_now", {})), Step.text("It is nine."))
            await say(app, "what time is it?")  # recorded while the page is open: a live row, in the same form
            live = page.locator("#executions tr.live time")
            await live.wait_for()
            assert (await live.inner_text()).endswith(ZONE)
            assert (await live.get_attribute("title") or "").endswith("+00:00 (UTC)")
            assert errors == []  # nothing the CSP blocked, no script error
            await browser.close()
    finally:
        await server.stop()
