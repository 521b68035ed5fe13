"""Speech to text, through litellm's ``atranscription`` (the same provider layer as every chat call).

``Transcription.transcribe`` turns a voice note's bytes into text with ``media.transcription_model``
(e.g. ``openai/whisper-1``, ``groq/whisper-large-v3``), on ``media.api_base``/``api_key`` when given,
else ``llm.api_base``/``api_key``. It runs inside the turn that needs it: each attempt is one
``llm_calls`` row of kind ``transcription`` (latency, status, cost) under that turn, checked
against the day's budget first and counted in it afterwards. Faults are read as for chat calls
(``bruce/llm/faults.py``); a retryable one is tried again up to ``llm.num_retries`` times with the
same backoff. Errors are ``LLMNotConfigured`` (no model or key: no call), ``OverBudget``,
``LLMUnavailable`` (every attempt failed), or ``MediaError`` when the model heard no words.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import structlog

from bruce.clock import Clock
from bruce.config.schema import LLMConfig, MediaConfig
from bruce.errors import LLMCallFailed, LLMNotConfigured, LLMUnavailable, MediaError, OverBudget
from bruce.llm.budget import Budget
from bruce.llm.faults import classify
from bruce.llm.service import load_litellm, provider_key_env
from bruce.records import LLMCallRecord
from bruce.store import Store
from bruce.turns.scope import TurnScope
from bruce.values import LLMCallKind, LLMCallStatus

__all__ = ["Transcription", "NOTHING_HEARD"]

log = structlog.get_logger(__name__)

NOTHING_HEARD = "I could not make out any words in that voice note. Could you say it again, or type it?"
_MAX_BACKOFF_S = 30.0


class Transcription:
    def __init__(self, media: MediaConfig, llm: LLMConfig, *, store: Store, clock: Clock, budget: Budget | None,
                 environ: Mapping[str, str]) -> None:
        self._media = media
        self._llm = llm
        self._store = store
        self._clock = clock
        self._budget = budget
        self._environ = environ

    @property
    def model(self) -> str | None:
        return self._media.transcription_model

    def endpoint(self) -> tuple[str | None, str | None]:
        """(api_base, api_key) for the transcription model: ``media``'s, else ``llm``'s."""
        base = self._media.api_base or self._llm.api_base
        key = self._media.api_key or self._llm.api_key
        return base, key.get_secret_value() if key is not None else None

    def missing_configuration(self) -> str | None:
        """A sentence saying what to set before a voice note can be heard, else None."""
        model = self._media.transcription_model
        if not model:
            return "Voice notes are not set up: set media.transcription_model (e.g. openai/whisper-1)."
        base, key = self.endpoint()
        env = provider_key_env(model)
        if key or base or env is None or self._environ.get(env):
            return None
        return (f"No API key is configured for the transcription model {model}. Set the environment variable "
                f"{env}, or media.api_key / media.api_base.")

    async def transcribe(self, audio: bytes, *, file_name: str, mime: str | None, scope: TurnScope) -> str:
        """The words of ``audio``, stripped; attempts are recorded under ``scope``'s turn."""
        hint = self.missing_configuration()
        if hint:
            raise LLMNotConfigured(hint)
        await self._check_budget()
        litellm = load_litellm()
        failures: list[tuple[str, str]] = []
        for attempt in range(self._llm.num_retries + 1):
            try:
                text = await self._call_once(litellm, audio, file_name, mime, scope)
            except LLMCallFailed as failed:
                failures.append((str(self.model), failed.reason))
                if not failed.retryable or attempt == self._llm.num_retries:
                    break
                await self._clock.sleep(min(self._llm.retry_backoff_s * 2.0**attempt, _MAX_BACKOFF_S))
                continue
            if not text.strip():
                raise MediaError(NOTHING_HEARD)
            return text.strip()
        raise LLMUnavailable(failures)

    async def _check_budget(self) -> None:
        if self._budget is None:
            return
        spend = await self._budget.reached(1.0)
        if spend is not None:
            raise OverBudget("the day's LLM budget is spent: no transcription until tomorrow", spend=spend)

    async def _call_once(self, litellm: Any, audio: bytes, file_name: str, mime: str | None,
                         scope: TurnScope) -> str:
        model = str(self.model)
        base, key = self.endpoint()
        kwargs: dict[str, Any] = {"model": model, "file": (file_name, audio, mime or "application/octet-stream"),
                                  "timeout": self._llm.timeout_s, "max_retries": 0}
        if base:
            kwargs["api_base"] = base
        if key:
            kwargs["api_key"] = key
        seq = scope.next_llm_seq()
        started = self._clock.monotonic()
        try:
            async with asyncio.timeout(self._llm.timeout_s + 1.0):
                response = await litellm.atranscription(**kwargs)
            text = getattr(response, "text", None)
            if not isinstance(text, str):
                raise ValueError("malformed response (no text)")
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # translated here, at the edge
            outcome = classify(exc, litellm)
            await self._record(scope, seq, model, outcome.status, started, error=outcome.reason)
            log.info("llm.transcription_failed", model=model, seq=seq, reason=outcome.reason, detail=str(exc)[:300])
            raise outcome from exc
        await self._record(scope, seq, model, LLMCallStatus.OK, started,
                           cost_usd=_cost(litellm, response, model, len(audio)))
        log.info("llm.transcribed", model=model, seq=seq, chars=len(text))
        return text

    async def _record(self, scope: TurnScope, seq: int, model: str, status: LLMCallStatus, started: float,
                      **fields: Any) -> None:
        latency_ms = (self._clock.monotonic() - started) * 1000
        await self._store.audit.record_llm_call(LLMCallRecord(
            turn_id=scope.turn_id, seq=seq, model=model, status=status, latency_ms=latency_ms,
            kind=LLMCallKind.TRANSCRIPTION, **fields))


def _cost(litellm: Any, response: Any, model: str, size: int) -> float | None:
    """The call's price, as litellm works it out (per second of audio for whisper models); None
    when it does not know the model's price."""
    hidden = getattr(response, "_hidden_params", None)
    known = hidden.get("response_cost") if isinstance(hidden, dict) else None
    if isinstance(known, int | float) and not isinstance(known, bool) and known > 0:
        return float(known)
    try:
        cost = litellm.completion_cost(completion_response=response, model=model, call_type="atranscription")
    except Exception:  # unknown model or price
        return None
    return float(cost) if cost else None
