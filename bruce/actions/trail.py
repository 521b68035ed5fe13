"""What the registry writes to the audit trail for one tool call.

A call of a tool with side effects (``ToolContract.has_side_effects``) is recorded as
**started** before its handler runs, in its own committed write (``tool_starts``, with its
idempotency key when it has one). Every call, whatever its outcome, is then one
``tool_executions`` row, written in the same transaction that marks its start finished. A kill
between the two leaves a start without a result: recovery (``bruce.runtime.recovery``) reads
that as "outcome unknown" and never runs a non-idempotent call again on its own.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

from bruce.clock import Clock
from bruce.contracts import ToolCall, ToolContract, ToolResult
from bruce.log import Redactor
from bruce.records import ToolExecutionRecord, ToolStart
from bruce.safe_text import visible
from bruce.store import Store
from bruce.turns.scope import TurnScope
from bruce.values import ConversationId, ToolStatus, TurnSource

__all__ = ["Ran", "Trail", "arguments_summary", "json_text"]

SUMMARY_VALUE_CHARS = 40
SUMMARY_CHARS = 200


@dataclass(frozen=True, slots=True)
class Ran:
    """A call that reached its handler (or replayed its key): its result, its idempotency key,
    and its ``tool_starts`` row (None: a tool without side effects, or a replay)."""

    result: ToolResult
    key: str | None = None
    start_id: int | None = None


def json_text(value: Any) -> str:
    """JSON for the audit row, whatever the value (a 5000-digit int, a cycle, a NaN...)."""
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (ValueError, TypeError, RecursionError, OverflowError) as exc:
        return json.dumps({"unserialisable": type(value).__name__, "error": str(exc)[:200]})


def _short(value: Any) -> str:
    text = json_text(value)
    return text if len(text) <= SUMMARY_VALUE_CHARS else text[: SUMMARY_VALUE_CHARS - 1] + "…"


def arguments_summary(arguments: Any) -> str:
    """A one-line view of a call's (already redacted) arguments, each value cut to 40 characters
    and the whole to 200, control and bidi characters written out: what the owner reads in a
    "may or may not have happened" notice."""
    if isinstance(arguments, dict):
        text = ", ".join(f"{name}={_short(value)}" for name, value in arguments.items())
    else:
        text = _short(arguments)
    text = visible(text.replace("\n", " "))
    return text if len(text) <= SUMMARY_CHARS else text[: SUMMARY_CHARS - 1] + "…"


def _source(scope: TurnScope) -> TurnSource:
    return scope.source if scope.source not in (TurnSource.SUMMARY, TurnSource.MEMORY) else TurnSource.CHAT


def _conversation(conversation_id: ConversationId | None) -> str | None:
    return None if conversation_id is None else str(conversation_id) or None


class Trail:
    """The registry's two writes: a start before the handler, the execution row after."""

    def __init__(self, *, store: Store, clock: Clock, redactor: Redactor, output_max_chars: int) -> None:
        self._store = store
        self._clock = clock
        self._redactor = redactor
        self._max = output_max_chars

    async def start(self, call: ToolCall, contract: ToolContract, arguments: dict[str, Any], scope: TurnScope,
                    key: str | None) -> int | None:
        """Record the call as started (committed before this returns); None for a tool without
        side effects, which has nothing a crash could repeat."""
        if not contract.has_side_effects:
            return None
        start = ToolStart(turn_id=scope.turn_id or None, conversation_id=_conversation(scope.conversation_id),
                          call_id=call.id, tool_name=contract.name,
                          summary=arguments_summary(self._redactor.value(arguments)), source=_source(scope),
                          idempotent=contract.idempotent, idempotency_key=key)
        return await asyncio.shield(self._store.audit.record_start(start))

    def _output(self, output: Any) -> Any:
        text = json_text(self._redactor.value(output))
        if len(text) <= self._max:
            return text
        return {"truncated": True, "original_chars": len(text), "preview": text[: self._max]}

    def record(self, call: ToolCall, scope: TurnScope, contract: ToolContract | None, arguments: Any,
               result: ToolResult, started: float, *, key: str | None,
               audit_status: ToolStatus | None) -> ToolExecutionRecord:
        """The ``tool_executions`` row of a call (its latency measured from ``started``)."""
        return ToolExecutionRecord(
            turn_id=scope.turn_id or None,  # '' for a call from an MCP client: no turn, perhaps no conversation
            conversation_id=_conversation(scope.conversation_id),
            call_id=call.id,
            tool_name=contract.name if contract else call.name,
            risk=str(contract.risk) if contract else None,
            input=self._redactor.value({"raw": arguments} if isinstance(arguments, str) else arguments),
            output=None if result.output is None else self._output(result.output),
            status=audit_status or result.status,
            error=self._redactor.text(result.error) if result.error else None,
            latency_ms=(self._clock.monotonic() - started) * 1000,
            source=_source(scope),
            idempotency_key=key,
            server=contract.server if contract else None,
        )

    async def write(self, record: ToolExecutionRecord, start_id: int | None) -> None:
        """The row, and its start marked finished with it; shielded: a cancelled turn still records it."""
        await asyncio.shield(self._store.audit.record_tool_execution(record, start_id=start_id))
