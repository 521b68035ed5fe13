"""A circuit breaker per model (and endpoint), so a turn does not wait on a model that is down.

After ``failures`` provider faults in a row the model is skipped for ``cooldown_s``; then one
trial call (no retries) closes it on success or opens it again. A rejected request or key says
nothing about the provider's health and is not counted. Logged as ``llm.circuit_open`` /
``llm.circuit_closed``. ``failures == 0`` turns the breaker off.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import structlog

from bruce.clock import Clock
from bruce.config.schema import ModelEndpoint
from bruce.errors import LLMCallFailed

__all__ = ["Circuit", "CircuitBreaker"]

log = structlog.get_logger(__name__)


@dataclass(slots=True)
class Circuit:
    """One model's (on one endpoint) recent health."""

    failures: int = 0  # provider faults in a row
    open_until: float | None = None  # monotonic; past it, one trial call may go
    trial: bool = False  # that trial call is in flight

    @property
    def due_trial(self) -> bool:
        """The circuit was open: the next call is its one trial."""
        return self.open_until is not None


class CircuitBreaker:
    def __init__(self, *, failures: int, cooldown_s: float, clock: Clock) -> None:
        self._threshold = failures
        self._cooldown_s = cooldown_s
        self._clock = clock
        self._circuits: dict[tuple[str | None, str], Circuit] = {}

    def circuit(self, endpoint: ModelEndpoint) -> Circuit:
        return self._circuits.setdefault((endpoint.api_base, endpoint.model), Circuit())

    def refusal(self, circuit: Circuit) -> str | None:
        """Why the model is skipped now, or None when it may be asked (closed, or due a trial)."""
        if circuit.open_until is None:
            return None
        left = circuit.open_until - self._clock.monotonic()
        if left > 0:
            return f"circuit open after {circuit.failures} failures in a row; next try in {math.ceil(left)} s"
        if circuit.trial:
            return "circuit open; a trial call is in flight"
        return None

    def failed(self, endpoint: ModelEndpoint, circuit: Circuit, failed: LLMCallFailed) -> None:
        """Count a provider fault (a rejected request or key says nothing about the provider's health)."""
        if not failed.retryable or self._threshold == 0:
            return
        circuit.failures += 1
        if circuit.trial or (circuit.open_until is None and circuit.failures >= self._threshold):
            circuit.open_until = self._clock.monotonic() + self._cooldown_s
            log.warning("llm.circuit_open", model=endpoint.model, failures=circuit.failures,
                        cooldown_s=self._cooldown_s, reason=failed.reason, trial=circuit.trial)

    def succeeded(self, endpoint: ModelEndpoint, circuit: Circuit) -> None:
        was_open = circuit.open_until is not None
        circuit.failures, circuit.open_until = 0, None
        if was_open:
            log.info("llm.circuit_closed", model=endpoint.model)
