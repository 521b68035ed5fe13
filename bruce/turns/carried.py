"""Taint carried by the history: an answer written after untrusted text steers the next turn too.

A page can make the model write its instruction into its answer ("note to self: next turn,
remember …"); that answer is in the history of every later turn of the session. So a turn
starts tainted (``TurnScope.tainted``) when the session it continues (since the last ``/new``:
the history it sees, and the summary folded during the session) holds an answer of a *tainted
turn*: one that called a tool whose output is text from outside (``untrusted_output``), a run of
an untrusted job, or one that answered a message carrying a document it read (``bruce.media``: the
document is in the history as the message's text). The answers that follow a tainted turn carry it on, so the rule holds for
the rest of the session; ``/new`` starts a session without them.

So that a follow-up does not ask needlessly, the outputs of those earlier calls to tools from
outside vouch for URLs as this turn's own results do (``bruce.actions.provenance``): "open the
second link of that page" reads a link found in the page's text. They are read back from the
audit table, where an output longer than ``tools.audit_output_max_chars`` is kept only as a
preview: a link past that point vouches for nothing, and reading it asks. Only the outputs of the
last ``SOURCE_TURNS`` turns that called tools from outside vouch (a page read long before is out of
the history the model sees): an older page's link asks.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

from bruce.contracts import ToolResult
from bruce.store import Store

__all__ = ["Carried", "carried_taint", "SOURCE_TURNS"]

# The turns whose outputs from outside vouch for URLs: the latest ones, about what the history the model
# sees can hold (15 messages, and up to 7 more waiting to be folded). An older page's text is out of
# the model's sight; its links ask, and a session of months of web reads does not read every one of
# its outputs at each turn's start.
SOURCE_TURNS = 20

@dataclass(frozen=True, slots=True)
class Carried:
    """What a turn inherits from the earlier turns of its session."""

    tainted: bool = False
    # the outputs of their calls to tools from outside, as the registry's ``ToolResult`` (with the
    # audited, masked arguments): they vouch for URLs in this turn
    sources: list[ToolResult] = field(default_factory=list)


async def carried_taint(store: Store, conversation_id: str, *, ours: Collection[str]) -> Carried:
    """Whether the session of ``conversation_id`` holds an answer of a tainted turn, and the outputs
    from outside of those turns. ``ours``: the contract names of the tools whose output is not text
    from outside; any other name is from outside, a name no tool answers to any more (an MCP server
    gone) included. Turns that called only ours are not even read (``answered_turns``); the outputs of
    the last ``SOURCE_TURNS`` turns that called tools from outside are the sources."""
    answered = await store.audit.answered_turns(conversation_id, ours=ours)
    outside = [t.id for t in answered if any(n not in ours for n in t.tools)]  # oldest first
    if not (outside or any(t.untrusted_run or t.read_document for t in answered)):
        return Carried()
    calls = await store.audit.tool_executions_of(outside[-SOURCE_TURNS:])
    sources = [ToolResult(call_id=c.call_id or "", name=c.tool_name, status=c.status, output=c.output,
                          arguments=c.input) for c in calls if c.output is not None and c.tool_name not in ours]
    return Carried(True, sources)
