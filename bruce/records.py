"""The records the store hands out and takes in: frozen values, never dicts, that any layer may
import without importing the store (this module knows no database, only ``bruce.values``).

``from_json`` reads back a JSON column the store wrote (tool inputs and outputs, a
confirmation's arguments)."""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from typing import Any

from bruce.values import (
    ConfirmationState,
    Direction,
    ExecutionMode,
    FactStatus,
    FactType,
    JobRunStatus,
    JobStatus,
    LLMCallStatus,
    MessageKind,
    MessageStatus,
    Notify,
    PairingState,
    PayloadKind,
    ToolStatus,
    TurnSource,
    TurnStatus,
)

__all__ = [
    "as_dict",
    "StoredLLMCall",
    "StoredToolExecution",
    "TracedMessage",
    "TracedReply",
    "TurnTrace",
    "Count",
    "ModelTotals",
    "LatencyHistogram",
    "StoredMessage",
    "Summary",
    "TurnView",
    "StoredTurn",
    "LLMCallRecord",
    "ToolExecutionRecord",
    "ActedTool",
    "ConfirmationRecord",
    "ArtifactRecord",
    "PairingRequestRecord",
    "JobRecord",
    "JobRunRecord",
    "Fact",
    "MemorySummary",
    "Spent",
    "UsageRow",
    "from_json",
]


def from_json(text: Any) -> Any:
    """A column the store wrote as JSON, read back: the JSON value, or the text as it is when it is not JSON."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return text


# conversations, messages, turns (store.messages) --------------------------------------------------

@dataclass(frozen=True, slots=True)
class StoredMessage:
    id: int
    conversation_id: str
    direction: Direction
    role: str
    kind: MessageKind
    sender_id: str | None
    text: str
    platform_message_id: str | None
    status: MessageStatus
    created_at: str
    turn_id: str | None = None
    parts_sent: int = 0
    send_attempts: int = 0
    send_error: str | None = None
    retry_at: str | None = None
    payload_kind: PayloadKind = PayloadKind.TEXT  # what the outbox sends: the text, a confirmation, a file
    payload: str | None = None  # JSON for a confirmation or a file

    def __post_init__(self) -> None:  # the database hands out plain strings
        object.__setattr__(self, "direction", Direction(self.direction))
        object.__setattr__(self, "kind", MessageKind(self.kind))
        object.__setattr__(self, "status", MessageStatus(self.status))
        object.__setattr__(self, "payload_kind", PayloadKind(self.payload_kind))


@dataclass(frozen=True, slots=True)
class Summary:
    summary: str
    up_to_message_id: int
    created_at: str


@dataclass(frozen=True, slots=True)
class TurnView:
    """What a turn starts from: the session summary, when the message before the turn's came,
    and the history the model sees."""

    summary: Summary | None
    previous_at: str | None  # when the message before the turn's own was stored
    history: list[StoredMessage]


@dataclass(frozen=True, slots=True)
class StoredTurn:
    """One exchange (a ``turns`` row): what started it, how it ended, what it counted."""

    id: str
    conversation_id: str
    inbound_message_id: int | None
    source: TurnSource
    status: TurnStatus
    started_at: str
    finished_at: str | None = None
    llm_calls: int = 0
    tool_calls: int = 0
    hit_ceiling: bool = False
    stopped_repeat: bool = False
    unbacked_claims: int = 0  # claims in the model's first answer that no tool backed
    job_id: str | None = None
    error: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "source", TurnSource(self.source))
        object.__setattr__(self, "status", TurnStatus(self.status))
        object.__setattr__(self, "hit_ceiling", bool(self.hit_ceiling))
        object.__setattr__(self, "stopped_repeat", bool(self.stopped_repeat))


# the audit trail (store.audit) --------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class LLMCallRecord:
    turn_id: str
    seq: int
    model: str
    status: LLMCallStatus
    latency_ms: float
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cost_usd: float | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class ToolExecutionRecord:
    turn_id: str | None
    conversation_id: str | None
    call_id: str | None
    tool_name: str
    risk: str | None
    input: Any
    output: Any
    status: ToolStatus
    error: str | None
    latency_ms: float
    source: TurnSource
    idempotency_key: str | None = None
    server: str | None = None  # the MCP server of a remote tool


@dataclass(frozen=True, slots=True)
class ActedTool:
    """A tool call that acted (or asked for approval) in a turn: what a crash may have cut off."""

    tool_name: str
    status: ToolStatus
    confirmation_id: str | None


# confirmations, artifacts, pairing ----------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class ConfirmationRecord:
    id: str
    conversation_id: str
    user_id: str | None
    turn_id: str | None
    call_id: str | None
    tool_name: str
    arguments: str  # JSON
    preview: str | None  # JSON
    step_up: bool
    status: ConfirmationState
    created_at: str
    expires_at: str
    decided_at: str | None
    decided_via: str | None
    result: str | None  # JSON

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", ConfirmationState(self.status))
        object.__setattr__(self, "step_up", bool(self.step_up))


@dataclass(frozen=True, slots=True)
class ArtifactRecord:
    id: str
    conversation_id: str | None
    turn_id: str | None
    title: str | None
    filename: str
    format: str
    path: str
    size_bytes: int
    sha256: str
    created_at: str


@dataclass(frozen=True, slots=True)
class PairingRequestRecord:
    code: str
    channel: str
    sender_id: str
    chat_id: str
    display_name: str | None
    status: PairingState
    created_at: str
    expires_at: str
    decided_at: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", PairingState(self.status))


# proactive jobs and their runs (store.jobs) -------------------------------------------------------

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

    def __post_init__(self) -> None:
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

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", JobRunStatus(self.status))


# long-term memory (store.memory) ------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Fact:
    id: int
    type: FactType
    content: str
    confidence: float
    status: FactStatus
    origin: str
    conversation_id: str | None
    source_turn_id: str | None
    created_at: str
    last_seen_at: str
    summarized_in: int | None

    def __post_init__(self) -> None:
        object.__setattr__(self, "type", FactType(self.type))
        object.__setattr__(self, "status", FactStatus(self.status))

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "type": str(self.type), "content": self.content, "confidence": self.confidence,
                "status": str(self.status), "origin": self.origin, "conversation_id": self.conversation_id,
                "source_turn_id": self.source_turn_id, "created_at": self.created_at,
                "last_seen_at": self.last_seen_at, "summarized_in": self.summarized_in}


@dataclass(frozen=True, slots=True)
class MemorySummary:
    id: int
    content: str
    period_start: str
    period_end: str
    created_at: str

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "content": self.content, "period_start": self.period_start,
                "period_end": self.period_end, "created_at": self.created_at}


# model spending (store.usage) ---------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Spent:
    tokens: int
    usd: float
    calls: int


@dataclass(frozen=True, slots=True)
class UsageRow:
    day: str
    model: str
    calls: int
    failed: int
    prompt_tokens: int
    completion_tokens: int
    usd: float


# the admin page's view of the audit (store.audit, store.stats) --------------------------------------

def as_dict(record: Any) -> dict[str, Any]:
    """A record's fields by name, in their order (for a JSON answer)."""
    return {f.name: getattr(record, f.name) for f in fields(record)}


@dataclass(frozen=True, slots=True)
class StoredLLMCall:
    """An ``llm_calls`` row as the audit shows it."""

    id: int
    turn_id: str
    seq: int
    model: str
    status: str
    latency_ms: float
    prompt_tokens: int | None
    completion_tokens: int | None
    cost_usd: float | None
    error: str | None
    created_at: str


@dataclass(frozen=True, slots=True)
class StoredToolExecution:
    """A ``tool_executions`` row as the audit shows it (``input`` and ``output`` as stored: JSON text)."""

    id: int
    turn_id: str | None
    conversation_id: str | None
    call_id: str | None
    tool_name: str
    risk: str | None
    input: str
    output: str | None
    status: str
    error: str | None
    latency_ms: float
    source: str
    idempotency_key: str | None
    created_at: str
    server: str | None


@dataclass(frozen=True, slots=True)
class TracedMessage:
    """The message a turn answered, as its trace shows it."""

    id: int
    text: str
    sender_id: str | None
    created_at: str


@dataclass(frozen=True, slots=True)
class TracedReply:
    """A reply a turn stored, as its trace shows it."""

    id: int
    kind: str
    text: str
    status: str
    created_at: str


@dataclass(frozen=True, slots=True)
class TurnTrace:
    """One turn, the message it answered, its model calls (in order), its tool executions and its replies."""

    turn: StoredTurn
    message: TracedMessage | None
    llm_calls: list[StoredLLMCall]
    tool_executions: list[StoredToolExecution]
    replies: list[TracedReply]


@dataclass(frozen=True, slots=True)
class Count:
    """How many rows share ``labels`` (the grouped columns, in the order the method names them)."""

    labels: tuple[str, ...]
    n: int


@dataclass(frozen=True, slots=True)
class ModelTotals:
    model: str
    prompt_tokens: int
    completion_tokens: int
    usd: float


@dataclass(frozen=True, slots=True)
class LatencyHistogram:
    """``at_most[i]``: rows with ``latency_ms <= bounds_ms[i]``; ``count`` and ``total_ms`` over all rows."""

    count: int
    total_ms: float
    at_most: tuple[int, ...]
