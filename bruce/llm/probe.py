"""A tiny real request to a transcription model, for ``bruce doctor``: half a second of silence
as a WAV (made with the standard library's ``wave``; every whisper API takes WAV), sent once
through litellm's ``atranscription``. Nothing is recorded: the doctor only asks whether the model
answers. A failure is read like a chat call's (``bruce.llm.faults.classify``)."""

from __future__ import annotations

import asyncio
import io
import wave

from bruce.errors import LLMCallFailed
from bruce.llm.faults import classify
from bruce.llm.service import load_litellm
from bruce.values import LLMCallStatus

__all__ = ["probe_transcription", "silent_wav"]

_RATE = 16_000  # samples per second: what whisper models work at


def silent_wav(seconds: float = 0.5) -> bytes:
    """A mono 16-bit PCM WAV of ``seconds`` of silence."""
    out = io.BytesIO()
    with wave.open(out, "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(_RATE)
        wav.writeframes(b"\0\0" * round(seconds * _RATE))
    return out.getvalue()


async def probe_transcription(model: str, *, api_base: str | None, api_key: str | None, timeout_s: float) -> str:
    """The text ``model`` hears in half a second of silence (often empty). Raises
    ``LLMCallFailed`` naming what went wrong when it does not answer with a transcription."""
    litellm = load_litellm()
    kwargs: dict[str, object] = {"model": model, "file": ("doctor-silence.wav", silent_wav(), "audio/wav"),
                                 "timeout": timeout_s, "max_retries": 0}
    if api_base:
        kwargs["api_base"] = api_base
    if api_key:
        kwargs["api_key"] = api_key
    try:
        async with asyncio.timeout(timeout_s + 1.0):
            response = await litellm.atranscription(**kwargs)
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # translated at the edge, like a chat call's
        raise classify(exc, litellm) from exc
    text = getattr(response, "text", None)
    if not isinstance(text, str):
        raise LLMCallFailed(status=LLMCallStatus.ERROR, reason="malformed response (no text)", retryable=False)
    return text
