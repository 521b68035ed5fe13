"""math.calculate: arithmetic through simpleeval (an AST-walking evaluator with size limits),
never ``eval``. Names: pi, e, tau; functions: sqrt, log, log10, exp, sin, cos, tan, asin, acos,
atan, floor, ceil, abs, round, min, max."""

from __future__ import annotations

import math
from typing import Any

from simpleeval import InvalidExpression, SimpleEval

from bruce.contracts import Risk, ToolContext, ToolContract
from bruce.errors import ToolFailed

__all__ = ["MATH_CALCULATE", "math_calculate"]

_FUNCTIONS = {
    name: getattr(math, name)
    for name in ("sqrt", "log", "log10", "exp", "sin", "cos", "tan", "asin", "acos", "atan", "floor", "ceil")
} | {"abs": abs, "round": round, "min": min, "max": max}
_NAMES = {"pi": math.pi, "e": math.e, "tau": math.tau}

MATH_CALCULATE = ToolContract(
    name="math.calculate",
    description=(
        "Evaluate an arithmetic expression exactly, e.g. '(1200*0.15)+32' or 'sqrt(2)**2'. Supports + - * / // % **, "
        "parentheses, pi, e, and sqrt, log, log10, exp, sin, cos, tan, asin, acos, atan, floor, ceil, abs, round, min, max."
    ),
    category="math",
    risk=Risk.LOW,
    autonomous=True,
    confirmation=False,
    input_schema={
        "type": "object",
        "properties": {"expression": {"type": "string", "minLength": 1, "maxLength": 500}},
        "required": ["expression"],
        "additionalProperties": False,
    },
    output_schema={
        "type": "object",
        "properties": {"expression": {"type": "string"}, "result": {"type": "number"}},
        "required": ["expression", "result"],
    },
    side_effects="none: pure computation; repeating it gives the same result",
    audit_event="math.calculated",
    failure_modes=("invalid_args", "invalid_expression", "math_error"),
    timeout_s=2.0,
)


def _evaluate(expression: str) -> float | int:
    evaluator = SimpleEval(functions=dict(_FUNCTIONS), names=dict(_NAMES))
    try:
        result = evaluator.eval(expression)
    except InvalidExpression as exc:
        raise ToolFailed(f"cannot evaluate {expression!r}: {exc}", code="invalid_expression") from None
    except SyntaxError:
        raise ToolFailed(f"{expression!r} is not a valid arithmetic expression", code="invalid_expression") from None
    except (ArithmeticError, ValueError) as exc:
        raise ToolFailed(f"math error in {expression!r}: {exc}", code="math_error") from None
    if isinstance(result, bool) or not isinstance(result, (int, float)):
        raise ToolFailed(f"{expression!r} does not evaluate to a number", code="invalid_expression")
    if isinstance(result, float) and not math.isfinite(result):
        raise ToolFailed(f"{expression!r} does not have a finite result", code="math_error")
    return result


async def math_calculate(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    expression = args["expression"]
    return {"expression": expression, "result": _evaluate(expression)}
