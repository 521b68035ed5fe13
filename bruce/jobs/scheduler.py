"""The scheduler: fires each proactive job when it is due, once.

``proactive_jobs`` is the one record; APScheduler 3 (``AsyncIOScheduler``, memory job store)
is only the timer, re-loaded from the table at start-up and kept in step with it (each change
through ``JobBook`` re-arms at once; a sync every ``sync_interval_s`` picks up what another
process or ``bruce jobs`` changed). A firing:

1. checks the job is still active and still due at that instant (a stale timer does nothing),
   and that its person is still admitted there: a guest's job is paused, with the reason, once
   they are revoked or out of the config; so is an owner's job in a chat only guests write in
   (``Doors.admitted``);
2. claims the run: inserts its ``job_runs`` row, unique on ``(job_id, scheduled_for)``; a second
   claim (another process, a retry, a restart) gets nothing to do;
3. delivers through the worker's doors: ``post`` (message mode: the text as written, no model;
   a link to an artifact that does not exist is taken out, ``bruce.jobs.links``) or
   ``run_proactive`` (agent mode: ``content`` is the run's instruction; no ``proactive.*`` tool,
   the briefing read tools only (``doors.tools_for``), no tool that needs approval, nothing sent
   when the answer is the quiet token). A run of an
   ``untrusted`` job starts tainted and stops at a tool needing a yes (``bruce.jobs.held``);
4. records the outcome (status, delivered text or error, lateness) and moves the job on: a
   one-off is ``done`` once its delivery is stored; a recurring job gets its next run.

At start-up (``start``), before arming: runs a stopped process left ``running`` are settled
(their message was stored: delivered; an agent run that acted: interrupted, never run twice;
nothing stored: the claim is released and the run fires again), then what fell due while
Bruce was down: a one-off within ``misfire_grace_s`` fires once, beyond it is marked ``missed``
and the user told once; a recurring job fires once for all its missed runs (coalesced). The
configured briefing is made, updated or cancelled before that (``bruce.jobs.briefing``).

One process per database runs the scheduler: the holder of its ``scheduler`` lease, kept in the
database (``bruce.runtime.leases``), so any path to the file finds it. A claim records its process
and needs the lease; a run left ``running`` is settled only once its claimer is gone.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import structlog
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.date import DateTrigger

from bruce.clock import Clock, parse_iso, utc_iso
from bruce.errors import ShuttingDown, StoreError
from bruce.jobs.book import QUIET_TOKEN, JobBook
from bruce.jobs.briefing import Briefing
from bruce.jobs.catch_up import CatchUp, Notices, ms
from bruce.jobs.doors import Doors, no_proactive_tools, tools_for
from bruce.jobs.held import record_held
from bruce.llm.budget import Budget
from bruce.records import JobRecord, JobRunRecord
from bruce.runtime.leases import SCHEDULER, Leases, new_owner, owner_alive
from bruce.store import Store
from bruce.values import (
    ConversationId,
    ExecutionMode,
    JobRunStatus,
    JobStatus,
    MessageStatus,
    Notify,
    TurnStatus,
)

__all__ = ["Scheduler", "SchedulerSettings", "Doors", "no_proactive_tools"]

log = structlog.get_logger(__name__)

EARLY_TOLERANCE = timedelta(milliseconds=500)  # a timer this early still fires (clock granularity)


@dataclass(frozen=True, slots=True)
class SchedulerSettings:
    misfire_grace_s: float = 21600.0
    max_failures: int = 3
    sync_interval_s: float = 30.0


class Scheduler:
    def __init__(self, *, store: Store, clock: Clock, book: JobBook, doors: Doors, notices: Notices,
                 settings: SchedulerSettings, budget: Budget | None = None, leases: Leases | None = None,
                 briefing: Briefing | None = None) -> None:
        self._budget = budget
        self._briefing = briefing  # kept in line with the config at each start (``bruce.jobs.briefing``)
        self._jobs = store.jobs
        self._lease_store = store.leases
        self._leases = leases  # None: no lease (tests that run two schedulers on purpose)
        self._owner = leases.owner if leases is not None else new_owner()  # recorded on each run it claims
        self._clock = clock
        self._book = book
        self._doors = doors
        self._notices = notices
        self._settings = settings
        self._timer: AsyncIOScheduler | None = None
        self._armed: dict[str, str] = {}  # job id -> the next_run_at its timer is set for
        self._firing: dict[tuple[str, str], asyncio.Task[None]] = {}
        self._sync_task: asyncio.Task[None] | None = None
        self._changes: set[str] = set()
        self._change_task: asyncio.Task[None] | None = None
        self._unsubscribe: Callable[[], None] | None = None  # from the book's changes, while running
        self.running = False

    # start and stop ----------------------------------------------------------------------

    async def start(self) -> bool:
        """Take the lease, settle what the last process left, catch up, arm every active job.
        False (and a warning) when another process runs the scheduler for this database."""
        holder = None if self._leases is None else await self._leases.take(SCHEDULER)  # None: ours now
        if holder is not None:
            log.warning("scheduler.not_started", reason="another Bruce process runs the scheduler for this database; "
                        "this one takes over when it stops", holder=holder)
            self._sync_task = asyncio.create_task(self._wait_for_lease(), name="scheduler.wait_for_lease")
            return False
        await self._begin()
        return True

    async def _wait_for_lease(self) -> None:
        """A second process: try the lease again every sync interval; take over once its holder is gone."""
        while self._leases is not None and await self._leases.take(SCHEDULER) is not None:
            await asyncio.sleep(self._settings.sync_interval_s)
        log.info("scheduler.taking_over")
        try:
            await self._begin()
        except Exception:
            log.exception("scheduler.take_over_failed")

    async def _begin(self) -> None:
        await self._settle_unfinished()
        if self._briefing is not None:
            try:
                await self._briefing.keep()
            except Exception:  # the other jobs still run
                log.exception("briefing.keep_failed")
        await CatchUp(store_jobs=self._jobs, book=self._book, notices=self._notices, clock=self._clock,
                      grace_s=self._settings.misfire_grace_s).run()
        self._timer = AsyncIOScheduler(timezone=UTC, job_defaults={"misfire_grace_time": None, "coalesce": True,
                                                                   "max_instances": 1})
        self.running = True
        await self.sync()  # armed before the timer starts: APScheduler takes them in one go
        self._timer.start()
        if self._unsubscribe is None:
            self._unsubscribe = self._book.subscribe(self._changed)
        self._sync_task = asyncio.create_task(self._sync_loop(), name="scheduler.sync")
        log.info("scheduler.started", jobs=len(self._armed) + len(self._firing))

    async def stop(self) -> None:
        """No new firing; runs in flight finish with the worker's drain (``Worker.close``)."""
        self.running = False
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        for task in (self._sync_task, self._change_task):  # (the sync task may be the wait for the lease)
            if task is not None:
                task.cancel()
        await asyncio.gather(*(t for t in (self._sync_task, self._change_task) if t is not None),
                             return_exceptions=True)
        if self._timer is not None and self._timer.running:
            self._timer.shutdown(wait=False)
        self._timer = None

    async def wait_idle(self) -> None:
        """Every firing in flight has finished (tests, and shutdown after the worker's drain)."""
        while self._firing:
            await asyncio.gather(*self._firing.values(), return_exceptions=True)

    async def release(self) -> None:
        """Give the lease back (a clean stop: the next process takes over at once)."""
        if self._leases is not None:
            await self._leases.release(SCHEDULER)

    async def _orphaned(self, run: JobRunRecord) -> bool:
        """A run left ``running`` is settled here only when this process or no live one claimed it."""
        return run.owner == self._owner or not await owner_alive(self._lease_store, run.owner,
                                                                  now=utc_iso(self._clock.now()))

    # keeping the timer in step with the table -------------------------------------------

    async def sync(self) -> None:
        """Arm every active job as the table has it, disarm the rest, fire what is due now."""
        if not self.running:
            return
        if self._leases is not None and not self._leases.holds(SCHEDULER):
            self.running = False  # taken over while this process stalled: the new holder fires now
            log.error("scheduler.lease_lost", hint="another process runs the scheduler for this database now")
            return
        try:
            if await self._jobs.mark_sent_runs():
                log.info("scheduler.unsent_runs_delivered")
        except StoreError as exc:  # only bookkeeping: the next sync does it
            log.warning("scheduler.mark_sent_failed", error=str(exc))
        index = await self._jobs.due_index()
        for job_id in set(self._armed) - set(index):
            self._disarm(job_id)
        now = self._clock.now()
        for job_id, next_run_at in index.items():
            if parse_iso(next_run_at) <= now:
                self._launch(job_id, next_run_at)
            elif self._armed.get(job_id) != next_run_at:
                self._arm(job_id, next_run_at)

    def _changed(self, job_id: str) -> None:
        """``JobBook`` changed a job: re-arm it at once (after the change is stored)."""
        self._changes.add(job_id)
        if self._change_task is None or self._change_task.done():
            self._change_task = asyncio.create_task(self._apply_changes(), name="scheduler.changes")

    async def _apply_changes(self) -> None:
        while self._changes and self.running:
            job_id = self._changes.pop()
            try:
                job = await self._jobs.get(job_id)
            except Exception:
                log.exception("scheduler.reload_failed", job=job_id)
                continue
            if job is None or job.status is not JobStatus.ACTIVE or job.next_run_at is None:
                self._disarm(job_id)
            elif parse_iso(job.next_run_at) <= self._clock.now():
                self._launch(job.id, job.next_run_at)
            else:
                self._arm(job.id, job.next_run_at)

    async def _sync_loop(self) -> None:
        while True:
            await asyncio.sleep(self._settings.sync_interval_s)
            try:
                await self.sync()
            except Exception:
                log.exception("scheduler.sync_failed")

    def _arm(self, job_id: str, next_run_at: str) -> None:
        """Set the job's timer: APScheduler counts real time, so the instant is the injected
        clock's distance from now (the same thing with the system clock)."""
        assert self._timer is not None
        delay = parse_iso(next_run_at) - self._clock.now()
        run_date = datetime.now(UTC) + max(delay, timedelta(0))
        self._timer.add_job(self._due, DateTrigger(run_date=run_date, timezone=UTC), id=job_id,
                            args=(job_id, next_run_at), replace_existing=True)
        self._armed[job_id] = next_run_at

    def _disarm(self, job_id: str) -> None:
        if self._armed.pop(job_id, None) is not None and self._timer is not None and self._timer.get_job(job_id):
            self._timer.remove_job(job_id)

    async def _due(self, job_id: str, scheduled_for: str) -> None:
        """The timer went off (APScheduler's task): the firing is our own task."""
        if self._armed.get(job_id) == scheduled_for:
            del self._armed[job_id]
        if self.running:
            self._launch(job_id, scheduled_for)

    def _launch(self, job_id: str, scheduled_for: str) -> None:
        key = (job_id, scheduled_for)
        if key in self._firing:
            return
        task = asyncio.create_task(self._guarded(job_id, scheduled_for), name=f"job:{job_id}")
        self._firing[key] = task
        task.add_done_callback(lambda _: self._firing.pop(key, None))

    # firing --------------------------------------------------------------------------------

    async def _guarded(self, job_id: str, scheduled_for: str) -> None:
        with structlog.contextvars.bound_contextvars(job=job_id, scheduled_for=scheduled_for):
            try:
                await self._fire(job_id, scheduled_for)
            except Exception:  # the run stays 'running': settled at the next start
                log.exception("scheduler.fire_crashed")

    async def _fire(self, job_id: str, scheduled_for: str, *, again: bool = True) -> None:
        job = await self._jobs.get(job_id)
        if job is None or job.status is not JobStatus.ACTIVE or job.next_run_at != scheduled_for:
            return  # paused, cancelled, rescheduled or already moved on meanwhile
        lateness = self._clock.now() - parse_iso(scheduled_for)
        if lateness < -EARLY_TOLERANCE:  # the wall clock went back since the timer was set
            log.info("scheduler.early", early_ms=-ms(lateness))
            self._arm(job_id, scheduled_for)
            return
        if not await self._doors.admitted(job.person, ConversationId.parse(job.conversation_id)):  # not run for them
            log.warning("scheduler.paused_not_admitted", person=job.person)
            await self._jobs.update(job.id, expect_next_run_at=scheduled_for, status=JobStatus.PAUSED,
                                    flagged=f"paused: {job.person} is no longer admitted here (revoked, not in the "
                                            "config, or the owner's job in a chat the owner does not write in)")
            return
        run_id = await self._jobs.claim_run(job_id, scheduled_for, lateness_ms=max(ms(lateness), 0), owner=self._owner,
                                            lease=SCHEDULER if self._leases is not None else None)
        if run_id is None:
            if again:
                await self._claimed_before(job, scheduled_for)
            return
        log.info("scheduler.firing", mode=str(job.execution_mode), lateness_ms=ms(lateness))
        try:
            status, detail = await self._deliver(job, run_id)
        except ShuttingDown:
            await self._jobs.release_run(run_id, owner=self._owner)  # nothing was started: it fires at the next start
            log.info("scheduler.deferred_until_restart")
            return
        except Exception as exc:
            log.exception("scheduler.delivery_failed")
            await self._jobs.finish_run(run_id, status=JobRunStatus.FAILED, error=f"{type(exc).__name__}: {exc}"[:500])
            status, detail = JobRunStatus.FAILED, f"{type(exc).__name__}: {exc}"
        await self._advance(job, scheduled_for, status, detail)

    async def _claimed_before(self, job: JobRecord, scheduled_for: str) -> None:
        """The run was claimed already, yet the job still waits for it: an attempt in this
        process failed part-way (the database was locked, say), or another scheduler has it.
        A finished run only moves the job on; a run left ``running`` is settled as at start-up,
        when its claimer is this process or gone (``_orphaned``), never while another lives."""
        run = await self._jobs.run_for(job.id, scheduled_for)
        if run is None:
            return
        if run.status is not JobRunStatus.RUNNING:
            log.info("scheduler.run_finished_before", status=str(run.status))
            await self._advance(job, scheduled_for, run.status, run.error)
        elif await self._orphaned(run):
            await self._settle(job, run)
            if await self._jobs.run_for(job.id, scheduled_for) is None:  # released: nothing went out
                await self._fire(job.id, scheduled_for, again=False)
        else:
            log.info("scheduler.already_claimed")

    async def _deliver(self, job: JobRecord, run_id: int) -> tuple[JobRunStatus, str | None]:
        """Send the run's message or run its turn; record it. (status, error or None)."""
        conversation = ConversationId.parse(job.conversation_id)  # the job's stored row
        if job.execution_mode is ExecutionMode.MESSAGE:
            text = await self._book.text_to_send(job)  # a link to no saved artifact is taken out
            message_id = await self._doors.post(conversation, text)
            return await self._record_sent(run_id, message_id, None, text)
        over = await self._budget.reached() if self._budget is not None else None
        if over is not None:  # a reminder needs no model and still fires; a briefing waits for the budget
            log.warning("scheduler.over_budget", tokens=over.tokens, usd=round(over.usd, 4))
            await self._jobs.finish_run(run_id, status=JobRunStatus.OVER_BUDGET,
                                        error=f"skipped: the day's LLM budget is spent (resets {utc_iso(over.resets_at)})")
            return JobRunStatus.OVER_BUDGET, None
        quiet = QUIET_TOKEN if job.notify is Notify.IF_ACTIONABLE else None
        # a trusted job's content stands for the owner's words in its run: a URL in it was not composed by
        # the run. An untrusted job's is not the owner's: its URLs count as composed (asked, so the run holds)
        outcome = await self._doors.run_proactive(conversation, job.content, job_id=job.id,  # as the job's person
                                                  tools=tools_for(job.id), quiet_token=quiet, tainted=job.untrusted,
                                                  owner_text="" if job.untrusted else job.content, person=job.person)
        if outcome.held is not None:
            return await record_held(self._jobs, self._notices, job, run_id, outcome.turn_id, outcome.held), None
        if outcome.quiet:
            await self._jobs.finish_run(run_id, status=JobRunStatus.QUIET, turn_id=outcome.turn_id)
            return JobRunStatus.QUIET, None
        if not outcome.ok:
            await self._jobs.finish_run(run_id, status=JobRunStatus.FAILED, turn_id=outcome.turn_id,
                                        text=outcome.text, error="the agent run failed; the user was told")
            return JobRunStatus.FAILED, "the agent run failed"
        reply = await self._jobs.reply_of_turn(outcome.turn_id)
        return await self._record_sent(run_id, reply[0] if reply else None, outcome.turn_id, outcome.text)

    async def _record_sent(self, run_id: int, message_id: int | None, turn_id: str | None,
                           text: str | None) -> tuple[JobRunStatus, str | None]:
        state = await self._jobs.message_status(message_id) if message_id is not None else None
        sent = state is not None and state[0] == MessageStatus.SENT
        status = JobRunStatus.DELIVERED if sent else JobRunStatus.UNSENT
        error = None if sent else (state[1] if state else None) or "not sent yet; the outbox keeps trying"
        await self._jobs.finish_run(run_id, status=status, turn_id=turn_id, message_id=message_id, text=text,
                                    error=error)
        return status, error

    async def _advance(self, job: JobRecord, scheduled_for: str, status: JobRunStatus, error: str | None) -> None:
        """Move the job past this run: a one-off is done (its delivery is stored, or its failure
        told), a recurring one gets its next run; consecutive failed deliveries flag it."""
        ok = status in (JobRunStatus.DELIVERED, JobRunStatus.QUIET, JobRunStatus.OVER_BUDGET, JobRunStatus.HELD)
        failures = 0 if ok else job.failures + 1
        changes: dict[str, Any] = {"failures": failures}
        if not ok and failures >= self._settings.max_failures:
            changes["flagged"] = f"{failures} runs in a row not delivered (last: {error})"[:300]
            log.error("scheduler.job_flagged", failures=failures, error=error)
        elif ok:
            changes["flagged"] = None
        schedule = self._book.schedule_of(job)
        if schedule.recurring:
            after = max(self._clock.now(), parse_iso(scheduled_for))
            nxt = schedule.next_after(after)
            changes["next_run_at"] = utc_iso(nxt) if nxt else None
        else:
            changes.update(status=JobStatus.DONE, next_run_at=None)
        # only the run's own next_run_at is moved: a reschedule, run-now or cancel made while the
        # run was in flight changed it (or the status), and the owner's change stands as made
        if await self._jobs.update(job.id, expect_next_run_at=scheduled_for, **changes):
            log.info("scheduler.fired", status=str(status), next_run_at=changes.get("next_run_at"))
        else:
            log.info("scheduler.fired_job_changed_meanwhile", status=str(status))
        fresh = await self._jobs.get(job.id)
        if fresh is not None and fresh.status is JobStatus.ACTIVE and fresh.next_run_at and self.running:
            if parse_iso(fresh.next_run_at) <= self._clock.now():
                self._launch(fresh.id, fresh.next_run_at)
            else:
                self._arm(fresh.id, fresh.next_run_at)

    # start-up ----------------------------------------------------------------------------

    async def _settle_unfinished(self) -> None:
        """Runs the previous process left ``running``: each is settled once, never delivered twice."""
        for run in await self._jobs.unfinished_runs():
            job = await self._jobs.get(run.job_id)
            if job is None:
                continue
            if not await self._orphaned(run):  # a live process claimed it: its own to finish
                log.info("scheduler.run_of_live_process_left", job=job.id, owner=run.owner)
                continue
            with structlog.contextvars.bound_contextvars(job=job.id, scheduled_for=run.scheduled_for):
                await self._settle(job, run)

    async def _settle(self, job: JobRecord, run: JobRunRecord) -> None:
        if job.execution_mode is ExecutionMode.MESSAGE:
            message_id, text = await self._stored_message(job, run)
            if message_id is None:  # nothing was stored: it was never sent; it fires again
                await self._jobs.release_run(run.id, owner=run.owner)
                log.info("scheduler.run_released")
                return
            status, error = await self._record_sent(run.id, message_id, None, text)
            log.info("scheduler.run_settled", status=str(status))
        else:
            turn = await self._jobs.turn_for_job(job.id, run.started_at)
            if turn is None:
                await self._jobs.release_run(run.id, owner=run.owner)
                log.info("scheduler.run_released")
                return
            turn_id, turn_status = turn
            reply = await self._jobs.reply_of_turn(turn_id)
            if turn_status == TurnStatus.OK and reply is not None:
                status, error = await self._record_sent(run.id, reply[0], turn_id, None)
            elif turn_status == TurnStatus.OK:
                status, error = JobRunStatus.QUIET, None
                await self._jobs.finish_run(run.id, status=status, turn_id=turn_id)
            elif await self._jobs.tools_run_in(turn_id) == 0 and reply is None:
                await self._jobs.release_run(run.id, owner=run.owner)  # it did nothing yet: run it again
                log.info("scheduler.run_released")
                return
            else:  # it may have acted: never run twice; the user was told what completed
                status, error = JobRunStatus.INTERRUPTED, "the process stopped during the run"
                await self._jobs.finish_run(run.id, status=status, turn_id=turn_id, error=error)
            log.info("scheduler.run_settled", status=str(status))
        if job.next_run_at == run.scheduled_for:
            await self._advance(job, run.scheduled_for, status, error)

    async def _stored_message(self, job: JobRecord, run: JobRunRecord) -> tuple[int | None, str]:
        """The message a stopped run of a reminder stored, if any, and its text: the content as
        it is sent now, or as written (a link was kept then whose artifact is gone since)."""
        text = await self._book.text_to_send(job)
        for candidate in dict.fromkeys((text, job.content)):
            message_id = await self._jobs.outbound_since(job.conversation_id, candidate, run.started_at)
            if message_id is not None:
                return message_id, candidate
        return None, text
