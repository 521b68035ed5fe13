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


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("GET https://bob:p@ss@w0rd@example.org/x ok", "GET https://***@example.org/x ok"),
        ("GET https://ghp_abcdef0123456789@example.org/x ok", "GET https://***@example.org/x ok"),
        ("https://api.example/v1?access_token=abc123&page=2", "https://api.example/v1?access_token=***&page=2"),
        ("https://hooks.example/exact?token=abc, then", "https://hooks.example/exact?token=***, then"),
        ("https://maps.example/q?key=AIzaSy0123&q=coffee", "https://maps.example/q?key=***&q=coffee"),
        ("https://app.example/cb#api_key=s3cr3t&state=ok", "https://app.example/cb#api_key=***&state=ok"),
        ("https://s3.example/f?X-Amz-Signature=ab12&X-Amz-Credential=AK%2F1",
         "https://s3.example/f?X-Amz-Signature=***&X-Amz-Credential=***"),
        ("https://a.example/?clientSecret=x1&password=x2&passwd=x3&sig=x4&auth=x5",
         "https://a.example/?clientSecret=***&password=***&passwd=***&sig=***&auth=***"),
        ("https://discord.com/api/webhooks/1234/AbCdEf_tok", "https://discord.com/api/webhooks/***"),
        ("https://hooks.slack.com/services/T000/B000/XXXXXXXX", "https://hooks.slack.com/services/***"),
        ("https://maker.ifttt.com/trigger/lights/with/key/d3adb33f", "https://maker.ifttt.com/trigger/lights/with/key/***"),
        # names that only look alike, and no URL at all, stay readable
        ("https://news.example/a?author=ann&keyword=otters&page=2",
         "https://news.example/a?author=ann&keyword=otters&page=2"),
        ("user@example.org wrote token=abc", "user@example.org wrote token=abc"),
    ],
    ids=lambda value: value[:48],
)
def test_redactor_masks_the_secret_parts_of_urls(text, shown):
    assert Redactor().text(text) == shown
    assert Redactor().value({"url": text}) == {"url": shown}
