"""The scheduler, as a user sees it: a reminder arrives at its instant, once; a briefing runs
the agent and its answer arrives; restarts neither lose nor double a run; a failing platform
is retried and recorded. The fake clock stands in for time (``sync`` is how the scheduler
looks at the clock again after a test moves it); one test waits for APScheduler's own timer."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from bruce.errors import ChannelSendError
from bruce.jobs.scheduler import Scheduler, SchedulerSettings
from bruce.runtime.leases import Leases
from bruce.store import Store
from bruce.values import ConversationId, JobRunStatus, JobStatus
from tests.fakes.llm_server import Step
from tests.helpers import rows, say

CID = "test:c1"


async def tick(app, clock, **delta: float) -> None:
    """Time passes; the scheduler looks at the clock; what fell due has been delivered."""
    clock.advance(**delta)
    await app.scheduler.sync()
    await app.scheduler.wait_idle()


async def remind(app, content: str = "Call Ana", **schedule):
    view = await app.jobs.create(ConversationId.parse(CID), {"execution_mode": "message", "content": content, **schedule})
    await asyncio.sleep(0)  # the change reaches the scheduler
    return view.job


async def test_a_reminder_in_120_seconds_arrives_at_that_instant_with_no_model_call(app, channel, clock, fake_llm):
    job = await remind(app, in_seconds=120)
    await tick(app, clock, seconds=119)
    assert channel.texts() == []
    await tick(app, clock, seconds=1)
    assert channel.texts() == ["Call Ana"]
    assert fake_llm.requests == []
    (run,) = await app.store.jobs.runs(job.id)
    assert (run.status, run.lateness_ms, run.delivered_text) == (JobRunStatus.DELIVERED, 0, "Call Ana")
    assert run.scheduled_for == (clock.now()).isoformat(timespec="microseconds")
    assert (await app.store.jobs.get(job.id)).status is JobStatus.DONE
    await tick(app, clock, minutes=5)
    assert channel.texts() == ["Call Ana"]


async def test_apschedulers_timer_fires_the_job_by_itself(app, channel, clock):
    await remind(app, in_seconds=1)
    clock.advance(seconds=1)  # the fake clock agrees with the real second that is about to pass
    for _ in range(100):
        if channel.texts():
            break
        await asyncio.sleep(0.05)
    await app.scheduler.wait_idle()
    assert channel.texts() == ["Call Ana"]


async def test_an_agent_mode_briefing_runs_the_agent_without_proactive_tools_and_sends_its_answer(
        app, channel, clock, fake_llm):
    fake_llm.add(Step.text("Three meetings today; the first at 10:00."))
    job = (await app.jobs.create(ConversationId.parse(CID), {"execution_mode": "agent", "content": "Brief me on my day.",
                                       "cron": "0 8 * * 1-5"})).job
    assert job.next_run_at == "2026-12-03T11:00:00.000000+00:00"  # Thursday 08:00 in São Paulo
    await tick(app, clock, hours=23)
    assert channel.texts() == ["Three meetings today; the first at 10:00."]
    (request,) = fake_llm.requests
    offered = [t["function"]["name"] for t in request.get("tools", [])]
    assert offered and not any(name.startswith("proactive_") for name in offered)
    assert request["messages"][-1] == {"role": "user", "content": "Brief me on my day."}
    (turn,) = await rows(app, "SELECT source, job_id, status FROM turns")
    assert turn == {"source": "proactive", "job_id": job.id, "status": "ok"}
    (run,) = await app.store.jobs.runs(job.id)
    assert run.status is JobRunStatus.DELIVERED and run.turn_id is not None
    assert (await app.store.jobs.get(job.id)).next_run_at == "2026-12-04T11:00:00.000000+00:00"


async def test_an_agent_run_with_nothing_to_report_sends_nothing_and_says_so_in_the_run(app, channel, clock, fake_llm):
    fake_llm.add(Step.text("NOTHING_TO_REPORT"))
    job = (await app.jobs.create(ConversationId.parse(CID), {"execution_mode": "agent", "content": "Any package?", "every_seconds": 3600,
                                       "notify": "if_actionable"})).job
    await tick(app, clock, hours=1)
    assert channel.texts() == []
    (run,) = await app.store.jobs.runs(job.id)
    assert run.status is JobRunStatus.QUIET


async def test_a_cron_job_fires_at_local_eight_across_a_dst_change(app, channel, clock):
    clock.set(datetime(2027, 3, 13, 12, 0, tzinfo=UTC))  # Saturday 07:00 EST; DST starts Sunday 14 March
    job = await remind(app, "Stretch", cron="0 8 * * *", timezone="America/New_York")
    assert job.next_run_at == "2027-03-13T13:00:00.000000+00:00"
    await tick(app, clock, hours=1)
    assert (await app.store.jobs.get(job.id)).next_run_at == "2027-03-14T12:00:00.000000+00:00"  # 08:00 EDT
    await tick(app, clock, hours=23)
    assert channel.texts() == ["Stretch", "Stretch"]
    runs = sorted(r.scheduled_for for r in await app.store.jobs.runs(job.id))
    assert runs == ["2027-03-13T13:00:00.000000+00:00", "2027-03-14T12:00:00.000000+00:00"]


async def test_a_one_off_due_during_downtime_fires_once_after_the_restart(app_factory, channel, clock):
    first = await app_factory()
    job = await remind(first, in_seconds=600)
    await first.stop()
    clock.advance(hours=1)
    second = await app_factory()
    await second.scheduler.wait_idle()
    assert channel.texts() == ["Call Ana"]
    (run,) = await second.store.jobs.runs(job.id)
    assert run.status is JobRunStatus.DELIVERED and run.lateness_ms == 50 * 60 * 1000
    await second.stop()
    third = await app_factory()
    await third.scheduler.wait_idle()
    assert channel.texts() == ["Call Ana"]


async def test_a_one_off_beyond_the_grace_is_reported_missed_once(app_factory, channel, clock):
    first = await app_factory()
    job = await remind(first, in_seconds=600)
    await first.stop()
    clock.advance(hours=7)  # the grace is six hours
    second = await app_factory()
    await second.scheduler.wait_idle()
    (notice,) = channel.texts()
    assert "Call Ana" in notice and "was not running" in notice and "not sent" in notice
    assert (await second.store.jobs.get(job.id)).status is JobStatus.MISSED
    (run,) = await second.store.jobs.runs(job.id)
    assert run.status is JobRunStatus.MISSED
    await second.stop()
    third = await app_factory()
    await third.scheduler.wait_idle()
    assert len(channel.texts()) == 1


async def test_a_recurring_job_that_missed_three_runs_fires_once(app_factory, channel, clock):
    first = await app_factory()
    job = await remind(first, "Drink water", every_seconds=60)
    await first.stop()
    clock.advance(minutes=3, seconds=30)  # runs due at 1, 2 and 3 minutes were missed
    second = await app_factory()
    await second.scheduler.wait_idle()
    assert channel.texts() == ["Drink water"]
    (run,) = await second.store.jobs.runs(job.id)
    assert run.scheduled_for == "2026-12-02T12:03:00.000000+00:00"  # the latest of them
    assert (await second.store.jobs.get(job.id)).next_run_at == "2026-12-02T12:04:00.000000+00:00"


async def test_a_second_scheduler_on_the_same_database_waits_and_takes_over_when_the_first_stops(
        app, channel, clock, make_config):
    config = make_config()
    other_store = await Store.open(config.storage.path, clock)
    other = Scheduler(store=other_store, clock=clock, book=app.jobs, doors=app.worker, notices=app.outbox,
                      settings=SchedulerSettings(sync_interval_s=0.02), leases=Leases(store=other_store.leases, clock=clock))
    try:
        assert await other.start() is False
        await asyncio.sleep(0.1)
        assert not other.running
        job = await remind(app, in_seconds=60)
        await app.scheduler.stop()
        await app.scheduler.release()  # the first process went away
        for _ in range(200):
            if other.running:
                break
            await asyncio.sleep(0.02)
        assert other.running
        clock.advance(seconds=60)
        await other.sync()
        await other.wait_idle()
        assert channel.texts() == ["Call Ana"]
        assert (await app.store.jobs.get(job.id)).status is JobStatus.DONE
    finally:
        await other.stop()
        await other.release()
        await other_store.close()


async def test_two_schedulers_on_one_database_deliver_once_even_without_the_lock(app, channel, clock, make_config):
    config = make_config()
    other_store = await Store.open(config.storage.path, clock)
    other = Scheduler(store=other_store, clock=clock, book=app.jobs, doors=app.worker, notices=app.outbox,
                      settings=SchedulerSettings())
    try:
        await other.start()
        await remind(app, in_seconds=60)
        clock.advance(seconds=60)
        await asyncio.gather(app.scheduler.sync(), other.sync())
        await asyncio.gather(app.scheduler.wait_idle(), other.wait_idle())
        assert channel.texts() == ["Call Ana"]
    finally:
        await other.stop()
        await other_store.close()


async def test_a_crash_between_sending_and_marking_does_not_send_twice(app_factory, channel, clock):
    first = await app_factory()
    job = await remind(first, in_seconds=60)
    await first.scheduler.stop()
    clock.advance(seconds=60)
    # the state kill -9 leaves right after the send: the run claimed, the message stored and sent, the run unmarked
    await first.store.jobs.claim_run(job.id, job.next_run_at, lateness_ms=0)
    await first.worker.post(ConversationId.parse(CID), "Call Ana")
    await first.stop()
    second = await app_factory()
    await second.scheduler.wait_idle()
    assert channel.texts() == ["Call Ana"]
    (run,) = await second.store.jobs.runs(job.id)
    assert run.status is JobRunStatus.DELIVERED and run.message_id is not None
    assert (await second.store.jobs.get(job.id)).status is JobStatus.DONE


async def test_a_crash_after_claiming_before_storing_fires_once_at_the_restart(app_factory, channel, clock):
    first = await app_factory()
    job = await remind(first, in_seconds=60)
    await first.scheduler.stop()
    await first.store.jobs.claim_run(job.id, job.next_run_at, lateness_ms=0)  # then the process died
    await first.stop()
    clock.advance(seconds=90)
    second = await app_factory()
    await second.scheduler.wait_idle()
    assert channel.texts() == ["Call Ana"]
    (run,) = await second.store.jobs.runs(job.id)
    assert run.status is JobRunStatus.DELIVERED and run.lateness_ms == 30_000


async def test_a_failing_send_is_retried_by_the_outbox_and_recorded(app, channel, clock):
    channel.failures = [ChannelSendError("timed out", retryable=True)]
    job = await remind(app, in_seconds=60)
    await tick(app, clock, seconds=60)
    assert channel.texts() == ["Call Ana"] and channel.attempts == 2
    (run,) = await app.store.jobs.runs(job.id)
    assert run.status is JobRunStatus.DELIVERED


async def test_repeated_failed_deliveries_are_recorded_and_flag_the_job(app, channel, clock):
    channel.fail_sends = True
    job = await remind(app, every_seconds=60)
    for _ in range(3):
        await tick(app, clock, seconds=60)
    runs = await app.store.jobs.runs(job.id)
    assert [r.status for r in runs] == [JobRunStatus.UNSENT] * 3
    assert all(r.error == "platform unreachable" for r in runs)
    stored = await app.store.jobs.get(job.id)
    assert stored.status is JobStatus.ACTIVE and stored.failures == 3
    assert stored.flagged and "3 runs in a row" in stored.flagged
    unsent = await rows(app, "SELECT text, status FROM messages WHERE direction = 'out'")
    assert unsent == [{"text": "Call Ana", "status": "unsent"}] * 3  # kept: the outbox sends them when it can
    channel.fail_sends = False
    await app.outbox.resend_all()  # what the outbox's background resend does
    await tick(app, clock, seconds=60)
    assert channel.texts() == ["Call Ana"] * 4
    stored = await app.store.jobs.get(job.id)
    assert stored.failures == 0 and stored.flagged is None
    assert [r.status for r in await app.store.jobs.runs(job.id)] == [JobRunStatus.DELIVERED] * 4


async def test_a_paused_job_does_not_fire_and_a_resumed_one_does(app, channel, clock):
    job = await remind(app, every_seconds=60)
    await app.jobs.pause(CID, job.id)
    await tick(app, clock, seconds=120)
    assert channel.texts() == []
    await app.jobs.resume(CID, job.id)
    await asyncio.sleep(0)
    await tick(app, clock, seconds=60)
    assert channel.texts() == ["Call Ana"]


async def test_a_cancelled_job_never_fires(app, channel, clock):
    job = await remind(app, in_seconds=60)
    await app.jobs.cancel(CID, job.id)
    await tick(app, clock, seconds=120)
    assert channel.texts() == []
    assert await app.store.jobs.runs(job.id) == []


async def test_a_job_due_while_stopping_is_left_for_the_next_start(app_factory, channel, clock):
    first = await app_factory()
    job = await remind(first, in_seconds=60)
    clock.advance(seconds=60)
    await first.worker.close(1.0)  # draining: no new turn or post
    await first.scheduler.sync()
    await first.scheduler.wait_idle()
    assert channel.texts() == [] and await first.store.jobs.runs(job.id) == []
    await first.stop()
    second = await app_factory()
    await second.scheduler.wait_idle()
    assert channel.texts() == ["Call Ana"]


async def test_an_agent_run_never_runs_a_tool_that_needs_approval(app_factory, channel, clock, fake_llm, receiver):
    url, received = receiver
    app = await app_factory(tools={"http_post": {"allowed_urls": [url]}})
    fake_llm.add(Step.tool_calls(("http_post", {"url": url, "json": {"x": 1}})), Step.text("I could not post it."))
    job = (await app.jobs.create(ConversationId.parse(CID), {"execution_mode": "agent", "content": "Post it.", "in_seconds": 60})).job
    await tick(app, clock, seconds=60)
    assert received == [] and channel.confirmations == []
    assert [r["status"] for r in await rows(app, "SELECT status FROM tool_executions")] == ["skipped"]
    (run,) = await app.store.jobs.runs(job.id)
    assert run.status is JobRunStatus.DELIVERED
    assert "I could not post it." in channel.texts()[0]


async def test_jobs_in_chat_lists_this_conversations_jobs_with_the_next_run_in_local_time(app, channel, fake_llm):
    mine = await remind(app, "Call Ana", in_seconds=120)
    await app.jobs.create(ConversationId("test", "c2"), {"execution_mode": "message", "content": "Secret of c2", "in_seconds": 60})
    await say(app, "/jobs")
    (listing,) = channel.texts("c1")
    assert listing.startswith("Scheduled jobs in this conversation:")
    assert mine.id in listing and "'Call Ana'" in listing
    assert "next Wed 2026-12-02 09:02 -03 (America/Sao_Paulo)" in listing  # 12:02 UTC, in the assistant's zone
    assert "Secret of c2" not in listing
    assert fake_llm.requests == []
    await app.jobs.cancel(CID, mine.id)
    await say(app, "/jobs")
    assert channel.texts("c1")[-1] == "No active jobs in this conversation."


async def test_jobs_right_after_a_reminder_fired_says_no_active_jobs_and_shows_the_last_runs(app, channel, clock):
    job = await remind(app, "Call Ana", in_seconds=120)
    await app.jobs.create(ConversationId("test", "c2"), {"execution_mode": "message", "content": "Secret of c2",
                                                         "in_seconds": 60})
    await tick(app, clock, seconds=120)
    assert channel.texts("c1") == ["Call Ana"]
    await say(app, "/jobs")
    listing = channel.texts("c1")[-1]
    assert listing.startswith("No active jobs in this conversation.\n\nLast runs:\n")
    assert f"- Wed 2026-12-02 09:02 -03 (America/Sao_Paulo): {job.id} 'Call Ana': delivered" in listing
    assert "Secret of c2" not in listing  # another conversation's run is not shown here


async def test_a_locked_database_at_firing_time_delays_the_reminder_but_does_not_lose_it(app_factory, channel, clock):
    from tests.store.test_store_failures import Locker

    app = await app_factory(storage={"busy_timeout_ms": 50})
    job = await remind(app, in_seconds=60)
    locker = Locker(app.config.storage.path)
    try:
        locker.lock()
        await tick(app, clock, seconds=60)
        assert channel.texts() == []
        locker.unlock()
        await tick(app, clock, seconds=30)  # the next sync
    finally:
        locker.close()
    assert channel.texts() == ["Call Ana"]
    (run,) = await app.store.jobs.runs(job.id)
    assert run.status is JobRunStatus.DELIVERED and run.lateness_ms == 30_000


async def test_a_run_left_running_by_a_failed_attempt_is_settled_without_a_restart(app, channel, clock):
    job = await remind(app, "Water the plants", every_seconds=60)
    clock.advance(seconds=60)
    await app.store.jobs.claim_run(job.id, job.next_run_at, lateness_ms=0)  # an attempt that died after claiming
    await tick(app, clock)
    assert channel.texts() == ["Water the plants"]
    await tick(app, clock, seconds=60)
    assert channel.texts() == ["Water the plants"] * 2
    assert [r.status for r in await app.store.jobs.runs(job.id)] == [JobRunStatus.DELIVERED] * 2


async def test_a_timer_that_goes_off_early_waits_for_the_clock(app, channel, clock):
    job = await remind(app, in_seconds=60)
    await app.scheduler._fire(job.id, job.next_run_at)  # as if the wall clock had gone back a minute
    assert channel.texts() == [] and await app.store.jobs.runs(job.id) == []
    await tick(app, clock, seconds=60)
    assert channel.texts() == ["Call Ana"]


async def test_an_app_that_fires_no_jobs_holds_no_scheduler_lock(make_config, clock, channel):
    from bruce.app import build_app

    config = make_config()
    chat = await build_app(config, clock=clock, environ={}, extra_channels=[channel], fire_jobs=False)
    await chat.start()
    try:
        assert chat.scheduler is None
        job = (await chat.jobs.create(ConversationId.parse(CID), {"execution_mode": "message", "content": "Call Ana", "in_seconds": 60})).job
        other_store = await Store.open(config.storage.path, clock)
        daemon = Scheduler(store=other_store, clock=clock, book=chat.jobs, doors=chat.worker, notices=chat.outbox,
                           settings=SchedulerSettings(), leases=Leases(store=other_store.leases, clock=clock))
        try:
            assert await daemon.start() is True  # the lease was free: the daemon fires the chat's jobs
            clock.advance(seconds=60)
            await daemon.sync()
            await daemon.wait_idle()
            assert channel.texts() == ["Call Ana"] and (await chat.store.jobs.get(job.id)).status is JobStatus.DONE
        finally:
            await daemon.stop()
            await daemon.release()
            await other_store.close()
    finally:
        await chat.stop()


async def _reschedule_while_the_run_is_in_flight(app, clock, fake_llm, job, **schedule):
    """The job falls due and its agent turn waits on the model; the owner reschedules it then."""
    clock.advance(hours=23)
    await app.scheduler.sync()
    for _ in range(200):
        if fake_llm.requests:
            break
        await asyncio.sleep(0.01)
    assert fake_llm.requests, "the run never reached the model"
    view = await app.jobs.reschedule(CID, job.id, schedule)
    await app.scheduler.wait_idle()
    return view


async def test_a_cron_job_rescheduled_while_its_run_is_in_flight_keeps_the_new_schedule(app, channel, clock, fake_llm):
    fake_llm.add(Step.delay(0.3, Step.text("Your day: two meetings.")))
    job = (await app.jobs.create(ConversationId.parse(CID), {"execution_mode": "agent", "content": "Brief me on my day.",
                                       "cron": "0 8 * * 1-5"})).job
    view = await _reschedule_while_the_run_is_in_flight(app, clock, fake_llm, job, cron="30 9 * * *")
    assert channel.texts() == ["Your day: two meetings."]
    fresh = await app.store.jobs.get(job.id)
    assert (fresh.schedule_value, fresh.next_run_at) == ("30 9 * * *", view.job.next_run_at)
    assert fresh.status is JobStatus.ACTIVE


async def test_a_one_off_rescheduled_while_its_run_is_in_flight_stays_active_for_its_new_time(
        app, channel, clock, fake_llm):
    fake_llm.add(Step.delay(0.3, Step.text("Checked: the parcel is out for delivery.")))
    job = (await app.jobs.create(ConversationId.parse(CID), {"execution_mode": "agent", "content": "Check the parcel.",
                                       "in_seconds": 23 * 3600})).job
    view = await _reschedule_while_the_run_is_in_flight(app, clock, fake_llm, job, in_seconds=7200)
    fresh = await app.store.jobs.get(job.id)
    assert (fresh.status, fresh.next_run_at) == (JobStatus.ACTIVE, view.job.next_run_at)
    fake_llm.add(Step.text("Checked again: delivered."))
    await tick(app, clock, hours=2)
    assert channel.texts() == ["Checked: the parcel is out for delivery.", "Checked again: delivered."]
    assert (await app.store.jobs.get(job.id)).status is JobStatus.DONE
