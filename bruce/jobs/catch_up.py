"""What fell due while Bruce was not running, settled once at start-up (``Scheduler.start``).

A one-off due within ``scheduler.misfire_grace_s`` is left due: the scheduler arms it and it fires
at once. Beyond the grace it is ``missed``, and the user is told once (the run's claim is unique).
A recurring job fires once for all its runs within the grace (coalesced); runs beyond it are
recorded as missed and the job moves on to its next run.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Protocol

import structlog

from bruce.clock import Clock, parse_iso, utc_iso
from bruce.jobs.book import JobBook
from bruce.jobs.schedule import Schedule, local_text
from bruce.records import JobRecord
from bruce.store.jobs import JobStore
from bruce.texts import job_missed
from bruce.values import ConversationId, JobRunStatus, JobStatus, MessageKind

__all__ = ["CatchUp", "Notices", "latest_within", "ms"]

log = structlog.get_logger("bruce.jobs.scheduler")  # the scheduler's events, as before


class Notices(Protocol):
    async def post(self, conversation_id: ConversationId, text: str, *, kind: MessageKind = ...) -> int: ...


class CatchUp:
    def __init__(self, *, store_jobs: JobStore, book: JobBook, notices: Notices, clock: Clock, grace_s: float) -> None:
        self._jobs = store_jobs
        self._book = book
        self._notices = notices
        self._clock = clock
        self._grace_s = grace_s

    async def run(self) -> None:
        """What fell due while Bruce was down: fired once (coalesced) within the grace;
        a one-off beyond it is missed and the user told once."""
        now = self._clock.now()
        grace = timedelta(seconds=self._grace_s)
        for job in await self._jobs.active():
            if job.next_run_at is None or parse_iso(job.next_run_at) > now:
                continue
            with structlog.contextvars.bound_contextvars(job=job.id):
                schedule = self._book.schedule_of(job)
                due = parse_iso(job.next_run_at)
                if not schedule.recurring:
                    if now - due > grace:
                        await self._missed(job, due, now)
                    continue  # within the grace: armed as due, it fires at once
                latest = latest_within(schedule, due, now, grace)
                if latest is None:  # every missed run is beyond the grace: on to the next one
                    nxt = schedule.next_after(now)
                    await self._jobs.claim_run(job.id, job.next_run_at, lateness_ms=ms(now - due),
                                               status=JobRunStatus.MISSED, error="due while Bruce was not running")
                    await self._jobs.update(job.id, expect=("active",), next_run_at=utc_iso(nxt) if nxt else None)
                    log.info("scheduler.missed_runs_skipped", next_run_at=utc_iso(nxt) if nxt else None)
                elif latest != due:
                    await self._jobs.update(job.id, expect=("active",), next_run_at=utc_iso(latest))
                    log.info("scheduler.missed_runs_coalesced", first=job.next_run_at, firing=utc_iso(latest))

    async def _missed(self, job: JobRecord, due: datetime, now: datetime) -> None:
        claimed = await self._jobs.claim_run(job.id, job.next_run_at or utc_iso(due), lateness_ms=ms(now - due),
                                             status=JobRunStatus.MISSED, error="due while Bruce was not running")
        if not await self._jobs.update(job.id, expect=("active",), status=JobStatus.MISSED, next_run_at=None):
            return
        if claimed is not None:  # told once: the claim is unique
            when = local_text(due, self._book.schedule_of(job).zone)
            await self._notices.post(ConversationId.parse(job.conversation_id), job_missed(job.content, when, job.execution_mode),
                                     kind=MessageKind.NOTICE)
        log.warning("scheduler.job_missed", late_s=int((now - due).total_seconds()))


def latest_within(schedule: Schedule, due: datetime, now: datetime, grace: timedelta) -> datetime | None:
    """The last run at or before ``now`` and no older than the grace (None: there is none)."""
    start = max(due, now - grace)
    found = due if due >= now - grace else None
    cursor = start
    for _ in range(100_000):  # runs at least a minute apart over at most the grace (30 days max)
        nxt = schedule.next_after(cursor)
        if nxt is None or nxt > now:
            break
        found, cursor = nxt, nxt
    return found


def ms(delta: timedelta) -> int:
    return int(delta.total_seconds() * 1000)
