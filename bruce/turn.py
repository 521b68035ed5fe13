"""TurnScope: the bookkeeping one turn carries through the LLM service and the registry."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from bruce.channel import ConfirmationRequest
from bruce.contracts import ToolResult

__all__ = ["TurnScope", "new_turn_id"]


def new_turn_id() -> str:
    return uuid.uuid4().hex


@dataclass(slots=True)
class TurnScope:
    turn_id: str
    conversation_id: str
    user_id: str | None
    source: str = "chat"  # chat | proactive | confirmation | summary
    _llm_seq: int = 0
    confirmations: list[ConfirmationRequest] = field(default_factory=list)
    results: list[ToolResult] = field(default_factory=list)  # every tool call of the turn, by contract name

    def completed_actions(self) -> list[str]:
        """Names of tools that succeeded this turn (what the user must hear about if the turn fails)."""
        return [r.name for r in self.results
                if r.ok and not (isinstance(r.output, dict) and r.output.get("dry_run") is True)]

    def next_llm_seq(self) -> int:
        self._llm_seq += 1
        return self._llm_seq

    @property
    def llm_calls(self) -> int:
        return self._llm_seq
