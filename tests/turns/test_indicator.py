"""The indicator: live progress in order, a channel's failing or slow display never breaking
the turn, a typing indicator where there is no progress view."""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager

import pytest

from bruce.app import build_app
from bruce.turns.progress import TextDelta, Thinking, ToolFinished, ToolStarted
from tests.fakes.channel import ProgressRecordingChannel, RecordingChannel
from tests.fakes.llm_server import Step
from tests.helpers import rows, say


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


async def test_a_tools_activity_label_comes_from_its_contract_to_the_channel(live, fake_llm):
    app, channel = live
    fake_llm.add(Step.tool_calls(("clock_now", {})), Step.text("It is nine."))
    await say(app, "what time is it?", channel="live")
    (started,) = [e for e in channel.events if isinstance(e, ToolStarted)]
    assert started.tool == "clock.now"
    assert started.activity == app.registry.get("clock.now").contract.activity == "Checking the time"
