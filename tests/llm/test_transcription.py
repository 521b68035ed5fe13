"""Speech to text through real litellm against the fake provider's OpenAI audio API: what is sent,
what is recorded (one llm_calls row of kind transcription per attempt, with its cost), the budget,
and every way it fails."""

from __future__ import annotations

from typing import Any
from zoneinfo import ZoneInfo

import pytest

from bruce.app import App
from bruce.config.loader import parse_config
from bruce.errors import LLMNotConfigured, LLMUnavailable, MediaError, OverBudget
from bruce.llm.budget import Budget
from bruce.llm.capabilities import supports_vision
from bruce.llm.transcription import NOTHING_HEARD, Transcription
from bruce.turns.scope import TurnScope, new_turn_id
from bruce.values import ConversationId, TurnSource
from tests.fakes.llm_server import FakeLLMServer, Step
from tests.fakes.media_files import ogg_opus
from tests.helpers import rows

CID = ConversationId("test", "1")


async def _scope(app: App) -> TurnScope:
    scope = TurnScope(turn_id=new_turn_id(), conversation_id=CID, user_id="1")
    await app.store.messages.ensure_conversation(str(CID), CID.channel, CID.chat_id)
    await app.store.messages.start_turn(scope.turn_id, str(CID), source=TurnSource.CHAT, inbound_message_id=None)
    return scope


def _transcription(app: App, fake: FakeLLMServer, budget: Budget | None = None, **media: Any) -> Transcription:
    config = parse_config({"llm": {"model": "openai/primary", "api_base": fake.base_url, "api_key": "sk-test-123456",
                                   "num_retries": 1, "retry_backoff_s": 0, "timeout_s": 3},
                           "media": {"transcription_model": "openai/whisper-1", **media}}, environ={})
    return Transcription(config.media, config.llm, store=app.store, clock=app.clock, budget=budget, environ={})


async def test_a_voice_note_is_sent_as_the_openai_audio_api_and_recorded_as_one_transcription_call(app, fake_llm):
    fake_llm.add_transcript("  remind me to call the plumber at five  ")
    scope = await _scope(app)
    voice = ogg_opus(4)

    text = await _transcription(app, fake_llm).transcribe(voice, file_name="voice.ogg", mime="audio/ogg", scope=scope)

    assert text == "remind me to call the plumber at five"
    (sent,) = fake_llm.transcriptions
    assert (sent.model, sent.file_name, sent.content_type, sent.data) == ("whisper-1", "voice.ogg", "audio/ogg", voice)
    (call,) = await rows(app, "SELECT turn_id, seq, model, status, kind, cost_usd FROM llm_calls")
    assert call["turn_id"] == scope.turn_id and call["seq"] == 1 and call["status"] == "ok"
    assert (call["model"], call["kind"]) == ("openai/whisper-1", "transcription")
    assert call["cost_usd"] is not None and call["cost_usd"] > 0  # litellm prices whisper-1 per second


async def test_media_has_its_own_endpoint_when_given(app, fake_llm):
    async with FakeLLMServer() as other:
        other.add_transcript("from the other server")
        scope = await _scope(app)
        text = await _transcription(app, fake_llm, api_base=other.base_url, api_key="sk-other-123456").transcribe(
            ogg_opus(1), file_name="v.ogg", mime="audio/ogg", scope=scope)
    assert text == "from the other server"
    assert fake_llm.transcriptions == [] and len(other.transcriptions) == 1


async def test_a_server_error_is_tried_again_then_every_attempt_is_a_row(app, fake_llm):
    fake_llm.add_transcript(Step.error(503), Step.error(503))
    scope = await _scope(app)
    with pytest.raises(LLMUnavailable) as failed:
        await _transcription(app, fake_llm).transcribe(ogg_opus(1), file_name="v.ogg", mime="audio/ogg", scope=scope)
    assert "openai/whisper-1" in str(failed.value)
    calls = await rows(app, "SELECT seq, status, kind, error FROM llm_calls ORDER BY seq")
    assert [(c["seq"], c["status"], c["kind"]) for c in calls] == [(1, "error", "transcription"),
                                                                   (2, "error", "transcription")]
    assert "503" in calls[0]["error"]


async def test_a_rejected_key_is_not_tried_again(app, fake_llm):
    fake_llm.add_transcript(Step.error(401, "bad key"))
    scope = await _scope(app)
    with pytest.raises(LLMUnavailable):
        await _transcription(app, fake_llm).transcribe(ogg_opus(1), file_name="v.ogg", mime="audio/ogg", scope=scope)
    assert len(fake_llm.transcriptions) == 1


async def test_a_slow_provider_times_out(app, fake_llm):
    fake_llm.add_transcript(Step.delay(10, Step.text("late")), Step.delay(10, Step.text("late")))
    scope = await _scope(app)
    transcription = _transcription(app, fake_llm)
    with pytest.raises(LLMUnavailable):
        await transcription.transcribe(ogg_opus(1), file_name="v.ogg", mime="audio/ogg", scope=scope)
    calls = await rows(app, "SELECT status FROM llm_calls")
    assert [c["status"] for c in calls] == ["timeout", "timeout"]


async def test_nothing_heard_is_a_clear_reply_not_an_empty_message(app, fake_llm):
    fake_llm.add_transcript("   ")
    scope = await _scope(app)
    with pytest.raises(MediaError) as error:
        await _transcription(app, fake_llm).transcribe(ogg_opus(1), file_name="v.ogg", mime="audio/ogg", scope=scope)
    assert str(error.value) == NOTHING_HEARD


async def test_no_model_or_no_key_makes_no_call(app, fake_llm):
    scope = await _scope(app)
    config = parse_config({"llm": {"model": "openai/primary"}, "media": {}}, environ={})
    unset = Transcription(config.media, config.llm, store=app.store, clock=app.clock, budget=None, environ={})
    with pytest.raises(LLMNotConfigured) as error:
        await unset.transcribe(b"x", file_name="v.ogg", mime="audio/ogg", scope=scope)
    assert "media.transcription_model" in error.value.hint

    config = parse_config({"llm": {"model": "openai/primary"}, "media": {"transcription_model": "groq/whisper-large-v3"}},
                          environ={})
    keyless = Transcription(config.media, config.llm, store=app.store, clock=app.clock, budget=None, environ={})
    with pytest.raises(LLMNotConfigured) as error:
        await keyless.transcribe(b"x", file_name="v.ogg", mime="audio/ogg", scope=scope)
    assert "GROQ_API_KEY" in error.value.hint
    assert fake_llm.transcriptions == []


async def test_a_spent_budget_stops_the_transcription_before_the_call(app, fake_llm):
    scope = await _scope(app)
    budget = Budget(store=app.store, clock=app.clock, zone=ZoneInfo("UTC"), daily_usd=None, daily_tokens=0)
    with pytest.raises(OverBudget):
        await _transcription(app, fake_llm, budget=budget).transcribe(ogg_opus(1), file_name="v.ogg",
                                                                      mime="audio/ogg", scope=scope)
    assert fake_llm.transcriptions == []


def test_vision_comes_from_litellms_capability_data():
    assert supports_vision("openai/gpt-4o-mini") is True
    assert supports_vision("openai/gpt-3.5-turbo") is False
    assert supports_vision("openai/primary") is False  # a model litellm does not know: not assumed
    assert supports_vision("nonsense-provider/xyz") is False
