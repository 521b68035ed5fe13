"""Assembling a streamed reply: the same reply a plain call gives, whatever the chunk shape."""

from __future__ import annotations

import litellm
import pytest

from bruce.llm.reply import parse_reply
from bruce.llm.stream import StreamParts


def chunk(delta=None, finish=None, usage=None, index=0, model="gpt-4o-mini"):
    choices = [] if delta is None and finish is None else [{"index": index, "delta": delta or {}, "finish_reason": finish}]
    out = {"id": "c1", "created": 1, "model": model, "choices": choices}
    if usage is not None:
        out["usage"] = usage
    return out


TEXT = [chunk({"role": "assistant", "content": ""}), chunk({"content": "Hel"}), chunk({"content": "lo."}),
        chunk(finish="stop"), chunk(usage={"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15})]
TOOLS = [
    chunk({"role": "assistant", "content": None}),
    chunk({"tool_calls": [{"index": 0, "id": "call_a", "type": "function", "function": {"name": "web_search",
                                                                                          "arguments": ""}}]}),
    chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"query":'}}]}),
    chunk({"tool_calls": [{"index": 1, "id": "call_b", "type": "function", "function": {"name": "clock_now"}}]}),
    chunk({"tool_calls": [{"index": 0, "function": {"arguments": ' "tea"}'}}]}),
    chunk(finish="tool_calls"),
]


def assemble(chunks, *, as_objects=False):
    parts = StreamParts()
    texts = []
    for raw in chunks:
        item = litellm.ModelResponseStream(**raw) if as_objects else raw
        text = parts.add(item)
        if text:
            texts.append(text)
    return texts, parse_reply(parts.response(litellm, "openai"), "openai/gpt-4o-mini")


@pytest.mark.parametrize("as_objects", [False, True], ids=["json", "litellm-chunks"])
def test_text_is_emitted_in_order_and_assembled_with_usage(as_objects):
    texts, reply = assemble(TEXT, as_objects=as_objects)
    assert texts == ["Hel", "lo."]
    assert (reply.text, reply.tool_calls, reply.prompt_tokens, reply.completion_tokens) == ("Hello.", (), 12, 3)


@pytest.mark.parametrize("as_objects", [False, True], ids=["json", "litellm-chunks"])
def test_tool_call_fragments_are_joined_by_index(as_objects):
    texts, reply = assemble(TOOLS, as_objects=as_objects)
    assert texts == [] and reply.text is None
    assert [(c.id, c.name, c.arguments) for c in reply.tool_calls] == [
        ("call_a", "web_search", '{"query": "tea"}'), ("call_b", "clock_now", "{}")]


def test_no_usage_from_the_provider_leaves_the_tokens_unknown():
    _, reply = assemble(TEXT[:-1])
    assert reply.text == "Hello." and reply.prompt_tokens is None and reply.completion_tokens is None


def test_an_empty_stream_is_an_error():
    with pytest.raises(ValueError, match="no response"):
        StreamParts().response(litellm, "openai")
