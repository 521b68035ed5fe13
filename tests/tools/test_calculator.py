"""math.calculate under hostile input: sizes are refused before computing, results always
serialise, and the evaluation runs in a worker process that is killed when it takes too long
(the worker process itself: tests/tools/test_procworker.py)."""

from __future__ import annotations

import asyncio
import json
import os

import pytest

from bruce.contracts import ToolCall
from bruce.turns.scope import TurnScope, new_turn_id
from bruce.values import ConversationId
from tests.helpers import rows
from tools import calculator
from tools.calculator import MATH_CALCULATE, MAX_DIGITS, ProcessWorker, evaluate


def spin_on_request(expression: str) -> float | int:
    """A worker target (runs in the child): "spin" never finishes, anything else is evaluated."""
    if expression == "spin":
        while True:
            pass
    return evaluate(expression)


SLOW_TARGET = f"{__name__}:spin_on_request"


def process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture(autouse=True)
def no_worker_left_behind():
    yield
    calculator.shutdown()


@pytest.fixture
def slow_worker():
    worker = ProcessWorker(SLOW_TARGET, time_limit_s=0.5)
    yield worker
    worker.shutdown()


async def run(app, expression):
    scope = TurnScope(new_turn_id(), ConversationId("test", "1"), "u1")
    await app.store.messages.ensure_conversation("test:1", "test", "1")
    await app.store.messages.start_turn(scope.turn_id, "test:1", source="chat", inbound_message_id=None)
    return await app.registry.execute(ToolCall("c1", "math_calculate", json.dumps({"expression": expression})), scope)


async def test_a_huge_power_is_refused_before_it_is_computed(app):
    # 3999999**3999999 passes simpleeval's own operand limits and used to compute for ~35 s on the loop
    result = await run(app, "3999999**3999999")
    assert result.status == "error"
    assert result.error.startswith("too_large: 3999999 ** 3999999 would have about 26,408,233 digits")
    assert f"limited to {MAX_DIGITS} digits" in result.error and "not computed" in result.error
    (audit,) = await rows(app, "SELECT status, error FROM tool_executions")
    assert audit["status"] == "error" and audit["error"].startswith("too_large")


async def test_a_result_too_long_for_json_is_refused_and_the_largest_allowed_is_exact(app):
    refused = await run(app, "10**5000")  # 5001 digits: json.dumps cannot write it (more than 4300)
    assert refused.status == "error" and refused.error.startswith("too_large: 10 ** 5000 would have about 5,001 digits")
    largest = await run(app, "10**3999 + 1")  # exactly MAX_DIGITS digits
    assert largest.ok and largest.output["result"] == 10**3999 + 1
    assert len(str(largest.output["result"])) == MAX_DIGITS
    audits = await rows(app, "SELECT status, output FROM tool_executions ORDER BY rowid")
    assert [a["status"] for a in audits] == ["error", "ok"]
    assert json.loads(audits[1]["output"])["result"] == 10**3999 + 1  # the audit row holds the whole number
    just_over = await run(app, "10**3999 * 10")
    assert just_over.status == "error" and just_over.error.startswith("too_large: a result would have 4,001 digits")


@pytest.mark.parametrize(
    ("expression", "message"),
    [("(10**3000) * (10**3000)", "a 3001-digit number * a 3001-digit number would have about 6,000 digits"),
     ("1 << 20000", "1 << 20000 would have about 6,021 digits"),
     ("9**9**9", "9 ** 387420489 would have about 369,693,100 digits"),
     ("2 ** (10**30)", "2 ** a 31-digit number would have far more than a million digits"),
     ("(10**2000)**3", "a 2001-digit number ** 3 would have about 6,001 digits"),
     ("round(5, -10**9)", "round() takes at most 4000 digits either way, not -1000000000.")],
)
async def test_growth_past_the_limit_is_refused_at_the_step_that_would_pass_it(app, expression, message):
    result = await run(app, expression)
    assert result.status == "error" and result.error == f"too_large: {message}" + (
        "" if expression.startswith("round") else f"; numbers are limited to {MAX_DIGITS} digits, so it was not computed.")


@pytest.mark.parametrize(
    ("expression", "value"),
    [("5000000**2", 25_000_000_000_000),  # simpleeval alone refuses any operand above 4,000,000
     ("2**13000 // 2**12999", 2), ("(-1)**(10**400)", 1), ("2**-2", 0.25), ("round(123456, -3)", 123000)],
)
async def test_large_but_bounded_arithmetic_still_works(app, expression, value):
    result = await run(app, expression)
    assert result.ok and result.output == {"expression": expression, "result": value}


@pytest.mark.parametrize(
    "expression", ["(1).real", "(2).to_bytes(10**9)", "f'{1:>999999999}'", "'a' in 'abc'", "x = 1", "1; 2", "3j"],
)
async def test_anything_but_numbers_and_operators_is_refused(app, expression):
    result = await run(app, expression)
    assert result.status == "error" and result.error.startswith("invalid_expression")


async def test_a_wrong_call_is_an_invalid_expression_not_a_crash(app):
    result = await run(app, "sqrt()")
    assert result.status == "error"
    assert result.error == "invalid_expression: cannot evaluate 'sqrt()': math.sqrt() takes exactly one argument (0 given)"


def test_the_contract_names_the_limit_and_its_failure_codes():
    assert {"too_large", "too_slow"} <= set(MATH_CALCULATE.failure_modes)
    assert f"limited to {MAX_DIGITS} digits" in MATH_CALCULATE.description


async def test_a_slow_calculation_does_not_block_the_loop_and_is_stopped(app, slow_worker, monkeypatch):
    # no expression gets past the size limits and is still slow, so the worker gets a target that spins
    monkeypatch.setattr(calculator, "_WORKER", slow_worker)
    assert (await run(app, "6*7")).output["result"] == 42
    first_pid = slow_worker.pid
    assert first_pid is not None

    spinning = asyncio.create_task(run(app, "spin"))
    other = asyncio.create_task(asyncio.sleep(0))
    done, _ = await asyncio.wait({spinning, other}, return_when=asyncio.FIRST_COMPLETED)
    assert done == {other}  # the loop kept running other work while the child computed

    result = await spinning
    assert result.status == "error"
    assert result.error == "too_slow: the calculation did not finish within 0.5 s and was stopped; simplify the expression."
    assert not process_exists(first_pid) and slow_worker.pid is None  # killed and reaped

    assert (await run(app, "2**10")).output["result"] == 1024  # a new child takes over
    assert slow_worker.pid not in (None, first_pid)


async def test_shutdown_leaves_no_process_and_a_later_call_starts_again(app):
    assert (await run(app, "19*23")).output["result"] == 437
    pid = calculator._WORKER.pid
    assert pid is not None and process_exists(pid)
    calculator.shutdown()
    assert not process_exists(pid) and calculator._WORKER.pid is None
    calculator.shutdown()  # twice is fine
    assert (await run(app, "20*23")).output["result"] == 460
