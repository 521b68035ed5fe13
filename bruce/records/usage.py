"""Model spending (``store.usage``) and the admin page's view of the audit (``store.audit``, ``store.stats``)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from bruce.records.messages import StoredTurn

__all__ = [
    "Spent",
    "UsageRow",
    "StoredLLMCall",
    "StoredToolExecution",
    "TracedMessage",
    "TracedReply",
    "TurnTrace",
    "Count",
    "ModelTotals",
    "KindTotals",
    "LatencyHistogram",
    "as_dict",
]


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
    kind: str = "chat"  # ``LLMCallKind``: a completion, or a voice note's transcription


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
    attachments: str | None = None  # the JSON list the message carried (``StoredMessage.attachments``)


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
class KindTotals:
    """The model calls of one ``LLMCallKind``: how many, how many failed, their mean latency and cost."""

    kind: str
    calls: int
    failed: int
    mean_latency_ms: float
    usd: float


@dataclass(frozen=True, slots=True)
class LatencyHistogram:
    """``at_most[i]``: rows with ``latency_ms <= bounds_ms[i]``; ``count`` and ``total_ms`` over all rows."""

    count: int
    total_ms: float
    at_most: tuple[int, ...]
