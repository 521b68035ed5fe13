"""ToolRegistry: the contracts the model may see, and the one audited way to run a tool.

``execute`` never raises for anything a model can cause. In order, a call is: looked up
(``unknown_tool``), checked against policy (``denied``), parsed and validated against the
input schema (``invalid_args``), previewed when the model asked for ``dry_run``, parked as a
pending confirmation when policy says the user must decide (``awaiting_confirmation``),
replayed when an idempotent tool already did exactly this, or run under a time-out (``ok``,
``error``, ``timeout``). A tool with side effects is recorded as started before its handler
runs (``trail``); every call, whatever its outcome, is one ``tool_executions`` row.
A contract is checked when it is registered (``checks``); arguments and output are handled by
``arguments``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any
from zoneinfo import ZoneInfo

import structlog
from jsonschema import Draft202012Validator

from bruce.actions.arguments import parse_arguments, readable_output, schema_with_dry_run
from bruce.actions.checks import check_contract
from bruce.actions.confirmations import Confirmations, PendingAction
from bruce.actions.guests import GuestTools
from bruce.actions.policy import Policy, effective_policy
from bruce.actions.provenance import composed_urls
from bruce.actions.tool_cache import ToolCache
from bruce.actions.trail import Ran, Trail
from bruce.clock import Clock, utc_iso
from bruce.config.schema import ToolOverride
from bruce.contracts import DryRun, ToolCall, ToolContext, ToolContract, ToolHandler, ToolResult, default_activity
from bruce.errors import ContractError, NeedsConfirmation, StoreError, ToolError, ToolInputInvalid
from bruce.log import Redactor
from bruce.store import Store
from bruce.turns.scope import TurnScope
from bruce.values import ConversationId, ToolStatus, is_owner

__all__ = ["RegisteredTool", "ToolRegistry", "idempotency_key"]

log = structlog.get_logger(__name__)

SKIPPED_MESSAGE = (
    "Not done: this action needs the user's approval, and this turn was not started by the user "
    "(a scheduled task), so nobody can approve it now. Tell the user it was skipped."
)
NOT_IN_TURN_MESSAGE = "The tool {name} is not available in this turn."
AWAITING_MESSAGE = (
    "Not done yet: this action needs the user's explicit approval, and a request ({id}) was sent to "
    "them{how}. Tell the user it is waiting for their approval. Do not say it happened."
)


Availability = Callable[[], str | None]  # why a tool cannot run now (its MCP server is down), or None


@dataclass(frozen=True, slots=True)
class RegisteredTool:
    contract: ToolContract
    handler: ToolHandler
    validator: Draft202012Validator
    policy: Policy
    unavailable: Availability | None = None

    @property
    def schema_for_model(self) -> dict[str, Any]:
        return self.validator.schema  # type: ignore[no-any-return]


def _text(conversation_id: ConversationId | None) -> str:
    """The store's form of a turn's conversation; '' for an MCP client's call (in none)."""
    return "" if conversation_id is None else str(conversation_id)


def _composed(contract: ToolContract, arguments: dict[str, Any], scope: TurnScope,
              get: Callable[[str], RegisteredTool | None]) -> list[str]:
    """The URL arguments of a call in a tainted turn that no one wrote (``bruce.actions.provenance``).
    Only the output of a tool returning text from outside (``untrusted_output``) vouches for a URL:
    Bruce's own tools return what the model wrote earlier (a reminder read back by ``proactive.list``)."""
    def outside(name: str) -> bool:
        tool = get(name)
        return tool is not None and tool.contract.untrusted_output

    return composed_urls(contract, arguments, tainted=scope.tainted, owner_text=scope.owner_text,
                         results=[*scope.carried, *scope.results], outside=outside)


def idempotency_key(tool_name: str, conversation_id: str | None, arguments: Mapping[str, Any]) -> str:
    canonical = json.dumps(arguments, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(f"{tool_name}\x00{conversation_id}\x00{canonical}".encode()).hexdigest()[:32]


class ToolRegistry:
    def __init__(
        self,
        *,
        store: Store,
        clock: Clock,
        zone: ZoneInfo,
        confirmations: Confirmations,
        default_timeout_s: float = 30.0,
        audit_output_max_chars: int = 8000,
        overrides: Mapping[str, ToolOverride] | None = None,
        redactor: Redactor | None = None,
        cache_max_entries: int = 512,
        guests: GuestTools | None = None,
    ) -> None:
        """``guests``: what a guest's turn may use (``access.guest_tools``; default: its default)."""
        self._store = store
        self._clock = clock
        self.cache = ToolCache(monotonic=clock.monotonic, max_entries=cache_max_entries)
        self._zone = zone
        self._confirmations = confirmations
        self._default_timeout_s = default_timeout_s
        self._overrides = dict(overrides or {})
        self._trail = Trail(store=store, clock=clock, redactor=redactor or Redactor(),
                            output_max_chars=audit_output_max_chars)
        self._tools: dict[str, RegisteredTool] = {}  # by wire name
        self._by_name: dict[str, str] = {}  # contract name -> wire name
        self._key_locks: dict[str, asyncio.Lock] = {}
        self._guests = guests or GuestTools()

    # registration ---------------------------------------------------------------------

    def register(self, contract: ToolContract, handler: ToolHandler, *, unavailable: Availability | None = None,
                 replace: bool = False) -> None:
        """Add a tool. ``unavailable`` says when it cannot run (it is then not offered, and a
        call is answered ``unavailable``); ``replace``: a tool of that name may be swapped (an
        MCP server that reconnected with a changed tool)."""
        problems = check_contract(contract)
        taken = self._tools.get(contract.wire_name)
        if taken is not None and not (replace and taken.contract.name == contract.name):
            problems.append("a tool with this name is already registered")
        named = self._by_name.get(contract.name)
        if named is not None and named != contract.wire_name:
            problems.append("a tool with this name is already registered under another wire name")
        if problems:
            raise ContractError(f"tool {contract.name}: " + "; ".join(problems))
        policy = effective_policy(contract, self._overrides.get(contract.name))
        validator = Draft202012Validator(schema_with_dry_run(contract))
        self._tools[contract.wire_name] = RegisteredTool(contract, handler, validator, policy, unavailable)
        self._by_name[contract.name] = contract.wire_name

    def has_wire_name(self, wire: str) -> bool:
        return wire in self._tools

    def register_all(self, tools: Iterable[tuple[ToolContract, ToolHandler]]) -> None:
        for contract, handler in tools:
            self.register(contract, handler)
        # an MCP server's tools arrive when it connects, which may be after start-up
        unknown = sorted(n for n in set(self._overrides) - {t.contract.name for t in self._tools.values()}
                         if not n.startswith("mcp."))
        if unknown:
            raise ContractError(f"tools.overrides names unknown tools: {', '.join(unknown)}")

    def tools(self) -> list[RegisteredTool]:
        return sorted(self._tools.values(), key=lambda t: t.contract.name)

    def get(self, name: str) -> RegisteredTool | None:
        """A tool by its wire name or its contract name."""
        return self._tools.get(name) or self._tools.get(self._by_name.get(name, ""))

    def _offered(self, tool: RegisteredTool, scope: TurnScope | None) -> bool:
        if not tool.policy.visible or (tool.unavailable is not None and tool.unavailable() is not None):
            return False
        if scope is None:
            return True
        return self._allows(tool, scope) and not (scope.unattended and tool.policy.needs_confirmation)

    def _allows(self, tool: RegisteredTool, scope: TurnScope) -> bool:
        """The turn's filter, and for a guest's turn, ``access.guest_tools`` (never high or critical)."""
        return scope.allows(tool.contract) and (is_owner(scope.person) or self._guests.allows(tool.contract))

    def offered(self, scope: TurnScope | None = None) -> list[ToolContract]:
        """The contracts of the tools ``definitions`` shows the model, by name (for the prompt)."""
        return [t.contract for t in self.tools() if self._offered(t, scope)]

    def definitions(self, scope: TurnScope | None = None) -> list[dict[str, Any]]:
        """What the model is shown: every visible tool (that ``scope`` allows; an unattended turn
        is not offered tools that need approval), with ``dry_run`` where supported."""
        return [t.contract.definition(t.schema_for_model) for t in self.tools() if self._offered(t, scope)]

    def contract_name(self, wire_name: str) -> str:
        tool = self._tools.get(wire_name)
        return tool.contract.name if tool else wire_name

    def activity(self, wire_name: str) -> str:
        """What the user is shown while the tool runs (``ToolContract.activity_label``)."""
        tool = self._tools.get(wire_name)
        return tool.contract.activity_label if tool else default_activity(wire_name)

    # execution ------------------------------------------------------------------------

    async def execute(self, call: ToolCall, scope: TurnScope) -> ToolResult:
        """Run one call from the model; never raises for anything a model (or a tool) can cause.
        Only the database failing (``StoreError``) and cancellation go through."""
        try:
            return await self._execute(call, scope)
        except (asyncio.CancelledError, StoreError):
            raise
        except Exception as exc:  # a bug of ours: the turn goes on, the model is told
            log.exception("tool.execute_crashed", tool=call.name)
            return ToolResult(call.id, call.name, ToolStatus.ERROR,
                              error=f"internal_error: the call could not be handled ({type(exc).__name__}).")

    async def _execute(self, call: ToolCall, scope: TurnScope) -> ToolResult:
        started = self._clock.monotonic()
        tool = self._tools.get(call.name)
        if tool is None:
            known = ", ".join(t.contract.wire_name for t in self.tools() if t.policy.visible)
            result = ToolResult(call.id, call.name, ToolStatus.UNKNOWN_TOOL,
                                error=f"There is no tool named {call.name!r}. Available tools: {known}.")
            return await self._audit(call, scope, None, call.arguments, result, started)
        refused = self._refused(call, tool, scope)
        if refused is not None:
            return await self._audit(call, scope, tool, call.arguments, refused, started)
        try:
            arguments = parse_arguments(call.arguments, tool.validator, tool.contract)
        except ToolInputInvalid as exc:
            result = ToolResult(call.id, call.name, ToolStatus.INVALID_ARGS, error=str(exc))
            return await self._audit(call, scope, tool, call.arguments, result, started)
        needs = tool.policy.needs_confirmation or self._asks_this_time(tool.contract, arguments, scope)
        if needs and scope.confirmed_by_caller and not tool.policy.step_up:
            ran = await self._run_once(call, tool, arguments, scope)  # a trusted MCP client asked its user
            return await self._audit(call, scope, tool, arguments, ran.result, started, ran=ran)
        if needs and scope.unattended:
            result = ToolResult(call.id, call.name, ToolStatus.SKIPPED, error=SKIPPED_MESSAGE)
            return await self._audit(call, scope, tool, arguments, result, started)
        if arguments.pop("dry_run", False) is True:  # only tools with dry-run support get this far
            result = await self._run(call, tool, arguments, scope, dry_run=True)
            if result.ok:
                result = ToolResult(call.id, call.name, ToolStatus.OK,
                                    output={"dry_run": True, "preview": result.output})
            return await self._audit(call, scope, tool, {**arguments, "dry_run": True}, result, started)
        if needs:
            result = await self._park(call, tool, arguments, scope)
            return await self._audit(call, scope, tool, arguments, result, started)
        try:
            if tool.contract.cache_ttl_s > 0:
                return await self._cached(call, tool, arguments, scope, started)
            ran = await self._run_once(call, tool, arguments, scope)
        except NeedsConfirmation as ask:  # the handler found, before acting, that this call needs a yes
            return await self._asked(call, tool, arguments, scope, ask.preview, started)
        return await self._audit(call, scope, tool, arguments, ran.result, started, ran=ran)

    async def _asked(self, call: ToolCall, tool: RegisteredTool, arguments: dict[str, Any], scope: TurnScope,
                     preview: str, started: float) -> ToolResult:
        """A call whose handler said it needs the user's yes (``NeedsConfirmation``): run as
        approved when a trusted MCP client asked its own user, skipped when nobody can be asked
        (unattended), else parked with the handler's preview, like a tool that always asks."""
        if scope.confirmed_by_caller and not tool.policy.step_up:
            ran = await self._run_once(call, tool, arguments, scope, approved=True)
            return await self._audit(call, scope, tool, arguments, ran.result, started, ran=ran)
        if scope.unattended:
            result = ToolResult(call.id, call.name, ToolStatus.SKIPPED, error=SKIPPED_MESSAGE)
        else:
            result = await self._park(call, tool, arguments, scope, preview=preview)
        return await self._audit(call, scope, tool, arguments, result, started)

    def _refused(self, call: ToolCall, tool: RegisteredTool, scope: TurnScope) -> ToolResult | None:
        """Denied (by policy, or not in this turn), or unavailable (its MCP server is down), or None."""
        refusal = tool.policy.refusal or (
            None if self._allows(tool, scope) else NOT_IN_TURN_MESSAGE.format(name=tool.contract.name))
        if refusal:
            return ToolResult(call.id, call.name, ToolStatus.DENIED, error=refusal)
        down = tool.unavailable() if tool.unavailable is not None else None
        if down is not None:
            return ToolResult(call.id, call.name, ToolStatus.ERROR, error=f"unavailable: {down}")
        return None

    def _asks_this_time(self, contract: ToolContract, arguments: dict[str, Any], scope: TurnScope) -> bool:
        """A tool that needs the user's yes for this call only: an argument its contract names
        (``memory.forget`` by query), untrusted text already in the turn (``memory.remember``
        after a web page was read, so a page cannot plant a memory), or, in such a turn, a URL
        argument the model composed (``web.read_url`` of ``attacker/?leak=...``: how data leaves)."""
        if any(name in arguments for name in contract.confirm_if):
            return True
        if contract.confirm_after_untrusted and scope.tainted:
            return True
        return bool(_composed(contract, arguments, scope, self.get))

    async def _cached(self, call: ToolCall, tool: RegisteredTool, arguments: dict[str, Any], scope: TurnScope,
                      started: float) -> ToolResult:
        """A read tool: a repeat within its ``cache_ttl_s`` is answered from memory (audited as
        ``cached``, shown to the model as the ok result it is)."""
        cache_key = ToolCache.key(tool.contract.name, arguments)
        kept = self.cache.get(cache_key)
        if kept is not None:
            log.info("tool.cache_hit", tool=tool.contract.name)
            result = ToolResult(call.id, call.name, ToolStatus.OK, output=kept)
            return await self._audit(call, scope, tool, arguments, result, started, audit_status=ToolStatus.CACHED)
        ran = await self._run_once(call, tool, arguments, scope)
        if ran.result.ok:
            self.cache.put(cache_key, ran.result.output, tool.contract.cache_ttl_s)
        return await self._audit(call, scope, tool, arguments, ran.result, started, ran=ran)

    async def run_approved(self, action: PendingAction, scope: TurnScope) -> ToolResult:
        """Run a request the user (or the owner, locally) approved; audited as ``confirmation``."""
        started = self._clock.monotonic()
        tool = self.get(action.tool_name)
        call = ToolCall(id=f"confirmation:{action.id}", name=tool.contract.wire_name if tool else action.tool_name.replace(".", "_"),
                        arguments=json.dumps(action.arguments))
        if tool is None or tool.policy.refusal or not self._allows(tool, scope):
            status = ToolStatus.UNKNOWN_TOOL if tool is None else ToolStatus.DENIED
            result = ToolResult(call.id, call.name, status, error=f"{action.tool_name} is no longer available.")
            return await self._audit(call, scope, tool, action.arguments, result, started)
        down = tool.unavailable() if tool.unavailable is not None else None
        if down is not None:  # approved, but its MCP server is down now: nothing was done
            result = ToolResult(call.id, call.name, ToolStatus.ERROR, error=f"unavailable: {down}")
            return await self._audit(call, scope, tool, action.arguments, result, started)
        stale = await self._changed_since_preview(call, tool, action, scope)
        if stale is not None:
            return await self._audit(call, scope, tool, action.arguments, stale, started)
        ran = await self._run_once(call, tool, dict(action.arguments), scope, approved=True)
        return await self._audit(call, scope, tool, action.arguments, ran.result, started, ran=ran)

    async def _changed_since_preview(
        self, call: ToolCall, tool: RegisteredTool, action: PendingAction, scope: TurnScope,
    ) -> ToolResult | None:
        """The user approved what the preview showed; if the world changed since (the file was
        edited meanwhile, say), running now would do something else. Refuse instead."""
        if tool.contract.dry_run is not DryRun.REQUIRED or action.preview is None:
            return None
        fresh = await self._run(call, tool, dict(action.arguments), scope, dry_run=True)
        if not fresh.ok:
            return fresh
        if json.loads(json.dumps(fresh.output, default=str)) == action.preview:
            return None
        return ToolResult(call.id, call.name, ToolStatus.ERROR, error=(
            "conflict: what this would do has changed since it was approved (the preview differs now), "
            "so nothing was done. Ask again to see the new preview."))

    async def _park(self, call: ToolCall, tool: RegisteredTool, arguments: dict[str, Any], scope: TurnScope, *,
                    preview: Any = None) -> ToolResult:
        if preview is None and tool.contract.dry_run is DryRun.REQUIRED:
            previewed = await self._run(call, tool, arguments, scope, dry_run=True)
            if not previewed.ok:
                return previewed  # the call would fail anyway: nothing to approve
            preview = previewed.output
        request = await self._confirmations.request(
            tool.contract, arguments, conversation_id=_text(scope.conversation_id), user_id=scope.user_id,
            turn_id=scope.turn_id, call_id=call.id, preview=preview, step_up=tool.policy.step_up,
            composed=_composed(tool.contract, arguments, scope, self.get), untrusted=scope.tainted,
        )
        scope.confirmations.append(request)
        how = " (the owner must approve it on the machine with `bruce approve`)" if request.step_up else ""
        message = AWAITING_MESSAGE.format(id=request.id, how=how)
        return ToolResult(call.id, call.name, ToolStatus.AWAITING_CONFIRMATION, output={"confirmation_id": request.id},
                          error=message)

    async def _run_once(
        self, call: ToolCall, tool: RegisteredTool, arguments: dict[str, Any], scope: TurnScope, *,
        approved: bool = False,
    ) -> Ran:
        """Run the handler once, recorded as started first when the tool has side effects
        (``Trail.start``); an idempotent tool replays its key's result instead when it has one."""
        if not tool.contract.idempotent:
            start_id = await self._trail.start(call, tool.contract, arguments, scope, None)
            return Ran(await self._run(call, tool, arguments, scope, approved=approved), None, start_id)
        whose = "" if is_owner(scope.person) else f"\x00{scope.person}"  # a guest never replays the owner's result
        key = idempotency_key(tool.contract.name, _text(scope.conversation_id) + whose, arguments)
        async with self._key_locks.setdefault(key, asyncio.Lock()):
            now = self._clock.now()
            earlier = await self._store.audit.idempotent_result(key, now=utc_iso(now))
            if earlier is not None:
                log.info("tool.replayed", tool=tool.contract.name, key=key)
                return Ran(ToolResult(call.id, call.name, ToolStatus.OK, output=earlier), key)
            start_id = await self._trail.start(call, tool.contract, arguments, scope, key)
            result = await self._run(call, tool, arguments, scope, key=key, approved=approved)
            if result.ok:
                expires = now + timedelta(seconds=tool.contract.idempotency_window_s)
                await self._store.audit.remember_result(key, tool.contract.name, result.output, expires_at=utc_iso(expires))
        return Ran(result, key, start_id)

    async def _run(
        self, call: ToolCall, tool: RegisteredTool, arguments: dict[str, Any], scope: TurnScope, *,
        dry_run: bool = False, key: str | None = None, approved: bool = False,
    ) -> ToolResult:
        timeout_s = tool.contract.timeout_s or self._default_timeout_s
        context = ToolContext(
            clock=self._clock, zone=self._zone, conversation_id=scope.conversation_id, turn_id=scope.turn_id or None,
            dry_run=dry_run, idempotency_key=key, now=self._clock.now(), untrusted=scope.tainted, person=scope.person,
            approved=approved,
        )
        try:
            async with asyncio.timeout(timeout_s):
                output = await tool.handler(arguments, context)
        except TimeoutError:
            return ToolResult(call.id, call.name, ToolStatus.TIMEOUT,
                              error=f"The tool did not finish within {timeout_s:g} seconds.")
        except ToolInputInvalid as exc:
            return ToolResult(call.id, call.name, ToolStatus.INVALID_ARGS, error=str(exc))
        except NeedsConfirmation:
            if approved or dry_run:  # asked again after the yes: a handler bug, never a loop of requests
                return ToolResult(call.id, call.name, ToolStatus.ERROR,
                                  error="internal_error: the tool asked for approval again after it was given.")
            raise
        except ToolError as exc:
            return ToolResult(call.id, call.name, ToolStatus.ERROR, error=f"{exc.code}: {exc}")
        except Exception as exc:  # a tool bug must not end the conversation
            log.exception("tool.crashed", tool=tool.contract.name)
            return ToolResult(call.id, call.name, ToolStatus.ERROR,
                              error=f"internal_error: the tool failed unexpectedly ({type(exc).__name__}).")
        return ToolResult(call.id, call.name, ToolStatus.OK, output=readable_output(output, tool.contract.name))

    # audit ----------------------------------------------------------------------------

    async def _audit(
        self, call: ToolCall, scope: TurnScope, tool: RegisteredTool | None, arguments: Any,
        result: ToolResult, started: float, *, ran: Ran | None = None, audit_status: ToolStatus | None = None,
    ) -> ToolResult:
        record = self._trail.record(call, scope, tool.contract if tool else None, arguments, result, started,
                                    key=ran.key if ran else None, audit_status=audit_status)
        # known to the turn even if the write fails; with its arguments, so that an echo vouches for nothing
        scope.results.append(replace(result, name=record.tool_name, arguments=arguments))
        if tool is not None and tool.contract.untrusted_output and result.output is not None:
            scope.tainted = True  # from here on, the turn carries text Bruce does not control
        await self._trail.write(record, ran.start_id if ran else None)
        log.info("tool.executed", tool=record.tool_name, status=record.status, ms=round(record.latency_ms, 1))
        return result
