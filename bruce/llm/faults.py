"""Why a model call failed: the exception litellm raised, read as an ``LLMCallFailed``.

Part of the LLM edge (``bruce/llm/service.py`` passes the lazily imported ``litellm`` in).
``classify`` names what really happened ("connection refused", "malformed response (no
choices)", "provider error (503)"…) and whether trying again could help; ``retry_after`` reads
the wait a provider asked for from the response litellm keeps on its exception.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

from bruce.errors import LLMCallFailed
from bruce.llm.stream import MalformedReply
from bruce.values import LLMCallStatus

__all__ = ["classify", "retry_after"]


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


def classify(exc: BaseException, litellm: Any) -> LLMCallFailed:
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
    return _by_kind(exc, litellm, status or getattr(exc, "status_code", None))


def _by_kind(exc: BaseException, litellm: Any, status: Any) -> LLMCallFailed:
    """A fault that reached the provider, told apart by litellm's exception type and the status."""
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


def retry_after(failed: LLMCallFailed, now: datetime) -> float | None:
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
