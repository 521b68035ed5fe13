"""bruce.actions.approvals: what runs once the user said yes, and what they are told. The first
line is written by code and says whether the action succeeded; one short model call without
tools, told the outcome by the system, may add a sentence; the run is its own turn. (Approving,
denying and the guarantees around them: tests/actions/test_confirmations.py.)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.fakes.channel import RecordingChannel
from tests.fakes.llm_server import FakeLLMServer, Step
from tests.helpers import rows, say


def write_call(path: str = "todo.md", content: str = "buy milk\n") -> Step:
    return Step.tool_calls(("files_write", {"path": path, "content": content}))


async def ask_and_approve(app: Any, fake_llm: FakeLLMServer, channel: RecordingChannel, follow_up: Step) -> str:
    fake_llm.add(write_call(), Step.text("I asked for your approval."))
    await say(app, "write it")
    ((_, request),) = channel.confirmations
    fake_llm.add(follow_up)
    await say(app, f"/approve {request.id}")
    return request.id


async def test_the_report_comes_first_then_the_models_sentence(app_factory, fake_llm, channel, notes: Path) -> None:
    app = await app_factory(tools={"files": {"notes_dir": str(notes)}})
    request_id = await ask_and_approve(app, fake_llm, channel, Step.text("Your list now says: buy milk."))
    assert (notes / "todo.md").read_text() == "buy milk\n"
    assert channel.texts()[-2:] == [f"Done: files.write ran (request {request_id}).", "Your list now says: buy milk."]


async def test_the_follow_up_call_has_no_tools_and_hears_the_outcome_from_the_system(
        app_factory, fake_llm, channel, notes: Path) -> None:
    app = await app_factory(tools={"files": {"notes_dir": str(notes)}})
    request_id = await ask_and_approve(app, fake_llm, channel, Step.text("Done."))
    follow_up = fake_llm.requests[-1]
    assert "tools" not in follow_up
    note = follow_up["messages"][-1]
    assert note["role"] == "system" and "from the system (not from the user)" in note["content"]
    outcome = json.loads(note["content"].split("Outcome, from the system (not from the user): ", 1)[1]
                         .split(". Tell the user", 1)[0])
    assert outcome["request"] == request_id and outcome["tool"] == "files.write" and outcome["ok"] is True


async def test_the_run_is_a_turn_of_its_own_from_the_confirmation(app_factory, fake_llm, channel, notes: Path) -> None:
    app = await app_factory(tools={"files": {"notes_dir": str(notes)}})
    await ask_and_approve(app, fake_llm, channel, Step.text("Done."))
    (turn,) = await rows(app, "SELECT status, tool_calls, llm_calls, error FROM turns WHERE source = 'confirmation'")
    assert turn == {"status": "ok", "tool_calls": 1, "llm_calls": 1, "error": None}
    (run,) = await rows(app, "SELECT tool_name, status FROM tool_executions WHERE source = 'confirmation'")
    assert run == {"tool_name": "files.write", "status": "ok"}


async def test_a_failed_action_is_reported_as_failed_and_its_turn_too(app_factory, fake_llm, channel,
                                                                      notes: Path) -> None:
    app = await app_factory(tools={"files": {"notes_dir": str(notes)}})
    fake_llm.add(write_call(), Step.text("I asked for your approval."))
    await say(app, "write it")
    ((_, request),) = channel.confirmations
    (notes / "todo.md").mkdir()  # the file's place is taken meanwhile: the write fails
    fake_llm.add(Step.text("It did not work."))
    await say(app, f"/approve {request.id}")
    report, sentence = channel.texts()[-2:]
    assert report.startswith(f"files.write did not succeed (request {request.id}): ")
    assert sentence == "It did not work."
    (turn,) = await rows(app, "SELECT status, error FROM turns WHERE source = 'confirmation'")
    assert turn["status"] == "failed" and turn["error"]


async def test_with_the_model_down_the_report_alone_is_sent(app_factory, fake_llm, channel, notes: Path) -> None:
    app = await app_factory(tools={"files": {"notes_dir": str(notes)}}, llm={"num_retries": 0})
    request_id = await ask_and_approve(app, fake_llm, channel, Step.error(500))
    assert channel.texts()[-1] == f"Done: files.write ran (request {request_id})."
    (turn,) = await rows(app, "SELECT status FROM turns WHERE source = 'confirmation'")
    assert turn["status"] == "ok"  # the action succeeded; only the comment is missing
