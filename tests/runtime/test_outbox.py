"""The outbox: a reply is stored, then sent; retryable failures are retried (honouring the
platform's retry_after), permanent ones leave it unsent and it is sent again later, once, in
order."""

from __future__ import annotations

import asyncio

from bruce.app import build_app
from bruce.errors import ChannelSendError
from bruce.values import ConversationId
from tests.fakes.channel import KeyedRecordingChannel, RecordingChannel
from tests.fakes.llm_server import Step
from tests.helpers import db_rows, rows, say


def rate_limited(retry_after: float | None = None) -> ChannelSendError:
    return ChannelSendError("rate limited (429)", retryable=True, retry_after=retry_after)


async def replies(app):
    return await rows(app, "SELECT text, status, parts_sent, send_attempts, send_error FROM messages"
                           " WHERE direction = 'out' ORDER BY id")


async def test_a_retryable_failure_is_retried_after_the_platforms_retry_after(app, fake_llm, channel, clock):
    channel.failures = [rate_limited(retry_after=2.5)]
    fake_llm.add(Step.text("hello"))
    await say(app, "hi")
    assert channel.texts() == ["hello"] and channel.attempts == 2
    assert clock.sleeps == [2.5]
    assert await replies(app) == [
        {"text": "hello", "status": "sent", "parts_sent": 1, "send_attempts": 2, "send_error": None}]


async def test_without_retry_after_the_backoff_doubles(app_factory, fake_llm, channel, clock):
    app = await app_factory(channels={"send_backoff_s": 0.5})
    channel.failures = [rate_limited(), ChannelSendError("HTTP 502", retryable=True), rate_limited()]
    await say(app, "hi")
    assert clock.sleeps == [0.5, 1.0, 2.0] and channel.texts() == ["ok"]


async def test_a_permanent_failure_is_kept_unsent_with_its_error(app, fake_llm, channel, clock):
    channel.failures = [ChannelSendError("chat not found", retryable=False)]
    await say(app, "hi")
    assert channel.texts() == [] and clock.sleeps == []
    assert await replies(app) == [
        {"text": "ok", "status": "unsent", "parts_sent": 0, "send_attempts": 1, "send_error": "chat not found"}]
    (inbound,) = await rows(app, "SELECT status FROM messages WHERE direction = 'in'")
    assert inbound["status"] == "done"  # answered; the answer waits in the outbox


async def test_retries_stop_at_send_retries(app_factory, fake_llm, channel, clock):
    app = await app_factory(channels={"send_retries": 2})
    channel.failures = [rate_limited(1) for _ in range(5)]
    await say(app, "hi")
    assert channel.attempts == 3 and clock.sleeps == [1, 1] and channel.texts() == []
    ((reply),) = await replies(app)
    assert reply["status"] == "unsent" and reply["send_error"] == "rate limited (429)"


async def test_a_long_platform_wait_is_left_to_the_background_resend_and_respected(app, fake_llm, channel, clock):
    channel.failures = [rate_limited(retry_after=3600)]
    await say(app, "hi")
    assert clock.sleeps == [] and (await replies(app))[0]["status"] == "unsent"
    fake_llm.add(Step.text("later"))
    await say(app, "and now?")
    await app.outbox.resend_all()
    assert channel.attempts == 1 and channel.texts() == []  # nothing tried before the platform's time
    clock.advance(seconds=3601)
    await app.outbox.resend_all()
    assert channel.texts() == ["ok", "later"]


async def test_an_unsent_reply_is_given_up_after_resend_max_age(app, fake_llm, channel, clock):
    channel.fail_sends = True
    await say(app, "hi")
    channel.fail_sends = False
    clock.advance(days=2)
    await app.outbox.resend_all()
    assert channel.texts() == []
    (reply,) = await replies(app)
    assert reply["status"] == "failed" and reply["send_error"] == "platform unreachable"


async def test_a_database_locked_by_another_process_does_not_resend_or_hide_approvals(
        app_factory, fake_llm, channel, tmp_path):
    import sqlite3
    import threading

    app = await app_factory(storage={"busy_timeout_ms": 50}, tools={"files": {"notes_dir": str(tmp_path)}})
    locker = sqlite3.connect(app.config.storage.path, check_same_thread=False)
    original = channel.send_text

    async def send_then_lock(chat_id, text):  # the platform took it; then a backup locks the file
        await original(chat_id, text)
        if not getattr(send_then_lock, "done", False):
            send_then_lock.done = True
            locker.execute("BEGIN EXCLUSIVE")
            threading.Timer(0.15, locker.rollback).start()

    channel.send_text = send_then_lock
    fake_llm.add(Step.tool_calls(("files_write", {"path": "a.md", "content": "x"})), Step.text("Waiting for you."))
    await say(app, "write it")
    await app.outbox.resend_all()
    locker.close()
    assert channel.texts() == ["Waiting for you."] and len(channel.confirmations) == 1
    assert (await replies(app))[0]["status"] == "sent"


async def test_an_unsent_reply_is_sent_at_the_next_start_exactly_once(make_config, clock, fake_llm):
    config = make_config()
    down = RecordingChannel("test")
    down.fail_sends = True
    app = await build_app(config, clock=clock, environ={}, extra_channels=[down])
    await app.start()
    fake_llm.add(Step.text("your answer"))
    await say(app, "question")
    await app.stop()
    assert down.texts() == []

    for _ in range(2):  # two more lives: the first sends it, the second has nothing to send
        up = RecordingChannel("test")
        app = await build_app(config, clock=clock, environ={}, extra_channels=[up])
        await app.start()
        await app.worker.wait_idle()
        await app.stop()
        sent = up.texts()
        if _ == 0:
            assert sent == ["your answer"]
        else:
            assert sent == []
    assert len(fake_llm.requests) == 1  # re-sent, not re-answered


async def test_replies_keep_their_order_behind_an_unsent_one(app_factory, fake_llm, channel):
    app = await app_factory(channels={"send_retries": 0})
    fake_llm.add(Step.text("first answer"), Step.text("second answer"))
    channel.failures = [rate_limited()]
    await say(app, "one")
    assert channel.texts() == []
    await say(app, "two")  # "first answer" goes out first: sending "second" alone would break the order
    assert channel.texts() == ["first answer", "second answer"]
    assert [r["status"] for r in await replies(app)] == ["sent", "sent"]


async def test_a_later_reply_does_not_overtake_while_the_platform_is_down(app_factory, fake_llm, channel):
    app = await app_factory(channels={"send_retries": 0})
    fake_llm.add(Step.text("first answer"), Step.text("second answer"))
    channel.failures = [rate_limited(), rate_limited()]
    await say(app, "one")
    await say(app, "two")
    assert channel.attempts == 2 and channel.texts() == []  # each flush stops at the first unsent reply
    await app.outbox.resend_all()
    assert channel.texts() == ["first answer", "second answer"]


async def test_a_refused_message_does_not_silence_the_conversation(app, fake_llm, channel):
    fake_llm.add(Step.text("a reply the platform refuses"), Step.text("second answer"))
    channel.refused = {"a reply the platform refuses"}
    await say(app, "one")
    await say(app, "two")
    assert channel.texts() == ["second answer"]
    assert [(r["status"], r["send_error"]) for r in await replies(app)] == [
        ("unsent", "message rejected"), ("sent", None)]


async def test_pieces_already_sent_are_not_sent_again(app, fake_llm, channel):
    channel.max_message_length = 20
    fake_llm.add(Step.text("alpha beta gamma. delta epsilon zeta. eta theta iota."))
    channel.failures = [None, ChannelSendError("network down", retryable=False)]  # the 2nd piece fails
    await say(app, "long please")
    first = channel.texts()
    assert first == ["alpha beta gamma."]
    assert (await replies(app))[0]["parts_sent"] == 1
    await app.outbox.resend_all()
    assert channel.texts() == ["alpha beta gamma.", "delta epsilon zeta.", "eta theta iota."]
    assert (await replies(app))[0] | {"text": ""} == {
        "text": "", "status": "sent", "parts_sent": 3, "send_attempts": 2, "send_error": None}


async def test_unsent_replies_are_retried_in_the_background(app_factory, fake_llm, channel):
    app = await app_factory(channels={"resend_interval_s": 0.05})
    channel.fail_sends = True
    await say(app, "hi")
    channel.fail_sends = False
    for _ in range(200):  # the send is recorded in the database just after the channel took it
        if channel.texts() and (await replies(app))[0]["status"] == "sent":
            break
        await asyncio.sleep(0.01)
    assert channel.texts() == ["ok"]
    assert (await replies(app))[0]["status"] == "sent"


async def test_a_channel_bug_leaves_the_reply_unsent_not_lost(app, fake_llm, channel):
    channel.failures = [RuntimeError("adapter bug")]
    await say(app, "hi")
    assert (await replies(app))[0] == {"text": "ok", "status": "unsent", "parts_sent": 0, "send_attempts": 1,
                                       "send_error": "RuntimeError"}


# approval requests and files: the same door ---------------------------------------------------

def write_note(path: str = "a.md"):
    return Step.tool_calls(("files_write", {"path": path, "content": "x"}))


def save_artifact(filename: str = "report.html"):
    return Step.tool_calls(("artifact_save", {"filename": filename, "content": "<h1>Report</h1>", "title": "Report"}))


async def outbound(app):
    return await rows(app, "SELECT payload_kind, status, send_attempts FROM messages WHERE direction = 'out'"
                           " ORDER BY id")


async def test_a_confirmation_whose_first_send_failed_arrives_after_the_channel_recovers(
        app_factory, fake_llm, channel, clock, tmp_path):
    app = await app_factory(channels={"send_retries": 1}, tools={"files": {"notes_dir": str(tmp_path)}})
    channel.confirmation_failures = [rate_limited(retry_after=1), rate_limited(retry_after=1)]  # past send_retries
    fake_llm.add(write_note(), Step.text("Waiting for you."), Step.text("Still here."))
    await say(app, "write it")
    assert channel.texts() == ["Waiting for you."] and channel.confirmations == []
    assert await outbound(app) == [{"payload_kind": "text", "status": "sent", "send_attempts": 1},
                                   {"payload_kind": "confirmation", "status": "unsent", "send_attempts": 2}]
    await say(app, "hello?")  # its reply waits behind the request (not tried before the platform's time)
    assert channel.texts() == ["Waiting for you."] and clock.sleeps == [1]

    clock.advance(seconds=2)
    await app.outbox.resend_all()  # the platform is back
    ((chat, request),) = channel.confirmations
    assert chat == "c1" and request.tool_name == "files.write" and not request.step_up
    assert channel.texts() == ["Waiting for you.", "Still here."] and channel.texts_before_confirmation == [1]
    assert [r["status"] for r in await outbound(app)] == ["sent", "sent", "sent"]
    fake_llm.add(Step.text("Written."))
    await say(app, f"/approve {request.id}")  # the request did not silently expire: it can be approved
    assert (tmp_path / "a.md").read_text() == "x"


async def test_a_confirmation_queued_when_the_process_stops_arrives_after_a_restart(make_config, clock, fake_llm,
                                                                                    tmp_path):
    config = make_config(tools={"files": {"notes_dir": str(tmp_path)}})
    down = RecordingChannel("test")
    down.confirmation_failures = [ChannelSendError("platform unreachable", retryable=False)]
    app = await build_app(config, clock=clock, environ={}, extra_channels=[down])
    await app.start()
    fake_llm.add(write_note(), Step.text("Waiting for you."))
    await say(app, "write it")
    await app.stop()
    assert down.texts() == ["Waiting for you."] and down.confirmations == []

    arrived = []
    for _ in range(2):  # two more lives: the first sends the request, the second has nothing to send
        up = RecordingChannel("test")
        app = await build_app(config, clock=clock, environ={}, extra_channels=[up])
        await app.start()
        await app.worker.wait_idle()
        arrived.append([request.tool_name for _, request in up.confirmations])
        if up.confirmations:
            fake_llm.add(Step.text("Written."))
            await say(app, f"/approve {up.confirmations[0][1].id}")
        await app.stop()
        assert up.texts() == ([f"Done: files.write ran (request {up.confirmations[0][1].id}).", "Written."]
                              if up.confirmations else [])
    assert arrived == [["files.write"], []]
    assert (tmp_path / "a.md").read_text() == "x"


async def test_a_file_whose_first_send_failed_arrives_after_the_channel_recovers(app_factory, fake_llm, channel,
                                                                                 tmp_path):
    app = await app_factory(channels={"send_retries": 0}, tools={"artifacts": {"dir": str(tmp_path / "art")}})
    channel.file_failures = [ChannelSendError("HTTP 502", retryable=True)]
    fake_llm.add(save_artifact(), Step.text("Here it is."))
    await say(app, "write the report")
    assert channel.texts() == ["Here it is."] and channel.files == []
    assert [r["status"] for r in await outbound(app)] == ["sent", "unsent"]
    await app.outbox.resend_all()
    ((chat, path, caption),) = channel.files
    assert (chat, path.name, caption) == ("c1", "report.html", "Report") and path.read_text() == "<h1>Report</h1>"
    assert [r["status"] for r in await outbound(app)] == ["sent", "sent"]


async def test_a_file_queued_when_the_process_stops_arrives_after_a_restart(make_config, clock, fake_llm, tmp_path):
    config = make_config(tools={"artifacts": {"dir": str(tmp_path / "art")}})
    down = RecordingChannel("test")
    down.file_failures = [ChannelSendError("Telegram unreachable", retryable=True) for _ in range(10)]
    app = await build_app(config, clock=clock, environ={}, extra_channels=[down])
    await app.start()
    fake_llm.add(save_artifact(), Step.text("Here it is."))
    await say(app, "write the report")
    await app.stop()
    assert down.texts() == ["Here it is."] and down.files == []

    for life in range(2):
        up = RecordingChannel("test")
        app = await build_app(config, clock=clock, environ={}, extra_channels=[up])
        await app.start()
        await app.worker.wait_idle()
        await app.stop()
        assert [(path.name, caption) for _, path, caption in up.files] == ([("report.html", "Report")] if life == 0
                                                                           else [])
    assert len(fake_llm.requests) == 2  # sent again, not made again


async def test_approval_requests_and_files_stay_out_of_the_models_history(app_factory, fake_llm, channel, tmp_path):
    app = await app_factory(tools={"files": {"notes_dir": str(tmp_path)}, "artifacts": {"dir": str(tmp_path / "a")}})
    fake_llm.add(write_note(), save_artifact(), Step.text("Saved; the note waits for you."), Step.text("Hi."))
    await say(app, "save both")
    assert len(channel.confirmations) == 1 and len(channel.files) == 1
    await say(app, "hi")
    history = [(m["role"], m.get("content")) for m in fake_llm.requests[-1]["messages"][1:]]
    assert history == [("user", "save both"), ("assistant", "Saved; the note waits for you."), ("user", "hi")]


async def test_a_payload_that_cannot_be_read_is_given_up_and_the_conversation_goes_on(app_factory, fake_llm, channel,
                                                                                       tmp_path):
    import sqlite3

    app = await app_factory(tools={"files": {"notes_dir": str(tmp_path)}})
    channel.confirmation_failures = [ChannelSendError("platform unreachable", retryable=False)]
    fake_llm.add(write_note(), Step.text("Waiting for you."))
    await say(app, "write it")
    con = sqlite3.connect(app.config.storage.path)
    with con:
        con.execute("UPDATE messages SET payload = '[1, 2]' WHERE payload_kind = 'confirmation'")
    con.close()
    await app.outbox.post(ConversationId("test", "c1"), "a later notice")
    assert channel.texts() == ["Waiting for you.", "a later notice"] and channel.confirmations == []
    assert [(r["payload_kind"], r["status"]) for r in await outbound(app)] == [
        ("text", "sent"), ("confirmation", "failed"), ("text", "sent")]


async def test_a_keyed_channel_gets_one_stable_key_per_piece_and_each_piece_is_recorded_before_the_next(
        make_config, clock, fake_llm):
    """Each piece goes out with the key ``bruce.<row>.<piece>``; the same key on a retry, so a
    platform that enforces it makes one message; and the row counts a piece as sent before the
    next one goes out (nothing runs in between)."""
    config = make_config()
    keyed = KeyedRecordingChannel("test", max_message_length=20)
    seen: list[tuple[str, int]] = []
    keyed.before_send.append(lambda key: seen.append((key, db_rows(
        config.storage.path, "SELECT parts_sent FROM messages WHERE direction = 'out'")[0]["parts_sent"])))
    keyed.failures = [None, ChannelSendError("HTTP 502", retryable=True)]  # the 2nd piece fails once
    app = await build_app(config, clock=clock, environ={}, extra_channels=[keyed])
    await app.start()
    fake_llm.add(Step.text("first piece here.\n\nsecond piece here.\n\nthird piece."))
    await say(app, "hi")
    await app.stop()
    (reply,) = await replies(app)
    (row,) = await rows(app, "SELECT id FROM messages WHERE direction = 'out'")
    key = f"bruce.{row['id']}"
    assert keyed.keys == [f"{key}.0", f"{key}.1", f"{key}.1", f"{key}.2"]
    assert seen == [(f"{key}.0", 0), (f"{key}.1", 1), (f"{key}.1", 1), (f"{key}.2", 2)]
    assert keyed.texts() == ["first piece here.", "second piece here.", "third piece."]
    assert reply["status"] == "sent" and reply["parts_sent"] == 3
