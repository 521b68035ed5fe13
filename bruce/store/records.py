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
