"""ToolRegistry: every failure a model can cause is a structured result plus an audit row,
and the conversation goes on."""

from __future__ import annotations

import asyncio
import json

import pytest

from bruce.contracts import Risk, ToolCall
from bruce.errors import ContractError, NeedsConfirmation
from bruce.turns.scope import TurnScope
from bruce.values import ConversationId
from tests.fakes.llm_server import Step
from tests.helpers import contract, rows, say


async def explode(args, ctx):
    raise ValueError("secret internal detail")


async def hang(args, ctx):
    await asyncio.sleep(60)


async def nothing(args, ctx):
    return {"done": True}


def tool_messages(request: dict) -> list[dict]:
    return [json.loads(m["content"]) for m in request["messages"] if m["role"] == "tool"]


@pytest.mark.parametrize(
    ("call", "status", "needle"),
    [
        (("math_calculate", {"expression": 42}), "invalid_args", "expression: 42 is not of type 'string'"),
        (("math_calculate", {}), "invalid_args", "'expression' is a required property"),
        (("math_calculate", "{not json", "call_x"), "invalid_args", "not valid JSON"),
        (("teleport_now", {}), "unknown_tool", "no tool named 'teleport_now'"),
        (("math_calculate", {"expression": "1/0"}), "error", "math_error"),
    ],
)
async def test_model_mistakes_become_structured_errors(app, fake_llm, channel, call, status, needle):
    fake_llm.add(Step.tool_calls(call), Step.text("Sorry, that did not work."))
    await say(app, "do it")

    (feedback,) = tool_messages(fake_llm.requests[1])
    assert feedback["ok"] is False and feedback["status"] == status
    assert needle in feedback["error"]
    (audit,) = await rows(app, "SELECT status, error, tool_name FROM tool_executions")
    assert audit["status"] == status and needle in audit["error"]
    assert channel.texts() == ["Sorry, that did not work."]


async def test_tool_that_raises_is_reported_without_its_internals(app, fake_llm, channel):
    app.registry.register(contract("test.explode"), explode)
    fake_llm.add(Step.tool_calls(("test_explode", {})), Step.text("The tool broke."))
    await say(app, "explode")

    (feedback,) = tool_messages(fake_llm.requests[1])
    assert feedback == {"ok": False, "status": "error", "error": "internal_error: the tool failed unexpectedly (ValueError)."}
    (audit,) = await rows(app, "SELECT status FROM tool_executions")
    assert audit["status"] == "error"
    assert channel.texts() == ["The tool broke."]


async def test_tool_that_hangs_times_out_and_the_turn_goes_on(app, fake_llm, channel):
    app.registry.register(contract("test.hang", timeout_s=0.2), hang)
    fake_llm.add(Step.tool_calls(("test_hang", {})), Step.text("It took too long."))
    await say(app, "hang")

    (feedback,) = tool_messages(fake_llm.requests[1])
    assert feedback["status"] == "timeout" and "0.2 seconds" in feedback["error"]
    (audit,) = await rows(app, "SELECT status, latency_ms FROM tool_executions")
    assert audit["status"] == "timeout" and audit["latency_ms"] >= 0
    assert channel.texts() == ["It took too long."]


async def test_forbidden_tool_is_hidden_and_refused(app, fake_llm):
    app.registry.register(contract("test.forbidden", Risk.FORBIDDEN, autonomous=False), nothing)
    fake_llm.add(Step.tool_calls(("test_forbidden", {})), Step.text("Not allowed."))
    await say(app, "try the forbidden thing")

    offered = {t["function"]["name"] for t in fake_llm.requests[0]["tools"]}
    assert "test_forbidden" not in offered
    (audit,) = await rows(app, "SELECT status FROM tool_executions")
    assert audit["status"] == "denied"


async def test_secrets_in_arguments_are_redacted_in_the_audit(app, fake_llm):
    schema = {"type": "object", "properties": {"api_key": {"type": "string"}, "q": {"type": "string"}}}
    app.registry.register(contract("test.secretive", input_schema=schema), nothing)
    fake_llm.add(Step.tool_calls(("test_secretive", {"api_key": "abc123", "q": "token sk-test-key-123456"})),
                 Step.text("done"))
    await say(app, "go")
    (audit,) = await rows(app, "SELECT input FROM tool_executions")
    assert json.loads(audit["input"]) == {"api_key": "***", "q": "token ***"}


async def test_large_outputs_are_truncated_in_the_audit_only(app, fake_llm):
    async def big(args, ctx):
        return {"text": "x" * 20000}

    app.registry.register(contract("test.big"), big)
    fake_llm.add(Step.tool_calls(("test_big", {})), Step.text("done"))
    await say(app, "big")
    (audit,) = await rows(app, "SELECT output FROM tool_executions")
    stored = json.loads(audit["output"])
    assert stored["truncated"] is True and stored["original_chars"] > 20000
    assert len(stored["preview"]) == app.config.tools.audit_output_max_chars
    assert len(tool_messages(fake_llm.requests[1])[0]["result"]["text"]) == 20000


@pytest.mark.parametrize(
    ("overrides", "problem"),
    [
        ({"name": "NoDomain"}, "domain.verb"),
        ({"risk": Risk.CRITICAL, "autonomous": True, "confirmation": True, "step_up": True}, "cannot be autonomous"),
        ({"risk": Risk.HIGH, "autonomous": False, "confirmation": False}, "must require confirmation"),
        ({"risk": Risk.CRITICAL, "autonomous": False, "confirmation": True, "step_up": False}, "step-up"),
        ({"description": " "}, "description must not be empty"),
        ({"failure_modes": ()}, "failure_modes"),
        ({"input_schema": {"type": "object", "properties": {"a": {"type": "nonsense"}}}}, "not a valid JSON Schema"),
        ({"idempotent": True}, "idempotency_window_s"),
        ({"risk": Risk.HIGH, "autonomous": False, "confirmation": True, "side_effects": "none"},
         "must describe its side effects"),
    ],
)
async def test_inconsistent_contracts_are_rejected(app, overrides, problem):
    with pytest.raises(ContractError, match=problem):
        overrides = dict(overrides)
        app.registry.register(contract(overrides.pop("name", "test.bad"), **overrides), nothing)


async def test_duplicate_registration_is_rejected(app):
    with pytest.raises(ContractError) as info:
        app.registry.register(contract("math.calculate"), nothing)
    assert str(info.value) == "tool math.calculate: a tool with this name is already registered"
    with pytest.raises(ContractError) as info:  # every problem at once, each named
        app.registry.register(contract("math.calculate", description=""), nothing)
    assert str(info.value) == ("tool math.calculate: description must not be empty; "
                               "a tool with this name is already registered")


def test_contract_from_plain_data_names_every_problem():
    from bruce.contracts import contract_from_dict

    with pytest.raises(ContractError) as info:
        contract_from_dict({"name": "x.y", "risk": "spicy", "colour": "red", "input_schema": []})
    message = str(info.value)
    for needle in ("missing field 'description'", "missing field 'autonomous'", "unknown field 'colour'",
                   "'spicy' is not a valid Risk", "input_schema must be an object"):
        assert needle in message
    complete = {
        "name": "notes.read", "description": "read", "category": "notes", "risk": "low",
        "input_schema": {"type": "object"}, "output_schema": {"type": "object"}, "autonomous": True,
        "confirmation": False, "step_up": False, "dry_run": "none", "idempotent": False, "permissions": [],
        "side_effects": "none", "audit_event": "notes.read", "failure_modes": ["error"],
    }
    good = contract_from_dict(complete)
    assert good.risk is Risk.LOW and good.failure_modes == ("error",)
    for field_name in ("step_up", "dry_run", "idempotent", "permissions", "side_effects"):
        with pytest.raises(ContractError, match=f"missing field '{field_name}'"):
            contract_from_dict({k: v for k, v in complete.items() if k != field_name})


async def test_a_result_too_large_to_serialise_keeps_the_turn_and_names_what_acted(app_factory, fake_llm, channel,
                                                                                  tmp_path):
    app = await app_factory(tools={"artifacts": {"dir": str(tmp_path / "art")}})

    async def huge(args, ctx):
        return {"value": 10**5000}  # more digits than json.dumps (int -> str) accepts

    app.registry.register(contract("test.huge"), huge)
    fake_llm.add(Step.tool_calls(("artifact_save", {"filename": "r.html", "content": "x"}), ("test_huge", {})),
                 Step.text("Saved the report; the number was too big to show."))
    await say(app, "save and compute")
    assert channel.texts() == ["Saved the report; the number was too big to show."]
    audit = {r["tool_name"]: r for r in await rows(app, "SELECT tool_name, status, output FROM tool_executions")}
    assert audit["artifact.save"]["status"] == "ok" and audit["test.huge"]["status"] == "ok"
    assert "cannot be shown" in audit["test.huge"]["output"]
    fed_back = [m["content"] for m in fake_llm.requests[1]["messages"] if m["role"] == "tool"]
    assert any("result_unavailable" in m for m in fed_back)
    assert [r["status"] for r in await rows(app, "SELECT status FROM turns WHERE source='chat'")] == ["ok"]


def test_the_idempotency_key_format_stays_what_earlier_versions_stored():
    """Keys are persisted; a changed format would run again, after an upgrade, a call made
    just before it. The format: sha256 of name NUL conversation NUL compact sorted JSON, 32 hex."""
    import hashlib

    from bruce.actions.registry import idempotency_key

    canonical = '{"content":"é","path":"a.txt"}'
    expected = hashlib.sha256(f"files.write\x00test:c1\x00{canonical}".encode()).hexdigest()[:32]
    assert idempotency_key("files.write", "test:c1", {"path": "a.txt", "content": "é"}) == expected
    assert idempotency_key("files.write", None, {}) == hashlib.sha256(
        b"files.write\x00None\x00{}").hexdigest()[:32]


async def test_a_guests_turn_gets_only_the_guest_tools_never_a_risky_one(app):
    from bruce.contracts import ToolCall
    from bruce.turns.scope import TurnScope
    from bruce.values import ConversationId

    app.registry.register(contract("test.low"), nothing)  # not in access.guest_tools
    scope = TurnScope(turn_id="t-guest", conversation_id=ConversationId("test", "c1"), user_id="222",
                      person="telegram:222")
    offered = {d["function"]["name"] for d in app.registry.definitions(scope)}
    assert "clock_now" in offered and not offered & {"test_low", "http_post", "files_write", "artifact_save"}
    assert "test_low" in {d["function"]["name"] for d in app.registry.definitions()}  # the owner's turn has it
    await app.store.messages.ensure_conversation("test:c1", "test", "c1")
    await app.store.messages.start_turn("t-guest", "test:c1", source="chat", inbound_message_id=None)
    result = await app.registry.execute(ToolCall("c1", "test_low", "{}"), scope)
    assert result.status == "denied" and result.error == "The tool test.low is not available in this turn."


# --- a handler that finds a call needs a yes (``NeedsConfirmation``) --------------------------------


def asking_tool(seen: list):
    """Asks (with a preview) unless the call was approved; records each context it ran with."""
    async def handler(args, ctx):
        if not ctx.approved:
            raise NeedsConfirmation("would do the risky thing")
        seen.append((ctx.approved, ctx.untrusted))
        return {"done": True}
    return handler


async def run_call(app, scope):
    await app.store.messages.ensure_conversation("test:c1", "test", "c1")
    return await app.registry.execute(ToolCall("c1", "test_asks", "{}"), scope)


async def test_a_handler_that_needs_a_yes_parks_with_its_preview_and_the_approval_runs_it(app, fake_llm, channel):
    seen: list = []
    app.registry.register(contract("test.asks"), asking_tool(seen))
    fake_llm.add(Step.tool_calls(("test_asks", {})), Step.text("Asked you."))
    await say(app, "do the risky thing")
    ((_, request),) = channel.confirmations
    assert request.tool_name == "test.asks" and request.preview == "would do the risky thing"
    assert seen == []
    fake_llm.add(Step.text("Done."))
    await say(app, f"/approve {request.id}")
    assert seen == [(True, False)]
    statuses = [r["status"] for r in await rows(app, "SELECT status FROM tool_executions ORDER BY id")]
    assert statuses == ["awaiting_confirmation", "ok"]


@pytest.mark.parametrize(("unattended", "confirmed", "status", "ran"),
                         [(True, False, "skipped", []), (False, True, "ok", [(True, True)])])
async def test_a_handler_that_needs_a_yes_is_skipped_unattended_and_runs_for_a_trusted_mcp_client(
        app, unattended, confirmed, status, ran):
    seen: list = []
    app.registry.register(contract("test.asks"), asking_tool(seen))
    scope = TurnScope("", ConversationId("test", "c1"), None, unattended=unattended, confirmed_by_caller=confirmed,
                      tainted=True)
    result = await run_call(app, scope)
    assert result.status == status and seen == ran


async def test_a_handler_that_asks_again_after_the_yes_fails_instead_of_asking_forever(app, channel, fake_llm):
    async def always_asks(args, ctx):
        raise NeedsConfirmation("again")

    app.registry.register(contract("test.asks"), always_asks)
    fake_llm.add(Step.tool_calls(("test_asks", {})), Step.text("Asked you."))
    await say(app, "do it")
    ((_, request),) = channel.confirmations
    fake_llm.add(Step.text("It failed."))
    await say(app, f"/approve {request.id}")
    assert len(channel.confirmations) == 1
    (last,) = await rows(app, "SELECT status, error FROM tool_executions ORDER BY id DESC LIMIT 1")
    assert last["status"] == "error" and "asked for approval again" in last["error"]
