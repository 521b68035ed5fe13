"""TurnScope: the bookkeeping one turn carries through the loop, the LLM service and the registry."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from bruce.channel import ConfirmationRequest
from bruce.contracts import ToolContract, ToolResult
from bruce.turns.progress import NO_PROGRESS, Progress
from bruce.turns.prompt import ScheduledRun
from bruce.values import OWNER, ConversationId, ToolStatus, TurnSource

__all__ = ["TurnScope", "ToolFilter", "HeldCall", "new_turn_id"]

ToolFilter = Callable[[ToolContract], bool]  # which tools a turn may see and run


@dataclass(frozen=True, slots=True)
class HeldCall:
    """The call a run of an untrusted job stopped at: it needed the owner's yes, nobody could give it."""

    tool: str  # the contract name, e.g. memory.remember
    arguments: str  # as the model sent them (JSON text)


def new_turn_id() -> str:
    return uuid.uuid4().hex


@dataclass(slots=True)
class TurnScope:
    turn_id: str
    conversation_id: ConversationId | None  # None: an MCP client's call, in no conversation
    user_id: str | None
    source: TurnSource = TurnSource.CHAT
    unattended: bool = False  # nobody to ask: tools that need approval are skipped, never parked
    confirmed_by_caller: bool = False  # a trusted MCP client asked its own user (step-up still refused)
    tool_filter: ToolFilter | None = None
    scheduled: ScheduledRun | None = None  # a proactive job's run
    progress: Progress = NO_PROGRESS
    # untrusted text is in the turn: a tool with ``untrusted_output`` ran (the registry sets it), or the
    # turn started so (a run of an untrusted job, an MCP client's call, a session whose history holds
    # an answer of a tainted turn: ``bruce.turns.carried``). Never set back to False.
    tainted: bool = False
    # the asker's own words in this turn (the owner's, or a guest's in a guest's turn): the inbound message's text, a scheduled run's instruction (written
    # when the job was made) or a briefing's configured prompt. A URL found here was not composed by the model.
    owner_text: str = ""
    # whose turn: the owner, or a guest as '<channel>:<user id>' (``bruce.runtime.people``); a guest's
    # turn sees only their memory and jobs, and only ``access.guest_tools`` (the registry enforces it)
    person: str = OWNER
    # a run of an untrusted job: its tool calls run one at a time, and the first one that needs a yes
    # ends the run there (``held``): no later call is made, no answer is sent as the job's result
    stops_at_held: bool = False
    held: HeldCall | None = None
    # the outputs from outside of earlier turns whose answers are in this turn's history
    # (``bruce.turns.carried``): they vouch for URLs as this turn's own ``results`` do
    carried: list[ToolResult] = field(default_factory=list)
    _llm_seq: int = 0
    confirmations: list[ConfirmationRequest] = field(default_factory=list)
    results: list[ToolResult] = field(default_factory=list)  # every tool call of the turn, by contract name

    @property
    def conversation(self) -> ConversationId:
        """The conversation of a turn that has one (every turn but an MCP client's call)."""
        if self.conversation_id is None:
            raise ValueError(f"turn {self.turn_id or '(none)'} is in no conversation")
        return self.conversation_id

    def allows(self, contract: ToolContract) -> bool:
        return self.tool_filter is None or self.tool_filter(contract)

    def completed_actions(self) -> list[str]:
        """Names of tools that succeeded this turn (what the user must hear about if the turn fails)."""
        return [r.name for r in self.results
                if r.ok and not (isinstance(r.output, dict) and r.output.get("dry_run") is True)]

    def skipped_actions(self) -> list[str]:
        return [r.name for r in self.results if r.status is ToolStatus.SKIPPED]

    def next_llm_seq(self) -> int:
        self._llm_seq += 1
        return self._llm_seq

    @property
    def llm_calls(self) -> int:
        return self._llm_seq
