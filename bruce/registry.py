"""ToolRegistry: the contracts the model may see, and the one audited way to run a tool.

``execute`` never raises for anything a model can cause: an unknown name, malformed or
schema-violating arguments, a tool that raises or hangs all come back as a ``ToolResult``
with a status, and every call (whatever its outcome) is one ``tool_executions`` row.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from zoneinfo import ZoneInfo

import structlog
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, best_match

from bruce.clock import Clock
from bruce.contracts import Risk, ToolCall, ToolContext, ToolContract, ToolHandler, ToolResult
from bruce.errors import BruceError, ToolError, ToolInputInvalid
from bruce.log import Redactor
from bruce.store import Store, ToolExecutionRecord
from bruce.turn import TurnScope

__all__ = ["ToolRegistry", "RegisteredTool", "ContractError"]

log = structlog.get_logger(__name__)


class ContractError(BruceError):
    """A tool contract is incomplete or contradicts its own risk."""


@dataclass(frozen=True, slots=True)
class RegisteredTool:
    contract: ToolContract
    handler: ToolHandler
    validator: Draft202012Validator


def _check_contract(contract: ToolContract) -> list[str]:
    problems = []
    parts = contract.name.split(".")
    if len(parts) != 2 or not all(p.replace("_", "").isalnum() and p.islower() for p in parts):
        problems.append("name must be 'domain.verb' in lower case")
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
    if contract.risk in (Risk.HIGH, Risk.CRITICAL):
        if contract.autonomous:
            problems.append(f"a {contract.risk} tool cannot be autonomous")
        if not contract.confirmation:
            problems.append(f"a {contract.risk} tool must require confirmation")
    if contract.risk is Risk.CRITICAL and not contract.step_up:
        problems.append("a critical tool must require step-up approval")
    if contract.risk is Risk.FORBIDDEN and contract.autonomous:
        problems.append("a forbidden tool cannot be autonomous")
    if contract.idempotent and contract.idempotency_window_s <= 0:
        problems.append("an idempotent tool needs a positive idempotency_window_s")
    return problems


def _schema_message(validator: Draft202012Validator, arguments: Any) -> str | None:
    error = best_match(validator.iter_errors(arguments))
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path)
    return f"{where}: {error.message}" if where else error.message


class ToolRegistry:
    def __init__(
        self,
        *,
        store: Store,
        clock: Clock,
        zone: ZoneInfo,
        default_timeout_s: float = 30.0,
        audit_output_max_chars: int = 8000,
        redactor: Redactor | None = None,
    ) -> None:
        self._store = store
        self._clock = clock
        self._zone = zone
        self._default_timeout_s = default_timeout_s
        self._audit_max = audit_output_max_chars
        self._redactor = redactor or Redactor()
        self._tools: dict[str, RegisteredTool] = {}

    def register(self, contract: ToolContract, handler: ToolHandler) -> None:
        problems = _check_contract(contract)
        if contract.wire_name in self._tools:
            problems.append("a tool with this name is already registered")
        if problems:
            raise ContractError(f"tool {contract.name}: " + "; ".join(problems))
        self._tools[contract.wire_name] = RegisteredTool(contract, handler, Draft202012Validator(contract.input_schema))

    def register_all(self, tools: Iterable[tuple[ToolContract, ToolHandler]]) -> None:
        for contract, handler in tools:
            self.register(contract, handler)

    def contracts(self) -> list[ToolContract]:
        return sorted((t.contract for t in self._tools.values()), key=lambda c: c.name)

    def get(self, name: str) -> RegisteredTool | None:
        return self._tools.get(name) or self._tools.get(name.replace(".", "_"))

    def definitions(self) -> list[dict[str, Any]]:
        """What the model is shown: every tool except forbidden ones."""
        return [t.contract.definition() for t in self._tools.values() if t.contract.risk is not Risk.FORBIDDEN]

    async def execute(self, call: ToolCall, scope: TurnScope) -> ToolResult:
        started = self._clock.monotonic()
        tool = self._tools.get(call.name)
        arguments: Any = call.arguments
        if tool is None:
            known = ", ".join(sorted(n for n, t in self._tools.items() if t.contract.risk is not Risk.FORBIDDEN))
            result = ToolResult(call.id, call.name, "unknown_tool", error=f"There is no tool named {call.name!r}. Available tools: {known}.")
            return await self._audit(call, scope, None, arguments, result, started)
        if tool.contract.risk is Risk.FORBIDDEN:
            result = ToolResult(call.id, call.name, "denied", error=f"The tool {tool.contract.name} is not allowed.")
            return await self._audit(call, scope, tool, arguments, result, started)
        try:
            arguments = self._parse_arguments(call.arguments, tool)
        except ToolInputInvalid as exc:
            result = ToolResult(call.id, call.name, "invalid_args", error=str(exc))
            return await self._audit(call, scope, tool, arguments, result, started)
        result = await self._run(call, tool, arguments, scope)
        return await self._audit(call, scope, tool, arguments, result, started)

    def _parse_arguments(self, raw: str, tool: RegisteredTool) -> dict[str, Any]:
        try:
            arguments = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError as exc:
            raise ToolInputInvalid(f"arguments are not valid JSON: {exc.msg} at position {exc.pos}") from None
        problem = _schema_message(tool.validator, arguments)
        if problem:
            raise ToolInputInvalid(f"arguments do not match the schema of {tool.contract.wire_name}: {problem}")
        return arguments

    async def _run(self, call: ToolCall, tool: RegisteredTool, arguments: dict[str, Any], scope: TurnScope) -> ToolResult:
        timeout_s = tool.contract.timeout_s or self._default_timeout_s
        context = ToolContext(
            clock=self._clock, zone=self._zone, conversation_id=scope.conversation_id,
            turn_id=scope.turn_id, now=self._clock.now(),
        )
        try:
            async with asyncio.timeout(timeout_s):
                output = await tool.handler(arguments, context)
        except TimeoutError:
            return ToolResult(call.id, call.name, "timeout", error=f"The tool did not finish within {timeout_s:g} seconds.")
        except ToolInputInvalid as exc:
            return ToolResult(call.id, call.name, "invalid_args", error=str(exc))
        except ToolError as exc:
            return ToolResult(call.id, call.name, "error", error=f"{exc.code}: {exc}")
        except Exception as exc:  # a tool bug must not end the conversation
            log.exception("tool.crashed", tool=tool.contract.name)
            return ToolResult(call.id, call.name, "error", error=f"internal_error: the tool failed unexpectedly ({type(exc).__name__}).")
        return ToolResult(call.id, call.name, "ok", output=output)

    def _audit_output(self, output: Any) -> Any:
        text = json.dumps(self._redactor.value(output), ensure_ascii=False, default=str)
        if len(text) <= self._audit_max:
            return text
        return {"truncated": True, "original_chars": len(text), "preview": text[: self._audit_max]}

    async def _audit(
        self, call: ToolCall, scope: TurnScope, tool: RegisteredTool | None, arguments: Any,
        result: ToolResult, started: float,
    ) -> ToolResult:
        latency_ms = (self._clock.monotonic() - started) * 1000
        record = ToolExecutionRecord(
            turn_id=scope.turn_id,
            conversation_id=scope.conversation_id,
            call_id=call.id,
            tool_name=tool.contract.name if tool else call.name,
            risk=str(tool.contract.risk) if tool else None,
            input=self._redactor.value({"raw": arguments} if isinstance(arguments, str) else arguments),
            output=None if result.output is None else self._audit_output(result.output),
            status=result.status,
            error=self._redactor.text(result.error) if result.error else None,
            latency_ms=latency_ms,
            source=scope.source if scope.source in ("chat", "proactive", "confirmation") else "chat",
        )
        await asyncio.shield(self._store.record_tool_execution(record))
        log.info("tool.executed", tool=record.tool_name, status=result.status, ms=round(latency_ms, 1))
        return result
