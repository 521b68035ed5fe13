"""The checks a tool's contract passes at registration: every problem named, all at once.

``check_contract`` is the one entry (used by ``ToolRegistry.register`` and by ``bruce doctor``):
the contract's shape (its name, the fields that must say something, valid JSON Schemas, an
object input without ``dry_run``, the idempotency window, the cache time, ``url_args`` naming
input properties), then what its risk
demands (side effects described, confirmation, step-up, never autonomous when high or above;
a cache only for a low-risk read).
"""

from __future__ import annotations

import re

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from bruce.contracts import Risk, ToolContract

__all__ = ["WIRE_NAME", "check_contract"]

WIRE_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")  # what every provider accepts as a function name


def _name_problems(contract: ToolContract) -> list[str]:
    problems = []
    if contract.server is not None:  # a remote tool: its name is the server's, its wire name made safe
        if not contract.name.startswith(f"mcp.{contract.server}.") or len(contract.name) <= len(contract.server) + 5:
            problems.append("a remote tool's name must be 'mcp.<server>.<tool>'")
        if not WIRE_NAME.fullmatch(contract.wire_name):
            problems.append("a remote tool's wire name must match [a-zA-Z0-9_-]{1,64}")
        return problems
    parts = contract.name.split(".")
    if len(parts) != 2 or not all(p.replace("_", "").isalnum() and p.islower() for p in parts):
        problems.append("name must be 'domain.verb' in lower case")
    return problems


def _shape_problems(contract: ToolContract) -> list[str]:
    problems = _name_problems(contract)
    for field_name in ("description", "category", "side_effects", "audit_event"):
        if not getattr(contract, field_name).strip():
            problems.append(f"{field_name} must not be empty")
    if not contract.failure_modes:
        problems.append("failure_modes must list at least one failure code")
    for label, schema in (("input_schema", contract.input_schema), ("output_schema", contract.output_schema)):
        try:
            Draft202012Validator.check_schema(schema)
        except SchemaError as exc:
            problems.append(f"{label} is not a valid JSON Schema: {exc.message}")
    if contract.input_schema.get("type") != "object":
        problems.append("input_schema must describe an object")
    properties = contract.input_schema.get("properties")
    if isinstance(properties, dict) and "dry_run" in properties:
        problems.append("input_schema must not define dry_run (the registry adds it)")
    if not isinstance(contract.guideline, str) or contract.guideline != contract.guideline.strip():
        problems.append("guideline must be text without leading or trailing whitespace")
    if contract.idempotent and contract.idempotency_window_s <= 0:
        problems.append("an idempotent tool needs a positive idempotency_window_s")
    if contract.cache_ttl_s < 0:
        problems.append("cache_ttl_s must not be negative")
    problems += _url_arg_problems(contract)
    return problems


def _url_arg_problems(contract: ToolContract) -> list[str]:
    """``url_args`` names top-level input properties (a misspelt one would silently check nothing)."""
    properties = contract.input_schema.get("properties")
    known = set(properties) if isinstance(properties, dict) else set()
    return [f"url_args names {name!r}, which is not a property of input_schema"
            for name in contract.url_args if name not in known]


def _risk_problems(contract: ToolContract) -> list[str]:
    problems = []
    if contract.risk in (Risk.HIGH, Risk.CRITICAL):
        if contract.side_effects.strip().lower() in ("none", "n/a", "-"):
            problems.append(f"a {contract.risk} tool must describe its side effects")
        if contract.autonomous:
            problems.append(f"a {contract.risk} tool cannot be autonomous")
        if not contract.confirmation:
            problems.append(f"a {contract.risk} tool must require confirmation")
    if contract.risk is Risk.CRITICAL and not contract.step_up:
        problems.append("a critical tool must require step-up approval")
    if contract.risk is Risk.FORBIDDEN and contract.autonomous:
        problems.append("a forbidden tool cannot be autonomous")
    if contract.cache_ttl_s > 0 and (contract.risk is not Risk.LOW or contract.confirmation
                                     or not contract.side_effects.strip().lower().startswith("none")):
        problems.append("cache_ttl_s is only for low-risk, read-only tools (side_effects 'none: ...'): "
                        "a cached answer must never stand in for an action")
    return problems


def check_contract(contract: ToolContract) -> list[str]:
    """Every problem with a contract, at once."""
    return _shape_problems(contract) + _risk_problems(contract)


