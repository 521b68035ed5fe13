"""LLMService over real litellm: retries, fallbacks, failure messages, call records."""

from __future__ import annotations

import pytest

from bruce.errors import LLMNotConfigured
from bruce.llm import LLMService
from bruce.texts import LLM_DOWN as LLM_DOWN_MESSAGE
from tests.fakes.llm_server import Step
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
    assert call["cost_usd"] is not None and call["cost_usd"] > 0


async def test_unknown_model_cost_is_null(app, fake_llm):
    await say(app, "hi")
    (call,) = await rows(app, "SELECT cost_usd FROM llm_calls")
    assert call["cost_usd"] is None


async def test_missing_key_is_explained_without_any_network_call(make_config, app, fake_llm):
    config = make_config(llm={"api_key": "", "api_base": ""})
    service = LLMService(config.llm, store=app.store, clock=app.clock, environ={})
    hint = service.missing_configuration()
    assert "OPENAI_API_KEY" in hint and "llm.api_base" in hint
    from bruce.turn import TurnScope

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
