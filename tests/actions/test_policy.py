"""When a tool may run, decided by code from its contract and the owner's config.

The expected outcome of every combination is derived from the rules in docs/tools.md
("Policy by risk", "Config can only tighten", "Step-up", "Proactive turns"), not from the code:

* a contract that contradicts its risk is rejected at registration: ``high``/``critical`` may
  not run on their own (``autonomous``) and need confirmation, ``critical`` needs step-up,
  ``forbidden`` never runs on its own;
* ``forbidden``, or ``tools.overrides.<name>.enabled: false``: hidden from the model and refused
  (audited ``denied``), whoever asks;
* otherwise the tool is shown and runs without asking only when nothing asks for approval: its
  risk (``high``, ``critical``), its contract (``autonomous: false``, ``confirmation: true``,
  ``step_up: true``) or the config (``require_confirmation: true``);
* approval is local (``bruce approve ID``, the step-up path) for ``critical`` tools and for
  contracts with ``step_up``; a chat ``/approve`` cannot run those;
* a proactive turn has nobody to ask: a tool that needs approval is not offered, and a call to
  it anyway is ``skipped`` (nothing runs, nothing is parked).
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from bruce.actions.confirmations import Confirmations
from bruce.actions.policy import Policy, effective_policy
from bruce.actions.registry import ToolRegistry
from bruce.config.schema import ToolOverride
from bruce.contracts import Risk, ToolCall, ToolContract
from bruce.errors import ConfigError, ContractError
from bruce.store import Store
from bruce.turns.scope import TurnScope, new_turn_id
from bruce.values import ConversationId, DecisionOutcome, TurnSource
from tests.actions.test_registry import contract
from tests.fakes.llm_server import Step
from tests.helpers import rows, say

# outcomes, as the user and the model experience them
REJECTED = "rejected at registration"
REFUSED = "hidden and refused"
RUNS = "visible, runs without asking"
CHAT_APPROVAL = "visible, waits for /approve in chat"
STEP_UP = "visible, waits for the owner's local approval"
SKIPPED = "not offered, skipped"

OVERRIDES: dict[str, ToolOverride | None] = {
    "none": None,
    "disabled": ToolOverride(enabled=False),
    "require_confirmation": ToolOverride(require_confirmation=True),
}


@dataclass(frozen=True)
class Row:
    risk: Risk
    autonomous: bool
    confirmation: bool
    step_up: bool
    override: str
    unattended: bool

    def __str__(self) -> str:
        source = "proactive" if self.unattended else "chat"
        return (f"{self.risk} autonomous={self.autonomous} confirmation={self.confirmation} "
                f"step_up={self.step_up} override={self.override} {source}")


ROWS = [Row(*values) for values in itertools.product(
    list(Risk), (True, False), (True, False), (True, False), list(OVERRIDES), (False, True))]


def contradicts_its_risk(row: Row) -> bool:
    """docs/tools.md: a contract that contradicts its risk is rejected at registration."""
    high_or_critical = row.risk in (Risk.HIGH, Risk.CRITICAL)
    return (
        (high_or_critical and row.autonomous)  # "runs on its own: no"
        or (high_or_critical and not row.confirmation)  # someone must approve it
        or (row.risk is Risk.CRITICAL and not row.step_up)  # "the owner, on the machine"
        or (row.risk is Risk.FORBIDDEN and row.autonomous)  # "runs on its own: never"
    )


def expected(row: Row) -> str:
    if contradicts_its_risk(row):
        return REJECTED
    if row.risk is Risk.FORBIDDEN or row.override == "disabled":
        return REFUSED
    local = row.step_up or row.risk is Risk.CRITICAL
    asks = (local or row.confirmation or not row.autonomous or row.risk in (Risk.HIGH, Risk.CRITICAL)
            or row.override == "require_confirmation")
    if not asks:
        return RUNS
    if row.unattended:
        return SKIPPED
    return STEP_UP if local else CHAT_APPROVAL


def contract_for(row: Row) -> ToolContract:
    return contract("test.act", row.risk, autonomous=row.autonomous, confirmation=row.confirmation,
                    step_up=row.step_up, side_effects="changes something outside Bruce")


@dataclass
class World:
    """A real store and confirmations; a fresh registry per row, as `build_app` makes one."""

    store: Store
    confirmations: Confirmations
    ran: list[dict[str, Any]] = field(default_factory=list)

    async def scope(self, unattended: bool) -> TurnScope:
        source = TurnSource.PROACTIVE if unattended else TurnSource.CHAT
        scope = TurnScope(new_turn_id(), ConversationId("test", "c1"), None if unattended else "u1", source=source,
                          unattended=unattended)
        await self.store.messages.start_turn(scope.turn_id, "test:c1", source=source, inbound_message_id=None)
        return scope

    async def act(self, args: dict[str, Any], ctx: Any) -> dict[str, Any]:
        self.ran.append(args)
        return {"done": True}


@pytest.fixture
async def world(tmp_path, clock):
    store = await Store.open(tmp_path / "policy.db", clock)
    await store.messages.ensure_conversation("test:c1", "test", "c1")
    yield World(store, Confirmations(store, clock))
    await store.close()


async def observe(world: World, clock, row: Row) -> str:
    """What happens when the model sees and calls the tool in a turn of this kind."""
    registry = ToolRegistry(store=world.store, clock=clock, zone=ZoneInfo("UTC"), confirmations=world.confirmations,
                            overrides={} if OVERRIDES[row.override] is None else {"test.act": OVERRIDES[row.override]})
    try:
        registry.register(contract_for(row), world.act)
    except ContractError:
        return REJECTED
    scope = await world.scope(row.unattended)
    offered = "test_act" in json.dumps(registry.definitions(scope))
    before = len(world.ran)
    result = await registry.execute(ToolCall("call_1", "test_act", "{}"), scope)
    ran = len(world.ran) > before
    seen = (offered, str(result.status), ran, len(scope.confirmations))
    if seen == (False, "denied", False, 0):
        return REFUSED
    if seen == (True, "ok", True, 0):
        return RUNS
    if seen == (False, "skipped", False, 0):
        return SKIPPED
    if seen == (True, "awaiting_confirmation", False, 1):
        (request,) = scope.confirmations
        decision = await world.confirmations.decide_in_chat(request.id, conversation_id="test:c1", user_id="u1",
                                                            approve=True)
        if decision.outcome is DecisionOutcome.NEEDS_STEP_UP and request.step_up:
            return STEP_UP
        if decision.outcome is DecisionOutcome.APPROVED and not request.step_up:
            return CHAT_APPROVAL
        return f"awaiting, step_up={request.step_up}, /approve in chat: {decision.outcome}"
    return f"offered={offered} status={result.status} ran={ran} parked={len(scope.confirmations)}"


def policy_outcome(row: Row) -> str:
    """The same decision read from effective_policy (what `bruce tools` shows), for a chat turn."""
    policy = effective_policy(contract_for(row), OVERRIDES[row.override])
    if policy.refusal is not None:
        # "never" runs: hidden, and listed as asking (not autonomous) by `bruce tools`
        return REFUSED if (policy.visible, policy.needs_confirmation) == (False, True) else repr(policy)
    if not policy.visible:
        return repr(policy)
    if not policy.needs_confirmation:
        return RUNS if not policy.step_up else repr(policy)
    return STEP_UP if policy.step_up else CHAT_APPROVAL


async def test_every_policy_decision(world, clock):
    want = {str(row): expected(row) for row in ROWS}
    got = {str(row): await observe(world, clock, row) for row in ROWS}
    assert {k: v for k, v in got.items() if v != want[k]} == {}
    chat_rows = [row for row in ROWS if not row.unattended and expected(row) != REJECTED]
    from_policy = {str(row): policy_outcome(row) for row in chat_rows}
    assert {k: v for k, v in from_policy.items() if v != want[k]} == {}
    # the table covers every outcome, and nothing ran except where it may run on its own
    assert set(want.values()) == {REJECTED, REFUSED, RUNS, CHAT_APPROVAL, STEP_UP, SKIPPED}
    assert len(world.ran) == sum(1 for row in ROWS if expected(row) == RUNS)


@pytest.mark.parametrize(
    ("row", "problem"),
    [
        (Row(Risk.HIGH, True, True, False, "none", False), "a high tool cannot be autonomous"),
        (Row(Risk.HIGH, False, False, False, "none", False), "a high tool must require confirmation"),
        (Row(Risk.CRITICAL, True, True, True, "none", False), "a critical tool cannot be autonomous"),
        (Row(Risk.CRITICAL, False, False, True, "none", False), "a critical tool must require confirmation"),
        (Row(Risk.CRITICAL, False, True, False, "none", False), "a critical tool must require step-up approval"),
        (Row(Risk.FORBIDDEN, True, False, False, "none", False), "a forbidden tool cannot be autonomous"),
    ],
)
async def test_a_contract_that_contradicts_its_risk_names_the_contradiction(world, clock, row, problem):
    registry = ToolRegistry(store=world.store, clock=clock, zone=ZoneInfo("UTC"), confirmations=world.confirmations)
    with pytest.raises(ContractError) as info:
        registry.register(contract_for(row), world.act)
    assert str(info.value) == f"tool test.act: {problem}"
    assert registry.tools() == []


async def test_refusals_say_why(world, clock):
    forbidden = effective_policy(contract("test.act", Risk.FORBIDDEN, autonomous=False))
    disabled = effective_policy(contract("test.act"), ToolOverride(enabled=False))
    # refused outright, and on every other count as strict as a policy can be
    assert forbidden == Policy(False, True, True, "The tool test.act is forbidden.")
    assert disabled == Policy(False, True, True, "The tool test.act is disabled by the owner's configuration.")
    assert effective_policy(contract("test.act")).refusal is None


async def test_an_override_naming_an_unknown_tool_stops_start_up(app_factory):
    with pytest.raises(ConfigError) as info:
        await app_factory(tools={"overrides": {"zz.tool": {"enabled": False}, "aa.tool": {"enabled": False},
                                               "web.search": {"enabled": False}}})
    assert "tools.overrides names unknown tools: aa.tool, zz.tool" in str(info.value)


# one real turn per risk level, through the app: what the user and the model see ----------------


async def test_low_and_medium_tools_run_on_their_own(app, fake_llm, channel):
    ran = []

    async def act(args, ctx):
        ran.append(ctx.turn_id)
        return {"done": True}

    app.registry.register(contract("test.low", Risk.LOW), act)
    app.registry.register(contract("test.medium", Risk.MEDIUM), act)
    fake_llm.add(Step.tool_calls(("test_low", {}), ("test_medium", {})), Step.text("Both ran."))
    await say(app, "do both")

    offered = {t["function"]["name"] for t in fake_llm.requests[0]["tools"]}
    assert {"test_low", "test_medium"} <= offered
    assert len(ran) == 2
    audit = await rows(app, "SELECT tool_name, risk, status, source FROM tool_executions ORDER BY tool_name")
    assert audit == [{"tool_name": "test.low", "risk": "low", "status": "ok", "source": "chat"},
                     {"tool_name": "test.medium", "risk": "medium", "status": "ok", "source": "chat"}]
    assert channel.texts() == ["Both ran."] and channel.confirmations == []


async def test_a_high_tool_waits_for_the_users_approval_in_chat(app, fake_llm, channel):
    ran = []

    async def act(args, ctx):
        ran.append(args)
        return {"done": True}

    app.registry.register(contract("test.high", Risk.HIGH, side_effects="changes a file"), act)
    fake_llm.add(Step.tool_calls(("test_high", {})), Step.text("I asked for your approval."))
    await say(app, "do the risky thing")
    assert ran == []
    ((chat, request),) = channel.confirmations
    assert (chat, request.tool_name, request.risk, request.step_up) == ("c1", "test.high", "high", False)

    fake_llm.add(Step.text("It ran."))
    await say(app, f"/approve {request.id}")
    assert ran == [{}]
    assert channel.texts()[-2:] == [f"Done: test.high ran (request {request.id}).", "It ran."]
    audit = await rows(app, "SELECT status, source FROM tool_executions ORDER BY id")
    assert audit == [{"status": "awaiting_confirmation", "source": "chat"}, {"status": "ok", "source": "confirmation"}]


async def test_a_critical_tool_cannot_be_approved_from_chat(app, fake_llm, channel):
    ran = []

    async def act(args, ctx):
        ran.append(args)
        return {"done": True}

    app.registry.register(contract("test.critical", Risk.CRITICAL, side_effects="sends money"), act)
    fake_llm.add(Step.tool_calls(("test_critical", {})), Step.text("The owner must approve this."))
    await say(app, "send it")
    ((_, request),) = channel.confirmations
    assert (request.risk, request.step_up) == ("critical", True)

    await say(app, f"/approve {request.id}")
    assert ran == []
    assert channel.texts()[-1] == (
        f"Request {request.id} (test.critical) is critical: it can only be approved by the owner on the machine "
        f"running Bruce, with `bruce approve {request.id}`. Nothing has run yet.")
    (pending,) = await rows(app, "SELECT status, step_up FROM pending_confirmations")
    assert pending == {"status": "pending", "step_up": 1}


async def test_a_forbidden_tool_is_never_offered_nor_run(app, fake_llm, channel):
    ran = []

    async def act(args, ctx):
        ran.append(args)
        return {"done": True}

    app.registry.register(contract("test.forbidden", Risk.FORBIDDEN, autonomous=False), act)
    fake_llm.add(Step.tool_calls(("test_forbidden", {})), Step.text("I may not do that."))
    await say(app, "do the forbidden thing")
    assert "test_forbidden" not in {t["function"]["name"] for t in fake_llm.requests[0]["tools"]}
    assert ran == [] and channel.confirmations == []
    (audit,) = await rows(app, "SELECT status, error FROM tool_executions")
    assert audit == {"status": "denied", "error": "The tool test.forbidden is forbidden."}


async def test_a_proactive_turn_skips_a_tool_that_needs_approval(app, fake_llm, channel):
    ran = []

    async def act(args, ctx):
        ran.append(args)
        return {"done": True}

    app.registry.register(contract("test.high", Risk.HIGH, side_effects="changes a file"), act)
    app.registry.register(contract("test.low", Risk.LOW), act)
    fake_llm.add(Step.tool_calls(("test_high", {}), ("test_low", {})), Step.text("Morning briefing done."))
    outcome = await app.worker.run_proactive(ConversationId("test", "c1"), "morning briefing")

    offered = {t["function"]["name"] for t in fake_llm.requests[0]["tools"]}
    assert "test_low" in offered and "test_high" not in offered
    assert ran == [{}] and channel.confirmations == []
    assert outcome.ok and channel.texts() == [
        "Morning briefing done.\n\n(Skipped: test.high. It needs your approval, and a scheduled turn never runs "
        "such an action; ask me in chat if you want it done.)"]
    audit = await rows(app, "SELECT tool_name, status, source FROM tool_executions ORDER BY tool_name")
    assert audit == [{"tool_name": "test.high", "status": "skipped", "source": "proactive"},
                     {"tool_name": "test.low", "status": "ok", "source": "proactive"}]
