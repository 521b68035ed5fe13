"""Error text for config problems: one line per bad key, starting with the key's path.

``validation_problems`` turns pydantic's errors into those lines (``llm.timeout_s: must be a
positive number (got -1)``), with a secret's input shown as ``<redacted>``; ``key_path`` writes a
location the same way for the YAML reader (``tools.http_post.allowed_urls[1]``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import ValidationError

__all__ = ["key_path", "describe", "validation_problems"]

_MESSAGES = {
    "extra_forbidden": "unknown key",
    "missing": "required key is missing",
    "greater_than": "must be greater than {gt}",
    "greater_than_equal": "must be at least {ge}",
    "less_than_equal": "must be at most {le}",
    "int_parsing": "must be a whole number",
    "int_type": "must be a whole number",
    "float_parsing": "must be a number",
    "float_type": "must be a number",
    "bool_parsing": "must be true or false",
    "bool_type": "must be true or false",
    "string_too_short": "must not be empty",
    "model_type": "must be a mapping of keys",
    "dict_type": "must be a mapping of keys",
    "list_type": "must be a list",
    "string_type": "must be text",
}

_UNION_TAGS = {"str", "ModelEndpoint"}  # pydantic names the union member tried; not a key
_SECRET_KEYS = ("api_key", "token", "secret_token", "judge_api_key")  # their input is never echoed


def key_path(loc: Iterable[Any]) -> str:
    """``('tools', 'http_post', 'allowed_urls', 1)`` -> ``tools.http_post.allowed_urls[1]``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part not in _UNION_TAGS:
            out += f".{part}" if out else str(part)
    return out


def describe(error: Any) -> str:
    """One pydantic error (an item of ``ValidationError.errors()``) as ``path: what is wrong``."""
    loc = key_path(error["loc"])
    template = _MESSAGES.get(error["type"])
    ctx = error.get("ctx") or {}
    if error["type"] == "greater_than" and ctx.get("gt") == 0:
        template = "must be a positive number"
    if error["type"] == "value_error":
        return f"{loc or '<root>'}: {error['msg'].removeprefix('Value error, ')}"
    if template is None:
        message = error["msg"].removeprefix("Value error, ")
    else:
        message = template.format(**ctx)
    if error["type"] not in ("extra_forbidden", "missing") and not isinstance(error["input"], dict):
        message += f" (got {error['input']!r})"
    return f"{loc or '<root>'}: {message}"


def _is_secret_path(error: Any) -> bool:
    return any(str(p) in _SECRET_KEYS for p in error["loc"])


def validation_problems(exc: ValidationError) -> list[str]:
    """Every problem ``exc`` found, one line each, sorted and without repeats."""
    problems = []
    for error in exc.errors():
        if _is_secret_path(error):
            error = {**error, "input": "<redacted>"}
        problems.append(describe(error))
    return sorted(set(problems))
