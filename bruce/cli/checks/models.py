"""``bruce doctor``'s check of the language models: one tiny call per model (primary and each
fallback) through ``LLMService``, recorded in a scratch in-memory database."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from bruce.cli.checks.findings import Finding, Mark, variable
from bruce.clock import SystemClock
from bruce.config.schema import Config, ModelEndpoint
from bruce.errors import LLMNotConfigured, LLMUnavailable

__all__ = ["check_models"]

_PROBE = [{"role": "user", "content": "Reply with the single word: ok"}]


def _llm_fix(reason: str, endpoint: ModelEndpoint, key: str | None) -> str:
    where = f"llm.api_base ({endpoint.api_base})" if endpoint.api_base else "the network"
    if "refused" in reason or "connect" in reason:
        return f"check {where} and that the server there is running"
    if "key" in reason:
        return f"put a valid key in {key}" if key else "check the model's API key"
    if "rejected" in reason:
        return f"check the model name {endpoint.model!r} (and that the key may use it)"
    if "timed out" in reason:
        return f"check {where}; the model did not answer in time"
    return "check the provider's status page and the llm settings"


async def _probe(config: Config, index: int, endpoint: ModelEndpoint, environ: Mapping[str, str], store: Any,
                 key: str | None, timeout_s: float) -> Finding:
    from bruce.config.schema import LLMConfig
    from bruce.llm.service import LLMService
    from bruce.turns.scope import TurnScope, new_turn_id
    from bruce.values import ConversationId, TurnSource

    label = f"llm {endpoint.model}" if index == 0 else f"llm fallback {index} {endpoint.model}"
    timeout = min(timeout_s, config.llm.timeout_s)
    one = LLMConfig(model=endpoint.model, api_base=endpoint.api_base, api_key=endpoint.api_key, num_retries=0,
                    timeout_s=timeout, turn_deadline_s=timeout + 1, circuit_failures=0, stream=False)
    clock = SystemClock()
    scope = TurnScope(turn_id=new_turn_id(), conversation_id=ConversationId("doctor", "llm"), user_id=None)
    await store.messages.start_turn(scope.turn_id, str(scope.conversation), source=TurnSource.CHAT,
                                    inbound_message_id=None)
    try:
        await LLMService(one, store=store, clock=clock, environ=environ).complete(list(_PROBE), scope=scope)
    except LLMNotConfigured as exc:
        return Finding(Mark.FAIL, f"{label}: no API key or endpoint configured", exc.hint)
    except LLMUnavailable as exc:
        reason = "; ".join(r for _, r in exc.attempts)
        return Finding(Mark.FAIL, f"{label}: did not answer ({reason})", _llm_fix(reason, endpoint, key))
    # the model's own time, as llm_calls records it: the request to the answer, without loading litellm
    calls = await store.audit.llm_calls_of([scope.turn_id])
    return Finding(Mark.OK, f"{label}: answered in {calls[-1].latency_ms / 1000:.1f} s")


async def check_models(config: Config, raw: Any, environ: Mapping[str, str], timeout_s: float) -> list[Finding]:
    from bruce.llm.service import provider_key_env
    from bruce.store import Store

    store = await Store.open(":memory:", SystemClock())  # the probes' llm_calls rows go nowhere
    try:
        await store.messages.ensure_conversation("doctor:llm", "doctor", "llm")
        probes = []
        for index, endpoint in enumerate(config.llm.endpoints()):
            own = index > 0 and isinstance(config.llm.fallbacks[index - 1], ModelEndpoint)
            keys: tuple[str | int, ...] = ("llm", "fallbacks", index - 1, "api_key") if own else ("llm", "api_key")
            name = variable(raw, *keys)
            key = f"${name}" if name else (f"${provider_key_env(endpoint.model)}"
                                           if provider_key_env(endpoint.model) and not endpoint.api_key else None)
            probes.append(_probe(config, index, endpoint, environ, store, key, timeout_s))
        return list(await asyncio.gather(*probes))
    finally:
        await store.close()
