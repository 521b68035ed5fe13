"""The values that cross the tool seam: a tool's contract, a call from the model, its result,
and the narrow context a handler receives."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, fields
from datetime import datetime
from enum import StrEnum
from typing import Any
from zoneinfo import ZoneInfo

from bruce.clock import Clock
from bruce.errors import ContractError
from bruce.values import OWNER, ConversationId, ToolStatus

__all__ = [
    "Risk",
    "DryRun",
    "ToolContract",
    "ToolCall",
    "ToolResult",
    "ToolContext",
    "ToolHandler",
    "wire_name",
    "default_activity",
    "contract_from_dict",
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


def default_activity(name: str) -> str:
    """The label of a tool whose contract names no ``activity`` (an MCP tool): ``Using mcp.x.y``."""
    return f"Using {name}"


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
    cache_ttl_s: float = 0.0  # >0: a repeated call with the same arguments within this is answered from memory
    guideline: str = ""  # how to use it well, for the prompt's tool guidelines while it is offered
    server: str | None = None  # the MCP server a remote tool comes from (None: built in)
    confirm_if: tuple[str, ...] = ()  # arguments whose presence makes a call need the user's yes
    confirm_after_untrusted: bool = False  # needs the user's yes once untrusted text entered the turn
    untrusted_output: bool = False  # its output is text Bruce does not control (a web page, an MCP result)
    # arguments whose value is a URL the call sends off the machine: once untrusted text entered the turn,
    # a value the model composed (found neither in the owner's text nor in an earlier result) needs a yes
    url_args: tuple[str, ...] = ()
    wire: str = ""  # the name the model sees, when it is not simply the name with '_' (MCP tools)
    activity: str = ""  # what the user is shown while it runs ("Searching the web"); empty: ``default_activity``

    @property
    def wire_name(self) -> str:
        return self.wire or wire_name(self.name)

    @property
    def has_side_effects(self) -> bool:
        """Whether a call may change something (so it is recorded as started before it runs):
        every tool whose ``side_effects`` does not begin with "none" ("none: reads the clock
        only"). Risk alone does not say it; an MCP tool's are "unknown", so it counts."""
        return not self.side_effects.strip().lower().startswith("none")

    @property
    def activity_label(self) -> str:
        """The short label a channel shows while the tool runs."""
        return self.activity or default_activity(self.name)

    def definition(self, parameters: dict[str, Any] | None = None) -> dict[str, Any]:
        """The OpenAI-style function definition sent to the model (``parameters``: the schema as
        the registry extends it, e.g. with ``dry_run``; default: the contract's own)."""
        return {
            "type": "function",
            "function": {
                "name": self.wire_name,
                "description": self.description,
                "parameters": self.input_schema if parameters is None else parameters,
            },
        }


def contract_from_dict(data: dict[str, Any]) -> ToolContract:
    """Build a contract from plain data (an MCP server's, a plugin's), naming every missing,
    unknown or ill-typed field at once. Every field must be stated; only ``timeout_s``,
    ``guideline``, ``cache_ttl_s``, ``server``, ``wire``, ``activity``, ``confirm_if``,
    ``confirm_after_untrusted``, ``untrusted_output``, ``url_args`` (and ``idempotency_window_s`` for
    a tool that is not idempotent) may be left out."""
    known = {f.name: f for f in fields(ToolContract)}
    optional = {"timeout_s", "guideline", "cache_ttl_s", "server", "wire", "confirm_if", "confirm_after_untrusted",
                "untrusted_output", "url_args", "activity"} | ({"idempotency_window_s"} if data.get("idempotent") is False else set())
    problems = [f"missing field {name!r}" for name in known if name not in data and name not in optional]
    problems += [f"unknown field {name!r}" for name in data if name not in known]
    values = dict(data)
    try:
        if "risk" in values:
            values["risk"] = Risk(values["risk"])
        if "dry_run" in values:
            values["dry_run"] = DryRun(values["dry_run"])
    except ValueError as exc:
        problems.append(str(exc))
    for name in ("permissions", "failure_modes", "confirm_if", "url_args"):
        if isinstance(values.get(name), list):
            values[name] = tuple(values[name])
    for name in ("input_schema", "output_schema"):
        if name in values and not isinstance(values[name], dict):
            problems.append(f"{name} must be an object")
    if problems:
        label = data.get("name", "<unnamed>")
        raise ContractError(f"tool {label}: " + "; ".join(problems))
    return ToolContract(**values)


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
    status: ToolStatus
    output: Any = None
    error: str | None = None
    # the arguments of the call, on the turn's record (``TurnScope.results``): what the registry ran it with
    arguments: Any = field(default=None, compare=False, repr=False)

    @property
    def ok(self) -> bool:
        return self.status == ToolStatus.OK

    def for_model(self) -> dict[str, Any]:
        if self.ok:
            return {"ok": True, "result": self.output}
        if self.status == ToolStatus.AWAITING_CONFIRMATION:
            return {"ok": False, "status": self.status, "message": self.error, **(self.output or {})}
        return {"ok": False, "status": self.status, "error": self.error}


@dataclass(frozen=True, slots=True)
class ToolContext:
    """What a tool handler may know about the call it serves. Kept narrow on purpose."""

    clock: Clock
    zone: ZoneInfo
    conversation_id: ConversationId | None
    turn_id: str | None
    dry_run: bool = False
    idempotency_key: str | None = None
    now: datetime | None = field(default=None)
    untrusted: bool = False  # untrusted text is in the turn that makes this call (``TurnScope.tainted``)
    person: str = OWNER  # whose call: memory and jobs are this person's (``TurnScope.person``)
    approved: bool = False  # the user said yes to this very call (or a trusted MCP client's user did)


ToolHandler = Callable[[dict[str, Any], ToolContext], Awaitable[Any]]
