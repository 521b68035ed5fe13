"""The audit trail (``store.audit``), confirmations, artifacts and pairing requests."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bruce.values import ConfirmationState, LLMCallKind, LLMCallStatus, PairingState, ToolStatus, TurnSource

__all__ = [
    "LLMCallRecord",
    "ToolExecutionRecord",
    "ActedTool",
    "ToolStart",
    "UnfinishedTool",
    "ConfirmationRecord",
    "ArtifactRecord",
    "PairingRequestRecord",
]


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
    kind: LLMCallKind = LLMCallKind.CHAT  # a completion, or a voice note's transcription


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
class ToolStart:
    """A call of a tool with side effects, recorded before its handler runs (``tool_starts``)."""

    turn_id: str | None
    conversation_id: str | None
    call_id: str | None
    tool_name: str
    summary: str  # a short view of the arguments, redacted: what the owner is told if it is cut off
    source: TurnSource
    idempotent: bool
    idempotency_key: str | None = None


@dataclass(frozen=True, slots=True)
class UnfinishedTool:
    """A started call with no result: a crash came between its start and its audit row, so
    nobody knows whether it acted."""

    id: int
    tool_name: str
    summary: str
    idempotent: bool
    conversation_id: str | None = None
    source: TurnSource = TurnSource.CHAT


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
    untrusted: bool = False  # asked in a tainted turn: the approved action runs tainted too

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", ConfirmationState(self.status))
        object.__setattr__(self, "step_up", bool(self.step_up))
        object.__setattr__(self, "untrusted", bool(self.untrusted))


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
