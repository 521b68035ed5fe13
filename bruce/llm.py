"""The language model, through litellm. The only module that imports litellm.

``LLMService.complete`` tries the primary model with retries and backoff on rate limits,
server errors and time-outs, then each fallback in order. Every attempt, good or bad, is one
``llm_calls`` row. When nothing answers it raises ``LLMUnavailable``; when no key or endpoint
is configured it raises ``LLMNotConfigured`` without touching the network.

When someone watches the turn's progress (``scope.progress.streams``) and ``llm.stream`` is on,
the call streams: each piece of text is emitted as a ``TextDelta`` as it arrives, and the
chunks are assembled by litellm into the same reply a plain call gives.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import structlog

from bruce.clock import Clock
from bruce.config import LLMConfig, ModelEndpoint
from bruce.contracts import ToolCall
from bruce.errors import LLMCallFailed, LLMNotConfigured, LLMUnavailable
from bruce.llm_stream import collect_stream
from bruce.progress import Thinking
from bruce.store import LLMCallRecord, Store
from bruce.texts import llm_not_configured
from bruce.turn import TurnScope
from bruce.values import LLMCallStatus

__all__ = ["LLMService", "LLMReply", "provider_key_env"]

log = structlog.get_logger(__name__)

_KEY_ENV = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "gemini": "GEMINI_API_KEY",
    "groq": "GROQ_API_KEY",
    "mistral": "MISTRAL_API_KEY",
    "openrouter": "OPENROUTER_API_KEY",
    "deepseek": "DEEPSEEK_API_KEY",
    "xai": "XAI_API_KEY",
    "together_ai": "TOGETHERAI_API_KEY",
}
_KEYLESS_PROVIDERS = {"ollama", "ollama_chat", "lm_studio", "llamafile", "vllm", "hosted_vllm"}
_MAX_BACKOFF_S = 30.0


def provider_key_env(model: str) -> str | None:
    """The environment variable that usually holds the key for ``provider/model``."""
    provider = model.split("/", 1)[0] if "/" in model else "openai"
    return _KEY_ENV.get(provider, f"{provider.upper()}_API_KEY" if provider not in _KEYLESS_PROVIDERS else None)


def _litellm() -> Any:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True
    litellm.telemetry = False
    # litellm would count the tokens of every stream with tiktoken (loaded on first use: ~110 MB
    # and a ~0.7 s stall of the event loop); providers report usage themselves
    litellm.disable_token_counter = True
    return litellm


@dataclass(frozen=True, slots=True)
class LLMReply:
    text: str | None
    tool_calls: tuple[ToolCall, ...]
    model: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None

    def as_message(self) -> dict[str, Any]:
        """The assistant message to append to the conversation sent back to the model."""
        message: dict[str, Any] = {"role": "assistant", "content": self.text or ""}
        if self.tool_calls:
            message["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in self.tool_calls
            ]
        return message


def _classify(exc: BaseException, litellm: Any) -> LLMCallFailed:
    """Why one call failed, and whether trying again could help."""
    status = getattr(exc, "status_code", None)
    if isinstance(exc, (TimeoutError, litellm.Timeout)):
        return LLMCallFailed(status=LLMCallStatus.TIMEOUT, reason="timed out", retryable=True)
    if isinstance(exc, litellm.RateLimitError):
        return LLMCallFailed(status=LLMCallStatus.ERROR, reason="rate limited (429)", retryable=True)
    if isinstance(exc, (litellm.AuthenticationError, litellm.PermissionDeniedError)):
        return LLMCallFailed(status=LLMCallStatus.ERROR, reason="the API key was rejected", retryable=False)
    if isinstance(exc, (litellm.NotFoundError, litellm.BadRequestError)):
        return LLMCallFailed(status=LLMCallStatus.ERROR, reason=f"request rejected ({status})", retryable=False)
    if isinstance(exc, (litellm.InternalServerError, litellm.ServiceUnavailableError, litellm.APIConnectionError)):
        return LLMCallFailed(status=LLMCallStatus.ERROR, reason=f"provider error ({status or 'connection'})", retryable=True)
    retryable = isinstance(status, int) and (status == 429 or status >= 500)
    reason = f"{type(exc).__name__} ({status})" if status else type(exc).__name__
    return LLMCallFailed(status=LLMCallStatus.ERROR, reason=reason, retryable=retryable)


class LLMService:
    def __init__(
        self,
        config: LLMConfig,
        *,
        store: Store,
        clock: Clock,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self._config = config
        self._store = store
        self._clock = clock
        self._environ = os.environ if environ is None else environ

    async def warm_up(self) -> None:
        """Import litellm (about 3 s, 190 MB) off the event loop, before the first message needs
        it, then move what it allocated out of the garbage collector's way: full collections
        over its ~400k objects otherwise pause the loop for hundreds of milliseconds."""
        await asyncio.to_thread(_litellm)
        gc.collect()
        gc.freeze()

    def missing_configuration(self) -> str | None:
        """A sentence saying what to set when the primary model cannot be reached, else None."""
        primary = self._config.endpoints()[0]
        if primary.api_key or primary.api_base:
            return None
        env = provider_key_env(primary.model)
        if env is None or self._environ.get(env):
            return None
        return llm_not_configured(primary.model, env)

    async def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        scope: TurnScope,
        tools: list[dict[str, Any]] | None = None,
        model: str | None = None,
    ) -> LLMReply:
        """Ask the configured models in order (or only ``model``, on the primary's endpoint)."""
        hint = self.missing_configuration()
        if hint:
            raise LLMNotConfigured(hint)
        litellm = _litellm()
        endpoints = self._config.endpoints()
        if model is not None:
            endpoints = [ModelEndpoint(model=model, api_base=endpoints[0].api_base, api_key=endpoints[0].api_key)]
        failures: list[tuple[str, str]] = []
        for endpoint in endpoints:
            for attempt in range(self._config.num_retries + 1):
                try:
                    return await self._call_once(litellm, endpoint, messages, tools, scope)
                except LLMCallFailed as failed:
                    outcome = failed
                if not outcome.retryable or attempt == self._config.num_retries:
                    break
                await asyncio.sleep(min(self._config.retry_backoff_s * 2**attempt, _MAX_BACKOFF_S))
            failures.append((endpoint.model, outcome.reason))
            log.warning("llm.model_failed", model=endpoint.model, reason=outcome.reason)
        raise LLMUnavailable(failures)

    async def _call_once(
        self,
        litellm: Any,
        endpoint: ModelEndpoint,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        scope: TurnScope,
    ) -> LLMReply:
        kwargs: dict[str, Any] = {
            "model": endpoint.model,
            "messages": messages,
            "timeout": self._config.timeout_s,
            "num_retries": 0,
            "max_retries": 0,
        }
        if tools:
            kwargs["tools"] = tools
        if endpoint.api_base:
            kwargs["api_base"] = endpoint.api_base
        if endpoint.api_key:
            kwargs["api_key"] = endpoint.api_key.get_secret_value()
        stream = self._config.stream and scope.progress.streams
        if stream:
            kwargs["stream"] = True
            kwargs["stream_options"] = {"include_usage": True}
        seq = scope.next_llm_seq()
        await scope.progress.emit(Thinking())
        started = self._clock.monotonic()
        try:
            async with asyncio.timeout(self._config.timeout_s + 1.0):
                response = await litellm.acompletion(**kwargs)
                if stream:
                    response = await collect_stream(litellm, response, scope)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # translated right here, at the edge
            outcome = _classify(exc, litellm)
            await self._record(scope, seq, endpoint.model, outcome.status, started, error=outcome.reason)
            log.info("llm.call_failed", model=endpoint.model, seq=seq, reason=outcome.reason,
                     detail=str(exc)[:300])
            raise outcome from exc
        reply = _parse(response, endpoint.model)
        cost = _cost(litellm, response)
        await self._record(
            scope, seq, endpoint.model, LLMCallStatus.OK, started,
            prompt_tokens=reply.prompt_tokens, completion_tokens=reply.completion_tokens, cost_usd=cost,
        )
        return reply

    async def _record(
        self, scope: TurnScope, seq: int, model: str, status: LLMCallStatus, started: float, **fields: Any,
    ) -> None:
        latency_ms = (self._clock.monotonic() - started) * 1000
        await self._store.audit.record_llm_call(
            LLMCallRecord(turn_id=scope.turn_id, seq=seq, model=model, status=status, latency_ms=latency_ms, **fields)
        )


def _parse(response: Any, model: str) -> LLMReply:
    message = response.choices[0].message
    calls = []
    for i, call in enumerate(getattr(message, "tool_calls", None) or []):
        arguments = call.function.arguments
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments)
        calls.append(ToolCall(id=call.id or f"call_{i}", name=call.function.name or "", arguments=arguments or "{}"))
    usage = getattr(response, "usage", None)
    return LLMReply(
        text=message.content,
        tool_calls=tuple(calls),
        model=model,
        prompt_tokens=getattr(usage, "prompt_tokens", None),
        completion_tokens=getattr(usage, "completion_tokens", None),
    )


def _cost(litellm: Any, response: Any) -> float | None:
    try:
        cost = litellm.completion_cost(completion_response=response)
    except Exception:  # unknown model or price: cost stays unknown
        return None
    return float(cost) if cost else None
