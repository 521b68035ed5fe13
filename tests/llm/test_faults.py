"""Reading why a model call failed (the whole path over real litellm: tests/llm/test_service.py)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import httpx
import litellm
import pytest

from bruce.errors import LLMCallFailed
from bruce.llm.faults import classify, retry_after
from bruce.llm.stream import MalformedReply
from bruce.values import LLMCallStatus

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


def raised_from(outer: BaseException, inner: BaseException) -> BaseException:
    try:
        try:
            raise inner
        except BaseException as exc:
            raise outer from exc
    except BaseException as caught:
        return caught


def test_a_time_out_is_retryable():
    failed = classify(TimeoutError(), litellm)
    assert (failed.status, failed.reason, failed.retryable) == (LLMCallStatus.TIMEOUT, "timed out", True)


@pytest.mark.parametrize(("inner", "reason"), [
    (ConnectionRefusedError(), "connection refused"),
    (httpx.ConnectError("no route"), "cannot connect"),
    (httpx.ReadError("reset"), "connection lost"),
    (MalformedReply("no choices", "the reply has no choices"), "malformed response (no choices)"),
    (json.JSONDecodeError("bad", "{", 0), "malformed response (not JSON)"),
])
def test_the_cause_under_litellms_error_is_named(inner, reason):
    failed = classify(raised_from(RuntimeError("litellm said 500"), inner), litellm)
    assert (failed.reason, failed.retryable) == (reason, True)


def test_an_unknown_error_is_named_by_its_type_and_not_retried():
    failed = classify(ValueError("odd"), litellm)
    assert (failed.reason, failed.retryable) == ("ValueError", False)


def failure_with_headers(headers: dict[str, str]) -> LLMCallFailed:
    response = httpx.Response(429, headers=headers, request=httpx.Request("POST", "http://x"))
    cause = httpx.HTTPStatusError("429", request=response.request, response=response)
    failed = LLMCallFailed(status=LLMCallStatus.ERROR, reason="rate limited (429)", retryable=True)
    failed.__cause__ = cause
    return failed


@pytest.mark.parametrize(("headers", "seconds"), [
    ({"retry-after-ms": "1500"}, 1.5),
    ({"Retry-After": "7"}, 7.0),
    ({"Retry-After": format_datetime(NOW + timedelta(seconds=20), usegmt=True)}, 20.0),
    ({"Retry-After": "-3"}, 0.0),
    ({"Retry-After": "soon"}, None),
    ({}, None),
])
def test_retry_after_reads_what_the_provider_asked(headers, seconds):
    assert retry_after(failure_with_headers(headers), NOW) == seconds


def test_retry_after_without_a_cause_is_none():
    assert retry_after(LLMCallFailed(status=LLMCallStatus.ERROR, reason="x", retryable=True), NOW) is None
