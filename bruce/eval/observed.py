"""What happened in one user turn of a case, read back from the case's own database: the reply,
the tool executions, the jobs, the model calls. ``checks`` compares it with the expectations;
``report`` writes it down."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from bruce.records import JobRecord
from bruce.store import Store
from bruce.values import LLMCallStatus

__all__ = ["ToolRun", "CallStats", "TurnRecord", "job_dict", "call_stats"]


@dataclass(frozen=True, slots=True)
class ToolRun:
    """One ``tool_executions`` row: the contract name, the arguments as audited, how it ended."""

    name: str
    arguments: Any
    status: str
    error: str | None = None
    output: Any = None

    @property
    def succeeded(self) -> bool:
        return self.status in ("ok", "cached")

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "arguments": self.arguments, "status": self.status, "error": self.error}


@dataclass(frozen=True, slots=True)
class CallStats:
    """Model calls from ``llm_calls``: how many, how many failed, tokens, cost and latency."""

    calls: int = 0
    failed: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None  # None: no call had a known price
    latency_ms: float = 0.0
    models: tuple[str, ...] = ()

    def __add__(self, other: CallStats) -> CallStats:
        costs = [c for c in (self.cost_usd, other.cost_usd) if c is not None]
        return CallStats(self.calls + other.calls, self.failed + other.failed,
                         self.prompt_tokens + other.prompt_tokens, self.completion_tokens + other.completion_tokens,
                         sum(costs) if costs else None, self.latency_ms + other.latency_ms,
                         tuple(dict.fromkeys((*self.models, *other.models))))

    def as_dict(self) -> dict[str, Any]:
        found = asdict(self)
        found["models"] = list(self.models)
        found["latency_ms"] = round(self.latency_ms, 1)
        return found


def job_dict(job: JobRecord) -> dict[str, Any]:
    return {"id": job.id, "mode": str(job.execution_mode), "content": job.content, "status": str(job.status),
            "schedule_kind": job.schedule_kind, "schedule_value": job.schedule_value, "timezone": job.timezone,
            "description": job.description, "next_run_at": job.next_run_at}


@dataclass(frozen=True, slots=True)
class TurnRecord:
    index: int  # 1-based, as messages name it
    user: str
    reply: str
    said_at: datetime  # the case's clock when the user spoke
    tools: tuple[ToolRun, ...] = ()
    jobs: tuple[JobRecord, ...] = ()  # every job of the conversation after the turn
    unbacked_claims: int = 0  # the turn row's count: claims in the model's first answer that no tool backed
    confirmations: tuple[str, ...] = ()  # tools waiting for the user's approval, as the channel showed them
    llm: CallStats = field(default_factory=CallStats)
    duration_ms: float = 0.0
    error: str | None = None  # the turn failed (the turn row's error), or no turn ran

    def as_dict(self) -> dict[str, Any]:
        return {"index": self.index, "user": self.user, "reply": self.reply, "said_at": self.said_at.isoformat(),
                "tools": [t.as_dict() for t in self.tools], "jobs": [job_dict(j) for j in self.jobs],
                "unbacked_claims": self.unbacked_claims, "confirmations": list(self.confirmations),
                "llm": self.llm.as_dict(), "duration_ms": round(self.duration_ms, 1), "error": self.error}


async def call_stats(store: Store, turn_ids: Sequence[str] | None) -> CallStats:
    """Model calls of these turns (None: every call in the case's database)."""
    calls = await store.audit.llm_calls_of(turn_ids)
    costs = [c.cost_usd for c in calls if c.cost_usd is not None]
    return CallStats(calls=len(calls), failed=sum(c.status is not LLMCallStatus.OK for c in calls),
                     prompt_tokens=sum(c.prompt_tokens or 0 for c in calls),
                     completion_tokens=sum(c.completion_tokens or 0 for c in calls),
                     cost_usd=sum(costs) if costs else None, latency_ms=sum(c.latency_ms for c in calls),
                     models=tuple(dict.fromkeys(c.model for c in calls)))
