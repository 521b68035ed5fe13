"""The rows the store hands out and takes in: frozen values, never dicts."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, fields
from typing import Any, TypeVar

from bruce.values import (
    ConfirmationState,
    Direction,
    LLMCallStatus,
    MessageKind,
    MessageStatus,
    PairingState,
    PayloadKind,
    ToolStatus,
    TurnSource,
)

__all__ = [
    "StoredMessage",
    "Summary",
    "LLMCallRecord",
    "ToolExecutionRecord",
    "ActedTool",
    "ConfirmationRecord",
    "ArtifactRecord",
    "PairingRequestRecord",
    "from_row",
    "to_json",
]

_R = TypeVar("_R")


def from_row(cls: type[_R], row: sqlite3.Row) -> _R:
    """Build a record from a row holding (at least) its fields."""
    names = row.keys()
    return cls(**{f.name: row[f.name] for f in fields(cls) if f.name in names})  # type: ignore[arg-type]


def to_json(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def from_json(text: Any) -> Any:
    """A column ``to_json`` wrote, read back: the JSON value, or the text as it is when it is not JSON."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return text


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
class StoredTurn:
    id: str
    conversation_id: str
    inbound_message_id: int | None
    source: str
    status: str
    llm_calls: int
    tool_calls: int
    hit_ceiling: int
    stopped_repeat: int
    unbacked_claims: int
    job_id: str | None
    error: str | None
    started_at: str
    finished_at: str | None


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
