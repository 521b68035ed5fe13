"""The start of a call with side effects, written before its handler runs (``bruce.actions.trail``).

docs/operations.md, "Side effects and crashes": a tool whose ``side_effects`` does not begin
with "none" is recorded in ``tool_starts`` (committed) before its handler runs; the row is
finished with the call's ``tool_executions`` row. A read-only tool writes no start."""

from __future__ import annotations

from typing import Any

import pytest

from bruce.actions.trail import arguments_summary
from bruce.contracts import ToolCall
from bruce.turns.scope import TurnScope, new_turn_id
from bruce.values import ConversationId, TurnSource
from tests.actions.test_registry import contract
from tests.helpers import rows

SCHEMA = {"type": "object", "properties": {"to": {"type": "string"}, "text": {"type": "string"}},
          "additionalProperties": False}


async def started_turn(app: Any) -> TurnScope:
    scope = TurnScope(new_turn_id(), ConversationId("test", "c1"), "u1")
    await app.store.messages.ensure_conversation("test:c1", "test", "c1")
    await app.store.messages.start_turn(scope.turn_id, "test:c1", source=TurnSource.CHAT, inbound_message_id=None)
    return scope


async def test_a_call_with_side_effects_is_started_in_the_database_before_its_handler_runs(app):
    seen: list[list[dict[str, Any]]] = []

    async def send(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
        seen.append(await rows(app, "SELECT tool_name, summary, status, idempotent, execution_id FROM tool_starts"))
        seen.append(await rows(app, "SELECT id FROM tool_executions"))
        return {"sent": True}

    app.registry.register(contract("test.send", input_schema=SCHEMA, side_effects="sends one message"), send)
    scope = await started_turn(app)
    result = await app.registry.execute(ToolCall("c1", "test_send", '{"to": "team", "text": "hi"}'), scope)
    assert result.ok
    assert seen == [[{"tool_name": "test.send", "summary": 'to="team", text="hi"', "status": "started",
                      "idempotent": 0, "execution_id": None}], []]  # another connection sees it: committed
    (execution,) = await rows(app, "SELECT id, status FROM tool_executions")
    (start,) = await rows(app, "SELECT status, execution_id, turn_id FROM tool_starts")
    assert start == {"status": "finished", "execution_id": execution["id"], "turn_id": scope.turn_id}


async def test_a_failed_call_finishes_its_start_too(app):
    async def broken(args: dict[str, Any], ctx: Any) -> None:
        raise ValueError("no route")

    app.registry.register(contract("test.send", input_schema=SCHEMA, side_effects="sends one message"), broken)
    result = await app.registry.execute(ToolCall("c1", "test_send", '{"to": "x"}'), await started_turn(app))
    assert not result.ok
    (start,) = await rows(app, "SELECT s.status, e.status AS execution FROM tool_starts s"
                               " JOIN tool_executions e ON e.id = s.execution_id")
    assert start == {"status": "finished", "execution": "error"}


async def test_a_read_only_tool_writes_no_start(app):
    async def look(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
        return {"seen": True}

    app.registry.register(contract("test.look", side_effects="none: reads only"), look)
    assert (await app.registry.execute(ToolCall("c1", "test_look", "{}"), await started_turn(app))).ok
    assert await rows(app, "SELECT id FROM tool_starts") == []
    assert len(await rows(app, "SELECT id FROM tool_executions")) == 1


async def test_a_refused_call_writes_no_start(app):
    async def send(args: dict[str, Any], ctx: Any) -> None:
        raise AssertionError("must not run")

    app.registry.register(contract("test.send", input_schema=SCHEMA, side_effects="sends one message"), send)
    result = await app.registry.execute(ToolCall("c1", "test_send", '{"to": 5}'), await started_turn(app))
    assert result.status == "invalid_args"
    assert await rows(app, "SELECT id FROM tool_starts") == []


async def test_an_idempotent_call_is_started_with_its_key_and_a_replay_is_not(app):
    runs: list[str | None] = []

    async def save(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
        runs.append(ctx.idempotency_key)
        return {"saved": True}

    app.registry.register(contract("test.save", input_schema=SCHEMA, side_effects="saves one thing", idempotent=True,
                                   idempotency_window_s=60), save)
    scope = await started_turn(app)
    for call in ("c1", "c2"):
        assert (await app.registry.execute(ToolCall(call, "test_save", '{"text": "a"}'), scope)).ok
    (start,) = await rows(app, "SELECT idempotent, idempotency_key, status FROM tool_starts")
    assert runs == [start["idempotency_key"]] and start["idempotent"] == 1 and start["status"] == "finished"


@pytest.mark.parametrize(("arguments", "expected"), [
    ({"to": "team", "n": 3}, 'to="team", n=3'),
    ({"text": "x" * 100}, 'text="' + "x" * 38 + "…"),
    ({"text": "a\nb\x1b[2K"}, 'text="a\\nb\\u001b[2K"'),
    ({"text": "\u202eevil"}, 'text="<U+202E>evil"'),
    ("raw text", '"raw text"'),
])
def test_the_summary_is_short_and_shows_what_a_screen_would_hide(arguments, expected):
    assert arguments_summary(arguments) == expected


def test_the_summary_is_capped_whatever_the_number_of_arguments():
    summary = arguments_summary({f"k{i}": "v" * 30 for i in range(20)})
    assert len(summary) == 200 and summary.endswith("…")


async def test_a_secret_in_the_arguments_is_not_in_the_summary(app_factory):
    app = await app_factory()
    secret = "sk-test-key-123456"  # the configured LLM key: the app's redactor masks it
    app.registry.register(contract("test.send", input_schema=SCHEMA, side_effects="sends one message"),
                          lambda args, ctx: _ok())
    await app.registry.execute(ToolCall("c1", "test_send", f'{{"text": "key {secret}"}}'), await started_turn(app))
    (start,) = await rows(app, "SELECT summary FROM tool_starts")
    assert secret not in start["summary"]


async def _ok() -> dict[str, Any]:
    return {}


READ_ONLY = {"clock.now", "math.calculate", "web.search", "web.read_url", "memory.search", "proactive.list"}


async def test_the_built_in_tools_are_classed_as_docs_operations_md_says(app_factory, tmp_path):
    app = await app_factory(tools={"files": {"notes_dir": str(tmp_path / "notes")},
                                   "artifacts": {"dir": str(tmp_path / "art")}}, memory={"enabled": True})
    contracts = [t.contract for t in app.registry.tools()]
    assert {"artifact.save", "files.write", "memory.remember", "proactive.create"} <= {c.name for c in contracts}
    assert {c.name for c in contracts if not c.has_side_effects} == READ_ONLY & {c.name for c in contracts}
    assert [c.name for c in contracts if c.has_side_effects and c.idempotent] == ["artifact.save"]
