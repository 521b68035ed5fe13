"""The worker end to end: storage before processing, serial per conversation, concurrent
across conversations, history and summaries, recovery after a crash, access control."""

from __future__ import annotations

import asyncio
import json
from contextlib import asynccontextmanager

import pytest

from bruce.app import build_app
from bruce.store import Store
from tests.actions.test_registry import contract
from tests.fakes.llm_server import Step
from tests.helpers import incoming, rows, say


async def test_inbound_is_stored_before_the_model_is_called(app, fake_llm):
    seen_status = []

    def responder(body):
        # runs inside the fake server while the turn is in flight
        seen_status.append(body["messages"][-1]["content"])
        return Step.text("ok")

    fake_llm.responder = responder
    handle = await app.worker.deliver(incoming(app, "remember me"))
    (stored,) = await rows(app, "SELECT text, status FROM messages WHERE direction='in'")
    assert stored == {"text": "remember me", "status": "pending"}
    await handle
    (stored,) = await rows(app, "SELECT status FROM messages WHERE direction='in'")
    assert stored["status"] == "done"
    assert seen_status == ["remember me"]
    (reply,) = await rows(app, "SELECT text, status, role FROM messages WHERE direction='out'")
    assert reply == {"text": "ok", "status": "sent", "role": "assistant"}


async def test_thinking_indicator_is_on_while_the_model_works(app, fake_llm, channel):
    seen = []

    def responder(body):
        seen.append(channel.thinking_now)
        return Step.text("hello")

    fake_llm.responder = responder
    await say(app, "hi", chat="42")
    assert seen == [1] and channel.thinking_spans == ["42"]
    assert channel.thinking_now == 0 and channel.texts() == ["hello"]


async def test_long_replies_are_split_to_the_channel_limit(app, fake_llm, channel):
    channel.max_message_length = 50
    fake_llm.add(Step.text(" ".join(["word"] * 40)))
    await say(app, "talk a lot")
    assert len(channel.texts()) > 1 and all(len(t) <= 50 for t in channel.texts())
    assert " ".join(channel.texts()) == " ".join(["word"] * 40)


async def test_history_is_sent_and_capped(app_factory, fake_llm):
    # history_limit 4, summary_batch 2: at most 4 + 2 - 1 = 5 unsummarized messages are sent
    app = await app_factory(assistant={"history_limit": 4, "summary_batch": 2})
    fake_llm.responder = lambda body: Step.text(
        "summary" if "running summary" in body["messages"][0]["content"] else "answer " + body["messages"][-1]["content"])
    for i in range(6):
        await say(app, f"question {i}")
        await app.worker.wait_idle()
    chat = [r for r in fake_llm.requests if "running summary" not in r["messages"][0]["content"]]
    for request in chat:
        non_system = [m for m in request["messages"] if m["role"] != "system"]
        assert len(non_system) <= 5
    last = [m for m in chat[-1]["messages"] if m["role"] != "system"]
    assert last[-1] == {"role": "user", "content": "question 5"}


async def test_older_history_is_folded_into_a_summary_that_feeds_the_prompt(app_factory, fake_llm):
    app = await app_factory(assistant={"history_limit": 2, "summary_batch": 2})

    def responder(body):
        system = body["messages"][0]["content"]
        if system.startswith("You maintain a running summary"):
            return Step.text("The user likes green tea.")
        return Step.text("noted")

    fake_llm.responder = responder
    await say(app, "I like green tea")
    await say(app, "and I live in Recife")
    await app.worker.wait_idle()
    (summary,) = await rows(app, "SELECT summary, up_to_message_id FROM session_summaries")
    assert summary["summary"] == "The user likes green tea."
    summary_turns = await rows(app, "SELECT status FROM turns WHERE source='summary'")
    assert summary_turns == [{"status": "ok"}]
    await say(app, "what do I drink?")
    chat_requests = [r for r in fake_llm.requests if "running summary" not in r["messages"][0]["content"]]
    assert "The user likes green tea." in chat_requests[-1]["messages"][0]["content"]


async def test_one_conversation_is_processed_in_order(app, fake_llm, channel):
    events: list[str] = []

    async def record(args, ctx):
        events.append(f"start {args['tag']}")
        await asyncio.sleep(0.05)
        events.append(f"end {args['tag']}")
        return {}

    schema = {"type": "object", "properties": {"tag": {"type": "string"}}, "required": ["tag"]}
    app.registry.register(contract("test.record", input_schema=schema), record)

    def responder(body):
        last = body["messages"][-1]
        if last["role"] == "user":
            return Step.tool_calls(("test_record", {"tag": last["content"]}))
        return Step.text("done")

    fake_llm.responder = responder
    first = await app.worker.deliver(incoming(app, "a"))
    second = await app.worker.deliver(incoming(app, "b"))
    await asyncio.gather(first, second)
    assert events == ["start a", "end a", "start b", "end b"]


async def test_different_conversations_run_concurrently(app, fake_llm, channel):
    barrier = asyncio.Barrier(2)

    async def meet(args, ctx):
        await barrier.wait()  # only passes if both conversations are in flight at once
        return {"met": True}

    app.registry.register(contract("test.meet", timeout_s=5), meet)

    def responder(body):
        if body["messages"][-1]["role"] == "user":
            return Step.tool_calls(("test_meet", {}))
        return Step.text("met")

    fake_llm.responder = responder
    handles = [await app.worker.deliver(incoming(app, "go", chat=c)) for c in ("x", "y")]
    await asyncio.gather(*handles)
    statuses = await rows(app, "SELECT status FROM tool_executions")
    assert [s["status"] for s in statuses] == ["ok", "ok"]
    assert sorted(channel.sent) == [("x", "met"), ("y", "met")]


async def test_strangers_cost_no_llm_call(app_factory, fake_llm, clock):
    from tests.fakes.channel import RecordingChannel

    telegram = RecordingChannel("telegram")
    config_app = await app_factory(channels={"telegram": {"allowed_users": [111]}})
    app = await build_app(config_app.config, clock=clock, environ={}, extra_channels=[telegram])
    try:
        assert await app.worker.deliver(incoming(app, "hi", channel="telegram", sender="999")) is None
        await app.worker.wait_idle()
        assert fake_llm.requests == []
        assert await rows(app, "SELECT id FROM messages") == []
        assert telegram.texts() == ["Sorry, I only talk to my owner."]  # straight to the channel, not stored
        handle = await app.worker.deliver(incoming(app, "hi", channel="telegram", sender="111"))
        await handle
        assert telegram.texts()[1:] == ["ok"]
    finally:
        await app.stop()


async def test_redelivered_platform_message_is_answered_once(app, fake_llm, channel):
    await say(app, "hi", message_id="m-1")
    assert await app.worker.deliver(incoming(app, "hi", message_id="m-1")) is None
    assert channel.texts() == ["ok"] and len(fake_llm.requests) == 1


async def test_made_up_artifact_link_is_removed(app, fake_llm, channel):
    fake_llm.add(Step.text("Saved! See http://127.0.0.1:8765/artifacts/abc/report.html for the report."))
    await say(app, "make me a report")
    (reply,) = channel.texts()
    assert "/artifacts/abc" not in reply
    assert "[link removed]" in reply and "could not actually produce" in reply
    (stored,) = await rows(app, "SELECT text FROM messages WHERE direction='out'")
    assert stored["text"] == reply


async def test_link_to_an_artifact_saved_this_turn_is_kept(app_factory, fake_llm, channel, tmp_path):
    app = await app_factory(tools={"artifacts": {"dir": str(tmp_path / "art")}})

    def responder(body):
        last = body["messages"][-1]
        if last["role"] == "user":
            return Step.tool_calls(("artifact_save", {"filename": "note.html", "content": "<p>hi</p>"}))
        return Step.text(f"Done: {json.loads(last['content'])['result']['url']}.")

    fake_llm.responder = responder
    await say(app, "save it")
    (reply,) = channel.texts()
    assert reply.startswith("Done: http://127.0.0.1:8765/artifacts/") and "removed" not in reply


async def test_a_failed_send_is_recorded_and_the_turn_still_completes(app, fake_llm, channel):
    channel.fail_sends = True
    await say(app, "hi")
    (reply,) = await rows(app, "SELECT status, send_error FROM messages WHERE direction='out'")
    assert reply == {"status": "unsent", "send_error": "platform unreachable"}  # kept, to be sent again
    (inbound,) = await rows(app, "SELECT status FROM messages WHERE direction='in'")
    assert inbound["status"] == "done"


@asynccontextmanager
async def previous_life(config, clock):
    """The store as a process that then died left it."""
    store = await Store.open(config.storage.path, clock)
    await store.messages.ensure_conversation("test:c1", "test", "c1")
    try:
        yield store
    finally:
        await store.close()


async def test_pending_message_is_processed_after_a_restart(make_config, app_factory, clock, channel, fake_llm):
    config = make_config()
    async with previous_life(config, clock) as store:  # stored, then the process died before answering
        await store.messages.add_inbound("test:c1", sender_id="u1", text="are you there?", platform_message_id="m-9")

    clock.advance(minutes=2)
    fake_llm.add(Step.text("Yes, sorry for the wait."))
    app = await app_factory(config)
    await app.worker.wait_idle()
    assert channel.texts() == ["Yes, sorry for the wait."]
    (inbound,) = await rows(app, "SELECT status FROM messages WHERE direction='in'")
    assert inbound["status"] == "done"


async def test_old_pending_message_gets_an_apology_not_an_answer(make_config, app_factory, clock, channel, fake_llm):
    config = make_config(assistant={"recovery_max_age_s": 600})
    async with previous_life(config, clock) as store:
        await store.messages.add_inbound("test:c1", sender_id="u1", text="book the table", platform_message_id=None)

    clock.advance(hours=3)
    app = await app_factory(config)
    (notice,) = channel.texts()
    assert "book the table" in notice and "Nothing was done" in notice
    assert fake_llm.requests == []
    (inbound,) = await rows(app, "SELECT status FROM messages WHERE direction='in'")
    assert inbound["status"] == "expired"


async def test_stored_but_unsent_reply_is_sent_after_a_restart(make_config, app_factory, clock, channel):
    config = make_config()
    async with previous_life(config, clock) as store:
        await store.outbound.add("test:c1", "Your answer, delayed.", turn_id=None)

    app = await app_factory(config)
    assert channel.texts() == ["Your answer, delayed."]
    (reply,) = await rows(app, "SELECT status FROM messages")
    assert reply["status"] == "sent"


async def test_shutdown_waits_for_a_turn_in_flight_and_keeps_late_messages(make_config, app_factory, channel,
                                                                           fake_llm):
    config = make_config()
    app = await app_factory(config)
    fake_llm.latency_s = 0.3
    handle = await app.worker.deliver(incoming(app, "hi"))
    stopping = asyncio.create_task(app.stop())
    await asyncio.sleep(0.1)  # draining: a message arrives now
    assert await app.worker.deliver(incoming(app, "late one")) is None
    await stopping
    assert handle.done() and channel.texts() == ["ok"]

    fake_llm.latency_s = 0
    fake_llm.add(Step.text("Answering the late one."))
    app = await app_factory(config)
    await app.worker.wait_idle()
    assert channel.texts() == ["ok", "Answering the late one."]


async def test_a_turn_cut_off_at_shutdown_after_a_tool_acted_is_reported_not_redone(
        make_config, app_factory, channel, fake_llm, tmp_path):
    config = make_config(assistant={"shutdown_timeout_s": 0.2}, tools={"artifacts": {"dir": str(tmp_path / "a")}})
    app = await app_factory(config)
    fake_llm.add(Step.tool_calls(("artifact_save", {"filename": "r.html", "content": "x"})),
                 Step.delay(30, Step.text("too late")))
    await app.worker.deliver(incoming(app, "save it"))
    for _ in range(200):
        if await rows(app, "SELECT id FROM artifacts"):
            break
        await asyncio.sleep(0.02)
    await app.stop()  # the model is still "thinking": the turn is cancelled

    app = await app_factory(config)
    await app.worker.wait_idle()
    (notice,) = channel.texts()
    assert "I was stopped while answering" in notice and "artifact.save" in notice
    assert len(await rows(app, "SELECT id FROM artifacts")) == 1
    (turn,) = await rows(app, "SELECT status, error FROM turns WHERE source='chat'")
    assert turn == {"status": "failed", "error": "interrupted by shutdown"}
    (inbound,) = await rows(app, "SELECT status FROM messages WHERE direction='in'")
    assert inbound["status"] == "failed"


async def test_an_overlong_message_is_refused_with_the_limit(app_factory, fake_llm, channel):
    app = await app_factory(assistant={"max_message_chars": 100})
    assert await app.worker.deliver(incoming(app, "x" * 150)) is None
    await app.worker.wait_idle()  # the notice is sent in the background: the channel is not kept waiting
    assert channel.texts() == ["Your message is 150 characters long; I accept at most 100. "
                               "Nothing was done with it. Please send it in shorter parts."]
    assert fake_llm.requests == []
    assert await app.worker.deliver(incoming(app, "   ")) is None
    assert len(channel.texts()) == 1


async def test_summaries_can_use_a_cheaper_model(app_factory, fake_llm):
    app = await app_factory(assistant={"history_limit": 2, "summary_batch": 2}, llm={"summary_model": "openai/cheap"})
    fake_llm.add(Step.text("Short summary."), model="cheap")
    await say(app, "one")
    await say(app, "two")
    await app.worker.wait_idle()
    assert len(fake_llm.requests_for("cheap")) == 1
    (summary,) = await rows(app, "SELECT summary FROM session_summaries")
    assert summary["summary"] == "Short summary."


@pytest.mark.parametrize("batch", [1, 3])
async def test_every_message_is_in_the_summary_or_the_history(app_factory, fake_llm, batch):
    app = await app_factory(assistant={"history_limit": 4, "summary_batch": batch})

    def responder(body):
        if body["messages"][0]["content"].startswith("You maintain a running summary"):
            return Step.text("summary")
        return Step.text("ans " + body["messages"][-1]["content"])

    fake_llm.responder = responder
    for i in range(10):
        summary = await app.store.messages.latest_summary("test:c1")  # what the next turn's prompt will carry
        await say(app, f"q{i}")
        chat = [r for r in fake_llm.requests if "running summary" not in r["messages"][0]["content"]][-1]
        sent = [m["content"] for m in chat["messages"] if m["role"] != "system"]
        everything = [r["text"] for r in await rows(app, "SELECT text FROM messages ORDER BY id")]
        folded = everything[: summary.up_to_message_id] if summary else []
        assert folded + sent == everything[: len(folded) + len(sent)] and sent[-1] == f"q{i}", (folded, sent)
        await app.worker.wait_idle()
    assert summary is not None and summary.up_to_message_id >= 6


async def test_a_search_result_url_does_not_vouch_for_an_artifact_link(app, fake_llm, channel):
    async def search(args, ctx):
        return {"results": [{"url": "http://127.0.0.1:8765/artifacts/deadbeef/report.html"}]}

    app.registry.register(contract("test.search"), search)
    fake_llm.add(Step.tool_calls(("test_search", {})),
                 Step.text("I saved it: http://127.0.0.1:8765/artifacts/deadbeef/report.html"))
    await say(app, "save a report")
    assert "deadbeef" not in channel.texts()[0]


async def test_a_second_process_cannot_serve_the_same_channel(make_config, app_factory, clock):
    from bruce.errors import BruceError
    from tests.fakes.channel import RecordingChannel

    config = make_config()
    await app_factory(config)
    second = await build_app(config, clock=clock, environ={}, extra_channels=[RecordingChannel("test")])
    with pytest.raises(BruceError, match="already serving the test channel"):
        await second.start()
    await second.stop()


async def test_a_burst_keeps_the_history_in_conversation_order(app, fake_llm, channel):
    """A second message sent while the first is answered sees the first reply, and its own
    message last; later turns see user, assistant, user, assistant, user."""
    def responder(body):
        last = body["messages"][-1]["content"]
        return Step.delay(0.1, Step.text(f"re: {last}")) if last == "one" else Step.text(f"re: {last}")

    fake_llm.responder = responder
    first = await app.worker.deliver(incoming(app, "one"))
    while not fake_llm.requests:  # the first turn is in flight
        await asyncio.sleep(0.005)
    second = await app.worker.deliver(incoming(app, "two"))
    await asyncio.gather(first, second)
    await say(app, "three")
    turns = [[(m["role"], m["content"]) for m in r["messages"] if m["role"] != "system"]
             for r in fake_llm.requests if "running summary" not in r["messages"][0]["content"]]
    assert turns[1] == [("user", "one"), ("assistant", "re: one"), ("user", "two")]
    assert turns[2] == [("user", "one"), ("assistant", "re: one"), ("user", "two"), ("assistant", "re: two"),
                        ("user", "three")]
    assert channel.texts() == ["re: one", "re: two", "re: three"]


async def test_turns_left_running_by_a_dead_process_are_closed_as_interrupted(make_config, app_factory, clock):
    config = make_config()
    async with previous_life(config, clock) as store:  # kill -9 during a chat turn and a summary
        await store.messages.ensure_conversation("telegram:9", "telegram", "9")
        message_id, _ = await store.messages.add_inbound("test:c1", sender_id="u1", text="hi", platform_message_id=None)
        await store.messages.start_turn("t-chat", "test:c1", source="chat", inbound_message_id=message_id)
        await store.messages.start_turn("t-summary", "test:c1", source="summary", inbound_message_id=None)
        await store.messages.start_turn("t-other", "telegram:9", source="chat", inbound_message_id=None)
    app = await app_factory(config)
    await app.worker.wait_idle()
    turns = {r["id"]: r["status"] for r in await rows(app, "SELECT id, status FROM turns")}
    assert turns["t-chat"] == turns["t-summary"] == "interrupted"
    assert turns["t-other"] == "running"  # another process serves telegram: not ours to close
    assert [t for t, status in turns.items() if status == "running"] == ["t-other"]


async def test_a_summary_cut_off_at_shutdown_is_closed_as_interrupted(app_factory, fake_llm):
    app = await app_factory(assistant={"history_limit": 2, "summary_batch": 1})

    def responder(body):
        if "running summary" in body["messages"][0]["content"]:
            return Step.delay(30, Step.text("late summary"))
        return Step.text("ok")

    fake_llm.responder = responder
    await say(app, "one")
    await say(app, "two")
    while not any("running summary" in r["messages"][0]["content"] for r in fake_llm.requests):
        await asyncio.sleep(0.01)
    await app.stop()
    (turn,) = await rows(app, "SELECT status FROM turns WHERE source = 'summary'")
    assert turn["status"] == "interrupted"
