"""Issue 30, point 5: a message-mode reminder is sent as written when it is due, so a made-up
``/artifacts/...`` link on the admin page reached the user, past the grounding every reply gets.
Its content now goes through the same link grounding: the model's ``proactive.create`` (and a
reschedule) is refused with the link named, and a stored reminder is cleaned when it fires.

The admin page is http://127.0.0.1:8765 (the default); one artifact, ``a1b2c3d4e5/report.html``,
was saved earlier. A ``CALL`` of the scripted model stands for a model a page has steered."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from bruce.texts import REMINDER_LINK_REMOVED
from bruce.values import ConversationId, JobRunStatus
from tests.fakes.llm_server import Step
from tests.helpers import rows, say

CID = ConversationId("test", "c1")
REAL = "http://127.0.0.1:8765/artifacts/a1b2c3d4e5/report.html"
FAKE = "http://127.0.0.1:8765/artifacts/0badc0ffee/secret.html"


async def saved_earlier(app) -> None:
    await app.store.artifacts.add(artifact_id="a1b2c3d4e5", conversation_id=None, turn_id=None, title="Report",
                                  filename="report.html", fmt="html", path="a1b2c3d4e5/report.html", size_bytes=10,
                                  sha256="0" * 64)


def tool_answer(fake_llm, index: int = 1) -> dict[str, Any]:
    """What the tool told the model: the last message of the model's ``index``-th request."""
    message = fake_llm.requests[index]["messages"][-1]
    assert message["role"] == "tool"
    return dict(json.loads(message["content"]))


async def tick(app, clock, **delta: float) -> None:
    clock.advance(**delta)
    await app.scheduler.sync()
    await app.scheduler.wait_idle()


async def test_a_reminder_with_a_made_up_artifact_link_is_refused_naming_the_link(app, fake_llm, channel) -> None:
    await saved_earlier(app)
    fake_llm.add(Step.tool_calls(("proactive_create", {"execution_mode": "message", "in_seconds": 3600,
                                                       "content": f"Your report is ready: {FAKE}"})),
                 Step.text("I could not set that reminder."))
    await say(app, "remind me in an hour about the report")
    answer = tool_answer(fake_llm)
    assert answer["ok"] is False and answer["status"] == "invalid_args"
    assert f"content: the link {FAKE!r} points at no saved artifact" in answer["error"]
    assert "artifact_save" in answer["error"]  # what the model can do instead
    assert await rows(app, "SELECT id FROM proactive_jobs") == []
    assert channel.texts() == ["I could not set that reminder."]


async def test_a_reminder_linking_a_saved_artifact_is_created_and_arrives_with_the_link(
        app, fake_llm, channel, clock) -> None:
    await saved_earlier(app)
    fake_llm.add(Step.tool_calls(("proactive_create", {"execution_mode": "message", "in_seconds": 3600,
                                                       "content": f"Your report is ready: {REAL}"})),
                 Step.text("Reminder set."))
    await say(app, "remind me in an hour about the report")
    assert tool_answer(fake_llm)["ok"] is True
    await tick(app, clock, hours=1)
    assert channel.texts()[-1] == f"Your report is ready: {REAL}"


async def stored_reminder(app, content: str) -> str:
    """A reminder whose content reached the table past ``JobBook`` (an earlier version, a direct write)."""
    job = (await app.jobs.create(CID, {"execution_mode": "message", "content": "placeholder", "in_seconds": 60})).job
    assert await app.store.jobs.update(job.id, content=content)
    await asyncio.sleep(0)  # the change reaches the scheduler
    return job.id


async def test_a_stored_reminder_with_a_made_up_link_is_cleaned_when_it_fires(app, channel, clock, fake_llm) -> None:
    await saved_earlier(app)
    job_id = await stored_reminder(app, f"Report: {REAL} and the secret one: {FAKE}")
    await tick(app, clock, seconds=60)
    cleaned = f"Report: {REAL} and the secret one: [link removed]\n\n{REMINDER_LINK_REMOVED}"
    assert channel.texts() == [cleaned]
    assert FAKE not in channel.texts()[0]
    (run,) = await app.store.jobs.runs(job_id)
    assert (run.status, run.delivered_text) == (JobRunStatus.DELIVERED, cleaned)
    assert fake_llm.requests == []  # still no model call for a reminder


async def test_rescheduling_a_stored_reminder_with_a_made_up_link_is_refused(app, fake_llm, channel) -> None:
    job_id = await stored_reminder(app, f"The secret one: {FAKE}")
    fake_llm.add(Step.tool_calls(("proactive_update", {"job_id": job_id, "action": "reschedule", "in_seconds": 7200})),
                 Step.text("I could not move it."))
    await say(app, "move my reminder to two hours from now")
    answer = tool_answer(fake_llm)
    assert answer["status"] == "invalid_args"
    assert f"job {job_id}: in its content, the link {FAKE!r} points at no saved artifact" in answer["error"]
    (job,) = await rows(app, "SELECT description FROM proactive_jobs")
    assert job["description"].startswith("once")  # the schedule it had


async def test_a_crash_after_sending_a_cleaned_reminder_does_not_send_it_again(app_factory, channel, clock) -> None:
    first = await app_factory()
    job_id = await stored_reminder(first, f"The secret one: {FAKE}")
    job = await first.store.jobs.get(job_id)
    await first.scheduler.stop()
    clock.advance(seconds=60)
    # what kill -9 leaves right after the send: the run claimed, the cleaned text stored and sent, the run unmarked
    cleaned = f"The secret one: [link removed]\n\n{REMINDER_LINK_REMOVED}"
    await first.store.jobs.claim_run(job_id, job.next_run_at, lateness_ms=0)
    await first.worker.post(CID, cleaned)
    await first.stop()
    second = await app_factory()
    await second.scheduler.wait_idle()
    assert channel.texts() == [cleaned]
    (run,) = await second.store.jobs.runs(job_id)
    assert (run.status, run.delivered_text) == (JobRunStatus.DELIVERED, cleaned)
