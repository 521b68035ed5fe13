"""clock.now and math.calculate, called through the registry as the model would."""

from __future__ import annotations

import json

import pytest

from bruce.contracts import ToolCall
from bruce.turns.scope import TurnScope, new_turn_id
from bruce.values import ConversationId
from tools import calculator


@pytest.fixture(autouse=True, scope="module")
def stop_the_calculator_worker():
    yield
    calculator.shutdown()  # no worker process outlives these tests


async def run(app, name, args):
    scope = TurnScope(new_turn_id(), ConversationId("test", "1"), "u1")
    await app.store.messages.ensure_conversation("test:1", "test", "1")
    await app.store.messages.start_turn(scope.turn_id, "test:1", source="chat", inbound_message_id=None)
    return await app.registry.execute(ToolCall("c1", name, json.dumps(args)), scope)


async def test_clock_now_defaults_to_the_assistant_zone(app):
    result = await run(app, "clock_now", {})
    assert result.output == {
        "iso": "2026-12-02T09:00:00-03:00", "date": "2026-12-02", "time": "09:00:00",
        "weekday": "Wednesday", "timezone": "America/Sao_Paulo", "utc_offset": "-03:00",
    }


async def test_clock_now_in_another_zone_and_a_bad_zone(app):
    assert (await run(app, "clock_now", {"timezone": "Asia/Tokyo"})).output["time"] == "21:00:00"
    bad = await run(app, "clock_now", {"timezone": "Nowhere/City"})
    assert bad.status == "invalid_args" and "unknown timezone 'Nowhere/City'" in bad.error
    huge = await run(app, "clock_now", {"timezone": "x" * 100_000})  # too long for a file name: OSError before
    assert huge.status == "invalid_args" and "unknown timezone" in huge.error and len(huge.error) < 300


@pytest.mark.parametrize(
    ("expression", "value"),
    [("2+3*4", 14), ("(1200*0.15)+32", 212.0), ("sqrt(16)", 4.0), ("2**10", 1024), ("round(pi, 2)", 3.14),
     ("max(3, 7) - min(1, 2)", 6), ("7 // 2", 3)],
)
async def test_math_calculate(app, expression, value):
    result = await run(app, "math_calculate", {"expression": expression})
    assert result.ok and result.output == {"expression": expression, "result": value}


@pytest.mark.parametrize(
    ("expression", "code"),
    [("__import__('os').system('id')", "invalid_expression"), ("open('/etc/passwd')", "invalid_expression"),
     ("9**9**9", "too_large"), ("1/0", "math_error"), ("sqrt(-1)", "math_error"),
     ("'a' * 3", "invalid_expression"), ("x + 1", "invalid_expression"), ("1 +", "invalid_expression")],
)
async def test_math_calculate_refuses_what_is_not_arithmetic(app, expression, code):
    result = await run(app, "math_calculate", {"expression": expression})
    assert result.status == "error" and result.error.startswith(code)


async def test_every_builtin_contract_is_registered_and_consistent(app):
    from bruce.actions.checks import check_contract

    names = {t.contract.name for t in app.registry.tools()}
    assert names == {"artifact.save", "clock.now", "files.write", "http.post", "math.calculate", "memory.forget", "memory.remember", "memory.search",
                     "proactive.cancel", "proactive.create", "proactive.list", "proactive.update",
                     "web.read_url", "web.search"}
    for tool in app.registry.tools():
        assert check_contract(tool.contract) == [], tool.contract.name
