"""The doors the scheduler fires through, and the tools a scheduled agent run may not use."""

from __future__ import annotations

from typing import Protocol

from bruce.contracts import ToolContract
from bruce.turns.runner import TurnOutcome
from bruce.turns.scope import ToolFilter
from bruce.values import OWNER, ConversationId

__all__ = ["Doors", "no_proactive_tools"]


class Doors(Protocol):
    """What the scheduler may ask of the worker (``bruce.runtime.worker.Worker``), and nothing else."""

    async def post(self, conversation_id: ConversationId, text: str) -> int: ...

    async def run_proactive(self, conversation_id: ConversationId, prompt: str, *, job_id: str | None = None,
                            tools: ToolFilter | None = None, quiet_token: str | None = None,
                            owner_text: str | None = None, person: str = OWNER,
                            tainted: bool = False) -> TurnOutcome: ...

    async def admitted(self, person: str, conversation_id: ConversationId) -> bool: ...


def no_proactive_tools(contract: ToolContract) -> bool:
    """An agent-mode run cannot schedule, change or cancel jobs: no feedback loops."""
    return not contract.name.startswith("proactive.")
