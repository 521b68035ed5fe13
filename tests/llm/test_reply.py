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


class CountingPrices:
    """litellm's own ``completion_cost`` (its real cost map), counting the questions."""

    def __init__(self) -> None:
        import litellm

        self.litellm = litellm
        self.ModelNotMappedError = litellm.ModelNotMappedError
        self.asked = 0

    def completion_cost(self, *, completion_response: object) -> float:
        self.asked += 1
        return float(self.litellm.completion_cost(completion_response=completion_response))


def litellm_reply(model: str, provider: str) -> object:
    import litellm

    reply = litellm.ModelResponse(model=model, choices=[{"message": {"role": "assistant", "content": "Hi."}}],
                                  usage={"prompt_tokens": 1000, "completion_tokens": 20, "total_tokens": 1020})
    reply._hidden_params = {"custom_llm_provider": provider}
    return reply


def test_a_model_litellm_has_no_price_for_is_not_priced_again():
    prices, unpriced = CountingPrices(), set()
    assert reply_cost(prices, litellm_reply("my-local-model", "openai"), unpriced) is None
    assert unpriced == {("my-local-model", "openai")}
    assert reply_cost(prices, litellm_reply("my-local-model", "openai"), unpriced) is None
    assert prices.asked == 1  # the second call did not search the cost map again
    priced = reply_cost(prices, litellm_reply("gpt-4o-mini", "openai"), unpriced)
    assert priced is not None and priced > 0  # a model with a price is priced, every time
    assert reply_cost(prices, litellm_reply("gpt-4o-mini", "openai"), unpriced) == priced
    assert prices.asked == 3 and ("gpt-4o-mini", "openai") not in unpriced


def test_a_price_that_failed_for_another_reason_is_asked_again():
    unpriced: set[tuple[str, str]] = set()
    assert reply_cost(PriceList(ValueError("usage missing")), response(SimpleNamespace(content="x")), unpriced) is None
    assert unpriced == set()
