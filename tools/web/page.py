"""Reading one web page: ``read_url`` fetches an http(s) URL and returns its title and text.

Redirects are followed by hand so that the SSRF guard (:mod:`tools.netguard`) checks every hop;
at most ``max_bytes`` of the body are read (``tools/web/client.py``); the text is extracted in a
worker process (``tools/web/extract.py``), limited to ``EXTRACT_TIME_LIMIT_S``.

Every failure the model should hear about is a ``ToolFailed`` with a code:
``unsupported_scheme``, ``invalid_url``, ``dns_error``, ``blocked_address`` (from the guard),
``http_error``, ``unsupported_content``, ``timeout``, ``connection_error``,
``too_many_redirects``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple

import httpx
import structlog

from bruce.errors import ToolFailed
from tools.netguard import PinnedTransport, resolve_and_check
from tools.procworker import ProcessWorker, WorkerTimeout
from tools.web.client import ACCEPT_ENCODING, USER_AGENT, host_of, read_capped, safe_url, tls_context

__all__ = ["ALLOWED_CONTENT_TYPES", "EXTRACT_TIME_LIMIT_S", "Guard", "read_url"]

log = structlog.get_logger(__name__)

ALLOWED_CONTENT_TYPES = frozenset({"text/html", "text/plain", "application/xhtml+xml"})
EXTRACT_TIME_LIMIT_S = 10.0
_ACCEPT = "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.1"
_HEADERS = {"User-Agent": USER_AGENT, "Accept": _ACCEPT, "Accept-Encoding": ACCEPT_ENCODING}
_REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})

Guard = Callable[..., Awaitable[None]]
"""``async guard(url, *, allow_private) -> None``; raises ToolFailed to refuse a URL."""

_READER = ProcessWorker("tools.web.extract:readable_in_worker", time_limit_s=EXTRACT_TIME_LIMIT_S)


class _Fetched(NamedTuple):
    url: str
    status: int
    media_type: str
    charset: str | None
    body: bytes
    truncated: bool


def _redirect_location(resp: httpx.Response) -> str | None:
    location = resp.headers.get("location")
    return location if resp.status_code in _REDIRECT_STATUSES and location else None


def _redirect_target(resp: httpx.Response, location: str) -> str:
    try:
        return str(resp.url.join(location))
    except (httpx.InvalidURL, ValueError):
        raise ToolFailed(f"{safe_url(resp.url)} redirected to an invalid URL.", code="invalid_url") from None


def _readable_type(resp: httpx.Response) -> str:
    """The media type of a final response we can read, or ToolFailed (an HTTP error, another type)."""
    if resp.status_code >= 400:
        reason = resp.reason_phrase or "error"
        raise ToolFailed(
            f"The server answered HTTP {resp.status_code} ({reason}) for {safe_url(resp.url)}.",
            code="http_error",
        )
    media_type: str = resp.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media_type not in ALLOWED_CONTENT_TYPES:
        shown = media_type or "none given"
        raise ToolFailed(
            f"Cannot read {safe_url(resp.url)}: its content type is '{shown}'; only "
            "HTML and plain-text pages can be read.",
            code="unsupported_content",
        )
    return media_type


async def _fetch(
    client: httpx.AsyncClient,
    url: str,
    *,
    guard: Guard,
    allow_private: bool,
    max_bytes: int,
    max_redirects: int,
) -> _Fetched:
    """GET ``url`` following redirects by hand; returns the final response's data."""
    current = url
    redirects = 0
    while True:
        await guard(current, allow_private=allow_private)
        request = client.build_request("GET", current, headers=_HEADERS)
        resp = await client.send(request, stream=True, follow_redirects=False)
        try:
            location = _redirect_location(resp)
            if location is not None:
                if redirects >= max_redirects:
                    raise ToolFailed(
                        f"Too many redirects: gave up after {max_redirects} redirects starting from {safe_url(url)}.",
                        code="too_many_redirects",
                    )
                redirects += 1
                current = _redirect_target(resp, location)
                continue
            media_type = _readable_type(resp)
            body, truncated = await read_capped(resp, max_bytes)
            return _Fetched(str(resp.url), resp.status_code, media_type, resp.charset_encoding, body, truncated)
        finally:
            await resp.aclose()


async def _with_own_client(
    fetch: Callable[[httpx.AsyncClient], Awaitable[_Fetched]], *, allow_private: bool, timeout_s: float,
) -> _Fetched:
    """``fetch`` through a client whose transport re-checks the connected peer's address."""
    tls = await tls_context(trust_env=False)  # as PinnedTransport's own default would be
    transport = PinnedTransport(allow_private=allow_private, verify=tls)
    async with httpx.AsyncClient(transport=transport, timeout=timeout_s, trust_env=False) as own_client:
        return await fetch(own_client)


def _fetch_failed(exc: Exception, url: str, *, timeout_s: float) -> ToolFailed:
    """What the model hears about an HTTP failure (a refusal by the guard is a ToolFailed already)."""
    if isinstance(exc, (TimeoutError, httpx.TimeoutException)):
        return ToolFailed(f"Timed out fetching {safe_url(url)} (limit {timeout_s:g}s).", code="timeout")
    if isinstance(exc, (httpx.InvalidURL, httpx.UnsupportedProtocol)):
        return ToolFailed(f"The URL {safe_url(url)} is not valid: {exc}", code="invalid_url")
    log.info("web.read_url.connection_error", host=host_of(url), error=type(exc).__name__)
    return ToolFailed(
        f"Could not connect to {host_of(url)}: {type(exc).__name__}" + (f" ({exc})" if str(exc) else "") + ".",
        code="connection_error",
    )


async def _read_text(fetched: _Fetched, max_chars: int) -> tuple[str | None, str]:
    request = {"url": fetched.url, "media_type": fetched.media_type, "charset": fetched.charset,
               "truncated": fetched.truncated, "max_chars": max_chars}
    try:
        title, text = await _READER.call(request, fetched.body)
    except WorkerTimeout as exc:
        raise ToolFailed(
            f"Could not extract the text of {safe_url(fetched.url)} within {exc.limit_s:g}s; "
            "the page is too large or too complex.",
            code="timeout",
        ) from None
    return title, text


async def _page(fetched: _Fetched, max_chars: int) -> dict[str, Any]:
    truncated = fetched.truncated
    title, text = await _read_text(fetched, max_chars)
    if len(text) > max_chars:
        text = text[:max_chars]
        truncated = True
    log.info("web.read_url", host=host_of(fetched.url), status=fetched.status,
             bytes=len(fetched.body), chars=len(text), truncated=truncated)
    return {"url": safe_url(fetched.url), "status": fetched.status, "title": title, "text": text,
            "truncated": truncated}


async def read_url(
    url: str,
    *,
    allow_private: bool = False,
    max_bytes: int = 2_000_000,
    timeout_s: float = 15.0,
    max_redirects: int = 5,
    max_chars: int = 20_000,
    client: httpx.AsyncClient | None = None,
    guard: Guard = resolve_and_check,
) -> dict[str, Any]:
    """Fetch an http(s) page and return its title and readable text.

    Returns ``{"url", "status", "title", "text", "truncated"}``: ``url`` is
    the final URL after redirects (credentials removed); ``truncated`` is True
    when the body was cut at ``max_bytes`` or the text at ``max_chars``.

    ``guard`` runs on the first URL and on every redirect target before it
    is requested. Without ``client``, a client with :class:`PinnedTransport`
    is used, which re-checks the connected peer's address (DNS rebinding); a
    caller-supplied client only gets the ``guard`` check. ``timeout_s``
    bounds the whole fetch, redirects included.
    """
    if max_bytes < 1 or max_chars < 1 or max_redirects < 0 or timeout_s <= 0:
        raise ValueError("max_bytes, max_chars and timeout_s must be positive, max_redirects >= 0")

    def fetch(through: httpx.AsyncClient) -> Awaitable[_Fetched]:
        return _fetch(through, url, guard=guard, allow_private=allow_private, max_bytes=max_bytes,
                      max_redirects=max_redirects)

    try:
        async with asyncio.timeout(timeout_s):
            if client is None:
                fetched = await _with_own_client(fetch, allow_private=allow_private, timeout_s=timeout_s)
            else:
                fetched = await fetch(client)
    except (TimeoutError, httpx.TimeoutException, httpx.InvalidURL, httpx.HTTPError) as exc:
        raise _fetch_failed(exc, url, timeout_s=timeout_s) from None
    return await _page(fetched, max_chars)
