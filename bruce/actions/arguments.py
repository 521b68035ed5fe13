"""A tool call's arguments on the way in and its output on the way out.

In: the model's JSON text, parsed (``parse_arguments``), bounded in depth, and validated against
the input schema the model was shown (``schema_with_dry_run``: the contract's, plus ``dry_run``
for a tool that can preview); every refusal is a ``ToolInputInvalid`` whose text the model reads.
Out: ``readable_output`` keeps a result the model and the audit can read, or says why it cannot
be shown, without pretending the action did not happen.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import structlog
from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

from bruce.contracts import DryRun, ToolContract
from bruce.errors import ToolInputInvalid

__all__ = ["MAX_NESTING", "parse_arguments", "readable_output", "schema_with_dry_run", "too_deep"]

log = structlog.get_logger(__name__)

MAX_NESTING = 100  # deeper arguments and results are refused whatever the stack depth left: no RecursionError later


def too_deep(value: Any, limit: int) -> bool:
    """Whether lists/dicts nest deeper than ``limit``; iterative, so it cannot recurse itself."""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list, tuple)):
            if depth >= limit:
                return True
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return False


def readable_output(output: Any, tool_name: str) -> Any:
    """The tool ran; if its result cannot be put into JSON for the model and the audit, say so
    instead of failing the turn (and never pretend the action did not happen)."""
    try:  # first, so that a cycle is named as one rather than as endless nesting
        json.dumps(output, ensure_ascii=False, default=str)
        if not too_deep(output, MAX_NESTING):
            return output
        error, reason = "too_deep", f"nested more than {MAX_NESTING} levels"
    except (ValueError, TypeError, RecursionError, OverflowError) as exc:
        error, reason = type(exc).__name__, str(exc)[:200]
    log.warning("tool.result_unserialisable", tool=tool_name, error=error)
    return {"result_unavailable": f"{tool_name} ran, but its result cannot be shown ({reason})."}


def schema_with_dry_run(contract: ToolContract) -> dict[str, Any]:
    schema = copy.deepcopy(contract.input_schema)
    if contract.dry_run is not DryRun.NONE:
        schema.setdefault("properties", {})["dry_run"] = {
            "type": "boolean",
            "description": "true: validate and preview what would happen, without doing it",
        }
    return schema


def _schema_message(validator: Draft202012Validator, arguments: Any) -> str | None:
    error = best_match(validator.iter_errors(arguments))
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path)
    return f"{where}: {error.message}" if where else error.message



def parse_arguments(raw: str, validator: Draft202012Validator, contract: ToolContract) -> dict[str, Any]:
    """The arguments of one call, valid against ``validator``'s schema; else ``ToolInputInvalid``."""
    try:
        arguments = json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError as exc:
        raise ToolInputInvalid(f"arguments are not valid JSON: {exc.msg} at position {exc.pos}") from None
    except RecursionError:
        raise ToolInputInvalid("arguments are nested too deeply") from None
    if too_deep(arguments, MAX_NESTING):
        raise ToolInputInvalid(f"arguments are nested too deeply (more than {MAX_NESTING} levels)")
    problem = _schema_message(validator, arguments)
    if problem:
        raise ToolInputInvalid(f"arguments do not match the schema of {contract.wire_name}: {problem}")
    if "dry_run" in arguments and contract.dry_run is DryRun.NONE:
        # a loose schema (additionalProperties allowed) must not turn dry_run into a way around
        # confirmation for a tool that cannot preview
        raise ToolInputInvalid(f"{contract.wire_name} has no dry run; call it without dry_run")
    if not isinstance(arguments, dict):  # the schema says object; this keeps the type honest
        raise ToolInputInvalid(f"arguments of {contract.wire_name} must be a JSON object")
    return arguments
