"""The language model, through litellm. The only module that imports litellm.

``LLMService.complete`` tries the primary model with retries on rate limits, server errors,
time-outs, connection faults and malformed replies, then each fallback in order. A retry waits
what the provider's ``Retry-After`` asks (up to 30 s; longer: the next model), else the
exponential backoff, always through the injected clock. Every attempt, good or bad, is one
``llm_calls`` row whose ``error`` says what really happened ("connection refused", "malformed
response (no choices)", "provider error (503)"…). When nothing answers it raises
``LLMUnavailable``; when no key or endpoint is configured it raises ``LLMNotConfigured`` without
touching the network.

Two limits keep a user from waiting on a model that does not answer:

* the turn deadline (``llm.turn_deadline_s``): the time one turn spends waiting on models,
  summed over its calls (time running tools between them does not count). Each attempt gets
  at most the time left; when it is gone no further attempt or fallback is made, and
  ``LLMUnavailable`` names the deadline.
* a circuit breaker per model (and endpoint): after ``llm.circuit_failures`` provider faults in
  a row the model is skipped for ``llm.circuit_cooldown_s``; then one trial call (no retries)
  closes it on success or opens it again. Logged as ``llm.circuit_open`` / ``llm.circuit_closed``.

When someone watches the turn's progress (``scope.progress.streams``) and ``llm.stream`` is on,
the call streams: each piece of text is emitted as a ``TextDelta`` as it arrives, and the
chunks are assembled by litellm into the same reply a plain call gives.
"""

from __future__ import annotations

import asyncio
import gc
import json
import math
import os
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import structlog

from bruce.clock import Clock
from bruce.config.schema import LLMConfig, ModelEndpoint
from bruce.contracts import ToolCall
from bruce.errors import LLMCallFailed, LLMNotConfigured, LLMUnavailable, OverBudget
from bruce.llm.budget import BACKGROUND_STOP_AT, Budget
from bruce.llm.stream import MalformedReply, collect_stream
from bruce.records import LLMCallRecord
from bruce.store import Store
from bruce.texts import llm_not_configured
from bruce.turns.progress import Thinking
from bruce.turns.scope import TurnScope
from bruce.values import LLMCallStatus, TurnSource

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
_MAX_RETRY_AFTER_S = 30.0  # a provider asking for a longer wait: go to the next model instead
_MIN_ATTEMPT_S = 0.1  # less than this left of the turn's deadline: no further attempt
_TURNS_KEPT = 512  # turns whose time on models is remembered (the oldest are forgotten first)


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


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and every exception it was raised from or while handling (litellm wraps the SDK's
    error, which wraps httpx's, which wraps the socket's)."""
    found: list[BaseException] = []
    todo: list[BaseException | None] = [exc]
    while todo:
        item = todo.pop(0)
        if item is None or any(item is seen for seen in found):
            continue
        found.append(item)
        todo += [item.__cause__, item.__context__]
    return found


# What litellm says when a 200 carried no completion: it raises a 500 of its own making, with no
# HTTP status underneath (pinned by tests/llm/test_service.py against the fake server).
_MALFORMED_TEXT = (
    ("provider returned a response with no 'choices'", "no choices"),
    ("provider returned 'choices' that is not a list", "no choices"),
    ("Empty or invalid response from LLM endpoint", "not a completion"),
    ("Invalid response object", "not a completion"),
)


def _malformed(chain: list[BaseException]) -> str | None:
    """What was wrong with a reply that arrived but was not a completion, or None."""
    for item in chain:
        if isinstance(item, MalformedReply):
            return item.what
        if isinstance(item, json.JSONDecodeError):
            return "not JSON"
    text = " ".join(str(item) for item in chain)
    return next((what for marker, what in _MALFORMED_TEXT if marker in text), None)


def _transport_fault(chain: list[BaseException], *, connect_only: bool) -> str | None:
    """A label for a connection that could not be made (or, unless ``connect_only``, was lost)."""
    import socket

    import httpx
    import openai

    if any(isinstance(item, ConnectionRefusedError) for item in chain):
        return "connection refused"
    if any(isinstance(item, socket.gaierror) for item in chain):
        return "cannot connect (host not found)"
    if any(isinstance(item, httpx.ConnectError) for item in chain):
        return "cannot connect"
    if connect_only:
        return None
    lost = (httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError, ConnectionResetError, BrokenPipeError)
    if any(isinstance(item, lost) for item in chain):
        return "connection lost"
    if any(type(item).__module__.startswith("openai") and isinstance(item, openai.APIConnectionError)
           for item in chain):
        return "connection error"
    return None


def _http_status(chain: list[BaseException]) -> int | None:
    """The status of an HTTP response the provider really sent (litellm invents a 500 for faults
    that had none: a refused connection, a malformed body)."""
    import httpx
    import openai

    for item in chain:
        if isinstance(item, httpx.HTTPStatusError):
            return item.response.status_code
        if type(item).__module__.startswith("openai") and isinstance(item, openai.APIStatusError):
            return item.status_code
    return None


def _classify(exc: BaseException, litellm: Any) -> LLMCallFailed:
    """Why one call failed, and whether trying again could help."""
    if isinstance(exc, (TimeoutError, litellm.Timeout)):
        return LLMCallFailed(status=LLMCallStatus.TIMEOUT, reason="timed out", retryable=True)
    chain = _chain(exc)
    status = _http_status(chain)
    label = _transport_fault(chain, connect_only=True)
    if label is None and status is None:  # an HTTP error page is the status's, not a malformed reply
        what = _malformed(chain)
        label = f"malformed response ({what})" if what else _transport_fault(chain, connect_only=False)
    if label is not None:
        return LLMCallFailed(status=LLMCallStatus.ERROR, reason=label, retryable=True)
    status = status or getattr(exc, "status_code", None)
    if isinstance(exc, litellm.RateLimitError):
        return LLMCallFailed(status=LLMCallStatus.ERROR, reason="rate limited (429)", retryable=True)
    if isinstance(exc, (litellm.AuthenticationError, litellm.PermissionDeniedError)):
        return LLMCallFailed(status=LLMCallStatus.ERROR, reason="the API key was rejected", retryable=False)
    if isinstance(exc, (litellm.NotFoundError, litellm.BadRequestError)):
        return LLMCallFailed(status=LLMCallStatus.ERROR, reason=f"request rejected ({status})", retryable=False)
    if isinstance(status, int) and (status == 429 or status >= 500):
        return LLMCallFailed(status=LLMCallStatus.ERROR, reason=f"provider error ({status})", retryable=True)
    if isinstance(exc, (litellm.InternalServerError, litellm.ServiceUnavailableError, litellm.APIConnectionError)):
        return LLMCallFailed(status=LLMCallStatus.ERROR, reason=f"provider error ({status or 'connection'})",
                             retryable=True)
    reason = f"{type(exc).__name__} ({status})" if status else type(exc).__name__
    return LLMCallFailed(status=LLMCallStatus.ERROR, reason=reason, retryable=False)


def _headers(chain: list[BaseException]) -> Iterator[Any]:
    for item in chain:
        for headers in (getattr(item, "litellm_response_headers", None),
                        getattr(getattr(item, "response", None), "headers", None)):
            if headers is not None and hasattr(headers, "get"):
                yield headers


def _retry_after(failed: LLMCallFailed, now: datetime) -> float | None:
    """Seconds the provider asked us to wait (``retry-after-ms``, ``Retry-After`` in seconds or as
    an HTTP date), from the response litellm keeps on its exception; None when it asked nothing."""
    if failed.__cause__ is None:
        return None
    for headers in _headers(_chain(failed.__cause__)):
        lowered = {str(k).lower(): str(v) for k, v in headers.items()} if isinstance(headers, dict) else headers
        millis = _number(lowered.get("retry-after-ms"))
        if millis is not None:
            return max(0.0, millis / 1000)
        value = lowered.get("retry-after")
        if value is not None and (seconds := _seconds(str(value).strip(), now)) is not None:
            return max(0.0, seconds)
    return None


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _seconds(value: str, now: datetime) -> float | None:
    """A Retry-After value (delta-seconds or an HTTP date) as seconds from ``now``."""
    seconds = _number(value)
    if seconds is not None:
        return seconds
    try:
        moment = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    moment = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    return (moment - now).total_seconds()


@dataclass(slots=True)
class _Circuit:
    """One model's (on one endpoint) recent health."""

    failures: int = 0  # provider faults in a row
    open_until: float | None = None  # monotonic; past it, one trial call may go
    trial: bool = False  # that trial call is in flight


@dataclass(slots=True)
class _Tried:
    """What trying one model came to: its reply, or its last failure (with why it stopped there)."""

    reply: LLMReply | None = None
    failed: LLMCallFailed | None = None
    note: str = ""


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
        self.budget: Budget | None = None  # the daily budget (app wiring); None: no limit
        self._circuits: dict[tuple[str | None, str], _Circuit] = {}
        self._spent: OrderedDict[str, float] = OrderedDict()  # turn id -> seconds spent waiting on models

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
        """Ask the configured models in order (or only ``model``, on the primary's endpoint),
        within what is left of the turn's deadline."""
        hint = self.missing_configuration()
        if hint:
            raise LLMNotConfigured(hint)
        if scope.source in (TurnSource.SUMMARY, TurnSource.MEMORY) and self.budget is not None \
                and await self.budget.reached(BACKGROUND_STOP_AT) is not None:
            log.info("llm.background_over_budget")
            raise OverBudget("the day's LLM budget is 90% spent: background calls wait for tomorrow")
        litellm = _litellm()
        endpoints = self._config.endpoints()
        if model is not None:
            endpoints = [ModelEndpoint(model=model, api_base=endpoints[0].api_base, api_key=endpoints[0].api_key)]
        started = self._clock.monotonic()
        deadline = started + self._config.turn_deadline_s - self._spent.get(scope.turn_id, 0.0)
        try:
            return await self._first_answer(litellm, endpoints, messages, tools, scope, deadline)
        finally:
            self._spend(scope.turn_id, self._clock.monotonic() - started)

    async def _first_answer(
        self,
        litellm: Any,
        endpoints: list[ModelEndpoint],
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        scope: TurnScope,
        deadline: float,
    ) -> LLMReply:
        failures: list[tuple[str, str]] = []
        for index, endpoint in enumerate(endpoints):
            if deadline - self._clock.monotonic() < _MIN_ATTEMPT_S:
                raise self._deadline_passed(failures, endpoints[index:])
            circuit = self._circuits.setdefault((endpoint.api_base, endpoint.model), _Circuit())
            skip = self._circuit_refusal(circuit)
            if skip:
                failures.append((endpoint.model, skip))
                log.info("llm.model_skipped", model=endpoint.model, reason=skip)
                continue
            tried = await self._ask(litellm, endpoint, circuit, messages, tools, scope, deadline)
            if tried.reply is not None:
                return tried.reply
            if tried.failed is None:  # no time was left for even one attempt
                raise self._deadline_passed(failures, endpoints[index:])
            failures.append((endpoint.model, tried.failed.reason + tried.note))
            log.warning("llm.model_failed", model=endpoint.model, reason=tried.failed.reason + tried.note)
        if deadline - self._clock.monotonic() < _MIN_ATTEMPT_S:
            raise self._deadline_passed(failures, [])
        raise LLMUnavailable(failures)

    async def _ask(
        self,
        litellm: Any,
        endpoint: ModelEndpoint,
        circuit: _Circuit,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        scope: TurnScope,
        deadline: float,
    ) -> _Tried:
        """One model: its attempts (one only for a circuit's trial call) and the waits between them."""
        trial = circuit.open_until is not None
        attempts = 1 if trial else self._config.num_retries + 1
        tried = _Tried()
        if trial:
            circuit.trial = True  # the other turns skip the model until this call is over
        try:
            for attempt in range(attempts):
                left = deadline - self._clock.monotonic()
                if left < _MIN_ATTEMPT_S:  # only before a first attempt: retries are checked before the wait
                    return tried
                try:
                    tried.reply = await self._call_once(
                        litellm, endpoint, messages, tools, scope, timeout=min(self._config.timeout_s, left))
                except LLMCallFailed as failed:
                    tried.failed = failed
                    self._circuit_failure(endpoint, circuit, failed)
                else:
                    self._circuit_success(endpoint, circuit)
                    return tried
                if not tried.failed.retryable or attempt == attempts - 1 or circuit.open_until is not None:
                    return tried
                wait, tried.note = self._retry_wait(tried.failed, attempt, deadline)
                if wait is None:
                    return tried
                await self._clock.sleep(wait)
        finally:
            if trial:
                circuit.trial = False
        return tried

    def _retry_wait(self, failed: LLMCallFailed, attempt: int, deadline: float) -> tuple[float | None, str]:
        """How long to wait before trying the same model again; None (and why) when not at all."""
        asked = _retry_after(failed, self._clock.now())
        if asked is not None and asked > _MAX_RETRY_AFTER_S:
            return None, f"; Retry-After {asked:g} s is over {_MAX_RETRY_AFTER_S:g} s"
        wait = asked if asked is not None else min(self._config.retry_backoff_s * 2**attempt, _MAX_BACKOFF_S)
        left = deadline - self._clock.monotonic()
        if left < _MIN_ATTEMPT_S:
            return None, ""  # the deadline itself is named once, for the whole call
        if wait + _MIN_ATTEMPT_S > left:
            return None, f"; waiting {wait:g} s to retry would pass the turn deadline"
        return wait, ""

    def _deadline_passed(self, failures: list[tuple[str, str]], untried: list[ModelEndpoint]) -> LLMUnavailable:
        note = f"{self._config.turn_deadline_s:g} s for the turn passed"
        if untried:
            note += "; not tried: " + ", ".join(e.model for e in untried)
        log.warning("llm.deadline_passed", deadline_s=self._config.turn_deadline_s,
                    untried=[e.model for e in untried])
        return LLMUnavailable([*failures, ("llm.turn_deadline_s", note)])

    def _spend(self, turn_id: str, seconds: float) -> None:
        self._spent[turn_id] = self._spent.get(turn_id, 0.0) + max(0.0, seconds)
        self._spent.move_to_end(turn_id)
        while len(self._spent) > _TURNS_KEPT:
            self._spent.popitem(last=False)

    # the circuit breaker ---------------------------------------------------------------------

    def _circuit_refusal(self, circuit: _Circuit) -> str | None:
        """Why the model is skipped now, or None when it may be asked (closed, or due a trial)."""
        if circuit.open_until is None:
            return None
        left = circuit.open_until - self._clock.monotonic()
        if left > 0:
            return f"circuit open after {circuit.failures} failures in a row; next try in {math.ceil(left)} s"
        if circuit.trial:
            return "circuit open; a trial call is in flight"
        return None

    def _circuit_failure(self, endpoint: ModelEndpoint, circuit: _Circuit, failed: LLMCallFailed) -> None:
        """Count a provider fault (a rejected request or key says nothing about the provider's health)."""
        threshold = self._config.circuit_failures
        if not failed.retryable or threshold == 0:
            return
        circuit.failures += 1
        if circuit.trial or (circuit.open_until is None and circuit.failures >= threshold):
            circuit.open_until = self._clock.monotonic() + self._config.circuit_cooldown_s
            log.warning("llm.circuit_open", model=endpoint.model, failures=circuit.failures,
                        cooldown_s=self._config.circuit_cooldown_s, reason=failed.reason, trial=circuit.trial)

    def _circuit_success(self, endpoint: ModelEndpoint, circuit: _Circuit) -> None:
        was_open = circuit.open_until is not None
        circuit.failures, circuit.open_until = 0, None
        if was_open:
            log.info("llm.circuit_closed", model=endpoint.model)

    async def _call_once(
        self,
        litellm: Any,
        endpoint: ModelEndpoint,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        scope: TurnScope,
        *,
        timeout: float,
    ) -> LLMReply:
        kwargs: dict[str, Any] = {
            "model": endpoint.model,
            "messages": messages,
            "timeout": timeout,
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
            async with asyncio.timeout(timeout + 1.0):
                response = await litellm.acompletion(**kwargs)
                if stream:
                    response = await collect_stream(litellm, response, scope)
            reply = _parse(response, endpoint.model)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # translated right here, at the edge; a malformed reply too
            outcome = _classify(exc, litellm)
            await self._record(scope, seq, endpoint.model, outcome.status, started, error=outcome.reason)
            log.info("llm.call_failed", model=endpoint.model, seq=seq, reason=outcome.reason,
                     detail=str(exc)[:300])
            raise outcome from exc
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
    choices = getattr(response, "choices", None)
    if not choices:  # litellm passes a 200 with an empty list through as it is
        raise MalformedReply("no choices", "the reply has no choices")
    message = getattr(choices[0], "message", None)
    if message is None:
        raise MalformedReply("no message", "the reply's first choice has no message")
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
    """The call's price: litellm has already worked it out for a reply it parsed itself (its
    ``_hidden_params``), so it is computed again only for a stream we assembled."""
    hidden = getattr(response, "_hidden_params", None)
    known = hidden.get("response_cost") if isinstance(hidden, dict) else None
    if isinstance(known, int | float) and not isinstance(known, bool) and known > 0:
        return float(known)
    try:
        cost = litellm.completion_cost(completion_response=response)
    except Exception:  # unknown model or price: cost stays unknown
        return None
    return float(cost) if cost else None
