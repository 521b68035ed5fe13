"""Issue 30, point 8: with the day's token budget used up, ``/approve ID`` still made the
follow-up model call that comments on the approved action. The budget is checked before that
call too: the action runs and its code-written report is sent, without the model's sentence."""

from __future__ import annotations

from pathlib import Path

from tests.fakes.llm_server import Step
from tests.helpers import rows, say


def spending(tokens: int, text: str) -> Step:
    return Step.text(text, prompt_tokens=tokens - 5, completion_tokens=5)


async def test_an_approval_over_the_budget_runs_the_action_and_makes_no_model_call(
        app_factory, fake_llm, channel, notes: Path) -> None:
    app = await app_factory(tools={"files": {"notes_dir": str(notes)}}, llm={"budget": {"daily_tokens": 100}})
    fake_llm.add(Step.tool_calls(("files_write", {"path": "todo.md", "content": "buy milk\n"})),
                 spending(100, "I asked for your approval."))  # past 100 tokens: the day's budget is spent
    await say(app, "write it")
    ((_, request),) = channel.confirmations
    calls = len(fake_llm.requests)
    fake_llm.add(Step.text("Your list now says: buy milk."))
    await say(app, f"/approve {request.id}")
    assert (notes / "todo.md").read_text() == "buy milk\n"  # the approved action still runs
    assert len(fake_llm.requests) == calls  # but no model call comments on it
    assert channel.texts()[-1] == f"Done: files.write ran (request {request.id})."
    assert "Your list now says: buy milk." not in channel.texts()
    (turn,) = await rows(app, "SELECT status, llm_calls FROM turns WHERE source = 'confirmation'")
    assert turn == {"status": "ok", "llm_calls": 0}


async def test_under_the_budget_the_model_still_comments(app_factory, fake_llm, channel, notes: Path) -> None:
    app = await app_factory(tools={"files": {"notes_dir": str(notes)}}, llm={"budget": {"daily_tokens": 1000}})
    fake_llm.add(Step.tool_calls(("files_write", {"path": "todo.md", "content": "buy milk\n"})),
                 spending(50, "I asked for your approval."))
    await say(app, "write it")
    ((_, request),) = channel.confirmations
    fake_llm.add(Step.text("Your list now says: buy milk."))
    await say(app, f"/approve {request.id}")
    assert channel.texts()[-2:] == [f"Done: files.write ran (request {request.id}).", "Your list now says: buy milk."]
