"""Reading a model's reply from litellm's response, and its price."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from bruce.contracts import ToolCall
from bruce.llm.reply import LLMReply, parse_reply, reply_cost
from bruce.llm.stream import MalformedReply


def response(message: object, usage: object = None, **extra: object) -> SimpleNamespace:
    return SimpleNamespace(choices=[SimpleNamespace(message=message)], usage=usage, **extra)


def test_text_tool_calls_and_tokens_are_read():
    call = SimpleNamespace(id=None, function=SimpleNamespace(name="clock_now", arguments={"zone": "UTC"}))
    message = SimpleNamespace(content="Let me look.", tool_calls=[call])
    reply = parse_reply(response(message, SimpleNamespace(prompt_tokens=12, completion_tokens=3)), "openai/m")
    assert reply == LLMReply(text="Let me look.", tool_calls=(ToolCall(id="call_0", name="clock_now",
                             arguments='{"zone": "UTC"}'),), model="openai/m", prompt_tokens=12, completion_tokens=3)


@pytest.mark.parametrize(("raw", "what"), [
    (SimpleNamespace(choices=[]), "no choices"),
    (SimpleNamespace(choices=[SimpleNamespace(message=None)]), "no message"),
])
def test_a_reply_without_a_completion_is_malformed(raw, what):
    with pytest.raises(MalformedReply) as caught:
        parse_reply(raw, "openai/m")
    assert caught.value.what == what


def test_as_message_carries_the_tool_calls_back_to_the_model():
    reply = LLMReply(text=None, tool_calls=(ToolCall(id="a", name="web_search", arguments="{}"),), model="m")
    assert reply.as_message() == {"role": "assistant", "content": "", "tool_calls": [
        {"id": "a", "type": "function", "function": {"name": "web_search", "arguments": "{}"}}]}
    assert LLMReply(text="Hi.", tool_calls=(), model="m").as_message() == {"role": "assistant", "content": "Hi."}


class PriceList:
    def __init__(self, price: float | Exception) -> None:
        self.price = price

    def completion_cost(self, *, completion_response: object) -> float:
        if isinstance(self.price, Exception):
            raise self.price
        return self.price


def test_the_cost_litellm_already_computed_is_used_else_asked_for():
    known = response(SimpleNamespace(content="x"), _hidden_params={"response_cost": 0.25})
    assert reply_cost(PriceList(9.0), known) == 0.25
    assert reply_cost(PriceList(0.5), response(SimpleNamespace(content="x"))) == 0.5
    assert reply_cost(PriceList(ValueError("unknown model")), response(SimpleNamespace(content="x"))) is None
    assert reply_cost(PriceList(0.0), response(SimpleNamespace(content="x"))) is None
