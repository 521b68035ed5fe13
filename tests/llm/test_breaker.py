"""The circuit breaker on its own, over a fake clock (through the service: tests/llm/test_service.py)."""

from __future__ import annotations

from structlog.testing import capture_logs

from bruce.config.schema import ModelEndpoint
from bruce.errors import LLMCallFailed
from bruce.llm.breaker import CircuitBreaker
from bruce.values import LLMCallStatus
from tests.fakes.clock import FakeClock

PRIMARY = ModelEndpoint(model="openai/primary")
FAULT = LLMCallFailed(status=LLMCallStatus.ERROR, reason="provider error (503)", retryable=True)
REJECTED = LLMCallFailed(status=LLMCallStatus.ERROR, reason="the API key was rejected", retryable=False)


def breaker(clock: FakeClock, failures: int = 2) -> CircuitBreaker:
    return CircuitBreaker(failures=failures, cooldown_s=60, clock=clock)


def test_a_circuit_opens_after_the_threshold_of_faults_in_a_row():
    clock = FakeClock()
    b = breaker(clock)
    circuit = b.circuit(PRIMARY)
    b.failed(PRIMARY, circuit, FAULT)
    assert b.refusal(circuit) is None
    with capture_logs() as logs:
        b.failed(PRIMARY, circuit, FAULT)
    assert b.refusal(circuit) == "circuit open after 2 failures in a row; next try in 60 s"
    assert [entry["event"] for entry in logs] == ["llm.circuit_open"]


def test_a_success_between_faults_starts_the_count_again():
    b = breaker(FakeClock())
    circuit = b.circuit(PRIMARY)
    b.failed(PRIMARY, circuit, FAULT)
    b.succeeded(PRIMARY, circuit)
    b.failed(PRIMARY, circuit, FAULT)
    assert b.refusal(circuit) is None and circuit.failures == 1


def test_a_rejected_request_is_not_counted_and_zero_turns_the_breaker_off():
    b = breaker(FakeClock())
    circuit = b.circuit(PRIMARY)
    for _ in range(3):
        b.failed(PRIMARY, circuit, REJECTED)
    assert circuit.failures == 0
    off = breaker(FakeClock(), failures=0)
    other = off.circuit(PRIMARY)
    for _ in range(5):
        off.failed(PRIMARY, other, FAULT)
    assert off.refusal(other) is None


def test_after_the_cool_down_one_trial_may_go_and_its_outcome_decides():
    clock = FakeClock()
    b = breaker(clock, failures=1)
    circuit = b.circuit(PRIMARY)
    b.failed(PRIMARY, circuit, FAULT)
    clock.advance(seconds=61)
    assert b.refusal(circuit) is None and circuit.due_trial
    circuit.trial = True
    assert b.refusal(circuit) == "circuit open; a trial call is in flight"
    b.failed(PRIMARY, circuit, FAULT)  # the trial failed: open again for a whole cool-down
    circuit.trial = False
    assert b.refusal(circuit) == "circuit open after 2 failures in a row; next try in 60 s"
    clock.advance(seconds=61)
    with capture_logs() as logs:
        b.succeeded(PRIMARY, circuit)
    assert not circuit.due_trial and [entry["event"] for entry in logs] == ["llm.circuit_closed"]


def test_each_endpoint_of_a_model_has_its_own_circuit():
    b = breaker(FakeClock())
    local = ModelEndpoint(model="openai/primary", api_base="http://127.0.0.1:1/v1")
    assert b.circuit(PRIMARY) is b.circuit(ModelEndpoint(model="openai/primary"))
    assert b.circuit(PRIMARY) is not b.circuit(local)
