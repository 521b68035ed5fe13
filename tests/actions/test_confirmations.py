"""The confirmation flow end to end: the model asks, code parks it, only the user's explicit
decision (or the owner's, locally, for critical tools) runs it, once."""

from __future__ import annotations

import asyncio
import json
import sys
from datetime import UTC, datetime

import pytest

from bruce.app import build_app
from bruce.contracts import ToolCall
from bruce.turns.scope import TurnScope, new_turn_id
from bruce.values import ConversationId
from tests.fakes.console import ConsoleDriver, request_id
from tests.fakes.llm_server import Step
from tests.helpers import db_rows, incoming, rows, say


@pytest.fixture
async def console_app(make_config, clock, notes, tmp_path):
    config = make_config(tools={"files": {"notes_dir": str(notes)}, "artifacts": {"dir": str(tmp_path / "art")},
                                "approval_poll_s": 0.05})
    driver = ConsoleDriver(clock)
    app = await build_app(config, clock=clock, environ={}, extra_channels=[driver.channel])
    await app.start()
    driver.start()
    yield app, driver
    await driver.close()
    await app.stop()


def write_call(content="buy milk\n", path="todo.md"):
    return Step.tool_calls(("files_write", {"path": path, "content": content}))


async def test_high_risk_tool_waits_for_explicit_approval_in_the_console(console_app, fake_llm, notes):
    app, console = console_app
    fake_llm.add(write_call(), Step.text("I've asked for your approval to write todo.md."))
    out = await console.say("note: buy milk")

    assert "Bruce> I've asked for your approval to write todo.md." in out
    assert "[approval needed]" in out and "files.write" in out and "+buy milk" in out  # the dry-run diff
    assert not (notes / "todo.md").exists()
    cid = request_id(out)
    feedback = [json.loads(m["content"]) for m in fake_llm.requests[1]["messages"] if m["role"] == "tool"][0]
    assert feedback["status"] == "awaiting_confirmation" and "Do not say it happened" in feedback["message"]
    (audit,) = await rows(app, "SELECT status, source FROM tool_executions")
    assert audit == {"status": "awaiting_confirmation", "source": "chat"}

    fake_llm.add(Step.text("Saved your note in todo.md."))
    out = await console.say(f"/approve {cid}")
    assert (notes / "todo.md").read_text() == "buy milk\n"
    assert f"Done: files.write ran (request {cid})." in out and "Saved your note in todo.md." in out
    assert "/approve" not in json.dumps(fake_llm.requests[-1]["messages"][-1])  # follow-up note comes from code
    assert "tools" not in fake_llm.requests[-1]

    out = await console.say(f"/approve {cid}")
    assert "already handled" in out
    executions = await rows(app, "SELECT status, source FROM tool_executions WHERE source='confirmation'")
    assert executions == [{"status": "ok", "source": "confirmation"}]
    (row,) = await rows(app, "SELECT status, decided_via FROM pending_confirmations")
    assert row == {"status": "executed", "decided_via": "chat"}


async def test_plain_yes_is_not_an_approval(console_app, fake_llm, notes):
    app, console = console_app
    fake_llm.add(write_call(), Step.text("Waiting for approval."))
    await console.say("write it")
    fake_llm.add(Step.text("Okay!"))
    await console.say("yes")
    assert not (notes / "todo.md").exists()
    assert [r["status"] for r in await rows(app, "SELECT status FROM pending_confirmations")] == ["pending"]


async def test_deny_runs_nothing(console_app, fake_llm, notes):
    app, console = console_app
    fake_llm.add(write_call(), Step.text("Asked."))
    cid = request_id(await console.say("write it"))
    out = await console.say(f"/deny {cid}")
    assert "Denied: files.write will not run" in out
    assert not (notes / "todo.md").exists()
    assert (await console.say(f"/approve {cid}")).count("already handled") == 1
    assert not (notes / "todo.md").exists()


async def test_only_the_same_user_in_the_same_conversation_can_decide(app_factory, fake_llm, channel, notes):
    app = await app_factory(tools={"files": {"notes_dir": str(notes)}})
    fake_llm.add(write_call(), Step.text("Asked."))
    await say(app, "write it", chat="home", sender="ana")
    ((_, request),) = channel.confirmations
    await say(app, f"/approve {request.id}", chat="work", sender="ana")
    assert "There is no request" in channel.texts("work")[-1]
    await say(app, f"/approve {request.id}", chat="home", sender="bob")
    assert "Only the person who asked" in channel.texts("home")[-1]
    assert not (notes / "todo.md").exists()
    fake_llm.add(Step.text("Written."))
    await say(app, f"/approve {request.id}", chat="home", sender="ana")
    assert (notes / "todo.md").exists()


async def test_an_expired_request_runs_nothing(app_factory, fake_llm, channel, notes, clock):
    app = await app_factory(tools={"files": {"notes_dir": str(notes)}})
    fake_llm.add(write_call(), Step.text("Asked."))
    await say(app, "write it")
    ((_, request),) = channel.confirmations
    clock.advance(minutes=11)
    await say(app, f"/approve {request.id}")
    assert "has expired" in channel.texts()[-1]
    assert not (notes / "todo.md").exists()
    assert [r["status"] for r in await rows(app, "SELECT status FROM pending_confirmations")] == ["expired"]


async def test_bad_command_usage_is_explained(app, fake_llm, channel):
    await say(app, "/approve")
    assert channel.texts() == ["Usage: /approve ID, with the 8-character id shown in the request."]
    assert fake_llm.requests == []


async def test_critical_tool_needs_the_owners_local_approval(make_config, clock, fake_llm, receiver, tmp_path):
    url, received = receiver
    clock.set(datetime.now(UTC))  # the `bruce approve` subprocess reads the real clock
    config = make_config(tools={"http_post": {"allowed_urls": [url]}, "approval_poll_s": 0.05})
    config_path = tmp_path / "config.yml"
    config_path.write_text(json.dumps(config.model_dump(mode="json", exclude={"llm"})))  # JSON is YAML
    driver = ConsoleDriver(clock)
    app = await build_app(config, clock=clock, environ={}, extra_channels=[driver.channel])
    await app.start()
    driver.start()
    try:
        fake_llm.add(Step.tool_calls(("http_post", {"url": url, "json": {"lights": "off"}})),
                     Step.text("I need the owner's approval for that."))
        out = await driver.say("turn off the lights")
        cid = request_id(out)
        assert f"bruce approve {cid}" in out and '"lights": "off"' in out  # the dry-run request preview
        out = await driver.say(f"/approve {cid}")
        assert f"`bruce approve {cid}`" in out and "Nothing has run yet" in out
        assert received == []

        fake_llm.add(Step.text("The lights webhook accepted it."))
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bruce.cli.main", "--config", str(config_path), "approve", cid,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        stdout, stderr = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode == 0, stderr.decode()
        assert "approved: http.post runs within" in stdout.decode()
        for _ in range(600):  # the daemon polls for local approvals every 50 ms here
            if "Done: http.post ran" in driver.stdout.getvalue():
                break
            await asyncio.sleep(0.05)
        assert received == [{"lights": "off"}]
        assert f"Done: http.post ran (request {cid})." in driver.stdout.getvalue()

        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bruce.cli.main", "--config", str(config_path), "approve", cid,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        _, stderr = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode == 1 and "already handled" in stderr.decode()
        await asyncio.sleep(0.2)
        assert received == [{"lights": "off"}]
        (row,) = db_rows(config.storage.path, "SELECT status, decided_via FROM pending_confirmations")
        assert row == {"status": "executed", "decided_via": "cli"}
    finally:
        await driver.close()
        await app.stop()


async def test_unattended_turn_never_runs_a_tool_that_needs_confirmation(app_factory, notes):
    app = await app_factory(tools={"files": {"notes_dir": str(notes)}})
    await app.store.messages.ensure_conversation("test:c1", "test", "c1")
    scope = TurnScope(new_turn_id(), ConversationId("test", "c1"), None, source="proactive", unattended=True)
    await app.store.messages.start_turn(scope.turn_id, "test:c1", source="proactive", inbound_message_id=None)
    assert "files_write" not in json.dumps(app.registry.definitions(scope))  # not even offered
    result = await app.registry.execute(ToolCall("c1", "files_write", json.dumps({"path": "a.md", "content": "x"})), scope)
    assert result.status == "skipped" and "nobody can approve it" in result.error
    assert not (notes / "a.md").exists()
    assert scope.confirmations == [] and await rows(app, "SELECT id FROM pending_confirmations") == []
    (audit,) = await rows(app, "SELECT tool_name, status, source FROM tool_executions")
    assert audit == {"tool_name": "files.write", "status": "skipped", "source": "proactive"}


async def test_dry_run_previews_without_confirmation_or_side_effects(app_factory, fake_llm, notes):
    app = await app_factory(tools={"files": {"notes_dir": str(notes)}})
    (notes / "todo.md").write_text("old line\n")
    fake_llm.add(Step.tool_calls(("files_write", {"path": "todo.md", "content": "new line\n", "dry_run": True})),
                 Step.text("That would replace one line."))
    await say(app, "what would change?")
    feedback = [json.loads(m["content"]) for m in fake_llm.requests[1]["messages"] if m["role"] == "tool"][0]
    assert feedback["ok"] is True and feedback["result"]["dry_run"] is True
    assert "-old line" in feedback["result"]["preview"]["diff"] and "+new line" in feedback["result"]["preview"]["diff"]
    assert (notes / "todo.md").read_text() == "old line\n"
    assert await rows(app, "SELECT id FROM pending_confirmations") == []


async def test_definitions_offer_dry_run_only_where_supported(app, fake_llm):
    await say(app, "hi")
    params = {t["function"]["name"]: t["function"]["parameters"] for t in fake_llm.requests[0]["tools"]}
    assert "dry_run" in params["files_write"]["properties"]
    assert "dry_run" not in params["math_calculate"]["properties"]


async def test_config_can_disable_a_tool_or_require_confirmation(app_factory, fake_llm, channel):
    app = await app_factory(tools={"overrides": {"web.search": {"enabled": False},
                                                 "math.calculate": {"require_confirmation": True}}})
    fake_llm.add(Step.tool_calls(("web_search", {"query": "x"}), ("math_calculate", {"expression": "1+1"})),
                 Step.text("ok"))
    await say(app, "search and add")
    offered = {t["function"]["name"] for t in fake_llm.requests[0]["tools"]}
    assert "web_search" not in offered and "math_calculate" in offered
    statuses = {r["tool_name"]: r["status"] for r in await rows(app, "SELECT tool_name, status FROM tool_executions")}
    assert statuses == {"web.search": "denied", "math.calculate": "awaiting_confirmation"}


async def test_config_cannot_loosen_a_critical_tool(make_config):
    from bruce.actions.policy import effective_policy
    from tools.http_post import http_post_tool

    contract, _ = http_post_tool(allowed_urls=[])
    config = make_config(tools={"overrides": {"http.post": {"enabled": True, "require_confirmation": False}}})
    policy = effective_policy(contract, config.tools.overrides["http.post"])
    assert policy.needs_confirmation and policy.step_up


async def test_unknown_tool_in_overrides_fails_at_start(make_config, clock):
    from bruce.errors import ConfigError

    with pytest.raises(ConfigError, match="unknown tools: web.serch"):
        await build_app(make_config(tools={"overrides": {"web.serch": {"enabled": False}}}), clock=clock, environ={})


async def test_identical_artifact_saves_create_one_artifact(app_factory, fake_llm, channel, tmp_path):
    app = await app_factory(tools={"artifacts": {"dir": str(tmp_path / "art")}})
    save = Step.tool_calls(("artifact_save", {"filename": "report.html", "content": "<h1>Hi</h1>"}))
    fake_llm.add(save, Step.text("saved"), save, Step.text("saved again"))
    await say(app, "save the report")
    await say(app, "save it again")
    assert len(await rows(app, "SELECT id FROM artifacts")) == 1
    outputs = [json.loads(m["content"]) for r in (fake_llm.requests[1], fake_llm.requests[3])
               for m in r["messages"] if m["role"] == "tool"]
    assert outputs[0]["result"]["url"] == outputs[-1]["result"]["url"]
    keys = {r["idempotency_key"] for r in await rows(app, "SELECT idempotency_key FROM tool_executions")}
    assert len(keys) == 1 and None not in keys


async def test_concurrent_identical_saves_in_one_turn_create_one_artifact(app_factory, tmp_path):
    app = await app_factory(tools={"artifacts": {"dir": str(tmp_path / "art")}})
    await app.store.messages.ensure_conversation("test:c1", "test", "c1")
    scope = TurnScope(new_turn_id(), ConversationId("test", "c1"), "u1")
    await app.store.messages.start_turn(scope.turn_id, "test:c1", source="chat", inbound_message_id=None)
    args = json.dumps({"filename": "a.md", "content": "# A", "format": "markdown"})
    results = await asyncio.gather(*(app.registry.execute(ToolCall(f"c{i}", "artifact_save", args), scope)
                                     for i in range(3)))
    assert len({r.output["artifact_id"] for r in results}) == 1
    assert len(await rows(app, "SELECT id FROM artifacts")) == 1
    assert len(list((tmp_path / "art").iterdir())) == 1


async def test_approval_reaches_the_user_even_if_the_model_fails_after_asking(app_factory, fake_llm, channel, notes):
    app = await app_factory(tools={"files": {"notes_dir": str(notes)}}, llm={"num_retries": 0})
    fake_llm.add(write_call(), Step.error(500))
    await say(app, "write it")
    assert len(channel.confirmations) == 1
    fake_llm.add(Step.error(500))
    await say(app, f"/approve {channel.confirmations[0][1].id}")
    assert (notes / "todo.md").exists()
    assert channel.texts()[-1].startswith("Done: files.write ran")


async def test_follow_up_cannot_invent_a_link(app_factory, fake_llm, channel, notes):
    app = await app_factory(tools={"files": {"notes_dir": str(notes)}})
    fake_llm.add(write_call(), Step.text("Asked."))
    await say(app, "write it")
    fake_llm.add(Step.text("Written, view it at http://127.0.0.1:8765/artifacts/zz/todo.html"))
    await say(app, f"/approve {channel.confirmations[0][1].id}")
    report, follow_up = channel.texts()[-2:]
    assert report.startswith("Done: files.write ran") and "/artifacts/zz" not in follow_up


async def test_an_action_interrupted_by_a_restart_is_reported(make_config, clock, channel, notes):
    from bruce.actions.confirmations import Confirmations
    from bruce.store import Store
    from tools.files import files_write_tool

    config = make_config(tools={"files": {"notes_dir": str(notes)}})
    store = await Store.open(config.storage.path, clock)
    await store.messages.ensure_conversation("test:c1", "test", "c1")
    contract, _ = files_write_tool(notes_dir=notes)
    request = await Confirmations(store, clock).request(
        contract, {"path": "a.md", "content": "x"}, conversation_id="test:c1", user_id="u1", turn_id=None,
        call_id="c1", preview=None, step_up=False)
    assert await store.confirmations.move(request.id, from_status="pending", to_status="running", via="chat")
    await store.close()  # the process dies while the tool runs

    app = await build_app(config, clock=clock, environ={}, extra_channels=[channel])
    try:
        await app.start()
        (notice,) = channel.texts()
        assert request.id in notice and "may or may not have completed" in notice
        (row,) = await rows(app, "SELECT status FROM pending_confirmations")
        assert row["status"] == "failed"
    finally:
        await app.stop()


async def test_a_local_approval_that_expired_while_the_daemon_was_down_is_told(make_config, clock, channel, notes):
    from bruce.actions.confirmations import Confirmations
    from bruce.store import Store
    from tools.files import files_write_tool

    config = make_config(tools={"files": {"notes_dir": str(notes)}, "approval_poll_s": 0.05})
    store = await Store.open(config.storage.path, clock)
    await store.messages.ensure_conversation("test:c1", "test", "c1")
    contract, _ = files_write_tool(notes_dir=notes)
    book = Confirmations(store, clock, ttl_s=config.tools.confirmation_ttl_s)
    request = await book.request(contract, {"path": "a.md", "content": "x"}, conversation_id="test:c1",
                                 user_id="u1", turn_id=None, call_id="c1", preview=None, step_up=True)
    await book.decide_locally(request.id, approve=True)  # `bruce approve` while no daemon runs
    await store.close()
    clock.advance(seconds=config.tools.confirmation_ttl_s + 60)

    app = await build_app(config, clock=clock, environ={}, extra_channels=[channel])
    try:
        await app.start()
        for _ in range(500):
            if channel.texts():
                break
            await asyncio.sleep(0.01)
        assert channel.texts() == [
            f"Your approval of request {request.id} (files.write) was not picked up before the request expired, "
            "so nothing was run. Ask again if you still want it."]
        (row,) = await rows(app, "SELECT status FROM pending_confirmations")
        assert row["status"] == "expired"
        assert not (notes / "a.md").exists()
    finally:
        await app.stop()


async def test_a_local_approval_not_picked_up_in_time_expires(make_config, clock, notes):
    from bruce.actions.confirmations import Confirmations
    from bruce.store import Store
    from bruce.values import DecisionOutcome as Outcome
    from tools.files import files_write_tool

    store = await Store.open(make_config().storage.path, clock)
    try:
        await store.messages.ensure_conversation("test:c1", "test", "c1")
        book = Confirmations(store, clock, ttl_s=600)
        contract, _ = files_write_tool(notes_dir=notes)
        request = await book.request(contract, {"path": "a.md", "content": "x"}, conversation_id="test:c1",
                                     user_id="u1", turn_id=None, call_id=None, preview=None, step_up=True)
        assert (await book.decide_locally(request.id, approve=True)).outcome is Outcome.QUEUED
        assert await book.claim_queued(["telegram"]) == []  # another process's channel: left alone
        assert (await store.confirmations.get(request.id)).status == "approved"
        clock.advance(minutes=11)  # the daemon was down all this time
        assert await book.claim_queued(["test"]) == []
        assert (await store.confirmations.get(request.id)).status == "expired"
        assert (await book.decide_locally(request.id, approve=True)).outcome is Outcome.EXPIRED
    finally:
        await store.close()


async def test_dry_run_is_no_way_around_confirmation_for_a_tool_without_previews(app_factory, fake_llm, channel):
    from bruce.contracts import Risk
    from tests.actions.test_registry import contract

    wiped = []

    async def wipe(args, ctx):
        wiped.append(args)
        return {"wiped": True}

    loose = {"type": "object", "properties": {"target": {"type": "string"}}}  # extra keys allowed
    app = await app_factory()
    app.registry.register(contract("disk.wipe", Risk.HIGH, input_schema=loose, side_effects="erases a disk"), wipe)
    fake_llm.add(Step.tool_calls(("disk_wipe", {"target": "/", "dry_run": True})), Step.text("Previewed."))
    await say(app, "what would wiping do?")
    assert wiped == []
    (audit,) = await rows(app, "SELECT status, error FROM tool_executions")
    assert audit["status"] == "invalid_args" and "has no dry run" in audit["error"]
    assert await rows(app, "SELECT id FROM pending_confirmations") == []


async def test_approval_of_a_stale_preview_runs_nothing(app_factory, fake_llm, channel, notes):
    app = await app_factory(tools={"files": {"notes_dir": str(notes)}})
    fake_llm.add(write_call(), Step.text("Asked."))
    await say(app, "write it")
    (notes / "todo.md").write_text("written by hand meanwhile\n")  # the preview showed a new file
    fake_llm.add(Step.text("It changed."))
    await say(app, f"/approve {channel.confirmations[0][1].id}")
    assert (notes / "todo.md").read_text() == "written by hand meanwhile\n"
    report = channel.texts()[-2]
    assert "did not succeed" in report and "conflict" in report
    (row,) = await rows(app, "SELECT status FROM pending_confirmations")
    assert row["status"] == "failed"


async def test_after_the_idempotency_window_the_same_save_acts_again(app_factory, fake_llm, clock, tmp_path):
    app = await app_factory(tools={"artifacts": {"dir": str(tmp_path / "art")}})
    save = Step.tool_calls(("artifact_save", {"filename": "report.html", "content": "<h1>Hi</h1>"}))
    fake_llm.add(save, Step.text("saved"))
    await say(app, "save the report")
    clock.advance(minutes=61)
    fake_llm.add(save, Step.text("saved again"))
    await say(app, "save it again")
    assert len(await rows(app, "SELECT id FROM artifacts")) == 2


async def test_a_chat_approval_and_a_local_decision_racing_have_one_winner(make_config, clock, notes):
    from bruce.actions.confirmations import Confirmations
    from bruce.store import Store
    from bruce.values import DecisionOutcome as Outcome
    from tools.files import files_write_tool

    store = await Store.open(make_config().storage.path, clock)
    try:
        await store.messages.ensure_conversation("test:c1", "test", "c1")
        book = Confirmations(store, clock)
        contract, _ = files_write_tool(notes_dir=notes)
        request = await book.request(contract, {"path": "a.md", "content": "x"}, conversation_id="test:c1",
                                     user_id="u1", turn_id=None, call_id=None, preview=None, step_up=False)
        decisions = await asyncio.gather(
            book.decide_in_chat(request.id, conversation_id="test:c1", user_id="u1", approve=True),
            book.decide_locally(request.id, approve=False),
            book.decide_in_chat(request.id, conversation_id="test:c1", user_id="u1", approve=True),
        )
        outcomes = sorted(d.outcome.value for d in decisions)
        winners = [o for o in outcomes if o in (Outcome.APPROVED, Outcome.DENIED)]
        assert len(winners) == 1 and outcomes.count(Outcome.ALREADY_DECIDED) == 2
    finally:
        await store.close()


async def test_the_outcome_is_reported_before_the_model_comments_on_it(make_config, app_factory, fake_llm, channel,
                                                                     notes):
    config = make_config(tools={"files": {"notes_dir": str(notes)}}, assistant={"shutdown_timeout_s": 0.2})
    app = await app_factory(config)
    fake_llm.add(write_call(), Step.text("Asked."))
    await say(app, "write it")
    fake_llm.add(Step.delay(30, Step.text("too late")))  # the follow-up model call hangs
    await app.worker.deliver(incoming(app, f"/approve {channel.confirmations[0][1].id}"))
    for _ in range(500):
        if any(t.startswith("Done: files.write ran") for t in channel.texts()):
            break
        await asyncio.sleep(0.02)
    await app.stop()  # cuts off the follow-up
    assert (notes / "todo.md").exists()
    assert channel.texts()[-1].startswith("Done: files.write ran")
    statuses = [r["status"] for r in db_rows(config.storage.path, "SELECT status FROM messages WHERE direction='in'")]
    assert statuses == ["done", "done"]


async def test_a_dry_run_before_a_failure_is_not_reported_as_done(app_factory, fake_llm, channel, notes):
    app = await app_factory(tools={"files": {"notes_dir": str(notes)}}, llm={"num_retries": 0})
    fake_llm.add(Step.tool_calls(("files_write", {"path": "a.md", "content": "x", "dry_run": True})), Step.error(500))
    await say(app, "what would it do?")
    assert channel.texts()[-1].endswith("Nothing was done.")


async def test_a_crash_after_tools_acted_is_reported_not_redone(make_config, app_factory, clock, channel, fake_llm):
    from bruce.records import ToolExecutionRecord
    from bruce.store import Store

    config = make_config()
    store = await Store.open(config.storage.path, clock)
    await store.messages.ensure_conversation("test:c1", "test", "c1")
    message_id, _ = await store.messages.add_inbound("test:c1", sender_id="u1", text="save and post it",
                                            platform_message_id=None)
    await store.messages.start_turn("t-dead", "test:c1", source="chat", inbound_message_id=message_id)
    for status, output in (("ok", {"url": "http://127.0.0.1:8765/artifacts/a/r.html"}),
                           ("awaiting_confirmation", {"confirmation_id": "abcd1234"})):
        await store.audit.record_tool_execution(ToolExecutionRecord(
            turn_id="t-dead", conversation_id="test:c1", call_id="c", tool_name="artifact.save", risk="medium",
            input={}, output=output, status=status, error=None, latency_ms=1, source="chat"))
    await store.close()  # the process dies mid-turn

    app = await app_factory(config)
    (notice,) = channel.texts()
    assert "I was interrupted while answering" in notice and "These actions completed: artifact.save." in notice
    assert "/approve abcd1234" in notice
    assert fake_llm.requests == []
    (turn,) = await rows(app, "SELECT status FROM turns")
    assert turn["status"] == "interrupted"
    (inbound,) = await rows(app, "SELECT status FROM messages WHERE direction='in'")
    assert inbound["status"] == "failed"


async def test_a_same_length_edit_deep_in_a_large_note_still_invalidates_the_approval(app_factory, fake_llm,
                                                                                      channel, notes):
    app = await app_factory(tools={"files": {"notes_dir": str(notes)}})
    big = "".join(f"line {i:05d}\n" for i in range(2000))
    (notes / "todo.md").write_text(big)
    fake_llm.add(Step.tool_calls(("files_write", {"path": "todo.md", "content": "one more\n", "mode": "append"})),
                 Step.text("Asked."))
    await say(app, "add a line to my notes")
    (notes / "todo.md").write_text(big.replace("line 00005", "LINE 00005"))  # same length, far from the diff
    fake_llm.add(Step.text("ok"))
    await say(app, f"/approve {channel.confirmations[0][1].id}")
    assert "one more" not in (notes / "todo.md").read_text()
    assert "conflict" in channel.texts()[-2]
