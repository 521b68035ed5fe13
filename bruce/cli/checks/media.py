"""The ``media:`` block: what start-up refuses in it (``media_problems``, part of ``check_config``),
what deserves a look but works (``media_warnings``: printed by ``bruce config check`` and
``bruce doctor``), and ``bruce doctor``'s check that the transcription model answers
(``check_media``): half a second of silence, as a WAV (every whisper API takes one), sent through
``bruce.llm.transcription`` as a voice note would be, with no retry and recorded in a scratch
in-memory database. Hearing no words in it is an answer too."""

from __future__ import annotations

import contextlib
import io
import wave
from collections.abc import Mapping
from typing import Any

from bruce.cli.checks.findings import Finding, Mark, variable
from bruce.clock import SystemClock
from bruce.config.rules import url_problem
from bruce.config.schema import Config, MediaConfig
from bruce.errors import LLMNotConfigured, LLMUnavailable, MediaError

__all__ = ["TELEGRAM_DOWNLOAD_MB", "check_media", "media_problems", "media_warnings", "silent_wav"]

TELEGRAM_DOWNLOAD_MB = 20  # the largest file the Bot API lets a bot download


def media_problems(media: MediaConfig) -> list[str]:
    """What start-up refuses: a transcription model litellm cannot route (no ``provider/``),
    an ``api_base`` that is no http(s) URL."""
    problems = []
    model = media.transcription_model
    if model is not None:
        provider, _, name = model.strip().partition("/")
        if not provider or not name:
            problems.append(f"media.transcription_model: {model[:80]!r} names no provider; write provider/model, "
                            "e.g. openai/whisper-1 or groq/whisper-large-v3")
    if media.api_base is not None:
        problem = url_problem(media.api_base)
        if problem:
            problems.append(f"media.api_base {problem}; give the transcription server's URL, "
                            "e.g. https://api.groq.com/openai/v1")
    return problems


def media_warnings(config: Config) -> list[str]:
    """What works but is likely not what was meant."""
    media, found = config.media, []
    if media.enabled and config.channels.telegram.enabled and media.max_file_mb > TELEGRAM_DOWNLOAD_MB:
        found.append(f"media.max_file_mb: {media.max_file_mb:g} MB is more than the {TELEGRAM_DOWNLOAD_MB} MB a "
                     f"Telegram bot may download; a larger file sent on Telegram is refused all the same "
                     f"(set it to {TELEGRAM_DOWNLOAD_MB} or less)")
    if not media.enabled and media.transcription_model is not None:
        found.append("media.transcription_model is set but media.enabled is false: no voice note is heard "
                     "(set media.enabled: true)")
    if media.transcription_model is None and (media.api_base is not None or media.api_key is not None):
        found.append("media.api_base or media.api_key is set but media.transcription_model is not: no voice note "
                     "is heard (set media.transcription_model, e.g. openai/whisper-1)")
    return found


def silent_wav(seconds: float = 0.5, rate: int = 16_000) -> bytes:
    """A mono 16-bit PCM WAV of ``seconds`` of silence, made with the standard library."""
    out = io.BytesIO()
    with wave.open(out, "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(rate)
        wav.writeframes(b"\0\0" * round(seconds * rate))
    return out.getvalue()


def _fix(reason: str, config: Config, key: str | None) -> str:
    media = config.media
    base = media.api_base or config.llm.api_base
    where = (f"media.api_base ({base})" if media.api_base else f"llm.api_base ({base})") if base else "the network"
    if "refused" in reason or "connect" in reason:
        return f"check {where} and that the server there is running"
    if "key" in reason or "401" in reason or "403" in reason:
        return f"put a valid key in {key}" if key else "check the transcription model's key (media.api_key)"
    if "rejected" in reason or "404" in reason:
        return f"check media.transcription_model ({media.transcription_model!r}) and that the key may use it"
    if "timed out" in reason:
        return f"check {where}; the model did not answer in time"
    return "check the provider's status page and the media settings"


def _key_name(config: Config, raw: Any) -> str | None:
    """How to name the key the transcription model gets, without showing it."""
    from bruce.llm.service import provider_key_env

    name = variable(raw, *(("media", "api_key") if config.media.api_key else ("llm", "api_key")))
    env = provider_key_env(str(config.media.transcription_model))
    if name:
        return f"${name}"
    return f"${env}" if env and config.media.api_key is None and config.llm.api_key is None else None


async def _transcribe_silence(config: Config, raw: Any, environ: Mapping[str, str], timeout_s: float) -> Finding:
    from bruce.llm.transcription import Transcription
    from bruce.store import Store
    from bruce.turns.scope import TurnScope, new_turn_id
    from bruce.values import ConversationId, TurnSource

    label = f"voice {config.media.transcription_model}"
    llm = config.llm.model_copy(update={"num_retries": 0, "timeout_s": min(timeout_s, config.llm.timeout_s)})
    clock = SystemClock()
    store = await Store.open(":memory:", clock)  # the probe's llm_calls row goes nowhere
    try:
        await store.messages.ensure_conversation("doctor:media", "doctor", "media")
        scope = TurnScope(turn_id=new_turn_id(), conversation_id=ConversationId("doctor", "media"), user_id=None)
        await store.messages.start_turn(scope.turn_id, str(scope.conversation), source=TurnSource.CHAT,
                                        inbound_message_id=None)
        transcription = Transcription(config.media, llm, store=store, clock=clock, budget=None, environ=environ)
        started = clock.monotonic()
        try:
            with contextlib.suppress(MediaError):  # it answered, and heard no words in silence
                await transcription.transcribe(silent_wav(), file_name="doctor-silence.wav", mime="audio/wav",
                                               scope=scope)
        except LLMNotConfigured as exc:
            return Finding(Mark.FAIL, f"{label}: no API key or endpoint configured", exc.hint)
        except LLMUnavailable as exc:
            reason = "; ".join(r for _, r in exc.attempts)
            return Finding(Mark.FAIL, f"{label}: did not answer ({reason})", _fix(reason, config, _key_name(config, raw)))
        return Finding(Mark.OK, f"{label}: transcribed a test sound in {clock.monotonic() - started:.1f} s")
    finally:
        await store.close()


async def check_media(config: Config, raw: Any, environ: Mapping[str, str], timeout_s: float, *,
                      call: bool = True) -> list[Finding]:
    """``media: off``, ``voice: not set up``, or one tiny transcription and how long it took
    (``call`` False, as ``--no-llm`` asks: no request)."""
    media = config.media
    if not media.enabled:
        return [Finding(Mark.SKIP, "media: off (media.enabled: false); voice notes, photos and documents get a "
                                   "reply saying so")]
    if media.transcription_model is None:
        return [Finding(Mark.SKIP, "voice: not set up (media.transcription_model); voice notes get a reply saying so",
                        "to hear them, set media.transcription_model, e.g. openai/whisper-1")]
    if not call:
        return [Finding(Mark.SKIP, f"voice {media.transcription_model}: not called (--no-llm)")]
    return [await _transcribe_silence(config, raw, environ, timeout_s)]
