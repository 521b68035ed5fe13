"""Searching the web: ``web_search`` asks a :class:`SearchBackend` and returns uniform results.

The backends: DuckDuckGo via ``ddgs`` (keyless), a SearxNG instance, or the Brave Search API. A
JSON backend's answer is read up to ``MAX_SEARCH_RESPONSE_BYTES`` and parsed and cleaned in a
thread, never on the event loop. Every failure the model should hear about is a ``ToolFailed``
with a code: ``invalid_query``, ``invalid_args``, ``backend_error``.
"""

from __future__ import annotations

import asyncio
import html as html_lib
import json
import re
from collections.abc import Callable
from typing import Any, Protocol

import httpx
import structlog
from ddgs import DDGS
from ddgs.exceptions import DDGSException

from bruce.errors import ToolFailed
from tools.web.client import ACCEPT_ENCODING, USER_AGENT, read_capped, tls_context

__all__ = [
    "MAX_SEARCH_RESPONSE_BYTES",
    "BraveBackend",
    "DuckDuckGoBackend",
    "ResponseTooLarge",
    "SearchBackend",
    "SearxNGBackend",
    "web_search",
]

log = structlog.get_logger(__name__)

MAX_SEARCH_RESPONSE_BYTES = 2_000_000
_MAX_SEARCH_RESULTS = 50


class SearchBackend(Protocol):
    """A web search provider. ``search`` returns dicts with title, url, snippet."""

    name: str

    async def search(self, query: str, max_results: int) -> list[dict[str, str]]: ...


_TAG_RE = re.compile(r"<[^>]+>")
_SPACE_RE = re.compile(r"\s+")


def _clean(value: Any) -> str:
    """Plain text from a provider's field: tags removed, entities decoded, spaces collapsed."""
    if not isinstance(value, str):
        return ""
    return _SPACE_RE.sub(" ", html_lib.unescape(_TAG_RE.sub("", value))).strip()


def _result(title: Any, url: Any, snippet: Any) -> dict[str, str] | None:
    if not isinstance(url, str) or not url.strip():
        return None
    return {"title": _clean(title), "url": url.strip(), "snippet": _clean(snippet)}


def _collect(rows: Any, keys: tuple[str, str, str], max_results: int) -> list[dict[str, str]]:
    if not isinstance(rows, list):
        raise ValueError("unexpected response shape")
    out: list[dict[str, str]] = []
    for row in rows:
        if not isinstance(row, dict):
            continue
        item = _result(row.get(keys[0]), row.get(keys[1]), row.get(keys[2]))
        if item is not None:
            out.append(item)
        if len(out) >= max_results:
            break
    return out


class DuckDuckGoBackend:
    """Keyless search through the ``ddgs`` metasearch library.

    ``ddgs`` is synchronous, so each search runs in a worker thread.
    ``engine`` is ddgs's ``backend`` argument: ``"auto"`` (default) lets ddgs
    choose among its engines (DuckDuckGo, Bing, Brave, ...);
    ``"duckduckgo"`` restricts it to DuckDuckGo. ``ddgs_factory`` builds the
    client (tests pass a fake).
    """

    name = "duckduckgo"

    def __init__(
        self,
        ddgs_factory: Callable[[], Any] = DDGS,
        *,
        engine: str = "auto",
        region: str = "wt-wt",
        safesearch: str = "moderate",
    ) -> None:
        self._factory = ddgs_factory
        self._engine = engine
        self._region = region
        self._safesearch = safesearch

    def _search_sync(self, query: str, max_results: int) -> list[dict[str, str]]:
        try:
            rows = self._factory().text(
                query, max_results=max_results, region=self._region,
                safesearch=self._safesearch, backend=self._engine,
            )
        except DDGSException as exc:
            if str(exc) == "No results found.":  # ddgs raises instead of returning []
                return []
            raise
        return _collect(list(rows or []), ("title", "href", "body"), max_results)

    async def search(self, query: str, max_results: int) -> list[dict[str, str]]:
        return await asyncio.to_thread(self._search_sync, query, max_results)


class ResponseTooLarge(ValueError):
    """A search backend answered with more than MAX_SEARCH_RESPONSE_BYTES."""


def _results_from_json(body: bytes, rows_of: Callable[[Any], Any], keys: tuple[str, str, str],
                       max_results: int) -> list[dict[str, str]]:
    """Parse a backend's JSON answer and clean its rows. CPU-bound: run in a thread."""
    return _collect(rows_of(json.loads(body)), keys, max_results)


class _HTTPBackend:
    """Shared plumbing for JSON-over-HTTP backends."""

    def __init__(self, client: httpx.AsyncClient | None, timeout_s: float) -> None:
        self._client = client
        self._timeout_s = timeout_s

    async def _get_body(self, client: httpx.AsyncClient, url: str, params: dict[str, Any],
                        headers: dict[str, str]) -> bytes:
        async with client.stream("GET", url, params=params, headers=headers) as resp:
            resp.raise_for_status()
            body, truncated = await read_capped(resp, MAX_SEARCH_RESPONSE_BYTES)
        if truncated:
            raise ResponseTooLarge(f"the answer is larger than {MAX_SEARCH_RESPONSE_BYTES} bytes")
        return body

    async def _get_results(self, url: str, params: dict[str, Any], headers: dict[str, str] | None, *,
                           rows_of: Callable[[Any], Any], keys: tuple[str, str, str],
                           max_results: int) -> list[dict[str, str]]:
        hdrs = {"Accept": "application/json", "Accept-Encoding": ACCEPT_ENCODING, "User-Agent": USER_AGENT,
                **(headers or {})}
        if self._client is not None:
            body = await self._get_body(self._client, url, params, hdrs)
        else:
            tls = await tls_context(trust_env=True)  # as a default AsyncClient's would be
            async with httpx.AsyncClient(timeout=self._timeout_s, verify=tls) as client:
                body = await self._get_body(client, url, params, hdrs)
        return await asyncio.to_thread(_results_from_json, body, rows_of, keys, max_results)


def _searxng_rows(data: Any) -> Any:
    return data.get("results") if isinstance(data, dict) else None


def _brave_rows(data: Any) -> Any:
    web = data.get("web") if isinstance(data, dict) else None
    return web.get("results", []) if isinstance(web, dict) else []


class SearxNGBackend(_HTTPBackend):
    """A SearxNG instance's JSON API (``format=json`` must be enabled in its settings)."""

    name = "searxng"

    def __init__(self, base_url: str, client: httpx.AsyncClient | None = None,
                 *, timeout_s: float = 10.0) -> None:
        super().__init__(client, timeout_s)
        self.base_url = base_url.rstrip("/")

    async def search(self, query: str, max_results: int) -> list[dict[str, str]]:
        return await self._get_results(f"{self.base_url}/search", {"q": query, "format": "json"}, None,
                                       rows_of=_searxng_rows, keys=("title", "url", "content"),
                                       max_results=max_results)


class BraveBackend(_HTTPBackend):
    """The Brave Search API (needs a subscription token)."""

    name = "brave"
    _MAX_COUNT = 20  # the API's limit per request

    def __init__(self, api_key: str, base_url: str = "https://api.search.brave.com/res/v1",
                 client: httpx.AsyncClient | None = None, *, timeout_s: float = 10.0) -> None:
        super().__init__(client, timeout_s)
        self._api_key = api_key
        self.base_url = base_url.rstrip("/")

    def __repr__(self) -> str:  # never show the key
        return f"BraveBackend(base_url={self.base_url!r})"

    async def search(self, query: str, max_results: int) -> list[dict[str, str]]:
        return await self._get_results(
            f"{self.base_url}/web/search",
            {"q": query, "count": min(max_results, self._MAX_COUNT)},
            {"X-Subscription-Token": self._api_key},
            rows_of=_brave_rows, keys=("title", "url", "description"), max_results=max_results,
        )


def _describe(exc: BaseException) -> str:
    """A short reason for a backend failure that cannot carry secrets."""
    if isinstance(exc, httpx.HTTPStatusError):
        status = exc.response.status_code
        hint = {401: "unauthorized: check the API key", 403: "forbidden",
                429: "rate limited"}.get(status)
        return f"HTTP {status}" + (f", {hint}" if hint else "")
    if isinstance(exc, (httpx.TimeoutException, TimeoutError)):
        return "timed out"
    if isinstance(exc, ResponseTooLarge):
        return str(exc)
    if isinstance(exc, httpx.TransportError):
        return "could not connect"
    if isinstance(exc, ValueError):
        return "unexpected response"
    return type(exc).__name__


async def web_search(query: str, *, backend: SearchBackend, max_results: int = 5) -> dict[str, Any]:
    """Search the web; returns ``{"query", "backend", "results": [{title, url, snippet}]}``."""
    query = (query or "").strip()
    if not query:
        raise ToolFailed("The search query is empty; give some words to search for.",
                         code="invalid_query")
    if not 1 <= max_results <= _MAX_SEARCH_RESULTS:
        raise ToolFailed(f"max_results must be between 1 and {_MAX_SEARCH_RESULTS}.",
                         code="invalid_args")
    name = getattr(backend, "name", type(backend).__name__)
    try:
        results = await backend.search(query, max_results)
    except Exception as exc:  # noqa: BLE001 - every backend failure becomes one code
        log.warning("web.search_failed", backend=name, error=type(exc).__name__)
        raise ToolFailed(
            f"The '{name}' search backend failed ({_describe(exc)}). Try again later "
            "or rephrase the query.",
            code="backend_error",
        ) from None
    log.info("web.search", backend=name, results=len(results))
    return {"query": query, "backend": name, "results": list(results)[:max_results]}
