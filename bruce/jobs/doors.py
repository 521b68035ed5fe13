"""The doors the scheduler fires through, and the tools a scheduled agent run may use."""

from __future__ import annotations

from typing import Protocol

from bruce.contracts import Risk, ToolContract
from bruce.jobs.briefing import BRIEFING_ID, CALENDAR_READS
from bruce.turns.runner import TurnOutcome
from bruce.turns.scope import ToolFilter
from bruce.values import OWNER, ConversationId

__all__ = ["Doors", "no_proactive_tools", "briefing_tools", "tools_for"]

_BRIEFING_READS = frozenset({"emails.search", "emails.read", "clock.now"})


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


def briefing_tools(contract: ToolContract) -> bool:
    """The morning briefing (``bruce.jobs.briefing``) reads and does nothing else: ``emails.search``,
    ``emails.read``, ``clock.now`` and an MCP server's ``free_busy`` and ``list_upcoming`` (the
    calendar's), each only at risk low and asking for nothing. No send, draft, memory, job or web
    tool is offered, and a call to one is refused, so a poisoned email read in the run can make it
    do nothing but report."""
    if contract.risk is not Risk.LOW or contract.confirmation:
        return False
    name = contract.name
    return name in _BRIEFING_READS or (name.startswith("mcp.") and name.rpartition(".")[2] in CALENDAR_READS)


def tools_for(job_id: str) -> ToolFilter:
    """The tools a run of this job may see and call."""
    return briefing_tools if job_id == BRIEFING_ID else no_proactive_tools
