"""What fell due while Bruce was down, settled at start-up (the whole scheduler: test_scheduler.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from bruce.jobs.book import JobBook
from bruce.jobs.catch_up import CatchUp, latest_within, ms
from bruce.jobs.schedule import parse_schedule
from bruce.store import Store
from bruce.values import ConversationId, JobRunStatus, JobStatus, MessageKind
from tests.fakes.clock import FakeClock

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
CID = ConversationId("test", "c1")
ADMIN = "http://127.0.0.1:8765"  # the admin page, where links to artifacts point


class Notices:
    def __init__(self) -> None:
        self.posted: list[tuple[ConversationId, str, MessageKind]] = []

    async def post(self, conversation_id: ConversationId, text: str, *, kind: MessageKind = MessageKind.CHAT) -> int:
        self.posted.append((conversation_id, text, kind))
        return len(self.posted)


def every_minute():
    return parse_schedule({"cron": "* * * * *"}, now=T0, default_zone=ZoneInfo("UTC"))


def test_the_latest_run_within_the_grace_is_the_one_that_fires():
    schedule = every_minute()
    due, now = T0 + timedelta(minutes=1), T0 + timedelta(minutes=3, seconds=30)
    assert latest_within(schedule, due, now, timedelta(hours=1)) == T0 + timedelta(minutes=3)
    assert latest_within(schedule, due, now, timedelta(seconds=10)) is None  # every missed run is older
    assert ms(timedelta(seconds=1.5)) == 1500


async def test_a_one_off_beyond_the_grace_is_missed_and_told_once(tmp_path):
    clock = FakeClock(T0)
    store = await Store.open(tmp_path / "b.db", clock)
    try:
        book = JobBook(store=store, clock=clock, zone=ZoneInfo("UTC"), admin_base_url=ADMIN)
        job = (await book.create(CID, {"execution_mode": "message", "content": "Call Ana", "in_seconds": 60})).job
        clock.advance(hours=2)
        notices = Notices()
        catch_up = CatchUp(store_jobs=store.jobs, book=book, notices=notices, clock=clock, grace_s=3600)
        await catch_up.run()
        await catch_up.run()  # a second start finds nothing more to say
        assert (await store.jobs.get(job.id)).status is JobStatus.MISSED
        assert [(c, k) for c, _, k in notices.posted] == [(CID, MessageKind.NOTICE)]
        assert "Call Ana" in notices.posted[0][1]
        (run,) = await store.jobs.runs(job.id)
        assert run.status is JobRunStatus.MISSED
    finally:
        await store.close()


async def test_a_one_off_within_the_grace_is_left_due_for_the_scheduler_to_fire(tmp_path):
    clock = FakeClock(T0)
    store = await Store.open(tmp_path / "b.db", clock)
    try:
        book = JobBook(store=store, clock=clock, zone=ZoneInfo("UTC"), admin_base_url=ADMIN)
        job = (await book.create(CID, {"execution_mode": "message", "content": "Call Ana", "in_seconds": 60})).job
        clock.advance(minutes=5)
        notices = Notices()
        await CatchUp(store_jobs=store.jobs, book=book, notices=notices, clock=clock, grace_s=3600).run()
        assert (await store.jobs.get(job.id)).status is JobStatus.ACTIVE and notices.posted == []
        assert await store.jobs.runs(job.id) == []
    finally:
        await store.close()
