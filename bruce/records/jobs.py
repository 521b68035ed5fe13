"""Proactive jobs and their runs (``store.jobs``)."""

from __future__ import annotations

from dataclasses import dataclass

from bruce.values import OWNER, ExecutionMode, JobRunStatus, JobStatus, Notify

__all__ = ["JobRecord", "JobRunRecord"]


@dataclass(frozen=True, slots=True)
class JobRecord:
    id: str
    conversation_id: str
    execution_mode: ExecutionMode
    content: str
    schedule_kind: str
    schedule_value: str
    timezone: str
    notify: Notify
    description: str
    status: JobStatus
    next_run_at: str | None
    anchor_at: str
    failures: int
    flagged: str | None
    dedup_key: str
    created_at: str
    updated_at: str
    person: str = OWNER  # whose job: the owner, or a guest as '<channel>:<user id>'; a run acts as them
    # made or changed after untrusted text entered the turn (or by an MCP client): every run starts tainted
    untrusted: bool = False
    # when the owner was told a run stopped at a tool needing a yes (None: not since the job last changed)
    held_told_at: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "untrusted", bool(self.untrusted))
        object.__setattr__(self, "execution_mode", ExecutionMode(self.execution_mode))
        object.__setattr__(self, "notify", Notify(self.notify))
        object.__setattr__(self, "status", JobStatus(self.status))


@dataclass(frozen=True, slots=True)
class JobRunRecord:
    id: int
    job_id: str
    scheduled_for: str
    started_at: str
    finished_at: str | None
    status: JobRunStatus
    turn_id: str | None
    message_id: int | None
    delivered_text: str | None
    error: str | None
    lateness_ms: int | None
    owner: str | None = None  # the process that claimed it (its lease owner id); None: not recorded

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", JobRunStatus(self.status))
