"""The ``media:`` block: what start-up refuses in it (``media_problems``, part of ``check_config``),
what deserves a look but works (``media_warnings``: printed by ``bruce config check`` and
``bruce doctor``), and ``bruce doctor``'s check that the transcription model answers
(``check_media``: half a second of silence, ``bruce.llm.probe``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bruce.cli.checks.findings import Finding, Mark, variable
from bruce.clock import SystemClock
from bruce.config.rules import url_problem
from bruce.config.schema import Config, MediaConfig
from bruce.errors import LLMCallFailed

__all__ = ["TELEGRAM_DOWNLOAD_MB", "check_media", "media_problems", "media_warnings"]

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


def _fix(reason: str, where: str, key: str | None, model: str) -> str:
    if "refused" in reason or "connect" in reason:
        return f"check {where} and that the server there is running"
    if "key" in reason or "401" in reason or "403" in reason:
        return f"put a valid key in {key}" if key else "check the transcription model's API key (media.api_key)"
    if "rejected" in reason or "404" in reason:
        return f"check media.transcription_model ({model!r}): is it a transcription model the key may use?"
    if "timed out" in reason:
        return f"check {where}; the model did not answer in time"
    return "check the provider's status page and the media settings"


async def check_media(config: Config, raw: Any, environ: Mapping[str, str], timeout_s: float, *,
                      call: bool = True) -> list[Finding]:
    """``media: off``, ``voice: not set up``, or one tiny transcription and how long it took
    (``call`` False, as ``--no-llm`` asks: no request)."""
    from bruce.llm.probe import probe_transcription
    from bruce.llm.service import provider_key_env

    media = config.media
    if not media.enabled:
        return [Finding(Mark.SKIP, "media: off (media.enabled: false); voice notes, photos and documents get a "
                                   "reply saying so")]
    model = media.transcription_model
    if model is None:
        return [Finding(Mark.SKIP, "voice: not set up (media.transcription_model); voice notes get a reply saying so",
                        "to hear them, set media.transcription_model, e.g. openai/whisper-1")]
    if not call:
        return [Finding(Mark.SKIP, f"voice {model}: not called (--no-llm)")]
    api_base = media.api_base or config.llm.api_base
    secret = media.api_key or config.llm.api_key
    keys = ("media", "api_key") if media.api_key else ("llm", "api_key")
    name = variable(raw, *keys)
    env = provider_key_env(model)
    key = f"${name}" if name else (f"${env}" if env and secret is None else None)
    label = f"voice {model}"
    if secret is None and api_base is None and env is not None and not environ.get(env):
        return [Finding(Mark.FAIL, f"{label}: no API key or endpoint configured",
                        f"set {env} in .env, or media.api_key (or media.api_base for a local server)")]
    where = f"media.api_base ({api_base})" if media.api_base else (
        f"llm.api_base ({api_base})" if api_base else "the network")
    clock = SystemClock()
    started = clock.monotonic()
    try:
        await probe_transcription(model, api_base=api_base, timeout_s=timeout_s,
                                  api_key=secret.get_secret_value() if secret is not None else None)
    except LLMCallFailed as failed:
        return [Finding(Mark.FAIL, f"{label}: did not answer ({failed.reason})", _fix(failed.reason, where, key, model))]
    return [Finding(Mark.OK, f"{label}: transcribed a test sound in {clock.monotonic() - started:.1f} s")]
