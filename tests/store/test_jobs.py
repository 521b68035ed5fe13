"""The proactive jobs' record and the scheduled run's turn: a run is claimed once, whoever asks
second; a duplicate job inside the window is the first one; a run with nothing to report sends
nothing; the run's instruction is the user-role message and the system prompt says it is a
scheduled run."""

from __future__ import annotations

import asyncio

from bruce.records import JobRecord
from bruce.values import JobRunStatus, JobStatus
from tests.fakes.llm_server import Step
from tests.helpers import rows


def a_job(app, job_id: str = "j1", *, dedup: str = "k1", created_at: str = "2026-12-02T12:00:00.000000+00:00"):
    return JobRecord(
        id=job_id, conversation_id="test:c1", execution_mode="message", content="call Ana", schedule_kind="at",
        schedule_value="2026-12-02T12:02:00.000000+00:00", timezone="UTC", notify="always",
        description="once", status=JobStatus.ACTIVE, next_run_at="2026-12-02T12:02:00.000000+00:00",
        anchor_at="2026-12-02T12:02:00.000000+00:00", failures=0, flagged=None, dedup_key=dedup,
        created_at=created_at, updated_at=created_at)


async def test_a_run_is_claimed_once_even_when_two_ask_at_once(app):
    await app.store.messages.ensure_conversation("test:c1", "test", "c1")
    await app.store.jobs.create(a_job(app), dedup_since="2026-12-02T11:50:00+00:00")
    claims = await asyncio.gather(*(app.store.jobs.claim_run("j1", "2026-12-02T12:02:00.000000+00:00",
                                                             lateness_ms=3) for _ in range(5)))
    assert len([c for c in claims if c is not None]) == 1
    (run,) = await app.store.jobs.runs("j1")
    assert run.status is JobRunStatus.RUNNING and run.lateness_ms == 3
    assert await app.store.jobs.unfinished_runs() == [run]


async def test_the_same_job_again_inside_the_window_is_the_first_one(app):
    await app.store.messages.ensure_conversation("test:c1", "test", "c1")
    first, made = await app.store.jobs.create(a_job(app), dedup_since="2026-12-02T11:50:00+00:00")
    again, made_again = await asyncio.gather(
        app.store.jobs.create(a_job(app, "j2"), dedup_since="2026-12-02T11:50:00+00:00"),
        app.store.jobs.create(a_job(app, "j3"), dedup_since="2026-12-02T11:50:00+00:00"))
    assert made and not again[1] and not made_again[1] and again[0].id == "j1" == made_again[0].id
    later, made_later = await app.store.jobs.create(a_job(app, "j4"), dedup_since="2026-12-02T12:30:00+00:00")
    assert made_later and later.id == "j4"
    assert [j.id for j in await app.store.jobs.for_conversation("test:c1")] == ["j1", "j4"]


async def test_a_scheduled_run_with_nothing_to_report_sends_nothing(app, fake_llm, channel):
    fake_llm.add(Step.text("NOTHING_TO_REPORT"))
    outcome = await app.worker.run_proactive("test:c1", "Tell me if a package arrived.", job_id="j9",
                                             quiet_token="NOTHING_TO_REPORT")
    assert outcome.ok and outcome.quiet and outcome.text == ""
    assert channel.texts() == []
    (turn,) = await rows(app, "SELECT source, status, job_id FROM turns")
    assert turn == {"source": "proactive", "status": "ok", "job_id": "j9"}
    assert await rows(app, "SELECT id FROM messages WHERE direction = 'out'") == []
    (request,) = fake_llm.requests
    system, *_, last = request["messages"]
    assert last == {"role": "user", "content": "Tell me if a package arrived."}
    assert "<scheduled_run>" in system["content"] and "answer exactly NOTHING_TO_REPORT" in system["content"]


async def test_a_scheduled_run_with_news_is_sent(app, fake_llm, channel):
    fake_llm.add(Step.text("Your package arrived."))
    outcome = await app.worker.run_proactive("test:c1", "Tell me if a package arrived.", job_id="j9",
                                             quiet_token="NOTHING_TO_REPORT")
    assert outcome.ok and not outcome.quiet and channel.texts() == ["Your package arrived."]
