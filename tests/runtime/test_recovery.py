"""Recovery after kill -9 in the middle of a side effect (issue 31, point 1).

The kill is simulated at an exact step: the test's tool (or a wrapper around artifact.save)
does its work and then raises ``Killed``, a BaseException nothing in Bruce catches, so the
turn dies where a kill would leave it: the handler's effect is done, its ``tool_executions``
row never written, the turn ``running`` and the message ``pending``. The app is then stopped
(the dead turn is not touched by it) and a new one started on the same database. The last test
fails the database instead, right after the tool acted: the worker's retry follows the same rule."""

from __future__ import annotations

from typing import Any

from bruce.values import ConversationId, TurnSource
from tests.actions.test_registry import contract
from tests.fakes.llm_server import Step
from tests.helpers import incoming, rows


class Killed(BaseException):
    """kill -9 at this very step: no handler, no cleanup, no audit row."""


def killed_after(handler: Any) -> Any:
    """``handler``, then the process dies before anything else happens."""
    async def run(args: dict[str, Any], ctx: Any) -> Any:
        await handler(args, ctx)
        raise Killed

    return run


async def crash_on(app: Any, text: str) -> None:
    """Deliver ``text`` and wait for its turn to die of ``Killed``, then stop the process."""
    handle = await app.worker.deliver(incoming(app, text))
    assert handle is not None
    try:
        await handle
    except Killed:
        pass
    else:
        raise AssertionError("the turn was expected to be killed")
    await app.stop()


async def test_an_artifact_save_cut_off_before_its_audit_row_is_not_saved_twice(
        make_config, app_factory, channel, fake_llm, tmp_path):
    folder = tmp_path / "art"
    config = make_config(tools={"artifacts": {"dir": str(folder)}})
    save = Step.tool_calls(("artifact_save", {"filename": "plan.html", "content": "<h1>Plan</h1>"}))
    app = await app_factory(config)
    tool = app.registry.get("artifact.save")
    assert tool is not None
    app.registry.register(tool.contract, killed_after(tool.handler), replace=True)
    fake_llm.add(save)
    await crash_on(app, "save my plan")
    (first,) = await rows(app, "SELECT id FROM artifacts")
    assert await rows(app, "SELECT id FROM tool_executions") == []  # the kill came before the audit row

    fake_llm.add(save, Step.text("Saved: see the link."))  # answered again: the model saves the same again
    app = await app_factory(config)
    await app.worker.wait_idle()
    assert await rows(app, "SELECT id FROM artifacts") == [first]
    assert [p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()] == [f"{first['id']}/plan.html"]
    assert channel.texts() == ["Saved: see the link."]
    (execution,) = await rows(app, "SELECT status, output FROM tool_executions")
    assert execution["status"] == "ok" and first["id"] in execution["output"]
    starts = await rows(app, "SELECT status FROM tool_starts ORDER BY id")
    assert starts == [{"status": "interrupted"}, {"status": "finished"}]


def sender(calls: list[dict[str, Any]]) -> Any:
    async def send(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
        calls.append(args)
        return {"sent": True}

    return send


SEND = contract("test.send", side_effects="sends one message to the team chat; repeating it sends it again",
                input_schema={"type": "object", "properties": {"to": {"type": "string"}, "text": {"type": "string"}},
                              "additionalProperties": False})


async def test_a_non_idempotent_call_cut_off_is_reported_as_unknown_and_never_run_again(
        make_config, app_factory, channel, fake_llm):
    config = make_config()
    calls: list[dict[str, Any]] = []
    app = await app_factory(config)
    app.registry.register(SEND, killed_after(sender(calls)))
    fake_llm.add(Step.tool_calls(("test_send", {"to": "team", "text": "the deploy is done"})))
    await crash_on(app, "tell the team the deploy is done")
    assert len(calls) == 1 and len(fake_llm.requests) == 1

    fake_llm.add(Step.tool_calls(("test_send", {"to": "team", "text": "the deploy is done"})))  # if asked again
    app = await app_factory(config)
    app.registry.register(SEND, sender(calls))
    await app.worker.wait_idle()
    (notice,) = channel.texts()
    assert "may or may not have happened" in notice and "test.send" in notice
    assert 'to="team"' in notice and "the deploy is done" in notice
    assert len(calls) == 1 and len(fake_llm.requests) == 1  # not run again, the message not answered again
    (inbound,) = await rows(app, "SELECT status FROM messages WHERE direction='in'")
    assert inbound["status"] == "failed"
    assert await rows(app, "SELECT status FROM tool_starts") == [{"status": "interrupted"}]

    await app.stop()  # told once: a later start says nothing more
    channel.sent.clear()
    app = await app_factory(config)
    await app.worker.wait_idle()
    assert channel.texts() == []


async def test_a_scheduled_turns_call_cut_off_is_reported_in_its_conversation(
        make_config, app_factory, channel, clock, fake_llm):
    from bruce.records import ToolStart
    from tests.runtime.test_worker import previous_life

    config = make_config()
    async with previous_life(config, clock) as store:  # a reminder's agent turn died while test.send ran
        await store.messages.start_turn("t-job", "test:c1", source=TurnSource.PROACTIVE, inbound_message_id=None)
        await store.audit.record_start(ToolStart(
            turn_id="t-job", conversation_id=str(ConversationId("test", "c1")), call_id="call-1", tool_name="test.send",
            summary='to="team", text="standup in 5"', source=TurnSource.PROACTIVE, idempotent=False))

    app = await app_factory(config)
    await app.worker.wait_idle()
    (notice,) = channel.texts()
    assert "may or may not have happened" in notice and 'test.send (to="team", text="standup in 5")' in notice
    assert fake_llm.requests == []
    assert await rows(app, "SELECT status FROM tool_starts") == [{"status": "interrupted"}]


async def test_a_database_failure_after_a_non_idempotent_call_acted_does_not_run_it_again(
        app_factory, channel, clock, fake_llm):
    import sqlite3

    app = await app_factory(storage={"busy_timeout_ms": 50})
    locker = sqlite3.connect(app.config.storage.path, check_same_thread=False, isolation_level=None)
    calls: list[dict[str, Any]] = []

    async def send_then_lock(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
        calls.append(args)  # sent; then a backup locks the database until the worker's first backoff
        locker.execute("BEGIN EXCLUSIVE")
        clock.on_sleep.append(lambda: locker.execute("ROLLBACK"))
        return {"sent": True}

    app.registry.register(SEND, send_then_lock)
    send = Step.tool_calls(("test_send", {"to": "team", "text": "lunch?"}))
    fake_llm.add(send, send, Step.text("Sent."))  # were it answered again, the model would send again
    handle = await app.worker.deliver(incoming(app, "ask the team about lunch"))
    assert handle is not None
    await handle
    locker.close()
    assert len(calls) == 1 and len(fake_llm.requests) == 1
    (notice,) = channel.texts()
    assert "may or may not have happened" in notice and 'test.send (to="team", text="lunch?")' in notice
    (inbound,) = await rows(app, "SELECT status FROM messages WHERE direction='in'")
    assert inbound["status"] == "failed"


async def test_an_agent_jobs_run_cut_off_in_a_call_is_reported_and_not_run_again(app_factory, channel, clock, fake_llm):
    from bruce.records import ToolStart
    from bruce.values import JobRunStatus

    first = await app_factory()
    job = (await first.jobs.create(ConversationId("test", "c1"), {"execution_mode": "agent", "in_seconds": 60,
                                                                  "content": "Tell the team lunch is at noon."})).job
    await first.scheduler.stop()
    clock.advance(seconds=60)
    # what kill -9 leaves in the middle of the run's test.send: the run claimed, its turn running, the call started
    await first.store.jobs.claim_run(job.id, job.next_run_at, lateness_ms=0)
    await first.store.messages.start_turn("t-job", "test:c1", source=TurnSource.PROACTIVE, inbound_message_id=None,
                                          job_id=job.id)
    await first.store.audit.record_start(ToolStart(
        turn_id="t-job", conversation_id="test:c1", call_id="call-1", tool_name="test.send",
        summary='to="team", text="lunch at noon"', source=TurnSource.PROACTIVE, idempotent=False))
    await first.stop()

    fake_llm.add(Step.tool_calls(("test_send", {"to": "team", "text": "lunch at noon"})))  # were it run again
    second = await app_factory()
    await second.scheduler.wait_idle()
    await second.worker.wait_idle()
    assert fake_llm.requests == []
    (run,) = await second.store.jobs.runs(job.id)
    assert run.status is JobRunStatus.INTERRUPTED
    (notice,) = channel.texts()
    assert "may or may not have happened" in notice and "test.send" in notice
