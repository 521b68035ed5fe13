"""Conversations, messages and turns (``store.messages``)."""

from __future__ import annotations

from dataclasses import dataclass

from bruce.values import Direction, MessageKind, MessageStatus, PayloadKind, TurnSource, TurnStatus

__all__ = ["StoredMessage", "Summary", "TurnView", "StoredTurn", "AnsweredTurn"]


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
    attachments: str | None = None  # inbound: JSON list of the attachments it carried (``bruce.media``); None: text only

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
    the history the model sees, and who wrote in the session."""

    summary: Summary | None
    previous_at: str | None  # when the message before the turn's own was stored
    history: list[StoredMessage]
    # who wrote what the turn reads: the session's senders; the conversation's once it has a summary
    senders: frozenset[str] = frozenset()


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


@dataclass(frozen=True, slots=True)
class AnsweredTurn:
    """A turn whose answer is in the current session (since ``/new``), and what may have brought
    text from outside into it: the tools it called that returned an output, whether it was a
    run of an untrusted job, and whether its message carried a document that was read
    (``bruce.turns.carried`` decides from these)."""

    id: str
    untrusted_run: bool
    tools: tuple[str, ...]  # contract names, in the order they were called
    read_document: bool = False  # the message it answered carried a document whose text the model read
