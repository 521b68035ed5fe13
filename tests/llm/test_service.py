"""LLMService over real litellm: retries, fallbacks, failure messages, call records."""

from __future__ import annotations

from datetime import timedelta
from email.utils import format_datetime

import pytest
from structlog.testing import capture_logs

from bruce.app import build_app
from bruce.errors import LLMNotConfigured
from bruce.llm.service import LLMService
from bruce.texts import LLM_DOWN as LLM_DOWN_MESSAGE
from bruce.values import ConversationId, TurnSource
from tests.fakes.channel import ProgressRecordingChannel
from tests.fakes.llm_server import Step, closed_base_url
from tests.helpers import rows, say


async def test_rate_limit_then_success_is_retried(app, fake_llm, channel):
    fake_llm.add(Step.error(429, "slow down"), Step.text("Here you go."))
    await say(app, "hi")

    assert channel.texts() == ["Here you go."]
    calls = await rows(app, "SELECT seq, model, status, error FROM llm_calls ORDER BY seq")
    assert [(c["seq"], c["status"]) for c in calls] == [(1, "error"), (2, "ok")]
    assert "429" in calls[0]["error"]


async def test_server_errors_exhaust_retries_then_the_fallback_answers(app_factory, fake_llm, channel):
    app = await app_factory(llm={"fallbacks": ["openai/backup"], "num_retries": 1})
    fake_llm.add(Step.error(500), Step.error(503), model="primary")
    fake_llm.add(Step.text("Backup here."), model="backup")
    await say(app, "hi")

    assert channel.texts() == ["Backup here."]
    calls = await rows(app, "SELECT model, status FROM llm_calls ORDER BY seq")
    assert calls == [
        {"model": "openai/primary", "status": "error"},
        {"model": "openai/primary", "status": "error"},
        {"model": "openai/backup", "status": "ok"},
    ]


async def test_rejected_key_skips_retries_and_goes_to_the_fallback(app_factory, fake_llm, channel):
    app = await app_factory(llm={"fallbacks": ["openai/backup"]})
    fake_llm.add(Step.error(401, "bad key"), model="primary")
    fake_llm.add(Step.text("Backup here."), model="backup")
    await say(app, "hi")
    assert channel.texts() == ["Backup here."]
    assert len(fake_llm.requests_for("primary")) == 1


async def test_every_model_failing_gives_the_user_a_clear_message(app_factory, fake_llm, channel):
    app = await app_factory(llm={"fallbacks": ["openai/backup"], "num_retries": 1})
    fake_llm.default = Step.error(500)
    await say(app, "hi")

    assert channel.texts() == [LLM_DOWN_MESSAGE + " Nothing was done."]
    (turn,) = await rows(app, "SELECT status, error FROM turns WHERE source='chat'")
    assert turn["status"] == "failed" and "openai/primary" in turn["error"] and "openai/backup" in turn["error"]
    (inbound,) = await rows(app, "SELECT status FROM messages WHERE direction='in'")
    assert inbound["status"] == "failed"
    assert len(await rows(app, "SELECT id FROM llm_calls WHERE status='error'")) == 4
    # the conversation goes on: the next message is answered
    fake_llm.default = Step.text("I'm back.")
    await say(app, "still there?")
    assert channel.texts()[-1] == "I'm back."


async def test_a_slow_model_times_out_and_is_retried(app_factory, fake_llm, channel):
    app = await app_factory(llm={"timeout_s": 1.0, "num_retries": 1})
    fake_llm.add(Step.delay(4, Step.text("too late")), Step.text("On time."))
    await say(app, "hi")
    assert channel.texts() == ["On time."]
    calls = await rows(app, "SELECT status FROM llm_calls ORDER BY seq")
    assert [c["status"] for c in calls] == ["timeout", "ok"]


async def test_known_model_gets_a_cost(app_factory, fake_llm):
    app = await app_factory(llm={"model": "openai/gpt-4o-mini"})
    fake_llm.add(Step.text("hi", prompt_tokens=1000, completion_tokens=100))
    await say(app, "hi")
    (call,) = await rows(app, "SELECT cost_usd, prompt_tokens, completion_tokens FROM llm_calls")
    assert call["prompt_tokens"] == 1000 and call["completion_tokens"] == 100
    import litellm

    prompt_usd, completion_usd = litellm.cost_per_token(model="gpt-4o-mini", prompt_tokens=1000, completion_tokens=100)
    assert call["cost_usd"] == pytest.approx(prompt_usd + completion_usd) and call["cost_usd"] > 0


async def test_a_streamed_reply_is_priced_the_same(clock, make_config, fake_llm):
    """A stream is assembled by Bruce, not litellm: its price is worked out from the usage it reported."""
    from tests.fakes.channel import ProgressRecordingChannel

    channel = ProgressRecordingChannel()
    app = await build_app(make_config(llm={"model": "openai/gpt-4o-mini"}), clock=clock, environ={},
                          extra_channels=[channel])
    await app.start()
    fake_llm.add(Step.text("hi", prompt_tokens=1000, completion_tokens=100))
    await say(app, "hi")
    import litellm

    prompt_usd, completion_usd = litellm.cost_per_token(model="gpt-4o-mini", prompt_tokens=1000, completion_tokens=100)
    try:
        (call,) = await rows(app, "SELECT cost_usd FROM llm_calls")
    finally:
        await app.stop()
    assert call["cost_usd"] == pytest.approx(prompt_usd + completion_usd)
    assert fake_llm.requests[0].get("stream") is True and channel.sent[-1][1] == "hi"


async def test_unknown_model_cost_is_null(app, fake_llm):
    await say(app, "hi")
    (call,) = await rows(app, "SELECT cost_usd FROM llm_calls")
    assert call["cost_usd"] is None


async def test_missing_key_is_explained_without_any_network_call(make_config, app, fake_llm):
    config = make_config(llm={"api_key": "", "api_base": ""})
    service = LLMService(config.llm, store=app.store, clock=app.clock, environ={})
    hint = service.missing_configuration()
    assert "OPENAI_API_KEY" in hint and "llm.api_base" in hint
    from bruce.turns.scope import TurnScope

    with pytest.raises(LLMNotConfigured):
        await service.complete([{"role": "user", "content": "hi"}], scope=TurnScope("t", "c", None))
    assert fake_llm.requests == []
    # a key in the environment is enough
    assert LLMService(config.llm, store=app.store, clock=app.clock,
                      environ={"OPENAI_API_KEY": "sk-x"}).missing_configuration() is None


async def test_unconfigured_model_answers_the_chat_with_the_fix(app_factory, fake_llm, channel):
    app = await app_factory(llm={"api_key": "", "api_base": ""})
    await say(app, "hi")
    (reply,) = channel.texts()
    assert "OPENAI_API_KEY" in reply
    assert fake_llm.requests == []


async def test_a_failure_after_a_tool_acted_says_what_was_done(app_factory, fake_llm, channel, tmp_path):
    app = await app_factory(tools={"artifacts": {"dir": str(tmp_path / "art")}}, llm={"num_retries": 0})
    fake_llm.add(Step.tool_calls(("artifact_save", {"filename": "r.html", "content": "<p>x</p>"})), Step.error(500))
    await say(app, "save a report")
    (reply,) = channel.texts()
    assert reply.startswith(LLM_DOWN_MESSAGE) and "These actions completed: artifact.save." in reply
    assert "Nothing was done" not in reply
    (turn,) = await rows(app, "SELECT status, tool_calls FROM turns WHERE source='chat'")
    assert turn == {"status": "failed", "tool_calls": 1}


# hardening: malformed replies, true labels, Retry-After, the turn deadline, the circuit breaker -----

@pytest.fixture
async def live_factory(make_config, clock):
    """Apps whose channel shows progress, so model calls stream."""
    apps = []

    async def build(**sections):
        channel = ProgressRecordingChannel("live")
        app = await build_app(make_config(**sections), clock=clock, environ={}, extra_channels=[channel])
        apps.append(app)
        await app.start()
        return app, channel

    yield build
    for app in apps:
        await app.stop()


async def test_a_reply_with_no_choices_is_recorded_retried_and_the_fallback_answers(app_factory, fake_llm, channel):
    app = await app_factory(llm={"fallbacks": ["openai/backup"], "num_retries": 1})
    fake_llm.add(Step.no_choices(), Step.no_choices(), model="primary")
    fake_llm.add(Step.text("Backup here."), model="backup")
    await say(app, "hi")

    assert channel.texts() == ["Backup here."]
    calls = await rows(app, "SELECT model, status, error FROM llm_calls ORDER BY seq")
    assert calls == [
        {"model": "openai/primary", "status": "error", "error": "malformed response (no choices)"},
        {"model": "openai/primary", "status": "error", "error": "malformed response (no choices)"},
        {"model": "openai/backup", "status": "ok", "error": None},
    ]
    (turn,) = await rows(app, "SELECT status, llm_calls FROM turns WHERE source='chat'")
    assert turn == {"status": "ok", "llm_calls": 3}


async def test_no_choices_everywhere_tells_the_user_the_model_is_unreachable(app_factory, fake_llm, channel):
    app = await app_factory(llm={"num_retries": 0})
    fake_llm.add(Step.no_choices())
    await say(app, "hi")
    assert channel.texts() == [LLM_DOWN_MESSAGE + " Nothing was done."]
    (turn,) = await rows(app, "SELECT error FROM turns WHERE source='chat'")
    assert "malformed response (no choices)" in turn["error"]


MALFORMED = [
    pytest.param(Step.no_choices(), "malformed response (no choices)", id="no-choices"),
    pytest.param(Step.raw("<html><body>502 Bad Gateway</body></html>", content_type="text/html"),
                 "malformed response (not a completion)", id="html-page"),
    pytest.param(Step.raw('{"id": "chatcmpl-1", "choices": [{"ind'), "malformed response (not JSON)", id="truncated"),
    pytest.param(Step.raw(""), "malformed response (not JSON)", id="empty-body"),
    pytest.param(Step.raw('{"id": "x", "object": "chat.completion", "created": 1, "model": "m"}'),
                 "malformed response (no choices)", id="choices-missing"),
]


@pytest.mark.parametrize(("step", "label"), MALFORMED)
async def test_a_malformed_200_is_labelled_as_such_and_retried(app, fake_llm, channel, step, label):
    fake_llm.add(step, Step.text("Fine now."))
    await say(app, "hi")
    assert channel.texts() == ["Fine now."]
    calls = await rows(app, "SELECT status, error FROM llm_calls ORDER BY seq")
    assert calls == [{"status": "error", "error": label}, {"status": "ok", "error": None}]


STREAMED_MALFORMED = [
    pytest.param(Step.no_choices(), "malformed response (no choices)", id="no-choices"),
    pytest.param(Step.raw("<html>502 Bad Gateway</html>", content_type="text/html"),
                 "malformed response (empty stream)", id="html-page"),
    pytest.param(Step.raw("data: {garbage\n\n", content_type="text/event-stream"),
                 "malformed response (not JSON)", id="garbage-chunk"),
    pytest.param(Step.raw('data: {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "primary", '
                          '"choices": [{"index": 0, "delta": {"content": "Hel"}, "finish_reason": null}]}\n\n'
                          "data: [DONE]\n\n", content_type="text/event-stream"),
                 "malformed response (stream ended without a finish_reason)", id="no-finish"),
]


@pytest.mark.parametrize(("step", "label"), STREAMED_MALFORMED)
async def test_a_malformed_stream_is_labelled_as_such_and_retried(live_factory, fake_llm, step, label):
    app, channel = await live_factory()
    fake_llm.add(step, Step.text("Fine now."))
    await say(app, "hi", channel="live")
    assert channel.texts() == ["Fine now."]
    assert fake_llm.requests[0]["stream"] is True
    calls = await rows(app, "SELECT status, error FROM llm_calls ORDER BY seq")
    assert calls == [{"status": "error", "error": label}, {"status": "ok", "error": None}]


async def test_a_stream_cut_mid_answer_is_labelled_a_lost_connection(live_factory, fake_llm):
    app, channel = await live_factory()
    fake_llm.add(Step.cut("The answer is 4"), Step.text("The answer is 42."))
    await say(app, "hi", channel="live")
    assert channel.texts() == ["The answer is 42."]
    (first, _) = await rows(app, "SELECT error FROM llm_calls ORDER BY seq")
    assert first["error"] == "connection lost"


async def test_a_refused_connection_is_labelled_as_such_and_the_fallback_answers(app_factory, fake_llm, channel):
    app = await app_factory(llm={"api_base": closed_base_url(), "num_retries": 1,
                                 "fallbacks": [{"model": "openai/backup", "api_base": fake_llm.base_url,
                                                "api_key": "sk-test-key-123456"}]})
    fake_llm.add(Step.text("Backup here."), model="backup")
    await say(app, "hi")
    assert channel.texts() == ["Backup here."]
    calls = await rows(app, "SELECT model, status, error FROM llm_calls ORDER BY seq")
    assert calls == [
        {"model": "openai/primary", "status": "error", "error": "connection refused"},
        {"model": "openai/primary", "status": "error", "error": "connection refused"},
        {"model": "openai/backup", "status": "ok", "error": None},
    ]


@pytest.mark.parametrize("status", [500, 502, 503])
@pytest.mark.parametrize("page", [False, True], ids=["json", "html-page"])
async def test_a_real_server_error_keeps_its_status_in_the_label(app, fake_llm, channel, status, page):
    error = Step.raw("<html>Bad gateway</html>", status=status, content_type="text/html") if page else Step.error(status)
    fake_llm.add(error, Step.text("Fine now."))
    await say(app, "hi")
    (first, _) = await rows(app, "SELECT error FROM llm_calls ORDER BY seq")
    assert first["error"] == f"provider error ({status})"


@pytest.mark.parametrize("status", [429, 503])
async def test_retry_after_is_honoured_instead_of_the_backoff(app_factory, fake_llm, channel, clock, status):
    app = await app_factory(llm={"retry_backoff_s": 1})
    fake_llm.add(Step.error(status, retry_after=7), Step.text("Here you go."))
    await say(app, "hi")
    assert channel.texts() == ["Here you go."]
    assert clock.sleeps == [7]


async def test_retry_after_as_an_http_date_is_honoured(app_factory, fake_llm, channel, clock):
    app = await app_factory(llm={"retry_backoff_s": 1})
    fake_llm.add(Step.error(429, retry_after=format_datetime(clock.now() + timedelta(seconds=12), usegmt=True)),
                 Step.text("Here you go."))
    await say(app, "hi")
    assert channel.texts() == ["Here you go."]
    assert clock.sleeps == [12]


async def test_without_retry_after_the_backoff_doubles_and_waits_on_the_clock(app_factory, fake_llm, clock):
    app = await app_factory(llm={"retry_backoff_s": 1})
    fake_llm.add(Step.error(500), Step.error(500), Step.text("Here you go."))
    await say(app, "hi")
    assert clock.sleeps == [1, 2]


async def test_a_retry_after_beyond_the_cap_goes_to_the_fallback_without_waiting(app_factory, fake_llm, channel,
                                                                                clock):
    app = await app_factory(llm={"fallbacks": ["openai/backup"], "retry_backoff_s": 1})
    fake_llm.add(Step.error(429, retry_after=600), model="primary")
    fake_llm.add(Step.text("Backup here."), model="backup")
    await say(app, "hi")
    assert channel.texts() == ["Backup here."]
    assert len(fake_llm.requests_for("primary")) == 1
    assert clock.sleeps == []


async def test_an_attempt_gets_no_more_time_than_the_turn_has_left(app_factory, fake_llm, channel):
    app = await app_factory(llm={"timeout_s": 30, "turn_deadline_s": 0.5, "num_retries": 0})
    fake_llm.add(Step.delay(3, Step.text("too late")))
    await say(app, "hi")
    assert channel.texts() == [LLM_DOWN_MESSAGE + " Nothing was done."]
    calls = await rows(app, "SELECT status FROM llm_calls")
    assert [c["status"] for c in calls] == ["timeout"]


def _hanging(clock, seconds, step):
    """Each request costs ``seconds`` on the clock (a provider that hangs that long), then ``step``."""
    def respond(body):
        clock.advance(seconds=seconds)
        return step
    return respond


async def test_the_turn_deadline_stops_retries_and_fallbacks_and_is_named(app_factory, fake_llm, channel, clock):
    app = await app_factory(llm={"fallbacks": ["openai/backup"], "circuit_failures": 0})  # deadline 90 s
    fake_llm.responder = _hanging(clock, 40, Step.error(500))
    await say(app, "hi")
    assert channel.texts() == [LLM_DOWN_MESSAGE + " Nothing was done."]
    assert [r["model"] for r in fake_llm.requests] == ["primary"] * 3  # at 0, 40 and 80 s; then 120 > 90
    (turn,) = await rows(app, "SELECT error FROM turns WHERE source='chat'")
    assert "llm.turn_deadline_s" in turn["error"] and "90" in turn["error"]
    assert "openai/backup" in turn["error"]  # named as not tried
    assert len(await rows(app, "SELECT id FROM llm_calls")) == 3


async def test_the_deadline_leaves_the_fallback_its_time_when_a_retry_wait_would_pass_it(
        app_factory, fake_llm, channel, clock):
    app = await app_factory(llm={"fallbacks": ["openai/backup"], "turn_deadline_s": 20, "retry_backoff_s": 1})
    fake_llm.add(Step.error(429, retry_after=25), model="primary")
    fake_llm.add(Step.text("Backup here."), model="backup")
    await say(app, "hi")
    assert channel.texts() == ["Backup here."]
    assert clock.sleeps == [] and len(fake_llm.requests_for("primary")) == 1


async def test_the_deadline_counts_model_time_across_the_calls_of_one_turn_only(app_factory, fake_llm, channel,
                                                                                 clock):
    app = await app_factory(llm={"turn_deadline_s": 90, "circuit_failures": 0})
    steps = iter([(60, Step.tool_calls(("clock_now", {}))), (40, Step.error(500))])
    fake_llm.responder = lambda body: _hanging(clock, *next(steps))(body)
    await say(app, "what time is it?")
    # the first call took 60 s, the second 40 s: the turn's 90 s are gone, no retry
    (reply,) = channel.texts()
    assert reply.startswith(LLM_DOWN_MESSAGE) and "clock.now" in reply
    assert len(fake_llm.requests) == 2
    (turn,) = await rows(app, "SELECT error FROM turns WHERE source='chat'")
    assert "llm.turn_deadline_s" in turn["error"]
    # a new turn has its own deadline
    fake_llm.responder = None
    fake_llm.add(Step.text("Back."))
    await say(app, "again?")
    assert channel.texts()[-1] == "Back."


async def test_time_between_model_calls_does_not_count_against_the_deadline(app, fake_llm, clock):
    from bruce.turns.scope import TurnScope

    scope = TurnScope("t-between", ConversationId("test", "c1"), None)
    await app.store.messages.ensure_conversation("test:c1", "test", "c1")
    await app.store.messages.start_turn(scope.turn_id, "test:c1", source=TurnSource.CHAT,
                                        inbound_message_id=None, job_id=None)
    messages = [{"role": "user", "content": "hi"}]
    assert (await app.llm.complete(messages, scope=scope)).text == "ok"
    clock.advance(seconds=600)  # tools ran for ten minutes
    assert (await app.llm.complete(messages, scope=scope)).text == "ok"


async def test_the_circuit_opens_after_consecutive_failures_and_later_messages_skip_the_model(
        app_factory, fake_llm, channel, clock):
    app = await app_factory(llm={"fallbacks": ["openai/backup"], "num_retries": 2})  # 3 failures, 60 s
    fake_llm.add(Step.error(500), Step.error(500), Step.error(500), model="primary")
    fake_llm.add(Step.text("Backup 1."), Step.text("Backup 2."), model="backup")
    with capture_logs() as logs:
        await say(app, "hi")
        await say(app, "again")
    assert channel.texts() == ["Backup 1.", "Backup 2."]
    assert len(fake_llm.requests_for("primary")) == 3  # the second message went straight to the backup
    opened = [e for e in logs if e["event"] == "llm.circuit_open"]
    assert len(opened) == 1 and opened[0]["model"] == "openai/primary"
    calls = await rows(app, "SELECT model FROM llm_calls ORDER BY id")
    assert [c["model"] for c in calls] == ["openai/primary"] * 3 + ["openai/backup"] * 2


async def test_after_the_cool_down_one_trial_call_closes_the_circuit(app_factory, fake_llm, channel, clock):
    app = await app_factory(llm={"fallbacks": ["openai/backup"], "num_retries": 2})
    fake_llm.add(Step.error(500), Step.error(500), Step.error(500), model="primary")
    fake_llm.add(Step.text("Backup."), model="backup")
    await say(app, "hi")
    clock.advance(seconds=61)
    fake_llm.add(Step.text("Primary is back."), Step.text("Still here."), model="primary")
    with capture_logs() as logs:
        await say(app, "again")
        await say(app, "and again")
    assert channel.texts() == ["Backup.", "Primary is back.", "Still here."]
    assert [e["model"] for e in logs if e["event"] == "llm.circuit_closed"] == ["openai/primary"]


async def test_a_failed_trial_call_opens_the_circuit_again_without_retries(app_factory, fake_llm, channel, clock):
    app = await app_factory(llm={"fallbacks": ["openai/backup"], "num_retries": 2})
    fake_llm.add(*[Step.error(500)] * 4, model="primary")
    fake_llm.add(Step.text("Backup 1."), Step.text("Backup 2."), Step.text("Backup 3."), model="backup")
    await say(app, "hi")
    clock.advance(seconds=61)
    with capture_logs() as logs:
        await say(app, "again")  # the trial: one call, fails
        await say(app, "and again")  # open again: straight to the backup
    assert channel.texts() == ["Backup 1.", "Backup 2.", "Backup 3."]
    assert len(fake_llm.requests_for("primary")) == 4
    assert [e["event"] for e in logs if e["event"].startswith("llm.circuit")] == ["llm.circuit_open"]


async def test_every_circuit_open_fails_fast_with_the_reason(app_factory, fake_llm, channel, clock):
    app = await app_factory(llm={"num_retries": 2})
    fake_llm.default = Step.error(503)
    await say(app, "hi")
    await say(app, "again")
    assert len(fake_llm.requests) == 3
    assert channel.texts()[-1] == LLM_DOWN_MESSAGE + " Nothing was done."
    (_, second) = await rows(app, "SELECT error FROM turns WHERE source='chat' ORDER BY started_at, rowid")
    assert "circuit open" in second["error"]


async def test_a_rejected_request_does_not_open_the_circuit(app_factory, fake_llm, channel):
    app = await app_factory(llm={"fallbacks": ["openai/backup"]})
    fake_llm.add(Step.error(400), Step.error(400), Step.error(400), Step.text("Primary."), model="primary")
    fake_llm.default = Step.text("Backup.")
    for text in ("a", "b", "c", "d"):
        await say(app, text)
    assert channel.texts()[-1] == "Primary."


async def test_a_hanging_primary_with_the_defaults_goes_as_docs_operations_says(app_factory, fake_llm, channel,
                                                                                clock):
    """docs/operations.md, "When the model is unreachable": the table for a provider that hangs."""
    app = await app_factory(llm={"fallbacks": ["openai/backup"], "timeout_s": 60, "retry_backoff_s": 1})

    def respond(body):
        if body["model"] == "primary":
            clock.advance(seconds=60)  # hangs for a whole time-out
            return Step.error(504, "gateway time-out")
        return Step.text("Backup here.")

    fake_llm.responder = respond
    await say(app, "one")
    assert channel.texts() == [LLM_DOWN_MESSAGE + " Nothing was done."]
    assert [r["model"] for r in fake_llm.requests] == ["primary", "primary"]  # the deadline passed
    assert clock.sleeps == [1]
    await say(app, "two")  # the third failure in a row opens the circuit; the backup answers
    await say(app, "three")  # straight to the backup
    assert channel.texts()[1:] == ["Backup here.", "Backup here."]
    assert [r["model"] for r in fake_llm.requests][2:] == ["primary", "backup", "backup"]
