"""The admin page in a real browser: Playwright driving Debian's chromium (``/usr/bin/chromium``,
installed by ``.ci/run``; no browser download). One session logs in, finds the tool execution a
chat turn produced, sees a new one appear without a reload, filters by status, opens its detail and its turn trace, pauses a job, chats
in ``/chat`` (the reply streams in) and approves a pending confirmation there.

Screenshots go to tmp_path; with ``BRUCE_SCREENSHOTS=<folder>`` they are copied there too (how
docs/admin-logs.png is made: ``BRUCE_SCREENSHOTS=docs .venv/bin/python -m pytest tests/e2e/test_admin_browser.py``)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from playwright.async_api import async_playwright

from bruce.admin import AdminServer
from bruce.values import ConversationId
from tests.e2e.browser import chromium, console_errors
from tests.fakes.llm_server import Step
from tests.helpers import say

TOKEN = "browser-test-admin-token-0123456789"


async def test_the_owner_reviews_a_turn_chats_approves_and_pauses_a_job_in_the_browser(app, fake_llm, tmp_path: Path):
    fake_llm.add(Step.tool_calls(("clock_now", {})), Step.text("It is 09:00 in São Paulo."))
    await say(app, "what time is it?")
    fake_llm.add(Step.tool_calls(("math_calculate", {"wrong": "argument"})), Step.text("I could not calculate that."))
    await say(app, "calculate something")
    job = (await app.jobs.create(ConversationId("test", "c1"), {"execution_mode": "message", "content": "Water the plants",
                                             "cron": "0 8 * * *"})).job
    server = AdminServer(store=app.store, clock=app.clock, token=TOKEN, host="127.0.0.1", port=0, jobs=app.jobs,
                         health=app._health, chat_routes=app.channels["web"].routes())
    server.live_poll_s = 0.1
    base = await server.start()
    shots: list[Path] = []
    try:
        async with async_playwright() as p:
            browser = await p.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
            page = await browser.new_page(viewport={"width": 1280, "height": 720})
            errors = console_errors(page)

            await page.goto(f"{base}/logs")
            assert page.url.endswith("/login")  # no session: the login form
            await page.fill("#token", TOKEN)
            await page.click("button[type=submit]")
            await page.wait_for_url(f"{base}/")  # a login lands on the overview
            await page.goto(f"{base}/logs")
            rows = page.locator("#executions tbody tr")
            assert await rows.count() == 2
            assert "clock.now" in await page.inner_text("#executions")
            shots.append(tmp_path / "admin-logs.png")
            await page.screenshot(path=str(shots[-1]), full_page=True)

            fake_llm.add(Step.tool_calls(("clock_now", {"timezone": "Europe/Lisbon"})), Step.text("In Lisbon it is 12:00."))
            await say(app, "and in Lisbon?")  # recorded while the page is open: it appears without a reload
            await page.wait_for_selector("#executions tr.live:has-text('clock.now')")
            assert await rows.count() == 3

            await page.select_option("select[name=status]", "invalid_args")
            await page.click(".filters button")
            await page.wait_for_url("**status=invalid_args**")
            assert await rows.count() == 1 and "math.calculate" in await rows.first.inner_text()

            await rows.first.locator("a").click()
            await page.wait_for_selector("h1:has-text('math.calculate')")
            assert "invalid_args" in await page.inner_text("h1")
            await page.click("dd a[href^='/turns/']")
            await page.wait_for_selector("#timeline")
            timeline = await page.inner_text("#timeline")
            assert "calculate something" in timeline and "I could not calculate that." in timeline

            await page.click("nav a[href='/jobs']")
            await page.wait_for_selector("#jobs")
            assert "Water the plants" in await page.inner_text("#jobs")
            await page.click(f"form[action='/jobs/{job.id}/pause'] button")
            await page.wait_for_selector("tr.job-paused")

            await page.click("nav a[href='/chat']")
            await page.wait_for_selector("#chat-form")
            await page.evaluate("""() => {
                window.drafts = 0;
                new MutationObserver(changes => changes.forEach(c => c.addedNodes.forEach(n => {
                    if (n.classList && n.classList.contains('draft')) { window.drafts += 1; }
                }))).observe(document.getElementById('chat-log'), {childList: true});
            }""")
            fake_llm.add(Step.text("Hello from Bruce, streamed to your browser piece by piece."))
            await page.fill("#chat-text", "hello")
            await page.click("#chat-form button")
            await page.wait_for_selector(".msg.bruce:has-text('Hello from Bruce, streamed')")
            assert await page.evaluate("window.drafts") >= 1  # the answer streamed in before the reply landed
            shots.append(tmp_path / "web-chat.png")
            await page.screenshot(path=str(shots[-1]))

            fake_llm.add(Step.tool_calls(("files_write", {"path": "todo.md", "content": "milk\n"})),
                         Step.text("I need your approval to write todo.md."))
            await page.fill("#chat-text", "note: milk")
            await page.click("#chat-form button")
            await page.wait_for_selector(".msg.confirmation button:has-text('Approve')")
            fake_llm.add(Step.text("Written to todo.md."))
            await page.click(".msg.confirmation button:has-text('Approve')")
            await page.wait_for_selector(".msg.bruce:has-text('Written to todo.md.')")
            assert (tmp_path / "notes" / "todo.md").read_text() == "milk\n"
            assert errors == []  # nothing the CSP blocked, no script error
            await browser.close()
    finally:
        await server.stop()
    assert (await app.store.jobs.get(job.id)).status.value == "paused"
    target = os.environ.get("BRUCE_SCREENSHOTS")
    for shot in shots:
        assert shot.stat().st_size > 10_000
        if target:
            shutil.copy(shot, Path(target) / shot.name)
