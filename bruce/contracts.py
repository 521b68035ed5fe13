"""The values that cross the tool seam: a tool's contract, a call from the model, its result,
and the narrow context a handler receives."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any
from zoneinfo import ZoneInfo

from bruce.clock import Clock

__all__ = [
    "Risk",
    "DryRun",
    "ToolContract",
    "ToolCall",
    "ToolResult",
    "ToolContext",
    "ToolHandler",
    "wire_name",
]


class Risk(StrEnum):
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"
    CRITICAL = "critical"
    FORBIDDEN = "forbidden"


class DryRun(StrEnum):
    NONE = "none"
    OPTIONAL = "optional"
    REQUIRED = "required"


def wire_name(name: str) -> str:
    """The name the model sees: ``web.search`` -> ``web_search``."""
    return name.replace(".", "_")


@dataclass(frozen=True, slots=True)
class ToolContract:
    """Everything Bruce knows and enforces about one tool (see docs/tools.md)."""

    name: str
    description: str
    category: str
    risk: Risk
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]
    autonomous: bool
    confirmation: bool
    step_up: bool = False
    dry_run: DryRun = DryRun.NONE
    idempotent: bool = False
    idempotency_window_s: float = 0.0
    permissions: tuple[str, ...] = ()
    side_effects: str = "none"
    audit_event: str = ""
    failure_modes: tuple[str, ...] = ()
    timeout_s: float | None = None

    @property
    def wire_name(self) -> str:
        return wire_name(self.name)

    def definition(self) -> dict[str, Any]:
        """The OpenAI-style function definition sent to the model."""
        return {
            "type": "function",
            "function": {
                "name": self.wire_name,
                "description": self.description,
                "parameters": self.input_schema,
            },
        }


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One call the model asked for; ``arguments`` is the raw JSON text it sent."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class ToolResult:
    call_id: str
    name: str
    status: str  # a tool_executions status
    output: Any = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def for_model(self) -> dict[str, Any]:
        if self.ok:
            return {"ok": True, "result": self.output}
        if self.status == "awaiting_confirmation":
            return {"ok": False, "status": self.status, "message": self.error, **(self.output or {})}
        return {"ok": False, "status": self.status, "error": self.error}


@dataclass(frozen=True, slots=True)
class ToolContext:
    """What a tool handler may know about the call it serves. Kept narrow on purpose."""

    clock: Clock
    zone: ZoneInfo
    conversation_id: str | None
    turn_id: str | None
    dry_run: bool = False
    idempotency_key: str | None = None
    now: datetime | None = field(default=None)


ToolHandler = Callable[[dict[str, Any], ToolContext], Awaitable[Any]]
