"""math.calculate: arithmetic through simpleeval (an AST-walking evaluator), never ``eval``.

Names: pi, e, tau; functions: sqrt, log, log10, exp, sin, cos, tan, asin, acos, atan, floor,
ceil, abs, round, min, max. Only numbers, names, operators and those calls are accepted: no
strings, attributes, subscripts or f-strings.

Size limit. Every integer in a calculation, intermediate or final, may have at most
``MAX_DIGITS`` (4000) decimal digits. Powers, products and left shifts are estimated *before*
they are computed (``b * log10(|a|)`` digits for ``a ** b``, the operands' bit lengths for ``*``
and ``<<``) and refused as ``too_large`` when they would pass the limit; every other operation
is checked on its result. A result is therefore never a number that cannot be written as JSON
(Python refuses to print integers of more than 4300 digits): anything larger is refused, never
returned as text. ``round(x, n)`` accepts ``|n| <= MAX_DIGITS``.

Time limit. The evaluation runs in a separate worker process (one long-lived child, started on
first use), never on the event loop. If it does not answer within ``EVAL_TIME_LIMIT_S`` the
child is killed, the call fails with ``too_slow`` and the next call starts a new child. Results
and errors come back as JSON lines. :class:`ProcessWorker` is that mechanism, for any function
taking and returning JSON values (``tools.web`` uses one to extract pages). Every worker's child
ends when :func:`shutdown` is called (the app should call it when it stops), when the
interpreter exits (``atexit``), or when its parent goes away (its input pipe closes).

Failure codes: ``invalid_args``, ``invalid_expression``, ``math_error``, ``too_large``,
``too_slow``.
"""

from __future__ import annotations

import ast
import math
import operator as op
from collections.abc import Callable
from typing import Any

from simpleeval import DEFAULT_OPERATORS, InvalidExpression, NumberTooHigh, SimpleEval

from bruce.contracts import Risk, ToolContext, ToolContract
from bruce.errors import ToolFailed
from tools.procworker import ProcessWorker, WorkerTimeout, shutdown

__all__ = ["MATH_CALCULATE", "MAX_DIGITS", "EVAL_TIME_LIMIT_S", "ProcessWorker", "WorkerTimeout",
           "evaluate", "math_calculate", "shutdown"]

MAX_DIGITS = 4000
"""The most decimal digits any integer in a calculation may have (below Python's 4300-digit
limit for turning an integer into text, so every result can be written as JSON)."""
EVAL_TIME_LIMIT_S = 1.0
"""How long the worker process may take for one evaluation before it is killed."""

_LOG10_2 = math.log10(2)
_LIMIT = 10**MAX_DIGITS  # an integer is too large when abs(n) >= _LIMIT
_MAX_EXPONENT_BITS = 64  # any integer exponent beyond this (with |base| >= 2) is far past the limit

MATH_CALCULATE = ToolContract(
    name="math.calculate",
    activity="Calculating",
    description=(
        "Evaluate an arithmetic expression exactly, e.g. '(1200*0.15)+32' or 'sqrt(2)**2'. Supports + - * / // % **, "
        "parentheses, pi, e, and sqrt, log, log10, exp, sin, cos, tan, asin, acos, atan, floor, ceil, abs, round, min, "
        f"max. Integers (results and every step) are limited to {MAX_DIGITS} digits: a larger one is refused "
        "(too_large), never computed."
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
    failure_modes=("invalid_args", "invalid_expression", "math_error", "too_large", "too_slow"),
    # the evaluation itself is limited to EVAL_TIME_LIMIT_S in the worker; this also covers
    # starting the worker process on the first call
    timeout_s=5.0,
    guideline="Arithmetic: compute numbers with math_calculate rather than in your head, and report its result.",
)


# --------------------------------------------------------------------------- evaluation


def _is_int(value: Any) -> bool:
    return isinstance(value, int)  # bool included: True ** 5 is 1


def _shown(value: Any) -> str:
    """An operand for a message: short numbers as they are, long ones by their size."""
    if _is_int(value) and value.bit_length() > 60:
        return f"a {_digits(value)}-digit number"
    return repr(value)


def _digits(n: int) -> int:
    """The number of decimal digits of ``n`` (exact; ``n`` is at most a few thousand digits)."""
    estimate = int(n.bit_length() * _LOG10_2) + 1  # equal to the true count or one more
    return estimate - 1 if estimate > 1 and abs(n) < 10 ** (estimate - 1) else estimate


def _too_large(what: str, digits: float | None) -> ToolFailed:
    """The refusal of ``what``, an integer of about ``digits`` digits (None: too many to say)."""
    size = f"about {math.floor(digits) + 1:,}" if digits is not None and digits < 1e15 else "far more than a million"
    return ToolFailed(
        f"{what} would have {size} digits; numbers are limited to {MAX_DIGITS} digits, so it was not computed.",
        code="too_large",
    )


def _checked(value: Any) -> Any:
    """``value``, or ToolFailed(too_large) for an integer past the limit."""
    if _is_int(value) and abs(value) >= _LIMIT:
        raise ToolFailed(f"a result would have {_digits(value):,} digits; numbers are limited to {MAX_DIGITS} digits.",
                         code="too_large")
    return value


def _refuse_bits(bits: float, what: Callable[[], str]) -> None:
    """Refuse before computing an integer of (at least) ``bits`` bits that is past the limit
    (with one digit of slack; the exact check happens on the result)."""
    if bits * _LOG10_2 > MAX_DIGITS + 1:
        raise _too_large(what(), bits * _LOG10_2)


def _power(a: Any, b: Any) -> Any:
    if _is_int(a) and _is_int(b) and b > 0 and abs(a) > 1:
        if b.bit_length() > _MAX_EXPONENT_BITS:
            raise _too_large(f"{_shown(a)} ** {_shown(b)}", None)
        digits = b * math.log10(abs(a))
        if digits > MAX_DIGITS + 1:
            raise _too_large(f"{_shown(a)} ** {_shown(b)}", digits)
    return _checked(a**b)


def _multiply(a: Any, b: Any) -> Any:
    if _is_int(a) and _is_int(b) and a and b:
        _refuse_bits(a.bit_length() + b.bit_length() - 1, lambda: f"{_shown(a)} * {_shown(b)}")
    return _checked(a * b)


def _lshift(a: Any, b: Any) -> Any:
    if _is_int(a) and _is_int(b) and a and b > 0:
        if b.bit_length() > _MAX_EXPONENT_BITS:
            raise _too_large(f"{_shown(a)} << {_shown(b)}", None)
        _refuse_bits(a.bit_length() + b, lambda: f"{_shown(a)} << {_shown(b)}")
    return _checked(a << b)


def _round(number: Any, ndigits: Any = None) -> Any:
    # round(x, -n) computes 10 ** n internally: bound n like any other integer
    if _is_int(ndigits) and abs(ndigits) > MAX_DIGITS:
        raise ToolFailed(f"round() takes at most {MAX_DIGITS} digits either way, not {_shown(ndigits)}.",
                         code="too_large")
    return _checked(round(number) if ndigits is None else round(number, ndigits))


def _result_checked(fn: Callable[..., Any]) -> Callable[..., Any]:
    def checked(*args: Any) -> Any:
        return _checked(fn(*args))

    return checked


_OPERATORS: dict[type, Callable[..., Any]] = {
    **{node: _result_checked(fn) for node, fn in DEFAULT_OPERATORS.items()},
    ast.Add: _result_checked(op.add),  # simpleeval's safe_add only guards strings, which are refused anyway
    ast.Pow: _power,
    ast.Mult: _multiply,
    ast.LShift: _lshift,
}
_FUNCTIONS: dict[str, Callable[..., Any]] = {
    name: getattr(math, name)
    for name in ("sqrt", "log", "log10", "exp", "sin", "cos", "tan", "asin", "acos", "atan", "floor", "ceil")
} | {"abs": abs, "round": _round, "min": min, "max": max}
_NAMES = {"pi": math.pi, "e": math.e, "tau": math.tau}
_NOT_ARITHMETIC = (ast.Attribute, ast.Subscript, ast.Slice, ast.JoinedStr, ast.FormattedValue, ast.Assign,
                   ast.AugAssign, ast.Import)


def _arithmetic() -> SimpleEval:
    """simpleeval restricted to arithmetic: our operators and functions, numeric literals only,
    and none of the nodes that reach objects or build strings. (An instance configured here
    rather than a subclass: simpleeval has no type hints, and a class cannot be typed on an
    untyped base.)"""
    evaluator = SimpleEval(operators=dict(_OPERATORS), functions=dict(_FUNCTIONS), names=dict(_NAMES))
    for node in _NOT_ARITHMETIC:
        evaluator.nodes.pop(node, None)
    evaluator.nodes[ast.Constant] = _number
    return evaluator


def _parse(expression: str) -> ast.AST:
    return ast.parse(expression.strip(), mode="eval").body  # one expression, never statements


def _number(node: ast.Constant) -> Any:
    if not isinstance(node.value, (int, float)):  # strings, bytes, None, complex numbers
        raise InvalidExpression(f"{node.value!r} is not a number")
    return _checked(node.value)


def evaluate(expression: str) -> float | int:
    """The value of ``expression``, or ToolFailed. Synchronous and CPU-bound: the tool runs it in
    the worker process (:class:`ProcessWorker`), never on the event loop."""
    try:
        result = _arithmetic().eval(expression, previously_parsed=_parse(expression))
    except ToolFailed:
        raise
    except NumberTooHigh as exc:
        raise ToolFailed(f"{expression!r} is too large to compute: {exc}", code="too_large") from None
    except InvalidExpression as exc:
        raise ToolFailed(f"cannot evaluate {expression!r}: {exc}", code="invalid_expression") from None
    except SyntaxError:
        raise ToolFailed(f"{expression!r} is not a valid arithmetic expression", code="invalid_expression") from None
    except RecursionError:
        raise ToolFailed(f"{expression!r} is nested too deeply", code="invalid_expression") from None
    except TypeError as exc:  # sqrt(), round(1, 2.5), a comparison of numbers used as one, ...
        raise ToolFailed(f"cannot evaluate {expression!r}: {exc}", code="invalid_expression") from None
    except (ArithmeticError, ValueError) as exc:
        raise ToolFailed(f"math error in {expression!r}: {exc}", code="math_error") from None
    except MemoryError:
        raise ToolFailed(f"{expression!r} needs too much memory", code="too_large") from None
    if isinstance(result, bool) or not isinstance(result, (int, float)):
        raise ToolFailed(f"{expression!r} does not evaluate to a number", code="invalid_expression")
    if isinstance(result, float) and not math.isfinite(result):
        raise ToolFailed(f"{expression!r} does not have a finite result", code="math_error")
    return result


_WORKER = ProcessWorker("tools.calculator:evaluate", time_limit_s=EVAL_TIME_LIMIT_S)


async def math_calculate(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    expression = args["expression"]
    try:
        result = await _WORKER.call(expression)
    except WorkerTimeout as exc:
        raise ToolFailed(f"the calculation did not finish within {exc.limit_s:g} s and was stopped; "
                         "simplify the expression.", code="too_slow") from None
    return {"expression": expression, "result": result}
