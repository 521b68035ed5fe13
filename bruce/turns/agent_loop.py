"""run_agent_loop: the bounded tool-calling loop. It takes its collaborators as arguments and
owns no state between turns.

Ceilings: at most ``max_model_calls`` model calls may use tools (config
``assistant.max_turns``); after that one last call is made with tools disabled, and its text is
the answer. The same happens when the next call would take the turn past ``max_turn_tokens``
(config ``assistant.max_turn_tokens``: prompt plus completion tokens over the turn's calls, as
the provider reported them; the next call's prompt is estimated as the last one's, plus its
completion, plus what was appended since at four characters a token). A model that repeats an identical call
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
from bruce.llm.reply import LLMReply
from bruce.turns.progress import ToolFinished, ToolStarted
from bruce.turns.scope import HeldCall, TurnScope
from bruce.values import ToolStatus

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
TOKEN_NOTE = (
    "This turn has used the tokens it may use. Do not call tools. Answer the user now with what "
    "the tool results above show, and say plainly what is still undone."
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

    def activity(self, wire_name: str) -> str: ...

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
    await scope.progress.emit(ToolStarted(name, registry.activity(call.name)))
    result = await registry.execute(call, scope)
    await scope.progress.emit(ToolFinished(name, result.status))
    return result


def _next_prompt(reply: LLMReply, appended: list[dict[str, Any]]) -> int:
    """The next call's prompt tokens, estimated: the last prompt, its completion, and what was
    appended since (the assistant message and the tool results) at four characters a token."""
    added = sum(len(json.dumps(m, ensure_ascii=False, default=str)) for m in appended) // 4
    return (reply.prompt_tokens or 0) + (reply.completion_tokens or 0) + added


async def _run_tools(
    registry: Tools, calls: tuple[ToolCall, ...], scope: TurnScope, seen: set[tuple[str, str]],
    messages: list[dict[str, Any]],
) -> tuple[list[ToolResult], bool]:
    """Run the calls not already made this turn (``seen``), concurrently, and append to
    ``messages``, in the model's order, each result or why a repeat was not run. Returns the
    results and whether any call was a repeat."""
    fresh: list[ToolCall] = []
    for call in calls:
        if _signature(call) not in seen:
            seen.add(_signature(call))
            fresh.append(call)
    if scope.stops_at_held:  # (once held, the caller makes no further call: what was not made is moot)
        executed = await _run_until_held(registry, fresh, scope)
    else:
        executed = list(await asyncio.gather(*(_execute(registry, c, scope) for c in fresh)))
    # matched by the call itself, not by its id: a model may reuse an id, and a repeat must
    # never be handed the result of another call that happens to share it
    ran = {id(c): r for c, r in zip(fresh, executed, strict=False)}
    repeated = False
    for call in calls:
        result = ran.get(id(call))
        if result is None:
            repeated = True
            log.info("agent.repeat_stopped", tool=call.name)
            messages.append(_tool_message(call, {"ok": False, "status": "repeated", "error": REPEAT_NOTE.format(name=call.name)}))
        else:
            messages.append(_tool_message(call, result.for_model()))
    return executed, repeated


async def _run_until_held(registry: Tools, calls: list[ToolCall], scope: TurnScope) -> list[ToolResult]:
    """A run of an untrusted job: the calls one at a time, in the model's order, until one is
    skipped for want of a yes; that one is ``scope.held`` and the calls after it are not made."""
    executed = []
    for call in calls:
        result = await _execute(registry, call, scope)
        executed.append(result)
        if result.status is ToolStatus.SKIPPED:
            scope.held = HeldCall(registry.contract_name(call.name), call.arguments)
            log.warning("agent.held", tool=scope.held.tool, not_made=len(calls) - len(executed))
            break
    return executed


async def run_agent_loop(
    llm: LLM, registry: Tools, system_prompt: str, history: list[dict[str, Any]], max_model_calls: int = 5, *,
    scope: TurnScope, max_turn_tokens: int | None = None,
) -> TurnResult:
    messages: list[dict[str, Any]] = [{"role": "system", "content": system_prompt}, *history]
    definitions = registry.definitions(scope) or None
    seen: set[tuple[str, str]] = set()
    results: list[ToolResult] = []
    repeated = out_of_tokens = False
    used = 0
    for calls in range(1, max_model_calls + 1):
        reply = await llm.complete(messages, scope=scope, tools=definitions)
        used += (reply.prompt_tokens or 0) + (reply.completion_tokens or 0)
        if not reply.tool_calls:
            return TurnResult((reply.text or "").strip(), calls, tuple(results), False, False)
        sent_before = len(messages)
        messages.append(reply.as_message())
        executed, repeated = await _run_tools(registry, reply.tool_calls, scope, seen, messages)
        results.extend(executed)
        if scope.held is not None:  # no further call, no answer: the caller tells the owner
            return TurnResult("", calls, tuple(results), False, False)
        if repeated:
            break
        if max_turn_tokens is not None and calls < max_model_calls and \
                used + _next_prompt(reply, messages[sent_before:]) > max_turn_tokens:
            out_of_tokens = True
            log.info("agent.token_ceiling_hit", used_tokens=used, max_turn_tokens=max_turn_tokens)
            break
    else:
        calls = max_model_calls
    hit_ceiling = not repeated
    if hit_ceiling and not out_of_tokens:
        log.info("agent.ceiling_hit", max_model_calls=max_model_calls)
    note = AFTER_REPEAT_NOTE if repeated else TOKEN_NOTE if out_of_tokens else CEILING_NOTE
    messages.append({"role": "system", "content": note})
    final = await llm.complete(messages, scope=scope, tools=None)
    return TurnResult((final.text or "").strip(), calls + 1, tuple(results), hit_ceiling, repeated)
