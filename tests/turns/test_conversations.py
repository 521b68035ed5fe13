"""The turns API beyond chat messages: proactive turns, posts that need no model, decisions
from buttons, live progress, and channels built from config."""

from __future__ import annotations

import asyncio
import json
from contextlib import asynccontextmanager

import pytest

from bruce.app import CHANNEL_FACTORIES, build_app
from bruce.turns.progress import TextDelta, Thinking, ToolFinished, ToolStarted
from bruce.values import DecisionOutcome
from tests.fakes.channel import ProgressRecordingChannel, RecordingChannel
from tests.fakes.llm_server import Step
from tests.helpers import incoming, rows, say


def offered(request) -> set[str]:
    return {t["function"]["name"] for t in request.get("tools") or []}


# proactive turns ----------------------------------------------------------------------------

async def test_a_proactive_turn_sees_only_the_filtered_tools_and_answers_through_the_outbox(app, fake_llm, channel):
    fake_llm.add(Step.tool_calls(("clock_now", {})), Step.text("Good morning! It is Wednesday."))
    outcome = await app.worker.run_proactive("test:c9", "Give me a morning briefing.", job_id="job-1",
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
    outcome = await app.worker.run_proactive("test:c1", "Log the day.")
    assert "files_write" not in offered(fake_llm.requests[0])
    assert not (notes / "log.md").exists()
    assert await rows(app, "SELECT id FROM pending_confirmations") == [] and channel.confirmations == []
    assert outcome.text.startswith("I logged it.") and "(Skipped: files.write" in outcome.text
    assert channel.texts() == [outcome.text]
    (audit,) = await rows(app, "SELECT tool_name, status, source FROM tool_executions")
    assert audit == {"tool_name": "files.write", "status": "skipped", "source": "proactive"}


async def test_a_proactive_turn_waits_for_the_conversations_turn_in_flight(app, fake_llm, channel):
    seen = []

    def responder(body):
        seen.append(body["messages"][-1]["content"])
        return Step.delay(0.1, Step.text("answer")) if len(seen) == 1 else Step.text("briefing")

    fake_llm.responder = responder
    handle = await app.worker.deliver(incoming(app, "a question"))
    while not seen:  # the chat turn is in flight (its model call has started)
        await asyncio.sleep(0.005)
    outcome = await app.worker.run_proactive("test:c1", "The briefing.")
    await handle
    assert channel.texts() == ["answer", "briefing"] and outcome.ok
    assert seen[0] == "a question" and "The briefing." in seen[1]


async def test_a_failed_proactive_turn_tells_the_user(app_factory, fake_llm, channel):
    app = await app_factory(llm={"num_retries": 0})
    fake_llm.add(Step.error(500))
    outcome = await app.worker.run_proactive("test:c1", "The briefing.")
    assert not outcome.ok
    assert channel.texts() == [outcome.text]
    assert outcome.text.startswith("I could not complete a scheduled task.") and "Nothing was done." in outcome.text


async def test_post_sends_a_stored_text_without_the_model(app, fake_llm, channel):
    message_id = await app.worker.post("test:c2", "Reminder: take the bins out.")
    assert channel.sent == [("c2", "Reminder: take the bins out.")] and fake_llm.requests == []
    (row,) = await rows(app, "SELECT id, text, status, kind FROM messages")
    assert row == {"id": message_id, "text": "Reminder: take the bins out.", "status": "sent", "kind": "chat"}
    with pytest.raises(ValueError, match="empty"):
        await app.worker.post("test:c2", "  ")
    fake_llm.add(Step.text("Great."))
    await say(app, "done", chat="c2")
    assert {"role": "assistant", "content": "Reminder: take the bins out."} in fake_llm.requests[0]["messages"]


# decisions from buttons ------------------------------------------------------------------------

async def ask_to_write(app, fake_llm, channel, *, sender="u1"):
    fake_llm.add(Step.tool_calls(("files_write", {"path": "todo.md", "content": "milk\n"})), Step.text("Asked."))
    await say(app, "note milk", sender=sender)
    ((_, request),) = channel.confirmations
    return request


async def test_a_button_approval_runs_the_tool_once(app_factory, fake_llm, channel, notes):
    app = await app_factory(tools={"files": {"notes_dir": str(notes)}})
    request = await ask_to_write(app, fake_llm, channel)
    fake_llm.add(Step.text("Written."))
    report = await app.worker.decide("test:c1", "u1", request.id, True)
    assert report.outcome is DecisionOutcome.APPROVED and report.accepted and request.id in report.text
    await app.worker.wait_idle()
    assert (notes / "todo.md").read_text() == "milk\n"
    assert channel.texts()[-2:] == [f"Done: files.write ran (request {request.id}).", "Written."]
    again = await app.worker.decide("test:c1", "u1", request.id, True)
    assert again.outcome is DecisionOutcome.ALREADY_DECIDED and not again.accepted
    await app.worker.wait_idle()
    runs = await rows(app, "SELECT status FROM tool_executions WHERE source = 'confirmation'")
    assert runs == [{"status": "ok"}]
    (row,) = await rows(app, "SELECT status, decided_via FROM pending_confirmations")
    assert row == {"status": "executed", "decided_via": "chat"}


async def test_only_the_requesting_user_may_press_the_button(app_factory, fake_llm, channel, notes):
    app = await app_factory(tools={"files": {"notes_dir": str(notes)}})
    request = await ask_to_write(app, fake_llm, channel)
    before = list(channel.sent)
    report = await app.worker.decide("test:c1", "intruder", request.id, True)
    assert report.outcome is DecisionOutcome.WRONG_USER and "Only the person who asked" in report.text
    wrong_chat = await app.worker.decide("test:other", "u1", request.id, True)
    assert wrong_chat.outcome is DecisionOutcome.NOT_FOUND
    forged = await app.worker.decide("test:c1", "u1", "x' OR 1=1; --" * 1000, True)
    assert forged.outcome is DecisionOutcome.NOT_FOUND and len(forged.text) < 200
    await app.worker.wait_idle()
    assert not (notes / "todo.md").exists() and channel.sent == before  # nothing posted, nothing run
    (row,) = await rows(app, "SELECT status FROM pending_confirmations")
    assert row["status"] == "pending"


async def test_an_expired_request_cannot_be_approved_by_button(app_factory, fake_llm, channel, notes, clock):
    app = await app_factory(tools={"files": {"notes_dir": str(notes)}})
    request = await ask_to_write(app, fake_llm, channel)
    clock.advance(minutes=11)
    report = await app.worker.decide("test:c1", "u1", request.id, True)
    assert report.outcome is DecisionOutcome.EXPIRED
    await app.worker.wait_idle()
    assert not (notes / "todo.md").exists()


async def test_a_button_denial_is_recorded_in_the_conversation(app_factory, fake_llm, channel, notes):
    app = await app_factory(tools={"files": {"notes_dir": str(notes)}})
    request = await ask_to_write(app, fake_llm, channel)
    report = await app.worker.decide("test:c1", "u1", request.id.upper(), False)
    assert report.outcome is DecisionOutcome.DENIED
    await app.worker.wait_idle()
    assert channel.texts()[-1] == f"Denied: files.write will not run (request {request.id})."
    assert not (notes / "todo.md").exists()


async def test_a_stranger_cannot_decide(app_factory, fake_llm, clock):
    telegram = RecordingChannel("telegram")
    base = await app_factory(channels={"telegram": {"allowed_users": ["111"]}})
    app = await build_app(base.config, clock=clock, environ={}, extra_channels=[telegram])
    try:
        report = await app.worker.decide("telegram:5", "999", "deadbeef", True)
        assert report.outcome is DecisionOutcome.WRONG_USER and fake_llm.requests == []
    finally:
        await app.stop()


# live progress ------------------------------------------------------------------------------

@pytest.fixture
async def live(make_config, clock):
    channel = ProgressRecordingChannel("live")
    app = await build_app(make_config(), clock=clock, environ={}, extra_channels=[channel])
    await app.start()
    yield app, channel
    await app.stop()


async def test_progress_events_arrive_in_order_and_the_final_message_is_the_grounded_text(live, fake_llm):
    app, channel = live
    fake_llm.add(Step.tool_calls(("math_calculate", {"expression": "19*23"})),
                 Step.text("It is 437. Full table: http://127.0.0.1:8765/artifacts/made/up.html"))
    await say(app, "19*23?", channel="live")
    kinds = [type(e) for e in channel.events]
    assert kinds[:4] == [Thinking, ToolStarted, ToolFinished, Thinking]
    assert channel.events[1] == ToolStarted("math.calculate")
    assert channel.events[2] == ToolFinished("math.calculate", "ok")
    deltas = channel.events[4:]
    assert deltas and all(isinstance(e, TextDelta) for e in deltas)
    streamed = "".join(e.text for e in deltas)
    assert streamed == "It is 437. Full table: http://127.0.0.1:8765/artifacts/made/up.html"
    (final,) = channel.texts()  # the record is the grounded text, not the draft
    assert final.startswith("It is 437. Full table: [link removed]") and "made/up" not in final
    assert all(r.get("stream") is True for r in fake_llm.requests)
    calls = await rows(app, "SELECT status, prompt_tokens, completion_tokens FROM llm_calls ORDER BY id")
    assert calls == [{"status": "ok", "prompt_tokens": 10, "completion_tokens": 5}] * 2


async def test_a_channel_without_progress_gets_no_stream(app, fake_llm, channel):
    await say(app, "hi")
    assert "stream" not in fake_llm.requests[0] and channel.thinking_spans == ["c1"]


class _RefusedSink:
    wants_text = True

    async def emit(self, event):
        raise ConnectionError("draft refused")


class _BrokenProgressChannel(RecordingChannel):
    @asynccontextmanager
    async def progress(self, chat_id):
        yield _RefusedSink()


async def test_a_failing_progress_display_does_not_break_the_turn(make_config, clock, fake_llm):
    channel = _BrokenProgressChannel("live")
    app = await build_app(make_config(), clock=clock, environ={}, extra_channels=[channel])
    await app.start()
    try:
        fake_llm.add(Step.tool_calls(("clock_now", {})), Step.text("still answered"))
        await say(app, "hi", channel="live")
        assert channel.texts() == ["still answered"]
    finally:
        await app.stop()


# channels from config -------------------------------------------------------------------------

async def test_channels_are_built_from_their_config_section(make_config, clock, fake_llm, monkeypatch):
    built = []

    def factory(section, context):
        channel = RecordingChannel("telegram")
        built.append((section.allowed_users, channel))
        return channel

    monkeypatch.setitem(CHANNEL_FACTORIES, "telegram", factory)
    config = make_config(channels={"telegram": {"enabled": True, "allowed_users": [42], "token": "t"}})
    app = await build_app(config, clock=clock, environ={})
    try:
        await app.start()
        ((allowed, telegram),) = built
        assert allowed == ["42"] and app.channels == {"telegram": telegram}
        assert not any("no telegram adapter" in w for w in app.warnings())
        assert await app.worker.deliver(incoming(app, "hi", channel="telegram", sender="7")) is None
        await say(app, "hi", channel="telegram", sender="42")
        assert telegram.texts() == ["Sorry, I only talk to my owner.", "ok"]  # the stranger: one refusal
    finally:
        await app.stop()
    assert json.dumps(built[0][0]) == '["42"]'


async def test_an_enabled_channel_without_an_adapter_is_reported(make_config, clock, monkeypatch):
    monkeypatch.delitem(CHANNEL_FACTORIES, "discord")  # as for a platform this version has no adapter for
    config = make_config(channels={"discord": {"enabled": True}})
    app = await build_app(config, clock=clock, environ={})
    try:
        assert any(w.startswith("channels.discord.enabled is true, but this version") for w in app.warnings())
        assert app.channels == {}
    finally:
        await app.stop()


# found by review: the edges of the new doors -------------------------------------------------

async def test_a_proactive_turn_cannot_dry_run_a_tool_that_needs_approval(app_factory, fake_llm, channel, notes):
    app = await app_factory(tools={"files": {"notes_dir": str(notes)}})
    (notes / "secret.md").write_text("do not leak\n")
    fake_llm.add(Step.tool_calls(("files_write", {"path": "secret.md", "content": "x", "dry_run": True})),
                 Step.text("Checked."))
    await app.worker.run_proactive("test:c1", "Look at my notes.")
    tool_message = [m for m in fake_llm.requests[1]["messages"] if m["role"] == "tool"][0]
    assert "do not leak" not in tool_message["content"] and '"skipped"' in tool_message["content"]
    (audit,) = await rows(app, "SELECT status FROM tool_executions")
    assert audit["status"] == "skipped"


async def test_proactive_turns_and_posts_are_refused_once_stopping(app, fake_llm):
    from bruce.errors import ShuttingDown

    await app.stop()
    with pytest.raises(ShuttingDown):
        await app.worker.run_proactive("test:c1", "The briefing.")
    with pytest.raises(ShuttingDown):
        await app.worker.post("test:c1", "Reminder.")
    assert fake_llm.requests == []


async def test_a_proactive_turn_in_flight_at_shutdown_is_drained_not_lost(app_factory, fake_llm, channel):
    app = await app_factory(assistant={"shutdown_timeout_s": 5})
    fake_llm.add(Step.delay(0.2, Step.text("Your briefing.")))
    job = asyncio.create_task(app.worker.run_proactive("test:c1", "The briefing."))
    while not fake_llm.requests:
        await asyncio.sleep(0.005)
    await app.stop()
    outcome = await job
    assert outcome.ok and channel.texts() == ["Your briefing."]
    assert [r["status"] for r in await rows(app, "SELECT status FROM turns")] == ["ok"]


async def test_a_button_during_shutdown_decides_nothing(app_factory, fake_llm, channel, notes):
    app = await app_factory(tools={"files": {"notes_dir": str(notes)}})
    request = await ask_to_write(app, fake_llm, channel)
    await app.worker.close(1)
    report = await app.worker.decide("test:c1", "u1", request.id, True)
    assert report.outcome is DecisionOutcome.UNAVAILABLE and "try again" in report.text
    assert not (notes / "todo.md").exists()
    assert [r["status"] for r in await rows(app, "SELECT status FROM pending_confirmations")] == ["pending"]


async def test_a_denial_does_not_wait_for_the_platform(make_config, fake_llm, notes, clock):
    slow = _SlowChannel("test")
    app = await build_app(make_config(tools={"files": {"notes_dir": str(notes)}}), clock=clock, environ={},
                          extra_channels=[slow])
    await app.start()
    try:
        request = await ask_to_write(app, fake_llm, slow)
        slow.hold.clear()
        report = await asyncio.wait_for(app.worker.decide("test:c1", "u1", request.id, False), 1)
        assert report.outcome is DecisionOutcome.DENIED and not slow.texts()[-1].startswith("Denied")
        slow.hold.set()
        await app.worker.wait_idle()
        assert slow.texts()[-1].startswith("Denied: files.write")
    finally:
        await app.stop()


class _SlowChannel(RecordingChannel):
    """A platform that takes as long as the test says to accept a message."""

    def __init__(self, name):
        super().__init__(name)
        self.hold = asyncio.Event()
        self.hold.set()

    async def send_text(self, chat_id, text):
        await self.hold.wait()
        await super().send_text(chat_id, text)


class _SlowSink:
    wants_text = True

    def __init__(self, events):
        self.events = events

    async def emit(self, event):
        await asyncio.sleep(0.3)
        self.events.append(event)


class _SlowProgressChannel(RecordingChannel):
    def __init__(self, name):
        super().__init__(name)
        self.events = []

    @asynccontextmanager
    async def progress(self, chat_id):
        yield _SlowSink(self.events)


async def test_a_slow_progress_display_never_counts_against_the_model(make_config, clock, fake_llm):
    channel = _SlowProgressChannel("live")
    config = make_config(llm={"timeout_s": 0.3, "num_retries": 0})
    app = await build_app(config, clock=clock, environ={}, extra_channels=[channel])
    await app.start()
    try:
        fake_llm.add(Step.text("an answer in three streamed pieces"))
        await say(app, "hi", channel="live")
        assert channel.texts() == ["an answer in three streamed pieces"]
        assert [r["status"] for r in await rows(app, "SELECT status FROM llm_calls")] == ["ok"]
    finally:
        await app.stop()


class _FlakyIndicatorChannel(RecordingChannel):
    def __init__(self, name, fail_on):
        super().__init__(name)
        self.fail_on = fail_on

    @asynccontextmanager
    async def progress(self, chat_id):
        if self.fail_on == "enter":
            raise ConnectionError("cannot start a draft")
        yield _RefusedSink()
        raise ConnectionError("cannot delete the draft")


@pytest.mark.parametrize("fail_on", ["enter", "exit"])
async def test_an_indicator_that_fails_to_start_or_stop_keeps_the_answer(make_config, clock, fake_llm, fail_on):
    channel = _FlakyIndicatorChannel("live", fail_on)
    app = await build_app(make_config(), clock=clock, environ={}, extra_channels=[channel])
    await app.start()
    try:
        fake_llm.add(Step.text("Saved it."))
        await say(app, "hi", channel="live")
        assert channel.texts() == ["Saved it."]
        assert [r["status"] for r in await rows(app, "SELECT status FROM turns")] == ["ok"]
    finally:
        await app.stop()


async def test_a_turn_counts_every_model_call_it_made(app_factory, fake_llm, channel):
    app = await app_factory(llm={"fallbacks": ["openai/backup"], "num_retries": 1})
    fake_llm.add(Step.error(500), Step.error(500), model="primary")
    fake_llm.add(Step.text("from the backup"), model="backup")
    await say(app, "hi")
    (turn,) = await rows(app, "SELECT id, llm_calls FROM turns WHERE source = 'chat'")
    calls = await rows(app, "SELECT COUNT(*) AS n FROM llm_calls WHERE turn_id = ?", turn["id"])
    assert turn["llm_calls"] == calls[0]["n"] == 3


async def test_a_stream_cut_mid_answer_is_retried_and_the_draft_starts_over(live, fake_llm):
    app, channel = live
    fake_llm.add(Step.cut("The answer is 42, and al"), Step.text("The answer is 42."))
    await say(app, "question?", channel="live")
    assert channel.texts() == ["The answer is 42."]
    kinds = [type(e).__name__ for e in channel.events]
    second = kinds.index("Thinking", 1)  # the retry announces itself: what was streamed before is void
    assert kinds[0] == "Thinking" and "TextDelta" in kinds[1:second]
    assert "".join(e.text for e in channel.events[second:] if isinstance(e, TextDelta)) == "The answer is 42."
    calls = await rows(app, "SELECT status FROM llm_calls ORDER BY id")
    assert [c["status"] for c in calls] == ["error", "ok"]


# artifacts sent as files ------------------------------------------------------------------------

def save(filename: str, content: str = "<h1>Report</h1>", **more):
    return ("artifact_save", {"filename": filename, "content": content, **more})


async def test_each_saved_artifact_is_sent_once_as_a_file_after_the_reply(app_factory, fake_llm, channel, tmp_path):
    art = tmp_path / "artifacts"
    app = await app_factory(tools={"artifacts": {"dir": str(art)}})
    fake_llm.add(Step.tool_calls(save("report.html", title="Monthly report"),
                                 save("report.html", title="Monthly report", dry_run=False),
                                 save("notes.md", "# Notes", format="markdown"), save("draft.html", dry_run=True),
                                 save("")),  # the same artifact twice, a dry run, an invalid call
                 Step.text("Here are your documents."))
    await say(app, "write the report and the notes")
    artifacts = await rows(app, "SELECT id, filename FROM artifacts")
    stored = {r["filename"]: r["id"] for r in artifacts}
    assert len(artifacts) == 2 and set(stored) == {"report.html", "notes.md"}
    assert channel.texts() == ["Here are your documents."]
    root = art.resolve()
    assert sorted(channel.files) == sorted([("c1", root / stored["notes.md"] / "notes.md", None),
                                            ("c1", root / stored["report.html"] / "report.html", "Monthly report")])
    assert channel.texts_before_file == [1, 1]  # after the reply


async def test_a_file_that_cannot_be_sent_is_logged_and_the_reply_stands(app_factory, fake_llm, channel, tmp_path):
    from bruce.errors import ChannelSendError

    app = await app_factory(tools={"artifacts": {"dir": str(tmp_path / "artifacts")}})
    channel.file_failures = [ChannelSendError("file refused", retryable=False), OSError("gone")]
    fake_llm.add(Step.tool_calls(save("a.html")), Step.text("Saved a."))
    await say(app, "save a")
    fake_llm.add(Step.tool_calls(save("b.html")), Step.text("Saved b."))
    await say(app, "save b")
    assert channel.texts() == ["Saved a.", "Saved b."] and channel.files == []
    assert [t["status"] for t in await rows(app, "SELECT status FROM turns WHERE source = 'chat'")] == ["ok", "ok"]
    assert [m["status"] for m in await rows(app, "SELECT status FROM messages WHERE direction = 'in'")] == [
        "done", "done"]


async def test_only_files_inside_the_artifacts_folder_are_sent(app_factory, fake_llm, channel, tmp_path):
    art = tmp_path / "artifacts"
    app = await app_factory(tools={"artifacts": {"dir": str(art)}})
    outside = tmp_path / "secret.txt"
    outside.write_text("not for the chat")

    def respond(body):
        if any(m["role"] == "tool" for m in body["messages"]):  # the tool ran: its file now leads elsewhere
            (saved,) = art.glob("*/r.html")
            saved.unlink()
            saved.symlink_to(outside)
            return Step.text("Saved it.")
        return Step.tool_calls(save("r.html"))

    fake_llm.responder = respond
    await say(app, "save it")
    assert channel.texts() == ["Saved it."] and channel.files == []
