"""A model's reply as Bruce keeps it: text, tool calls, tokens; read from litellm's response.

Part of the LLM edge: ``parse_reply`` and ``reply_cost`` take litellm's objects (and the lazily
imported ``litellm``) so nothing past ``bruce/llm/service.py`` ever holds one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from bruce.contracts import ToolCall
from bruce.llm.stream import MalformedReply

__all__ = ["LLMReply", "parse_reply", "reply_cost"]


@dataclass(frozen=True, slots=True)
class LLMReply:
    text: str | None
    tool_calls: tuple[ToolCall, ...]
    model: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None

    def as_message(self) -> dict[str, Any]:
        """The assistant message to append to the conversation sent back to the model."""
        message: dict[str, Any] = {"role": "assistant", "content": self.text or ""}
        if self.tool_calls:
            message["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in self.tool_calls
            ]
        return message


def parse_reply(response: Any, model: str) -> LLMReply:
    choices = getattr(response, "choices", None)
    if not choices:  # litellm passes a 200 with an empty list through as it is
        raise MalformedReply("no choices", "the reply has no choices")
    message = getattr(choices[0], "message", None)
    if message is None:
        raise MalformedReply("no message", "the reply's first choice has no message")
    calls = []
    for i, call in enumerate(getattr(message, "tool_calls", None) or []):
        arguments = call.function.arguments
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments)
        calls.append(ToolCall(id=call.id or f"call_{i}", name=call.function.name or "", arguments=arguments or "{}"))
    usage = getattr(response, "usage", None)
    return LLMReply(
        text=message.content,
        tool_calls=tuple(calls),
        model=model,
        prompt_tokens=getattr(usage, "prompt_tokens", None),
        completion_tokens=getattr(usage, "completion_tokens", None),
    )


def reply_cost(litellm: Any, response: Any, unpriced: set[tuple[str, str]] | None = None) -> float | None:
    """The call's price: litellm has already worked it out for a reply it parsed itself (its
    ``_hidden_params``), so it is computed again only for a stream we assembled.

    ``unpriced`` remembers the models litellm has no price for (``ModelNotMappedError``: a local or
    custom model outside its cost map, which is read once and never changes in a process): asking
    again costs about 0.6 ms of CPU per call, a failed search through its whole map, for the same
    answer. Only that error is remembered; a price that failed for another reason is asked again."""
    hidden = getattr(response, "_hidden_params", None)
    known = hidden.get("response_cost") if isinstance(hidden, dict) else None
    if isinstance(known, int | float) and not isinstance(known, bool) and known > 0:
        return float(known)
    key = (str(getattr(response, "model", "")), str(hidden.get("custom_llm_provider", "")) if isinstance(hidden, dict) else "")
    if unpriced is not None and key in unpriced:
        return None
    try:
        cost = litellm.completion_cost(completion_response=response)
    except Exception as exc:  # unknown model or price: cost stays unknown
        not_mapped = getattr(litellm, "ModelNotMappedError", None)
        if unpriced is not None and isinstance(not_mapped, type) and isinstance(exc, not_mapped):
            unpriced.add(key)
        return None
    return float(cost) if cost else None
