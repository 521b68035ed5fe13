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
* a circuit breaker per model (and endpoint, ``bruce/llm/breaker.py``): after
  ``llm.circuit_failures`` provider faults in a row the model is skipped for
  ``llm.circuit_cooldown_s``; then one trial call (no retries) closes it on success or opens it
  again.

Why a call failed is read in ``bruce/llm/faults.py``; the reply, in ``bruce/llm/reply.py``.

When someone watches the turn's progress (``scope.progress.streams``) and ``llm.stream`` is on,
the call streams: each piece of text is emitted as a ``TextDelta`` as it arrives, and the
chunks are assembled by litellm into the same reply a plain call gives.
"""

from __future__ import annotations

import asyncio
import gc
import os
import sys
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import structlog

from bruce.clock import Clock
from bruce.config.schema import LLMConfig, ModelEndpoint
from bruce.errors import LLMCallFailed, LLMNotConfigured, LLMUnavailable, OverBudget
from bruce.llm.breaker import Circuit, CircuitBreaker
from bruce.llm.budget import BACKGROUND_STOP_AT, Budget
from bruce.llm.faults import classify, retry_after
from bruce.llm.lean import release_unused
from bruce.llm.reply import LLMReply, parse_reply, reply_cost
from bruce.llm.stream import collect_stream, prepare_first_stream
from bruce.records import LLMCallRecord
from bruce.store import Store
from bruce.texts import llm_not_configured
from bruce.turns.progress import Thinking
from bruce.turns.scope import TurnScope
from bruce.values import LLMCallStatus, TurnSource

__all__ = ["LLMService", "LLMReply", "provider_key_env", "load_litellm"]

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


def load_litellm() -> Any:
    """litellm, imported on first use (about 3 s and 155 MiB: ``warm_up`` does it off the event
    loop), set up for how Bruce calls it; what its import kept for nothing is let go of once."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    first = "litellm" not in sys.modules
    import litellm

    if first:
        release_unused()

    litellm.suppress_debug_info = True
    litellm.telemetry = False
    # litellm would count the tokens of every stream with tiktoken (loaded on first use: ~110 MB
    # and a ~0.7 s stall of the event loop); providers report usage themselves
    litellm.disable_token_counter = True
    return litellm


def _load_for_streams() -> Any:
    """litellm, and what the first streamed answer would load and build (``prepare_first_stream``)."""
    litellm = load_litellm()
    prepare_first_stream()
    return litellm


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
        budget: Budget | None = None,
    ) -> None:
        """``budget``: the daily budget every call is checked against (``_check_budget``); None: no limit."""
        self._config = config
        self._store = store
        self._clock = clock
        self._environ = os.environ if environ is None else environ
        self.budget = budget
        self._breaker = CircuitBreaker(failures=config.circuit_failures, cooldown_s=config.circuit_cooldown_s,
                                       clock=clock)
        self._spent: OrderedDict[str, float] = OrderedDict()  # turn id -> seconds spent waiting on models
        self._unpriced: set[tuple[str, str]] = set()  # (model, provider) litellm has no price for: not asked again

    async def warm_up(self) -> None:
        """Import litellm (about 3 s, 170 MB) off the event loop, before the first message needs
        it; make one call that never leaves the process (litellm's ``mock_response``), so that
        what its first call builds (~40 more modules, its deferred pydantic models: ~0.4 s) is
        not paid by the first message; then move what is allocated out of the garbage
        collector's way: full collections over its ~400k objects otherwise pause the loop for
        hundreds of milliseconds."""
        litellm = await asyncio.to_thread(_load_for_streams)
        try:
            await litellm.acompletion(model=self._config.model, messages=[{"role": "user", "content": "warm-up"}],
                                      mock_response="ok", api_key="warm-up")
        except Exception as exc:  # only the first real call is slower for it
            log.warning("llm.warm_up_call_failed", error=type(exc).__name__)
        # pricing a streamed reply builds litellm's deferred usage-details models on first use (about
        # 35 ms of the first message's time in the daemon); the mock call does not get that far
        litellm.Usage(prompt_tokens=1, completion_tokens=1, total_tokens=2, cache_creation_input_tokens=0,
                      cache_read_input_tokens=0)
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
        await self._check_budget(scope.source)
        litellm = load_litellm()
        endpoints = self._config.endpoints()
        if model is not None:
            endpoints = [ModelEndpoint(model=model, api_base=endpoints[0].api_base, api_key=endpoints[0].api_key)]
        started = self._clock.monotonic()
        deadline = started + self._config.turn_deadline_s - self._spent.get(scope.turn_id, 0.0)
        try:
            return await self._first_answer(litellm, endpoints, messages, tools, scope, deadline)
        finally:
            self._spend(scope.turn_id, self._clock.monotonic() - started)

    async def _check_budget(self, source: TurnSource) -> None:
        """Before every call, whatever asks for it: background calls (summaries, memory) stop at
        90 % of the day's budget, the rest at 100 % (a turn's second and later calls, the
        claim correction, the comment on an approved action), so a spent budget is never spent
        further. ``OverBudget`` carries the spend, for the turn's code-written notice."""
        if self.budget is None:
            return
        background = source in (TurnSource.SUMMARY, TurnSource.MEMORY)
        spend = await self.budget.reached(BACKGROUND_STOP_AT if background else 1.0)
        if spend is None:
            return
        if background:
            log.info("llm.background_over_budget")
            raise OverBudget("the day's LLM budget is 90% spent: background calls wait for tomorrow", spend=spend)
        log.info("llm.over_budget", source=str(source))
        raise OverBudget("the day's LLM budget is spent: no model call until tomorrow", spend=spend)

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
            circuit = self._breaker.circuit(endpoint)
            skip = self._breaker.refusal(circuit)
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
        circuit: Circuit,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        scope: TurnScope,
        deadline: float,
    ) -> _Tried:
        """One model: its attempts (one only for a circuit's trial call) and the waits between them."""
        trial = circuit.due_trial
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
                    self._breaker.failed(endpoint, circuit, failed)
                else:
                    self._breaker.succeeded(endpoint, circuit)
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
        asked = retry_after(failed, self._clock.now())
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
        stream = self._config.stream and scope.progress.streams
        kwargs = _request(endpoint, messages, tools, timeout=timeout, stream=stream)
        seq = scope.next_llm_seq()
        await scope.progress.emit(Thinking())
        started = self._clock.monotonic()
        try:
            async with asyncio.timeout(timeout + 1.0):
                response = await litellm.acompletion(**kwargs)
                if stream:
                    response = await collect_stream(litellm, response, scope)
            reply = parse_reply(response, endpoint.model)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # translated right here, at the edge; a malformed reply too
            outcome = classify(exc, litellm)
            await self._record(scope, seq, endpoint.model, outcome.status, started, error=outcome.reason)
            log.info("llm.call_failed", model=endpoint.model, seq=seq, reason=outcome.reason,
                     detail=str(exc)[:300])
            raise outcome from exc
        cost = reply_cost(litellm, response, self._unpriced)
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


def _request(
    endpoint: ModelEndpoint,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    *,
    timeout: float,
    stream: bool,
) -> dict[str, Any]:
    """The arguments of one ``litellm.acompletion`` call: one attempt, retried by us, not by litellm."""
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
    if stream:
        kwargs["stream"] = True
        kwargs["stream_options"] = {"include_usage": True}
    return kwargs
