"""run_agent_loop: the bounded tool-calling loop. It takes its collaborators as arguments and
owns no state between turns.

Ceilings: at most ``max_model_calls`` model calls may use tools (config
``assistant.max_turns``); after that one last call is made with tools disabled, and its text is
the answer. A model that repeats an identical call
(same tool, same arguments) is stopped early: the repeat is not executed, the model is told
why, and the last call is made at once.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any, Protocol

import structlog

from bruce.contracts import ToolCall, ToolResult
from bruce.llm import LLMReply
from bruce.progress import ToolFinished, ToolStarted
from bruce.turn import TurnScope

__all__ = ["run_agent_loop", "TurnResult", "LLM", "Tools"]

log = structlog.get_logger(__name__)

CEILING_NOTE = (
    "You have used every tool call this turn allows. Do not call tools. Answer the user now "
    "with what the tool results above show, and say plainly what is still undone."
)
AFTER_REPEAT_NOTE = (
    "Repeating the same tool call will not help. Do not call tools. Answer the user now with "
    "what the tool results above show, and say plainly what is still undone."
)
REPEAT_NOTE = (
    "Not executed: you already called {name} with exactly these arguments in this turn, and its "
    "result is above. Do not repeat it. Answer the user with what you have."
)


class LLM(Protocol):
    async def complete(
        self, messages: list[dict[str, Any]], *, scope: TurnScope, tools: list[dict[str, Any]] | None = None,
        model: str | None = None,
    ) -> LLMReply: ...


class Tools(Protocol):
    def definitions(self, scope: TurnScope | None = None) -> list[dict[str, Any]]: ...

    def contract_name(self, wire_name: str) -> str: ...

    async def execute(self, call: ToolCall, scope: TurnScope) -> ToolResult: ...


@dataclass(frozen=True, slots=True)
class TurnResult:
    text: str  # may be empty: the caller decides what the user is told
    llm_calls: int
    tool_results: tuple[ToolResult, ...]
    hit_ceiling: bool
    stopped_repeat: bool


def _signature(call: ToolCall) -> tuple[str, str]:
    try:
        canonical = json.dumps(json.loads(call.arguments or "{}"), sort_keys=True)
    except (json.JSONDecodeError, RecursionError):  # the registry tells the model what is wrong
        canonical = call.arguments
    return call.name, canonical


def _tool_message(call: ToolCall, content: Any) -> dict[str, Any]:
    text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False, default=str)
    return {"role": "tool", "tool_call_id": call.id, "content": text}


async def _execute(registry: Tools, call: ToolCall, scope: TurnScope) -> ToolResult:
    name = registry.contract_name(call.name)
    await scope.progress.emit(ToolStarted(name))
    result = await registry.execute(call, scope)
    await scope.progress.emit(ToolFinished(name, result.status))
    return result


async def run_agent_loop(
    llm: LLM,
    registry: Tools,
    system_prompt: str,
    history: list[dict[str, Any]],
    max_model_calls: int = 5,
    *,
    scope: TurnScope,
) -> TurnResult:
    messages: list[dict[str, Any]] = [{"role": "system", "content": system_prompt}, *history]
    definitions = registry.definitions(scope) or None
    seen: set[tuple[str, str]] = set()
    results: list[ToolResult] = []
    repeated = False
    for calls in range(1, max_model_calls + 1):
        reply = await llm.complete(messages, scope=scope, tools=definitions)
        if not reply.tool_calls:
            return TurnResult((reply.text or "").strip(), calls, tuple(results), False, False)
        messages.append(reply.as_message())
        fresh: list[ToolCall] = []
        for call in reply.tool_calls:
            if _signature(call) not in seen:
                seen.add(_signature(call))
                fresh.append(call)
        executed = await asyncio.gather(*(_execute(registry, c, scope) for c in fresh))
        # matched by the call itself, not by its id: a model may reuse an id, and a repeat must
        # never be handed the result of another call that happens to share it
        ran = {id(c): r for c, r in zip(fresh, executed, strict=True)}
        for call in reply.tool_calls:
            result = ran.get(id(call))
            if result is None:
                repeated = True
                log.info("agent.repeat_stopped", tool=call.name)
                messages.append(_tool_message(call, {"ok": False, "status": "repeated", "error": REPEAT_NOTE.format(name=call.name)}))
            else:
                messages.append(_tool_message(call, result.for_model()))
        results.extend(executed)
        if repeated:
            break
    else:
        calls = max_model_calls
    hit_ceiling = not repeated
    if hit_ceiling:
        log.info("agent.ceiling_hit", max_model_calls=max_model_calls)
    messages.append({"role": "system", "content": AFTER_REPEAT_NOTE if repeated else CEILING_NOTE})
    final = await llm.complete(messages, scope=scope, tools=None)
    return TurnResult((final.text or "").strip(), calls + 1, tuple(results), hit_ceiling, repeated)
