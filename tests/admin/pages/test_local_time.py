"""Times on the admin pages: in ``assistant.timezone`` (America/Sao_Paulo in the tests), the zone
named, the UTC instant only on hover (a ``title``); never a raw stamp with microseconds. The JSON
API keeps ISO 8601 with an offset."""

from __future__ import annotations

import re
from datetime import datetime

from bruce.values import ConversationId
from tests.fakes.llm_server import Step
from tests.helpers import ADMIN_TOKEN as TOKEN
from tests.helpers import BEARER, say

ZONE = "-03 (America/Sao_Paulo)"
RAW_STAMP = re.compile(r"\d{2}:\d{2}:\d{2}\.\d{6}")  # storage form: what a page must not show


def hover(text: str, shown: str) -> str:
    """The ``title`` (UTC) of the ``<time>`` element showing ``shown``."""
    match = re.search(r'<time datetime="([^"]+)" title="([^"]+)">' + re.escape(shown) + "</time>", text)
    assert match is not None, f"{shown!r} is not shown as a <time>"
    return match.group(2)


async def test_every_page_shows_the_owners_zone_and_utc_only_on_hover(app, admin, fake_llm):
    """The clock is 12:00 UTC (09:00 in São Paulo): a tool turn, a job, a pairing request."""
    steps = [Step.tool_calls(("math_calculate", {"expression": "2+2"})), Step.text("It is 4.")]

    def answer(body):  # each model call takes a second
        app.clock.advance(seconds=1)
        return steps.pop(0)

    fake_llm.responder = answer
    await say(app, "what is 2+2?")
    job = (await app.jobs.create(ConversationId("test", "c1"), {"execution_mode": "message", "content": "Call Ana",
                                                                "in_seconds": 120})).job
    await app.store.jobs.claim_run(job.id, "2026-12-02T11:30:00.000000+00:00", lateness_ms=0)
    await app.store.pairing.ask(channel="telegram", sender_id="555", chat_id="555", display_name="Ana",
                                expires_at="2026-12-02T13:00:00.000000+00:00", max_pending=3,
                                new_code=lambda: "ABCD2345")
    (item,) = (await (await admin.get("/api/tool-executions", headers=BEARER)).json())["items"]
    await admin.post("/login", data={"token": TOKEN})

    pages = {path: await (await admin.get(path)).text()
             for path in ("/", "/logs", f"/logs/{item['id']}", "/llm", f"/turns/{item['turn_id']}", "/jobs",
                          "/pairing")}
    assert hover(pages["/"], f"2026-12-02 09:02 {ZONE}") == "2026-12-02T12:02:02+00:00 (UTC)"  # the overview's next job
    assert hover(pages["/logs"], f"2026-12-02 09:00:01 {ZONE}") == "2026-12-02T12:00:01+00:00 (UTC)"
    assert hover(pages[f"/logs/{item['id']}"], f"2026-12-02 09:00:01 {ZONE}") == "2026-12-02T12:00:01+00:00 (UTC)"
    assert f"2026-12-02 09:00:01 {ZONE}" in pages["/llm"] and f"2026-12-02 09:00:02 {ZONE}" in pages["/llm"]
    turn = pages[f"/turns/{item['turn_id']}"]
    assert _time(turn, "Started").endswith(f">2026-12-02 09:00:00 {ZONE}</time>")
    assert _time(turn, "Finished").endswith(f">2026-12-02 09:00:02 {ZONE}</time>")
    assert f"2026-12-02 09:02 {ZONE}</time>" in pages["/jobs"]  # the next run
    assert hover(pages["/jobs"], f"2026-12-02 08:30 {ZONE}") == "2026-12-02T11:30:00+00:00 (UTC)"  # a last run
    assert hover(pages["/pairing"], f"2026-12-02 10:00 {ZONE}") == "2026-12-02T13:00:00+00:00 (UTC)"
    for path, text in pages.items():
        assert not RAW_STAMP.search(text), path
        assert "(UTC)</th>" not in text and "(UTC)</dt>" not in text, path  # no column still labelled UTC

    api = [(await (await admin.get(path, headers=BEARER)).json()) for path in
           ("/api/tool-executions", "/api/llm-calls", "/api/jobs")]
    stamps = [api[0]["items"][0]["started_at"], api[1]["items"][0]["created_at"], api[2]["items"][0]["next_run_at"]]
    for stamp in stamps:  # ISO 8601 with its offset, as stored
        assert datetime.fromisoformat(stamp).utcoffset() is not None, stamp
    assert stamps[2] == "2026-12-02T12:02:02.000000+00:00"  # made two seconds into the turn, for in 120 s


def _time(text: str, label: str) -> str:
    return text.split(f"<dt>{label}</dt><dd>", 1)[1].split("</dd>", 1)[0]
