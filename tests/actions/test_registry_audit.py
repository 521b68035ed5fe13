"""The audit of every path a tool call can take, column by column, and idempotency.

docs/tools.md, "Audit": every call, whatever happened, is one ``tool_executions`` row (status,
input with secrets masked, output truncated, source ``chat``, ``proactive`` or
``confirmation``). "Idempotency": the key is made from the tool's name, the conversation and
the normalized arguments; a repeat within the window returns the first result.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging

import pytest
import structlog

from bruce.contracts import DryRun, Risk, ToolCall
from bruce.errors import ToolFailed, ToolInputInvalid
from bruce.log import configure_logging
from bruce.turns.scope import TurnScope, new_turn_id
from bruce.values import ConversationId, TurnSource
from tests.actions.test_registry import contract
from tests.conftest import T0
from tests.fakes.llm_server import Step
from tests.helpers import rows, say

NOW = T0.isoformat(timespec="microseconds")  # what the store writes as created_at under the fake clock
AWAITING = ("Not done yet: this action needs the user's explicit approval, and a request ({id}) was sent to them{how}. "
            "Tell the user it is waiting for their approval. Do not say it happened.")
SKIPPED = ("Not done: this action needs the user's approval, and this turn was not started by the user "
           "(a scheduled task), so nobody can approve it now. Tell the user it was skipped.")


@pytest.fixture
def tool_dirs(tmp_path, notes):
    return {"files": {"notes_dir": str(notes)}, "artifacts": {"dir": str(tmp_path / "artifacts")}}


async def audit(app) -> list[dict]:
    found = await rows(app, "SELECT * FROM tool_executions ORDER BY id")
    for row in found:  # JSON columns, read as data
        row["input"] = json.loads(row["input"])
        row["output"] = None if row["output"] is None else (
            "null (not NULL)" if row["output"] == "null" else json.loads(row["output"]))
    return found


async def turn_ids(app, source: str) -> list[str]:
    return [r["id"] for r in await rows(app, "SELECT id FROM turns WHERE source = ? ORDER BY started_at, rowid",
                                        source)]


def row(**values) -> dict:
    base = {"conversation_id": "test:c1", "output": None, "error": None, "latency_ms": 0.0, "source": "chat",
            "idempotency_key": None, "created_at": NOW, "server": None}
    return {**base, **values}


def without_ids(found: list[dict]) -> list[dict]:
    assert [r["id"] for r in found] == list(range(1, len(found) + 1))
    return [{k: v for k, v in r.items() if k != "id"} for r in found]


async def test_unknown_tool(app, fake_llm):
    fake_llm.add(Step.tool_calls(("teleport_now", '{"to": "Mars"}', "call_u")), Step.text("No such tool."))
    await say(app, "teleport me")
    offered = [t["function"]["name"] for t in fake_llm.requests[0]["tools"]]
    (turn,) = await turn_ids(app, "chat")
    assert without_ids(await audit(app)) == [row(
        turn_id=turn, call_id="call_u", tool_name="teleport_now", risk=None, input={"raw": '{"to": "Mars"}'},
        status="unknown_tool",
        error=f"There is no tool named 'teleport_now'. Available tools: {', '.join(offered)}.")]


async def test_unknown_tool_lists_only_what_the_model_may_see(app_factory, fake_llm):
    app = await app_factory(tools={"overrides": {"web.search": {"enabled": False}}})
    fake_llm.add(Step.tool_calls(("teleport_now", {})), Step.text("No such tool."))
    await say(app, "teleport me")
    (found,) = await audit(app)
    listed = found["error"].removeprefix("There is no tool named 'teleport_now'. Available tools: ")
    assert listed.endswith(".")
    assert listed[:-1].split(", ") == [t["function"]["name"] for t in fake_llm.requests[0]["tools"]]
    assert "web_search" not in listed and "math_calculate" in listed


async def test_denied_by_config(app_factory, fake_llm):
    app = await app_factory(tools={"overrides": {"web.search": {"enabled": False}}})
    fake_llm.add(Step.tool_calls(("web_search", '{"query": "news"}', "call_d")), Step.text("Search is off."))
    await say(app, "search the news")
    (turn,) = await turn_ids(app, "chat")
    assert without_ids(await audit(app)) == [row(
        turn_id=turn, call_id="call_d", tool_name="web.search", risk="low", input={"raw": '{"query": "news"}'},
        status="denied", error="The tool web.search is disabled by the owner's configuration.")]


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ('{"expression": 42}', "arguments do not match the schema of math_calculate: expression: 42 is not of type "
                               "'string'"),
        ('{"expression": "1+1", "dry_run": true}', "arguments do not match the schema of math_calculate: Additional "
                                                   "properties are not allowed ('dry_run' was unexpected)"),
        ("[1, 2]", "arguments do not match the schema of math_calculate: [1, 2] is not of type 'object'"),
        ('{"expression": ', "arguments are not valid JSON: Expecting value at position 15"),
    ],
)
async def test_invalid_arguments(app, fake_llm, arguments, error):
    fake_llm.add(Step.tool_calls(("math_calculate", arguments, "call_i")), Step.text("Bad call."))
    await say(app, "calculate")
    (turn,) = await turn_ids(app, "chat")
    assert without_ids(await audit(app)) == [row(
        turn_id=turn, call_id="call_i", tool_name="math.calculate", risk="low", input={"raw": arguments},
        status="invalid_args", error=error)]


async def test_dry_run_on_a_tool_that_cannot_preview_is_refused_even_with_a_loose_schema(app, fake_llm):
    ran = []

    async def act(args, ctx):
        ran.append(args)
        return {"done": True}

    app.registry.register(contract("test.loose", input_schema={"type": "object"}), act)
    fake_llm.add(Step.tool_calls(("test_loose", '{"dry_run": true}', "call_l")), Step.text("Refused."))
    await say(app, "preview it")
    assert ran == []
    (found,) = await audit(app)
    assert (found["status"], found["error"]) == ("invalid_args", "test_loose has no dry run; call it without dry_run")


@pytest.mark.parametrize("arguments", ["", "  "])
async def test_empty_arguments_mean_no_arguments(app, fake_llm, arguments):
    fake_llm.add(Step.tool_calls(("clock_now", arguments, "call_e")), Step.text("It is noon."))
    await say(app, "time?")
    (found,) = await audit(app)
    assert (found["status"], found["input"]) == ("ok", {})


async def test_a_schema_error_names_where_in_the_arguments_it_is(app, fake_llm):
    async def act(args, ctx):
        return {"done": True}

    schema = {"type": "object", "properties": {"event": {"type": "object", "properties": {
        "when": {"type": "object", "properties": {"day": {"type": "string"}}}}}}}
    app.registry.register(contract("test.nested", input_schema=schema), act)
    fake_llm.add(Step.tool_calls(("test_nested", {"event": {"when": {"day": 3}}})), Step.text("Bad call."))
    await say(app, "schedule")
    (found,) = await audit(app)
    assert found["error"] == ("arguments do not match the schema of test_nested: event/when/day: 3 is not of type "
                              "'string'")


async def test_a_tool_that_finds_its_arguments_invalid_says_why(app, fake_llm):
    async def picky(args, ctx):
        raise ToolInputInvalid("date must be in the future")

    app.registry.register(contract("test.picky"), picky)
    fake_llm.add(Step.tool_calls(("test_picky", {})), Step.text("Bad date."))
    await say(app, "book it")
    (found,) = await audit(app)
    assert (found["status"], found["error"], found["output"]) == ("invalid_args", "date must be in the future", None)
    fed_back = json.loads([m for m in fake_llm.requests[1]["messages"] if m["role"] == "tool"][0]["content"])
    assert fed_back == {"ok": False, "status": "invalid_args", "error": "date must be in the future"}


async def test_a_tool_knows_its_conversation_turn_and_time(app, fake_llm):
    async def where(args, ctx):
        return {"conversation": ctx.conversation_id, "turn": ctx.turn_id, "now": ctx.now.isoformat(),
                "dry_run": ctx.dry_run, "key": ctx.idempotency_key}

    app.registry.register(contract("test.where"), where)
    fake_llm.add(Step.tool_calls(("test_where", {})), Step.text("Here."))
    await say(app, "where am I?")
    (turn,) = await turn_ids(app, "chat")
    (found,) = await audit(app)
    assert found["output"] == {"conversation": "test:c1", "turn": turn, "now": T0.isoformat(), "dry_run": False,
                               "key": None}


async def test_dry_run_previews_and_is_audited_as_such(app_factory, fake_llm, notes, tool_dirs):
    app = await app_factory(tools=tool_dirs)
    arguments = {"path": "todo.md", "content": "milk\n", "dry_run": True}
    fake_llm.add(Step.tool_calls(("files_write", arguments, "call_p")), Step.text("That would create todo.md."))
    await say(app, "what would it do?")
    assert not (notes / "todo.md").exists()
    (turn,) = await turn_ids(app, "chat")
    preview = {"path": "todo.md", "exists": False, "mode": "overwrite", "bytes_after": 5, "current_sha256": None,
               "diff": "--- a/todo.md\n+++ b/todo.md\n@@ -0,0 +1 @@\n+milk"}
    assert without_ids(await audit(app)) == [row(
        turn_id=turn, call_id="call_p", tool_name="files.write", risk="high", input=arguments,
        output={"dry_run": True, "preview": preview}, status="ok")]
    fed_back = json.loads([m for m in fake_llm.requests[1]["messages"] if m["role"] == "tool"][0]["content"])
    assert fed_back == {"ok": True, "result": {"dry_run": True, "preview": preview}}
    assert await rows(app, "SELECT id FROM pending_confirmations") == []


async def test_a_failed_dry_run_is_audited_with_its_error(app_factory, fake_llm, notes, tool_dirs):
    app = await app_factory(tools=tool_dirs)
    arguments = {"path": "todo.pdf", "content": "milk\n", "dry_run": True}
    fake_llm.add(Step.tool_calls(("files_write", arguments)), Step.text("Not allowed."))
    await say(app, "preview a pdf")
    (found,) = await audit(app)
    assert (found["status"], found["input"], found["output"]) == ("error", arguments, None)
    assert found["error"].startswith("extension_not_allowed: ")


async def test_parked_then_approved(app_factory, fake_llm, channel, notes, tool_dirs):
    app = await app_factory(tools=tool_dirs)
    arguments = {"path": "todo.md", "content": "milk\n"}
    fake_llm.add(Step.tool_calls(("files_write", {**arguments, "dry_run": False}, "call_w")),
                 Step.text("Waiting for your approval."))
    await say(app, "note milk")
    ((_, request),) = channel.confirmations
    (chat_turn,) = await turn_ids(app, "chat")
    parked = row(turn_id=chat_turn, call_id="call_w", tool_name="files.write", risk="high", input=arguments,
                 output={"confirmation_id": request.id}, status="awaiting_confirmation",
                 error=AWAITING.format(id=request.id, how=""))
    assert without_ids(await audit(app)) == [parked]
    (pending,) = await rows(app, "SELECT conversation_id, user_id, turn_id, call_id, tool_name, arguments, step_up, "
                                 "status FROM pending_confirmations")
    assert {**pending, "arguments": json.loads(pending["arguments"])} == {
        "conversation_id": "test:c1", "user_id": "u1", "turn_id": chat_turn, "call_id": "call_w",
        "tool_name": "files.write", "arguments": arguments, "step_up": 0, "status": "pending"}
    await say(app, f"/approve {request.id}", sender="u2")  # someone else in the same chat
    assert channel.texts()[-1] == f"Only the person who asked can decide on request {request.id}. Nothing was run."
    assert not (notes / "todo.md").exists()

    fake_llm.add(Step.text("Saved."))
    await say(app, f"/approve {request.id}")
    assert (notes / "todo.md").read_text() == "milk\n"
    (approval_turn,) = await turn_ids(app, "confirmation")
    ran = row(turn_id=approval_turn, call_id=f"confirmation:{request.id}", tool_name="files.write", risk="high",
              input=arguments, source="confirmation", status="ok",
              output={"path": "todo.md", "bytes_written": 5, "created": True, "mode": "overwrite", "file_bytes": 5})
    assert without_ids(await audit(app)) == [parked, ran]
    assert channel.texts()[-2:] == [f"Done: files.write ran (request {request.id}).", "Saved."]


async def test_a_step_up_request_tells_the_model_who_approves(make_config, app_factory, fake_llm, channel):
    app = await app_factory(tools={"http_post": {"allowed_urls": ["http://127.0.0.1:9/hook"]}})
    fake_llm.add(Step.tool_calls(("http_post", {"url": "http://127.0.0.1:9/hook", "json": {"a": 1}})),
                 Step.text("The owner must approve it."))
    await say(app, "post it")
    ((_, request),) = channel.confirmations
    (found,) = await audit(app)
    assert found["status"] == "awaiting_confirmation" and found["risk"] == "critical"
    assert found["error"] == AWAITING.format(
        id=request.id, how=" (the owner must approve it on the machine with `bruce approve`)")


async def test_stale_preview_is_a_conflict_and_nothing_runs(app_factory, fake_llm, channel, notes, tool_dirs):
    app = await app_factory(tools=tool_dirs)
    (notes / "todo.md").write_text("old\n")
    arguments = {"path": "todo.md", "content": "new\n"}
    fake_llm.add(Step.tool_calls(("files_write", arguments)), Step.text("Waiting for your approval."))
    await say(app, "replace the note")
    ((_, request),) = channel.confirmations
    (notes / "todo.md").write_text("edited meanwhile\n")

    fake_llm.add(Step.text("It changed, so I did nothing."))
    await say(app, f"/approve {request.id}")
    assert (notes / "todo.md").read_text() == "edited meanwhile\n"
    (approval_turn,) = await turn_ids(app, "confirmation")
    conflict = ("conflict: what this would do has changed since it was approved (the preview differs now), so "
                "nothing was done. Ask again to see the new preview.")
    assert without_ids(await audit(app))[1] == row(
        turn_id=approval_turn, call_id=f"confirmation:{request.id}", tool_name="files.write", risk="high",
        input=arguments, source="confirmation", status="error", error=conflict)
    assert f"files.write did not succeed (request {request.id}): {conflict}" in channel.texts()
    (pending,) = await rows(app, "SELECT status FROM pending_confirmations")
    assert pending["status"] == "failed"


async def test_a_preview_that_now_fails_runs_nothing(app_factory, fake_llm, channel, notes, tool_dirs):
    app = await app_factory(tools=tool_dirs)
    fake_llm.add(Step.tool_calls(("files_write", {"path": "todo.md", "content": "new\n"})), Step.text("Asked."))
    await say(app, "write the note")
    ((_, request),) = channel.confirmations
    (notes / "todo.md").mkdir()  # the target became a folder meanwhile

    fake_llm.add(Step.text("It could not be written."))
    await say(app, f"/approve {request.id}")
    approved = (await audit(app))[1]
    assert (approved["status"], approved["source"], approved["output"]) == ("error", "confirmation", None)
    assert approved["error"] == "path_not_allowed: cannot write 'todo.md': it is a folder, not a file."
    assert (notes / "todo.md").is_dir()


async def test_an_approved_preview_is_made_again_and_must_match(app_factory, fake_llm, channel, notes, tool_dirs):
    app = await app_factory(tools=tool_dirs)
    calls = []

    async def previewing(args, ctx):
        calls.append(ctx.dry_run)
        return {"would": "do it"}

    app.registry.register(contract("test.previewed", Risk.HIGH, dry_run=DryRun.REQUIRED,
                                   side_effects="changes something"), previewing)
    fake_llm.add(Step.tool_calls(("test_previewed", {})), Step.text("Asked."))
    await say(app, "do it")
    ((_, request),) = channel.confirmations
    assert calls == [True] and request.preview is not None and '"would": "do it"' in request.preview
    fake_llm.add(Step.text("Done."))
    await say(app, f"/approve {request.id}")
    assert calls == [True, True, False]  # previewed at the request, again at the approval, then run
    assert (await audit(app))[1]["status"] == "ok"


async def test_a_preview_with_dates_is_compared_as_the_user_saw_it(app, fake_llm, channel):
    calls = []

    async def dated(args, ctx):
        calls.append(ctx.dry_run)
        return {"at": ctx.now} if ctx.dry_run else {"done": True}

    app.registry.register(contract("test.dated", Risk.HIGH, dry_run=DryRun.REQUIRED,
                                   side_effects="changes something"), dated)
    fake_llm.add(Step.tool_calls(("test_dated", {})), Step.text("Asked."))
    await say(app, "do it")
    ((_, request),) = channel.confirmations
    fake_llm.add(Step.text("Done."))
    await say(app, f"/approve {request.id}")
    assert calls == [True, True, False]
    assert channel.texts()[-2] == f"Done: test.dated ran (request {request.id})."


async def test_a_tool_that_no_longer_requires_a_preview_is_not_previewed_again(app_factory, fake_llm, channel):
    calls = []

    async def changing(args, ctx):
        calls.append(ctx.dry_run)
        return {"version": len(calls)}

    def register(app, dry_run):
        app.registry.register(contract("test.changing", Risk.HIGH, dry_run=dry_run, side_effects="changes something"),
                              changing)

    app = await app_factory()
    register(app, DryRun.REQUIRED)
    fake_llm.add(Step.tool_calls(("test_changing", {})), Step.text("Asked."))
    await say(app, "do it")
    ((_, request),) = channel.confirmations
    await app.stop()

    app = await app_factory()  # restarted with a new version of the tool: its dry run is optional now
    register(app, DryRun.OPTIONAL)
    fake_llm.add(Step.text("Done."))
    await say(app, f"/approve {request.id}")
    assert calls == [True, False]
    assert channel.texts()[-2] == f"Done: test.changing ran (request {request.id})."


async def test_an_optional_dry_run_tool_is_not_previewed_for_its_request(app, fake_llm, channel):
    calls = []

    async def act(args, ctx):
        calls.append(ctx.dry_run)
        return {"done": True}

    app.registry.register(contract("test.optional", Risk.HIGH, dry_run=DryRun.OPTIONAL,
                                   side_effects="changes something"), act)
    fake_llm.add(Step.tool_calls(("test_optional", {})), Step.text("Asked."))
    await say(app, "do it")
    ((_, request),) = channel.confirmations
    assert calls == [] and request.preview is None
    fake_llm.add(Step.text("Done."))
    await say(app, f"/approve {request.id}")
    assert calls == [False]


async def test_skipped_in_a_proactive_turn(app_factory, fake_llm, channel, notes, tool_dirs):
    app = await app_factory(tools=tool_dirs)
    arguments = {"path": "todo.md", "content": "milk\n"}
    fake_llm.add(Step.tool_calls(("files_write", arguments, "call_s")), Step.text("Briefing done."))
    await app.worker.run_proactive(ConversationId("test", "c1"), "morning briefing")
    (turn,) = await turn_ids(app, "proactive")
    assert without_ids(await audit(app)) == [row(
        turn_id=turn, call_id="call_s", tool_name="files.write", risk="high", input=arguments, source="proactive",
        status="skipped", error=SKIPPED)]
    assert not (notes / "todo.md").exists() and channel.confirmations == []


async def test_a_tool_outside_the_turns_filter_is_denied(app, fake_llm):
    fake_llm.add(Step.tool_calls(("clock_now", '{}', "call_f")), Step.text("Briefing done."))
    await app.worker.run_proactive(ConversationId("test", "c1"), "briefing", tools=lambda c: c.name != "clock.now")
    assert "clock_now" not in {t["function"]["name"] for t in fake_llm.requests[0]["tools"]}
    (turn,) = await turn_ids(app, "proactive")
    assert without_ids(await audit(app)) == [row(
        turn_id=turn, call_id="call_f", tool_name="clock.now", risk="low", input={"raw": "{}"}, source="proactive",
        status="denied", error="The tool clock.now is not available in this turn.")]


async def test_approved_but_disabled_before_it_runs(app_factory, make_config, fake_llm, channel, notes, tool_dirs):
    app = await app_factory(tools=tool_dirs)
    arguments = {"path": "todo.md", "content": "milk\n"}
    fake_llm.add(Step.tool_calls(("files_write", arguments)), Step.text("Waiting for your approval."))
    await say(app, "note milk")
    ((_, request),) = channel.confirmations
    await app.stop()

    # the owner turns the tool off and restarts Bruce; the user then approves the old request
    app = await app_factory(tools={**tool_dirs, "overrides": {"files.write": {"enabled": False}}})
    fake_llm.add(Step.text("That tool is switched off now."))
    await say(app, f"/approve {request.id}")
    assert not (notes / "todo.md").exists()
    (approval_turn,) = await turn_ids(app, "confirmation")
    assert without_ids(await audit(app))[1] == row(
        turn_id=approval_turn, call_id=f"confirmation:{request.id}", tool_name="files.write", risk="high",
        input=arguments, source="confirmation", status="denied", error="files.write is no longer available.")
    assert f"files.write did not succeed (request {request.id}): files.write is no longer available." in channel.texts()
    (pending,) = await rows(app, "SELECT status FROM pending_confirmations")
    assert pending["status"] == "failed"


async def test_approved_but_gone_before_it_runs(app_factory, fake_llm, channel):
    app = await app_factory()
    ran = []

    async def act(args, ctx):
        ran.append(args)
        return {"done": True}

    app.registry.register(contract("test.plugin", Risk.HIGH, side_effects="changes something"), act)
    fake_llm.add(Step.tool_calls(("test_plugin", {})), Step.text("Waiting for your approval."))
    await say(app, "use the plugin")
    ((_, request),) = channel.confirmations
    await app.stop()

    app = await app_factory()  # restarted without the plugin
    fake_llm.add(Step.text("That tool is gone."))
    await say(app, f"/approve {request.id}")
    assert ran == []
    approved = (await audit(app))[1]
    assert (approved["tool_name"], approved["risk"], approved["status"], approved["error"]) == (
        "test_plugin", None, "unknown_tool", "test.plugin is no longer available.")


# the row's own measurements and masks ------------------------------------------------------------


async def test_latency_is_the_calls_own_time(app, fake_llm, clock):
    async def slow(args, ctx):
        clock.advance(seconds=0.25)
        return {"done": True}

    app.registry.register(contract("test.slow"), slow)
    fake_llm.add(Step.tool_calls(("test_slow", {})), Step.text("Done."))
    await say(app, "slow")
    (found,) = await audit(app)
    assert found["latency_ms"] == 250.0


async def test_secrets_are_masked_in_output_and_error(app, fake_llm):
    async def leaky(args, ctx):
        return {"note": "key sk-test-key-123456 here"}

    async def failing(args, ctx):
        raise ToolFailed("upstream rejected sk-test-key-123456", code="backend_error")

    app.registry.register(contract("test.leaky"), leaky)
    app.registry.register(contract("test.failing"), failing)
    fake_llm.add(Step.tool_calls(("test_leaky", {}), ("test_failing", {})), Step.text("Done."))
    await say(app, "leak")
    found = {r["tool_name"]: r for r in await audit(app)}
    assert found["test.leaky"]["output"] == {"note": "key *** here"}
    assert found["test.failing"]["error"] == "backend_error: upstream rejected ***"
    assert found["test.failing"]["output"] is None


@pytest.mark.parametrize(("length", "kept"), [(254, True), (255, False)])
async def test_output_is_kept_up_to_the_limit_then_truncated(app_factory, fake_llm, length, kept):
    app = await app_factory(tools={"audit_output_max_chars": 256})

    async def sized(args, ctx):
        return "x" * length  # as JSON: two quotes more

    app.registry.register(contract("test.sized", output_schema={"type": "string"}), sized)
    fake_llm.add(Step.tool_calls(("test_sized", {})), Step.text("Done."))
    await say(app, "size")
    (found,) = await rows(app, "SELECT output FROM tool_executions")
    if kept:
        assert found["output"] == json.dumps("x" * length)
    else:
        assert json.loads(found["output"]) == {"truncated": True, "original_chars": 257,
                                               "preview": json.dumps("x" * length)[:256]}


async def test_output_keeps_text_readable_and_values_a_json_cannot_hold(app, fake_llm):
    async def rich(args, ctx):
        return {"city": "São Paulo", "when": T0}

    app.registry.register(contract("test.rich"), rich)
    fake_llm.add(Step.tool_calls(("test_rich", {})), Step.text("Done."))
    await say(app, "rich")
    (found,) = await rows(app, "SELECT output FROM tool_executions")
    assert found["output"] == '{"city": "São Paulo", "when": "2026-12-02 12:00:00+00:00"}'


async def test_a_summary_scope_is_audited_as_chat(app):
    await app.store.messages.ensure_conversation("test:c1", "test", "c1")
    scope = TurnScope(new_turn_id(), ConversationId("test", "c1"), None, source=TurnSource.SUMMARY)
    await app.store.messages.start_turn(scope.turn_id, "test:c1", source=TurnSource.SUMMARY, inbound_message_id=None)
    result = await app.registry.execute(ToolCall("c1", "clock_now", "{}"), scope)
    assert result.ok
    (found,) = await audit(app)
    assert found["source"] == "chat"


# idempotency --------------------------------------------------------------------------------------


def save(content: str, filename: str = "report.html") -> Step:
    return Step.tool_calls(("artifact_save", {"filename": filename, "content": content}))


async def saved(app) -> list[dict]:
    return [{"status": r["status"], "key": r["idempotency_key"], "url": (r["output"] or {}).get("url")}
            for r in await audit(app)]


async def test_identical_calls_replay_and_different_ones_both_run(app_factory, fake_llm, tmp_path, tool_dirs):
    app = await app_factory(tools=tool_dirs)
    for content in ("<p>one</p>", "<p>one</p>", "<p>two</p>"):
        fake_llm.add(save(content), Step.text("Saved."))
        await say(app, "save the report")
    first, again, other = await saved(app)
    assert first["status"] == again["status"] == other["status"] == "ok"
    assert again == first  # the first result, replayed: same artifact, same key
    assert other["url"] != first["url"] and other["key"] != first["key"]
    assert len(first["key"]) == 32 and int(first["key"], 16) >= 0
    stored = await rows(app, "SELECT id FROM artifacts")
    assert len(stored) == 2 and len(list((tmp_path / "artifacts").iterdir())) == 2


async def test_the_same_arguments_in_another_order_are_the_same_call(app_factory, fake_llm, tool_dirs):
    app = await app_factory(tools=tool_dirs)
    fake_llm.add(Step.tool_calls(("artifact_save", '{"filename": "r.html", "content": "x"}')), Step.text("Saved."))
    await say(app, "save")
    fake_llm.add(Step.tool_calls(("artifact_save", '{"content": "x", "filename": "r.html"}')), Step.text("Saved."))
    await say(app, "save again")
    first, again = await saved(app)
    assert again == first
    assert len(await rows(app, "SELECT id FROM artifacts")) == 1


async def test_the_same_call_in_another_conversation_runs_again(app_factory, fake_llm, tool_dirs):
    app = await app_factory(tools=tool_dirs)
    fake_llm.add(save("x"), Step.text("Saved."))
    await say(app, "save", chat="c1")
    fake_llm.add(save("x"), Step.text("Saved."))
    await say(app, "save", chat="c2")
    first, other = await saved(app)
    assert other["url"] != first["url"] and other["key"] != first["key"]
    assert len(await rows(app, "SELECT id FROM artifacts")) == 2


async def test_the_window_ends_the_replay(app_factory, fake_llm, clock, tool_dirs):
    app = await app_factory(tools=tool_dirs)
    for minutes in (0, 59, 2):  # 0, 59 min (within the hour), 61 min (past it)
        clock.advance(minutes=minutes)
        fake_llm.add(save("x"), Step.text("Saved."))
        await say(app, "save")
    first, within, after = await saved(app)
    assert within == first
    assert after["url"] != first["url"] and after["key"] == first["key"]
    assert len(await rows(app, "SELECT id FROM artifacts")) == 2


async def test_idempotency_is_per_tool_and_a_failure_is_not_replayed(app, fake_llm):
    counts = {"a": 0, "b": 0}

    def counter(name, fail_first=False):
        async def handler(args, ctx):
            counts[name] += 1
            if fail_first and counts[name] == 1:
                raise ToolFailed("not yet", code="busy")
            return {"run": counts[name], "key": ctx.idempotency_key}
        return handler

    for name, fail_first in (("a", False), ("b", True)):
        app.registry.register(contract(f"test.{name}", idempotent=True, idempotency_window_s=60,
                                       input_schema={"type": "object"}), counter(name, fail_first))
    for _ in range(2):
        fake_llm.add(Step.tool_calls(("test_a", {"n": 1}), ("test_b", {"n": 1})), Step.text("Done."))
        await say(app, "run both")
    found = await audit(app)
    assert counts == {"a": 1, "b": 2}
    by_tool = {}
    for r in found:
        by_tool.setdefault(r["tool_name"], []).append(r)
    a1, a2 = by_tool["test.a"]
    b1, b2 = by_tool["test.b"]
    assert a1["output"] == a2["output"] == {"run": 1, "key": a1["idempotency_key"]}
    assert (b1["status"], b2["status"], b2["output"]["run"]) == ("error", "ok", 2)
    assert b1["idempotency_key"] == b2["idempotency_key"] != a1["idempotency_key"]


async def test_identical_calls_at_the_same_moment_run_once(app):
    runs = []

    async def slow(args, ctx):
        runs.append(args)
        await asyncio.sleep(0.05)
        return {"run": len(runs)}

    app.registry.register(contract("test.once", idempotent=True, idempotency_window_s=60), slow)
    await app.store.messages.ensure_conversation("test:c1", "test", "c1")
    scope = TurnScope(new_turn_id(), ConversationId("test", "c1"), "u1")
    await app.store.messages.start_turn(scope.turn_id, "test:c1", source=TurnSource.CHAT, inbound_message_id=None)
    both = await asyncio.gather(*(app.registry.execute(ToolCall(f"c{i}", "test_once", "{}"), scope) for i in (1, 2)))
    assert len(runs) == 1
    assert [r.output for r in both] == [{"run": 1}, {"run": 1}]


async def test_an_idempotent_approved_action_replays_inside_its_window(app_factory, fake_llm, channel, tool_dirs):
    app = await app_factory(tools={**tool_dirs, "overrides": {"artifact.save": {"require_confirmation": True}}})
    for _ in range(2):
        fake_llm.add(save("x"), Step.text("Waiting for your approval."))
        await say(app, "save")
        request = channel.confirmations[-1][1]
        fake_llm.add(Step.text("Saved."))
        await say(app, f"/approve {request.id}")
    approved = [r for r in await audit(app) if r["source"] == "confirmation"]
    assert [r["status"] for r in approved] == ["ok", "ok"]
    assert approved[0]["output"] == approved[1]["output"] and approved[0]["idempotency_key"] is not None
    assert approved[0]["idempotency_key"] == approved[1]["idempotency_key"]
    assert len(await rows(app, "SELECT id FROM artifacts")) == 1


async def test_arguments_nested_too_deep_are_invalid_and_audited(app):
    """(Through litellm such a reply is already refused as a malformed response; the registry
    must hold on its own too.)"""
    from bruce.contracts import ToolCall
    from bruce.turns.scope import TurnScope, new_turn_id

    await app.store.messages.ensure_conversation("test:c1", "test", "c1")
    scope = TurnScope(new_turn_id(), ConversationId("test", "c1"), "u1")
    await app.store.messages.start_turn(scope.turn_id, "test:c1", source="chat", inbound_message_id=None)
    deep = "[" * 5_000 + "]" * 5_000
    result = await app.registry.execute(ToolCall("call_deep", "math_calculate", deep), scope)
    assert result.status == "invalid_args" and "nested too deeply" in result.error
    (found,) = await audit(app)
    assert (found["call_id"], found["status"]) == ("call_deep", "invalid_args")


def nested(depth: int) -> dict:
    value: dict = {}
    for _ in range(depth):
        value = {"k": value}
    return value


async def test_a_deeply_nested_result_is_reported_as_ran_but_not_shown(app, fake_llm):
    """550 levels: JSON might hold it, or might not, depending on how deep the stack already is.
    The tool ran, so the model is told it did, and the audit keeps the row; a result within the
    ceiling (100 levels) is passed on whole and its audit row keeps the first 64 levels."""
    async def deep(args, ctx):
        return nested(550 if args.get("deep") else 90)

    app.registry.register(contract("test.deep", input_schema={"type": "object"}), deep)
    fake_llm.add(Step.tool_calls(("test_deep", {"deep": True})), Step.text("Deep."),
                 Step.tool_calls(("test_deep", {})), Step.text("Fine."))
    with structlog.testing.capture_logs() as logs:
        await say(app, "deep")
    told = json.loads(fake_llm.requests[-1]["messages"][-1]["content"])
    assert told == {"ok": True, "result": {"result_unavailable": (
        "test.deep ran, but its result cannot be shown (nested more than 100 levels).")}}
    assert [(e["tool"], e["error"]) for e in logs if e["event"] == "tool.result_unserialisable"] == [
        ("test.deep", "too_deep")]
    await say(app, "not so deep")
    told = json.loads(fake_llm.requests[-1]["messages"][-1]["content"])
    assert told["ok"] is True and json.dumps(told["result"]).count('"k"') == 90
    found = await rows(app, "SELECT status, error, output FROM tool_executions ORDER BY id")
    assert [(f["status"], f["error"]) for f in found] == [("ok", None), ("ok", None)]
    assert "result cannot be shown" in found[0]["output"]
    kept = found[1]["output"]
    assert kept.count('"k"') == 64 and '"[nested too deeply to record]"' in kept


async def test_a_result_that_holds_itself_is_named_a_cycle(app, fake_llm):
    async def cyclic(args, ctx):
        loop: list = []
        loop.append(loop)
        return {"loop": loop}

    app.registry.register(contract("test.cyclic"), cyclic)
    fake_llm.add(Step.tool_calls(("test_cyclic", {})), Step.text("Odd."))
    await say(app, "loop")
    told = json.loads(fake_llm.requests[-1]["messages"][-1]["content"])
    assert told["result"] == {"result_unavailable": "test.cyclic ran, but its result cannot be shown "
                                                    "(Circular reference detected)."}


@pytest.mark.parametrize("depth, status", [(99, "ok"), (100, "invalid_args"), (101, "invalid_args")])  # n + 1 levels
async def test_arguments_a_loose_schema_accepts_are_refused_past_100_levels(app, depth, status):
    seen = []

    async def loose(args, ctx):
        seen.append(args)
        return {"fine": True}

    app.registry.register(contract("test.loose", input_schema={"type": "object"}), loose)
    await app.store.messages.ensure_conversation("test:c1", "test", "c1")
    scope = TurnScope(new_turn_id(), ConversationId("test", "c1"), "u1")
    await app.store.messages.start_turn(scope.turn_id, "test:c1", source="chat", inbound_message_id=None)
    result = await app.registry.execute(ToolCall("call_deep", "test_loose", json.dumps(nested(depth))), scope)
    assert (result.status, len(seen)) == (status, 1 if status == "ok" else 0)
    if status == "invalid_args":
        assert result.error == "arguments are nested too deeply (more than 100 levels)"
    (found,) = await audit(app)
    assert found["status"] == status
    if status == "ok":  # the audit keeps the first 64 levels of what was asked
        assert "nested too deeply to record" in json.dumps(found["input"])


# what the operator reads in the log -------------------------------------------------------------


@pytest.fixture
def log_lines():
    buffer = io.StringIO()
    configure_logging(fmt="json", stream=buffer)
    yield lambda *events: [line for line in map(json.loads, buffer.getvalue().splitlines())
                           if line["event"] in events]
    structlog.reset_defaults()
    logging.getLogger().handlers.clear()


def fields(line: dict, *names: str) -> dict:
    return {name: line.get(name) for name in names}


async def test_each_call_is_logged_with_its_tool_status_and_time(app, fake_llm, clock, log_lines):
    async def slow(args, ctx):
        clock.advance(seconds=0.01234)
        return {"done": True}

    app.registry.register(contract("test.slow"), slow)
    fake_llm.add(Step.tool_calls(("test_slow", {}), ("teleport_now", {})), Step.text("Done."))
    await say(app, "slow")
    lines = sorted(log_lines("tool.executed"), key=lambda line: line["tool"])
    assert [fields(line, "level", "tool", "status", "ms") for line in lines] == [
        {"level": "info", "tool": "teleport_now", "status": "unknown_tool", "ms": 0.0},
        {"level": "info", "tool": "test.slow", "status": "ok", "ms": 12.3}]  # rounded to a tenth
    assert [r["latency_ms"] for r in await audit(app) if r["tool_name"] == "test.slow"] == [12.34]


async def test_a_replay_is_logged_with_its_key(app_factory, fake_llm, tool_dirs, log_lines):
    app = await app_factory(tools=tool_dirs)
    for _ in range(2):
        fake_llm.add(save("x"), Step.text("Saved."))
        await say(app, "save")
    key = (await audit(app))[0]["idempotency_key"]
    (line,) = log_lines("tool.replayed")
    assert fields(line, "level", "tool", "key") == {"level": "info", "tool": "artifact.save", "key": key}


async def test_a_crashing_tool_is_logged_with_its_traceback(app, fake_llm, log_lines):
    async def explode(args, ctx):
        raise ValueError("boom")

    app.registry.register(contract("test.explode"), explode)
    fake_llm.add(Step.tool_calls(("test_explode", {})), Step.text("It broke."))
    await say(app, "explode")
    (line,) = log_lines("tool.crashed")
    assert fields(line, "level", "tool") == {"level": "error", "tool": "test.explode"}
    assert "ValueError: boom" in line["exception"]


async def test_a_result_that_cannot_be_shown_is_logged(app, fake_llm, log_lines):
    async def huge(args, ctx):
        return {"value": 10**5000}

    app.registry.register(contract("test.huge"), huge)
    fake_llm.add(Step.tool_calls(("test_huge", {})), Step.text("Too big."))
    await say(app, "compute")
    (line,) = log_lines("tool.result_unserialisable")
    assert fields(line, "level", "tool", "error") == {"level": "warning", "tool": "test.huge", "error": "ValueError"}
    (found,) = await audit(app)
    shown = found["output"]["result_unavailable"]
    assert shown.startswith("test.huge ran, but its result cannot be shown (Exceeds the limit (4300 digits) for "
                            "integer string conversion") and shown.endswith(").")


async def test_the_reason_a_result_cannot_be_shown_is_cut_to_200_characters(app, fake_llm):
    class Unprintable:
        def __str__(self):
            raise ValueError("x" * 300)

    async def odd(args, ctx):
        return {"value": Unprintable()}

    app.registry.register(contract("test.odd"), odd)
    fake_llm.add(Step.tool_calls(("test_odd", {})), Step.text("Odd."))
    await say(app, "odd")
    (found,) = await audit(app)
    assert found["output"] == {"result_unavailable": f"test.odd ran, but its result cannot be shown ({'x' * 200})."}


async def test_the_model_is_offered_dry_run_only_where_a_tool_supports_it(app_factory, fake_llm, tool_dirs):
    app = await app_factory(tools=tool_dirs)
    fake_llm.add(Step.text("Hi."))
    await say(app, "hi")
    params = {t["function"]["name"]: t["function"]["parameters"] for t in fake_llm.requests[0]["tools"]}
    assert params["files_write"]["properties"]["dry_run"] == {
        "type": "boolean", "description": "true: validate and preview what would happen, without doing it"}
    assert "dry_run" not in params["math_calculate"]["properties"]
    assert "dry_run" not in app.registry.get("files.write").contract.input_schema["properties"]


async def test_without_a_turn_every_visible_tool_is_listed(app_factory, tool_dirs):
    app = await app_factory(tools={**tool_dirs, "overrides": {"web.search": {"enabled": False}}})
    listed = [d["function"]["name"] for d in app.registry.definitions()]
    assert "files_write" in listed and "http_post" in listed and "web_search" not in listed
    assert listed == sorted(listed, key=lambda n: app.registry.contract_name(n))


async def test_tools_are_looked_up_by_either_name(app):
    assert app.registry.get("math.calculate").contract.name == "math.calculate"
    assert app.registry.get("math_calculate").contract.name == "math.calculate"
    assert app.registry.get("math.nothing") is None


async def test_a_call_the_registry_cannot_handle_is_an_error_for_the_model_and_logged(app):
    """A bug of ours (here: arguments that are not text at all) ends neither the turn nor the
    process: the model is told the call could not be handled, and the crash is logged."""
    scope = TurnScope(new_turn_id(), ConversationId("test", "c1"), "u1", source=TurnSource.CHAT)
    with structlog.testing.capture_logs() as logs:
        result = await app.registry.execute(ToolCall("call_x", "math_calculate", None), scope)  # type: ignore[arg-type]
    assert (result.status, result.error) == (
        "error", "internal_error: the call could not be handled (AttributeError).")
    assert [(e["event"], e["tool"]) for e in logs if e["log_level"] == "error"] == [
        ("tool.execute_crashed", "math_calculate")]


async def test_arguments_too_deep_for_the_json_parser_are_invalid(app):
    deep = "[" * 200_000 + "]" * 200_000  # past the parser's own recursion limit
    scope = TurnScope(new_turn_id(), ConversationId("test", "c1"), "u1", source=TurnSource.CHAT)
    await app.store.messages.ensure_conversation("test:c1", "test", "c1")
    await app.store.messages.start_turn(scope.turn_id, "test:c1", source=TurnSource.CHAT, inbound_message_id=None)
    result = await app.registry.execute(ToolCall("call_d", "math_calculate", deep), scope)
    assert (result.status, result.error) == ("invalid_args", "arguments are nested too deeply")
    (found,) = await rows(app, "SELECT status, error FROM tool_executions")
    assert found == {"status": "invalid_args", "error": "arguments are nested too deeply"}
