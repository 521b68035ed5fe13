"""The proactive jobs' record and the scheduled run's turn: a run is claimed once, whoever asks
second; a duplicate job inside the window is the first one; a run with nothing to report sends
nothing; the run's instruction is the user-role message and the system prompt says it is a
scheduled run. Then ``JobStore`` on its own: listings, conditional updates, a run's claim,
release and finish, and what an interrupted run left behind."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from bruce.records import JobRecord
from bruce.values import ConversationId, JobRunStatus, JobStatus, MessageStatus, TurnSource
from tests.fakes.llm_server import Step
from tests.helpers import rows
from tests.store.test_audit import execution


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
    outcome = await app.worker.run_proactive(ConversationId("test", "c1"), "Tell me if a package arrived.", job_id="j9",
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
    outcome = await app.worker.run_proactive(ConversationId("test", "c1"), "Tell me if a package arrived.", job_id="j9",
                                             quiet_token="NOTHING_TO_REPORT")
    assert outcome.ok and not outcome.quiet and channel.texts() == ["Your package arrived."]


async def a_stored_job(store, job_id: str = "j1", **changes) -> JobRecord:
    await store.messages.ensure_conversation("test:c1", "test", "c1")
    job = replace(a_job(None, job_id, dedup=job_id), **changes)
    stored, new = await store.jobs.create(job, dedup_since="2026-12-02T00:00:00+00:00")
    assert new
    return stored


async def test_jobs_are_listed_by_conversation_state_and_due_time(store):
    await a_stored_job(store, "j1", next_run_at="2026-12-02T15:00:00.000000+00:00")
    await a_stored_job(store, "j2", next_run_at="2026-12-02T13:00:00.000000+00:00")
    await a_stored_job(store, "j3", status=JobStatus.PAUSED, next_run_at=None)
    await a_stored_job(store, "j4", status=JobStatus.CANCELLED, next_run_at="2026-12-02T16:00:00.000000+00:00")
    assert (await store.jobs.get("j2")) == replace(a_job(None, "j2", dedup="j2"),
                                                   next_run_at="2026-12-02T13:00:00.000000+00:00")
    assert await store.jobs.get("nope") is None
    assert [j.id for j in await store.jobs.for_conversation("test:c1")] == ["j2", "j1", "j3"]
    assert [j.id for j in await store.jobs.for_conversation("test:c1", live_only=False)] == ["j2", "j1", "j4", "j3"]
    assert [j.id for j in await store.jobs.all(live_only=True)] == ["j1", "j2", "j3"]
    assert [j.id for j in await store.jobs.active()] == ["j2", "j1"]
    assert await store.jobs.due_index() == {"j1": "2026-12-02T15:00:00.000000+00:00",
                                            "j2": "2026-12-02T13:00:00.000000+00:00"}


async def test_an_update_lands_only_on_a_job_still_in_the_expected_state_and_due_time(store, clock):
    await a_stored_job(store)
    clock.advance(minutes=5)
    assert not await store.jobs.update("j1", expect_next_run_at="2026-12-02T12:03:00.000000+00:00", failures=1)
    assert await store.jobs.update("j1", expect_next_run_at="2026-12-02T12:02:00.000000+00:00", failures=1,
                                   status=JobStatus.PAUSED)
    job = await store.jobs.get("j1")
    assert job is not None and (job.failures, job.status, job.updated_at) == (
        1, JobStatus.PAUSED, "2026-12-02T12:05:00.000000+00:00")
    assert not await store.jobs.update("j1", expect=("active",), failures=2)
    assert await store.jobs.update("j1", expect=("paused",), status=JobStatus.CANCELLED)


async def test_a_run_is_claimed_finished_and_read_back(store):
    await a_stored_job(store)
    run_id = await store.jobs.claim_run("j1", "T1", lateness_ms=7)
    assert run_id is not None
    assert [r.id for r in await store.jobs.unfinished_runs()] == [run_id]
    await store.jobs.finish_run(run_id, status=JobRunStatus.DELIVERED, text="Call Ana.")
    run = await store.jobs.run_for("j1", "T1")
    assert run is not None and (run.status, run.delivered_text, run.lateness_ms) == (
        JobRunStatus.DELIVERED, "Call Ana.", 7)
    assert run.finished_at is not None and await store.jobs.unfinished_runs() == []
    missed = await store.jobs.claim_run("j1", "T2", lateness_ms=0, status=JobRunStatus.MISSED, error="too late")
    assert [r.id for r in await store.jobs.runs("j1")] == [missed, run_id]
    assert await store.jobs.run_for("j1", "T3") is None


async def test_a_released_claim_fires_again(store):
    await a_stored_job(store)
    first = await store.jobs.claim_run("j1", "T1", lateness_ms=0)
    assert first is not None and await store.jobs.claim_run("j1", "T1", lateness_ms=0) is None
    await store.jobs.release_run(first, owner=None)
    assert await store.jobs.claim_run("j1", "T1", lateness_ms=0) is not None


async def test_what_a_run_left_behind_its_reply_its_tools_its_turn(store):
    await a_stored_job(store)
    await store.messages.start_turn("t1", "test:c1", source=TurnSource.PROACTIVE, inbound_message_id=None,
                                    job_id="j1")
    assert await store.jobs.turn_for_job("j1", "2026-12-02T00") == ("t1", "running")
    assert await store.jobs.turn_for_job("j1", "2026-12-03T00") is None
    assert await store.jobs.reply_of_turn("t1") is None and await store.jobs.tools_run_in("t1") == 0
    await store.audit.record_tool_execution(execution("t1", source=TurnSource.PROACTIVE, conversation_id="test:c1"))
    reply = await store.messages.complete_turn("t1", conversation_id="test:c1", reply="Done.", llm_calls=1,
                                               tool_calls=1)
    assert await store.jobs.tools_run_in("t1") == 1
    assert await store.jobs.reply_of_turn("t1") == (reply, "pending", None)
    assert await store.jobs.message_status(reply) == ("pending", None)
    assert await store.jobs.message_status(999) is None
    assert await store.jobs.outbound_since("test:c1", "Done.", "2026-12-02T00") == reply
    assert await store.jobs.outbound_since("test:c1", "Other.", "2026-12-02T00") is None


async def test_unsent_runs_whose_message_went_out_since_are_delivered(store):
    await a_stored_job(store)
    reply = await store.outbound.add("test:c1", "Call Ana.", turn_id=None)
    run_id = await store.jobs.claim_run("j1", "T1", lateness_ms=0)
    assert run_id is not None
    await store.jobs.finish_run(run_id, status=JobRunStatus.UNSENT, message_id=reply, error="down")
    assert await store.jobs.mark_sent_runs() == 0
    await store.outbound.record_send(reply, status=MessageStatus.SENT, parts_sent=1, attempts=1, error=None)
    assert await store.jobs.mark_sent_runs() == 1
    run = await store.jobs.run_for("j1", "T1")
    assert run is not None and (run.status, run.error) == (JobRunStatus.DELIVERED, None)


async def test_the_same_job_of_another_person_is_another_job_and_listings_can_keep_to_one_person(app):
    await app.store.messages.ensure_conversation("test:c1", "test", "c1")
    since = "2026-12-02T11:50:00+00:00"
    owners, _ = await app.store.jobs.create(a_job(app), dedup_since=since)
    guests, created = await app.store.jobs.create(replace(a_job(app, "j2"), person="telegram:222"), dedup_since=since)
    assert created and guests.id == "j2" and owners.person == "owner"
    assert [j.id for j in await app.store.jobs.for_conversation("test:c1", person="telegram:222")] == ["j2"]
    assert [j.id for j in await app.store.jobs.for_conversation("test:c1")] == ["j1", "j2"]


async def test_at_the_live_limit_no_new_job_is_stored_even_two_at_once(app):
    await app.store.messages.ensure_conversation("test:c1", "test", "c1")
    since = "2026-12-02T11:50:00+00:00"
    await app.store.jobs.create(a_job(app, "j1", dedup="k1"), dedup_since=since, max_live=2)
    made = await asyncio.gather(app.store.jobs.create(a_job(app, "j2", dedup="k2"), dedup_since=since, max_live=2),
                                app.store.jobs.create(a_job(app, "j3", dedup="k3"), dedup_since=since, max_live=2))
    assert sorted(created for _, created in made) == [False, True]
    assert (None, False) in made  # the other one: refused, not stored
    assert await app.store.jobs.live_count("test:c1") == 2
    again, created = await app.store.jobs.create(a_job(app, "j4", dedup="k1"), dedup_since=since, max_live=2)
    assert again is not None and again.id == "j1" and not created  # the same job again is no new one


async def test_the_owner_is_marked_told_once_until_the_job_changes(app):
    await app.store.messages.ensure_conversation("test:c1", "test", "c1")
    await app.store.jobs.create(a_job(app), dedup_since="2026-12-02T11:50:00+00:00")
    assert await app.store.jobs.mark_held_told("j1") is True
    assert await app.store.jobs.mark_held_told("j1") is False
    assert (await app.store.jobs.get("j1")).held_told_at is not None
    await app.store.jobs.update("j1", held_told_at=None)
    assert await app.store.jobs.mark_held_told("j1") is True
