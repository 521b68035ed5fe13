"""The job book tells its listeners of every stored change (``JobBook.subscribe``): the
scheduler re-arms at once, ``bruce mcp serve`` tells the running daemon. It keeps a job's trust
(untrusted once, untrusted for good), caps the live jobs of a conversation, and checks a job it
is asked to approve without storing it."""

from __future__ import annotations

from zoneinfo import ZoneInfo

import pytest

from bruce.jobs.book import JobBook, JobError, JobView, ScheduleError
from bruce.store import Store
from bruce.values import ConversationId
from tests.fakes.clock import FakeClock

CID = "test:c1"
ADMIN = "http://127.0.0.1:8765"  # the admin page, where links to artifacts point
REMINDER = {"execution_mode": "message", "content": "Call Ana", "in_seconds": 120}


async def open_book(tmp_path) -> tuple[Store, JobBook]:
    clock = FakeClock()
    store = await Store.open(tmp_path / "bruce.db", clock)
    return store, JobBook(store=store, clock=clock, zone=ZoneInfo("UTC"), admin_base_url=ADMIN)


async def test_a_listener_hears_each_stored_change_with_the_job_id(tmp_path):
    store, book = await open_book(tmp_path)
    heard: list[str] = []
    book.subscribe(heard.append)
    try:
        job = (await book.create(ConversationId.parse(CID), REMINDER)).job
        await book.pause(ConversationId.parse(CID), job.id)
        await book.cancel(ConversationId.parse(CID), job.id)
        assert heard == [job.id, job.id, job.id]
    finally:
        await store.close()


async def test_the_same_job_made_again_in_the_window_is_no_change(tmp_path):
    store, book = await open_book(tmp_path)
    heard: list[str] = []
    book.subscribe(heard.append)
    try:
        first = await book.create(ConversationId.parse(CID), REMINDER)
        again = await book.create(ConversationId.parse(CID), REMINDER)
        assert not again.created and heard == [first.job.id]
    finally:
        await store.close()


async def test_every_listener_hears_in_order_and_an_unsubscribed_one_no_more(tmp_path):
    store, book = await open_book(tmp_path)
    heard: list[str] = []
    stop_first = book.subscribe(lambda job_id: heard.append(f"first {job_id}"))
    book.subscribe(lambda job_id: heard.append(f"second {job_id}"))
    try:
        one = (await book.create(ConversationId.parse(CID), REMINDER)).job
        stop_first()
        stop_first()  # a second call does nothing
        two = (await book.create(ConversationId.parse(CID), {**REMINDER, "content": "Call Bia"})).job
        assert heard == [f"first {one.id}", f"second {one.id}", f"second {two.id}"]
    finally:
        await store.close()


async def test_with_no_listener_a_change_is_only_stored(tmp_path):
    store, book = await open_book(tmp_path)
    try:
        job = (await book.create(ConversationId.parse(CID), REMINDER)).job
        assert [view.job.id for view in await book.list(ConversationId.parse(CID))] == [job.id]
    finally:
        await store.close()


AGENT = {"execution_mode": "agent", "content": "Brief me.", "every_seconds": 3600}


async def test_an_untrusted_job_stays_untrusted_whatever_changes_it_and_every_change_resets_told(tmp_path):
    store, book = await open_book(tmp_path)
    cid = ConversationId.parse(CID)
    try:
        job = (await book.create(cid, AGENT, untrusted=True)).job
        assert job.untrusted and "[untrusted]" in JobView(job).line()
        await store.jobs.mark_held_told(job.id)
        paused = (await book.pause(None, job.id)).job  # the owner, on the machine
        assert paused.untrusted and paused.held_told_at is None
        await store.jobs.mark_held_told(job.id)
        resumed = (await book.resume(None, job.id)).job
        assert resumed.untrusted and resumed.held_told_at is None
        moved = (await book.reschedule(None, job.id, {"every_seconds": 120})).job
        assert moved.untrusted and moved.description.startswith("every 2 minutes")
    finally:
        await store.close()


async def test_a_trusted_job_resumed_or_rescheduled_in_a_tainted_turn_becomes_untrusted(tmp_path):
    store, book = await open_book(tmp_path)
    cid = ConversationId.parse(CID)
    try:
        job = (await book.create(cid, AGENT)).job
        assert not job.untrusted and "[untrusted]" not in JobView(job).line()
        await book.pause(cid, job.id)
        assert not (await book.get(cid, job.id)).untrusted  # pausing runs nothing: trust unchanged
        assert (await book.resume(cid, job.id, untrusted=True)).job.untrusted
        other = (await book.create(cid, {**AGENT, "content": "Other."})).job
        assert (await book.reschedule(cid, other.id, {"in_seconds": 60}, untrusted=True)).job.untrusted
    finally:
        await store.close()


async def test_past_the_live_job_limit_create_and_draft_refuse_naming_the_key(tmp_path):
    clock = FakeClock()
    store = await Store.open(tmp_path / "bruce.db", clock)
    book = JobBook(store=store, clock=clock, zone=ZoneInfo("UTC"), admin_base_url=ADMIN, max_live_jobs=2)
    cid = ConversationId.parse(CID)
    try:
        first = (await book.create(cid, REMINDER)).job
        paused = (await book.create(cid, {**REMINDER, "content": "Two"})).job
        await book.pause(cid, paused.id)  # paused jobs count
        for attempt in (book.create(cid, {**REMINDER, "content": "Three"}),
                        book.draft(cid, {**REMINDER, "content": "Three"})):
            with pytest.raises(JobError, match=r"2 live jobs .*scheduler\.max_active_jobs allows 2"):
                await attempt
        assert (await book.create(cid, REMINDER)).job.id == first.id  # the same job again: no new one
        assert len(await book.list(ConversationId.parse("test:c2"))) == 0
        assert (await book.create(ConversationId.parse("test:c2"), REMINDER)).created  # per conversation
        await book.cancel(cid, first.id)  # a cancelled job frees its place
        assert (await book.create(cid, {**REMINDER, "content": "Three"})).created
    finally:
        await store.close()


async def test_draft_and_planned_check_without_storing_and_the_preview_shows_content_and_schedule(tmp_path):
    store, book = await open_book(tmp_path)
    cid = ConversationId.parse(CID)
    try:
        long = "x" * 1600
        draft = await book.draft(cid, {**AGENT, "content": long})
        assert await book.list(cid) == []
        shown = draft.preview("make a job")
        assert shown.startswith("make a job\nmode: agent") and "schedule: every 1 hour" in shown
        assert "next run: " in shown and "notify: always" in shown and "(100 more characters)" in shown
        job = (await book.create(cid, AGENT)).job
        planned = await book.planned(cid, job.id, "reschedule", {"every_seconds": 60})
        assert planned.job.description.startswith("every 1 minute")
        assert (await book.get(cid, job.id)).description.startswith("every 1 hour")  # nothing stored
        with pytest.raises(ScheduleError):
            await book.planned(cid, job.id, "reschedule", {"every_seconds": 1})
    finally:
        await store.close()
