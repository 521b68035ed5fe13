"""A run of an untrusted job that stopped at a tool needing the owner's yes (``TurnOutcome.held``).

The run is recorded ``held`` with the tool named, and the owner is told in the job's conversation,
through the outbox, which job wanted which tool with which arguments (``bruce.texts.job_held``):
once, until the job changes. The mark (``proactive_jobs.held_told_at``) is set in the database
before the notice is stored, so a restart never tells twice; ``JobBook`` clears it on any change.
"""

from __future__ import annotations

import structlog

from bruce.jobs.catch_up import Notices
from bruce.records import JobRecord
from bruce.store.jobs import JobStore
from bruce.texts import job_held
from bruce.turns.scope import HeldCall
from bruce.values import ConversationId, JobRunStatus, MessageKind

__all__ = ["record_held"]

log = structlog.get_logger("bruce.jobs.scheduler")  # the scheduler's events


async def record_held(jobs: JobStore, notices: Notices, job: JobRecord, run_id: int, turn_id: str,
                      held: HeldCall) -> JobRunStatus:
    await jobs.finish_run(run_id, status=JobRunStatus.HELD, turn_id=turn_id,
                          error=f"stopped before {held.tool}: it needs the owner's yes (a tainted run)")
    told = await jobs.mark_held_told(job.id)
    if told:
        text = job_held(job.id, held.tool, held.arguments, untrusted=job.untrusted)
        await notices.post(ConversationId.parse(job.conversation_id), text, kind=MessageKind.NOTICE)
    log.warning("scheduler.held", tool=held.tool, told=told)
    return JobRunStatus.HELD
