"""Long-term memory (``store.memory``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bruce.values import OWNER, FactStatus, FactType

__all__ = ["Fact", "MemorySummary"]


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
    person: str = OWNER  # whose fact: the owner, or a guest as '<channel>:<user id>'

    def __post_init__(self) -> None:
        object.__setattr__(self, "type", FactType(self.type))
        object.__setattr__(self, "status", FactStatus(self.status))

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": str(self.type),
            "content": self.content,
            "confidence": self.confidence,
            "status": str(self.status),
            "origin": self.origin,
            "conversation_id": self.conversation_id,
            "source_turn_id": self.source_turn_id,
            "created_at": self.created_at,
            "last_seen_at": self.last_seen_at,
            "summarized_in": self.summarized_in,
            "person": self.person,
        }


@dataclass(frozen=True, slots=True)
class MemorySummary:
    id: int
    content: str
    period_start: str
    period_end: str
    created_at: str
    person: str = OWNER

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "content": self.content,
            "period_start": self.period_start,
            "period_end": self.period_end,
            "created_at": self.created_at,
            "person": self.person,
        }
