"""The turn runner: proactive turns (filtered tools, never one that needs approval, failures told),
and the model calls a turn counts."""

from __future__ import annotations

from bruce.contracts import Risk
from bruce.values import ConversationId
from tests.actions.test_registry import contract, nothing
from tests.fakes.llm_server import Step
from tests.helpers import rows, say


def offered(request) -> set[str]:
    return {t["function"]["name"] for t in request.get("tools") or []}


async def test_a_proactive_turn_sees_only_the_filtered_tools_and_answers_through_the_outbox(app, fake_llm, channel):
    fake_llm.add(Step.tool_calls(("clock_now", {})), Step.text("Good morning! It is Wednesday."))
    outcome = await app.worker.run_proactive(ConversationId("test", "c9"), "Give me a morning briefing.", job_id="job-1",
                                             tools=lambda contract: contract.name.startswith("clock."))
    assert outcome.ok and outcome.text == "Good morning! It is Wednesday."
    assert channel.sent == [("c9", "Good morning! It is Wednesday.")]
    first = fake_llm.requests[0]
    assert offered(first) == {"clock_now"}
    assert "morning briefing" in first["messages"][-1]["content"]
    (turn,) = await rows(app, "SELECT id, source, status, job_id, inbound_message_id FROM turns")
    assert turn == {"id": outcome.turn_id, "source": "proactive", "status": "ok", "job_id": "job-1",
                    "inbound_message_id": None}
    (reply,) = await rows(app, "SELECT text, status, kind, turn_id FROM messages WHERE direction = 'out'")
    assert reply == {"text": outcome.text, "status": "sent", "kind": "chat", "turn_id": outcome.turn_id}


async def test_a_proactive_turn_never_runs_a_tool_that_needs_approval(app_factory, fake_llm, channel, notes):
    app = await app_factory(tools={"files": {"notes_dir": str(notes)}})
    # the model calls files_write although it was not offered: code skips it and says so
    fake_llm.add(Step.tool_calls(("files_write", {"path": "log.md", "content": "x"})), Step.text("I logged it."))
    outcome = await app.worker.run_proactive(ConversationId("test", "c1"), "Log the day.")
    assert "files_write" not in offered(fake_llm.requests[0])
    assert not (notes / "log.md").exists()
    assert await rows(app, "SELECT id FROM pending_confirmations") == [] and channel.confirmations == []
    assert outcome.text.startswith("I logged it.") and "(Skipped: files.write" in outcome.text
    assert channel.texts() == [outcome.text]
    (audit,) = await rows(app, "SELECT tool_name, status, source FROM tool_executions")
    assert audit == {"tool_name": "files.write", "status": "skipped", "source": "proactive"}


async def test_a_failed_proactive_turn_tells_the_user(app_factory, fake_llm, channel):
    app = await app_factory(llm={"num_retries": 0})
    fake_llm.add(Step.error(500))
    outcome = await app.worker.run_proactive(ConversationId("test", "c1"), "The briefing.")
    assert not outcome.ok
    assert channel.texts() == [outcome.text]
    assert outcome.text.startswith("I could not complete a scheduled task.") and "Nothing was done." in outcome.text


async def test_a_proactive_turn_cannot_dry_run_a_tool_that_needs_approval(app_factory, fake_llm, channel, notes):
    app = await app_factory(tools={"files": {"notes_dir": str(notes)}})
    (notes / "secret.md").write_text("do not leak\n")
    fake_llm.add(Step.tool_calls(("files_write", {"path": "secret.md", "content": "x", "dry_run": True})),
                 Step.text("Checked."))
    await app.worker.run_proactive(ConversationId("test", "c1"), "Look at my notes.")
    tool_message = [m for m in fake_llm.requests[1]["messages"] if m["role"] == "tool"][0]
    assert "do not leak" not in tool_message["content"] and '"skipped"' in tool_message["content"]
    (audit,) = await rows(app, "SELECT status FROM tool_executions")
    assert audit["status"] == "skipped"


async def test_a_turn_counts_every_model_call_it_made(app_factory, fake_llm, channel):
    app = await app_factory(llm={"fallbacks": ["openai/backup"], "num_retries": 1})
    fake_llm.add(Step.error(500), Step.error(500), model="primary")
    fake_llm.add(Step.text("from the backup"), model="backup")
    await say(app, "hi")
    (turn,) = await rows(app, "SELECT id, llm_calls FROM turns WHERE source = 'chat'")
    calls = await rows(app, "SELECT COUNT(*) AS n FROM llm_calls WHERE turn_id = ?", turn["id"])
    assert turn["llm_calls"] == calls[0]["n"] == 3


async def test_a_tainted_run_stops_at_the_first_call_needing_a_yes_and_sends_nothing(app, fake_llm, channel):
    """A run of an untrusted job: its calls run in order until one needs a yes; that one and the
    ones after it are not made, no further model call, no answer sent; the outcome names it."""
    app.registry.register(contract("test.risky", Risk.HIGH, side_effects="changes a thing"), nothing)
    fake_llm.add(Step.tool_calls(("math_calculate", {"expression": "1+1"}), ("test_risky", {}), ("clock_now", {})),
                 Step.text("Done everything."))
    outcome = await app.worker.run_proactive(ConversationId("test", "c1"), "Do it all.", job_id="j1", tainted=True)
    assert outcome.held is not None and outcome.held.tool == "test.risky" and outcome.held.arguments == "{}"
    assert not outcome.ok and outcome.text == ""
    assert channel.sent == [] and len(fake_llm.requests) == 1
    made = [(r["tool_name"], r["status"]) for r in await rows(app, "SELECT tool_name, status FROM tool_executions"
                                                                   " ORDER BY id")]
    assert made == [("math.calculate", "ok"), ("test.risky", "skipped")]
    (turn,) = await rows(app, "SELECT status, error FROM turns")
    assert turn["status"] == "failed" and turn["error"].startswith("held: test.risky")


async def test_an_untainted_run_goes_on_past_a_skipped_call_as_before(app, fake_llm, channel):
    app.registry.register(contract("test.risky", Risk.HIGH, side_effects="changes a thing"), nothing)
    fake_llm.add(Step.tool_calls(("test_risky", {}), ("clock_now", {})), Step.text("Part of it is done."))
    outcome = await app.worker.run_proactive(ConversationId("test", "c1"), "Do it all.", job_id="j1")
    assert outcome.ok and outcome.held is None
    assert channel.texts()[0].startswith("Part of it is done.")
