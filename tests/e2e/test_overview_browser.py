"""The overview and the charts in a real browser (Playwright driving Debian's chromium, as
tests/e2e/test_admin_browser.py): on a database seeded with four days of turns, the overview,
the LLM page and a turn's trace each render with their charts drawn (a canvas with data), the
console stays free of errors, and the overview follows a turn that finishes while it is open.

Screenshots go to tmp_path; with ``BRUCE_SCREENSHOTS=<folder>`` they are copied there too (how
docs/screenshots/ is made: ``BRUCE_SCREENSHOTS=docs/screenshots .venv/bin/python -m pytest
tests/e2e/test_overview_browser.py``)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from playwright.async_api import Page, async_playwright

from bruce.admin import AdminServer
from bruce.app import build_app
from bruce.values import ConversationId
from tests.e2e.browser import chromium, console_errors
from tests.fakes.llm_server import Step
from tests.helpers import rows, say

TOKEN = "browser-test-admin-token-0123456789"
LATENCIES_S = (0.8, 1.4, 0.6, 2.9, 1.1, 0.9, 1.7, 3.4, 0.7, 1.2)


@pytest.fixture
async def app(make_config, clock, channel, tmp_path):
    (tmp_path / "notes").mkdir()
    config = make_config(tools={"files": {"notes_dir": str(tmp_path / "notes")}},
                         llm={"budget": {"daily_tokens": 2000}})
    built = await build_app(config, clock=clock, environ={}, extra_channels=[channel])
    await built.start()
    yield built
    await built.stop()


async def _seed(app, fake_llm) -> str:
    """Four days of turns (tool runs, a failed model call, a refused tool), each model call
    taking its time on the clock; returns the id of the last turn with a tool run."""
    script: list[Step] = []
    turn = iter(range(10_000))

    def answer(body):
        app.clock.advance(seconds=LATENCIES_S[next(turn) % len(LATENCIES_S)])
        return script.pop(0) if script else Step.text("Noted.")

    fake_llm.responder = answer
    for day in range(4):  # three days ago to today
        if day:
            app.clock.advance(hours=23)
        script += [Step.tool_calls(("clock_now", {})), Step.text("It is 09:00 in São Paulo.")]
        await say(app, "what time is it?", chat=f"d{day}a")
        script += [Step.tool_calls(("math_calculate", {"expression": f"{day}*7"})), Step.text(f"It is {day * 7}.")]
        await say(app, f"what is {day}*7?", chat=f"d{day}b")
        if day % 2:
            script += [Step.tool_calls(("math_calculate", {"wrong": "argument"})), Step.text("I could not.")]
            await say(app, "calculate something", chat=f"d{day}c")
        if day == 3:
            script += [Step.error(400, "bad request")]
            await say(app, "and now?", chat=f"d{day}d")
    await app.jobs.create(ConversationId("test", "d3a"), {"execution_mode": "message",
                                                          "content": "Water the plants", "cron": "0 8 * * *"})
    await app.jobs.create(ConversationId("test", "d3a"), {"execution_mode": "message",
                                                          "content": "Call the dentist", "in_seconds": 7200})
    (last,) = await rows(app, "SELECT turn_id FROM tool_executions WHERE tool_name = 'clock.now'"
                              " ORDER BY id DESC LIMIT 1")
    return str(last["turn_id"])


async def _drawn(page: Page, figure: str) -> int:
    """How many data points the figure's chart holds (its canvas must be there)."""
    await page.wait_for_selector(f"#{figure}.drawn canvas")
    return int(await page.evaluate("""id => {
        const chart = document.getElementById(id).chart;
        return chart.data.slice(1).reduce((n, s) => n + s.filter(v => v != null && v > 0).length, 0);
    }""", figure))


async def test_the_overview_llm_page_and_waterfall_draw_their_charts_and_follow_a_turn(app, fake_llm, tmp_path):
    turn_id = await _seed(app, fake_llm)
    server = AdminServer(store=app.store, clock=app.clock, token=TOKEN, host="127.0.0.1", port=0, jobs=app.jobs,
                         health=app._health, budget=app.llm.budget, zone=app.config.assistant.zone)
    server.overview.poll_s = 0.1
    base = await server.start()
    shots: list[Path] = []
    try:
        async with async_playwright() as p:
            browser = await p.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
            page = await browser.new_page(viewport={"width": 1280, "height": 900})
            errors = console_errors(page)
            page.on("pageerror", lambda error: errors.append(str(error)))

            await page.goto(f"{base}/")
            await page.fill("#token", TOKEN)
            await page.click("button[type=submit]")
            await page.wait_for_url(f"{base}/")
            assert await _drawn(page, "chart-tool-runs") >= 4  # ok runs on four days, and the refused ones
            assert await _drawn(page, "chart-usage") >= 4
            assert "Water the plants" in await page.inner_text("#upcoming")
            assert "America/Sao_Paulo" in await page.inner_text("#upcoming")
            assert "no model answered" in await page.inner_text("#failures")
            assert await page.locator("#budget meter").count() == 1
            shots.append(tmp_path / "overview.png")
            await page.screenshot(path=str(shots[-1]), full_page=True)

            before = await page.inner_text("#turns-ok .today")
            await page.wait_for_selector("#overview[data-updates]")  # the event stream is open
            await say(app, "one more", chat="live")  # finishes while the page is open: it follows
            await page.wait_for_function("t => document.querySelector('#turns-ok .today').textContent !== t",
                                         arg=before)
            assert int(await page.inner_text("#turns-ok .today")) == int(before) + 1

            await page.click("nav a[href='/llm']")
            assert await _drawn(page, "chart-latency") >= 4
            assert await _drawn(page, "chart-usage") >= 4
            legend = await page.inner_text("#chart-latency .u-legend")
            assert "openai/primary p50 (ms)" in legend and "openai/primary p95 (ms)" in legend
            shots.append(tmp_path / "llm.png")
            await page.screenshot(path=str(shots[-1]), full_page=True)

            await page.goto(f"{base}/turns/{turn_id}")
            assert await _drawn(page, "waterfall") >= 3  # model call, tool run, model call
            assert "Tool clock.now" in await page.inner_text("#waterfall .u-legend")
            shots.append(tmp_path / "turn-waterfall.png")
            await page.locator("main").screenshot(path=str(shots[-1]))
            assert errors == []  # nothing the CSP blocked, no script error
            await browser.close()
    finally:
        await server.stop()
    target = os.environ.get("BRUCE_SCREENSHOTS")
    for shot in shots:
        assert shot.stat().st_size > 10_000
        if target:
            shutil.copy(shot, Path(target) / shot.name)
