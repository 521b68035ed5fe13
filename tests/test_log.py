"""Logging: each line of a turn carries its turn and conversation; secrets never appear."""

from __future__ import annotations

import io
import json
import logging

import pytest
import structlog

from bruce.log import Redactor, configure_logging
from tests.fakes.llm_server import Step
from tests.helpers import rows, say


@pytest.fixture
def log_lines():
    buffer = io.StringIO()
    configure_logging(fmt="json", stream=buffer, redactor=Redactor(["sk-test-key-123456"]))
    yield lambda: [json.loads(line) for line in buffer.getvalue().splitlines()]
    structlog.reset_defaults()
    logging.getLogger().handlers.clear()


async def test_every_line_of_a_turn_carries_turn_and_conversation(app, fake_llm, log_lines):
    fake_llm.add(Step.tool_calls(("math_calculate", {"expression": "1+1"})), Step.text("2"))
    await say(app, "1+1?", chat="77")
    (turn_id,) = [r["id"] for r in await rows(app, "SELECT id FROM turns")]
    lines = log_lines()
    turn_lines = [line for line in lines if line["event"].startswith(("turn.", "tool.", "llm."))]
    assert {line["event"] for line in turn_lines} >= {"turn.started", "tool.executed", "turn.finished"}
    for line in turn_lines:
        assert line["turn_id"] == turn_id and line["conversation"] == "test:77"


async def test_api_key_never_reaches_the_log(app, fake_llm, log_lines):
    fake_llm.add(Step.error(401, "Incorrect API key provided: sk-test-key-123456"))
    fake_llm.default = Step.error(401, "Incorrect API key provided: sk-test-key-123456")
    await say(app, "hi")
    structlog.get_logger("x").info("debug", headers={"Authorization": "Bearer abcdefghijkl"})
    logging.getLogger("litellm").error("request failed with key sk-test-key-123456")
    text = json.dumps(log_lines())
    assert "sk-test-key-123456" not in text and "abcdefghijkl" not in text
    assert "***" in text


def test_redactor_masks_nested_values_and_token_shapes():
    redactor = Redactor(["hunter22"])
    assert redactor.value({"password": "x", "nested": [{"token": "t"}, "pw hunter22"]}) == {
        "password": "***", "nested": [{"token": "***"}, "pw ***"]}
    assert redactor.text("bot 123456789:AAH0123456789abcdefghijklmnopqrstuv ok") == "bot *** ok"
    assert redactor.value({"max_tokens": 50, "api_key": None}) == {"max_tokens": 50, "api_key": None}
    assert redactor.text("GET https://bob:hunter2x@example.org/x ok") == "GET https://***@example.org/x ok"
