"""Web tools: read a page as text, and search the web through a pluggable backend.

``read_url`` fetches one http(s) URL, following redirects by hand so that the
SSRF guard (:mod:`tools.netguard`) checks every hop, streams at most
``max_bytes`` of the body, and turns HTML into readable text with trafilatura.
A compressed body (gzip or deflate, the only encodings asked for) is inflated
here, never more than ``max_bytes`` at a time, so a small "compression bomb"
costs no more than a page of ``max_bytes``; other encodings are refused.

``web_search`` asks a :class:`SearchBackend` (DuckDuckGo via ``ddgs``,
a SearxNG instance, or the Brave Search API) and returns uniform results.
A JSON backend's answer is read up to ``MAX_SEARCH_RESPONSE_BYTES``.

Nothing CPU-heavy runs on the event loop. Decoding and extracting a page run in
a worker process (:class:`tools.procworker.ProcessWorker`): lxml and charset
detection hold the GIL for long stretches, so a thread would still stall the
loop, and a process can be stopped: extraction is limited to
``EXTRACT_TIME_LIMIT_S`` (then ``timeout``). Parsing and cleaning a search
answer (at most ``MAX_SEARCH_RESPONSE_BYTES``) run in a thread.

Every failure the model should hear about is a ``ToolFailed`` with a code:
``unsupported_scheme``, ``invalid_url``, ``dns_error``, ``blocked_address``,
``http_error``, ``unsupported_content``, ``timeout``, ``connection_error``,
``too_many_redirects`` (read_url); ``invalid_query``, ``invalid_args``,
``backend_error`` (web_search).
"""

from __future__ import annotations

import asyncio
import functools
import html as html_lib
import json
import re
import ssl
import zlib
from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple, Protocol

import httpx
import structlog
import trafilatura
from ddgs import DDGS
from ddgs.exceptions import DDGSException

from bruce.errors import ToolFailed
from tools.netguard import PinnedTransport, resolve_and_check
from tools.procworker import ProcessWorker, WorkerTimeout

__all__ = [
    "ALLOWED_CONTENT_TYPES",
    "EXTRACT_TIME_LIMIT_S",
    "MAX_SEARCH_RESPONSE_BYTES",
    "BraveBackend",
    "DuckDuckGoBackend",
    "Guard",
    "SearchBackend",
    "SearxNGBackend",
    "read_url",
    "web_search",
]

log = structlog.get_logger(__name__)

ALLOWED_CONTENT_TYPES = frozenset({"text/html", "text/plain", "application/xhtml+xml"})
USER_AGENT = "Mozilla/5.0 (compatible; Bruce/0.1; personal assistant)"
_ACCEPT = "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.1"
_ACCEPT_ENCODING = "gzip, deflate"  # what _Inflater can decode within a size limit
MAX_SEARCH_RESPONSE_BYTES = 2_000_000
EXTRACT_TIME_LIMIT_S = 10.0
_REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
_MAX_SEARCH_RESULTS = 50

Guard = Callable[..., Awaitable[None]]
"""``async guard(url, *, allow_private) -> None``; raises ToolFailed to refuse a URL."""


# --------------------------------------------------------------------------- read_url


@functools.cache
def _tls(trust_env: bool) -> ssl.SSLContext:
    """The TLS settings httpx would make for a new client (loading the CA bundle takes 60-170 ms),
    made once."""
    return httpx.create_ssl_context(trust_env=trust_env)


async def _tls_context(*, trust_env: bool) -> ssl.SSLContext:
    """``_tls``, its first (slow) making done in a thread rather than on the loop."""
    return await asyncio.to_thread(_tls, trust_env)


def _safe_url(url: httpx.URL | str) -> str:
    """The URL without any ``user:password@`` part, for messages and results."""
    try:
        parsed = httpx.URL(str(url))
        return str(parsed.copy_with(userinfo=b"")) if parsed.userinfo else str(parsed)
    except (httpx.InvalidURL, TypeError, ValueError):
        return "(invalid URL)"


def _host(url: httpx.URL | str) -> str:
    try:
        return httpx.URL(str(url)).host or "?"
    except (httpx.InvalidURL, TypeError, ValueError):
        return "?"


class _Fetched(NamedTuple):
    url: str
    status: int
    media_type: str
    charset: str | None
    body: bytes
    truncated: bool


class _Inflater:
    """A gzip or deflate body, inflated at most ``limit`` bytes per call: the work done is
    bounded by the output we keep, not by what the server packed into a chunk."""

    def __init__(self, encoding: str) -> None:
        self._raw_deflate_allowed = encoding == "deflate"  # some servers send deflate without its header
        self._started = False
        self._inflate = zlib.decompressobj(32 + zlib.MAX_WBITS)  # gzip or zlib header, detected

    def feed(self, data: bytes, limit: int) -> tuple[bytes, bytes]:
        """At most ``limit`` inflated bytes from ``data``, and the input not used yet."""
        if self._inflate.eof:
            return b"", b""  # anything after the end of the stream is ignored
        try:
            out = self._inflate.decompress(data, limit)
        except zlib.error as exc:
            if self._started or not self._raw_deflate_allowed:
                raise httpx.DecodingError(f"invalid compressed body: {exc}") from None
            self._raw_deflate_allowed = False
            self._inflate = zlib.decompressobj(-zlib.MAX_WBITS)
            return self.feed(data, limit)
        self._started = True
        return out, self._inflate.unconsumed_tail


def _inflater(resp: httpx.Response) -> _Inflater | None:
    """How to decode the body (None: as it is), or ToolFailed for an encoding we did not ask for."""
    codings = [c.strip().lower() for c in resp.headers.get("content-encoding", "").split(",")]
    codings = [c for c in codings if c and c != "identity"]
    if not codings:
        return None
    if len(codings) == 1 and codings[0] in ("gzip", "x-gzip", "deflate"):
        return _Inflater(codings[0])
    raise ToolFailed(
        f"Cannot read {_safe_url(resp.url)}: it is compressed as '{', '.join(codings)}'; only gzip and deflate "
        "can be read.",
        code="unsupported_content",
    )


async def _read_capped(resp: httpx.Response, max_bytes: int) -> tuple[bytes, bool]:
    """Read the (decoded) body up to ``max_bytes``; True if more was left unread."""
    inflater = _inflater(resp)
    buf = bytearray()
    async for raw in resp.aiter_raw():
        pending = raw
        while pending:
            room = max_bytes - len(buf)
            if inflater is None:
                chunk, pending = pending, b""
            else:
                chunk, pending = inflater.feed(pending, room + 1)  # one byte more tells us it goes on
            if len(chunk) > room:
                buf += chunk[:room]
                return bytes(buf), True
            buf += chunk
    return bytes(buf), False


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
    headers = {"User-Agent": USER_AGENT, "Accept": _ACCEPT, "Accept-Encoding": _ACCEPT_ENCODING}
    while True:
        await guard(current, allow_private=allow_private)
        request = client.build_request("GET", current, headers=headers)
        resp = await client.send(request, stream=True, follow_redirects=False)
        try:
            location = resp.headers.get("location")
            if resp.status_code in _REDIRECT_STATUSES and location:
                if redirects >= max_redirects:
                    raise ToolFailed(
                        f"Too many redirects: gave up after {max_redirects} redirects "
                        f"starting from {_safe_url(url)}.",
                        code="too_many_redirects",
                    )
                redirects += 1
                try:
                    current = str(resp.url.join(location))
                except (httpx.InvalidURL, ValueError):
                    raise ToolFailed(
                        f"{_safe_url(resp.url)} redirected to an invalid URL.", code="invalid_url"
                    ) from None
                continue
            if resp.status_code >= 400:
                reason = resp.reason_phrase or "error"
                raise ToolFailed(
                    f"The server answered HTTP {resp.status_code} ({reason}) for "
                    f"{_safe_url(resp.url)}.",
                    code="http_error",
                )
            raw_type = resp.headers.get("content-type", "")
            media_type = raw_type.split(";", 1)[0].strip().lower()
            if media_type not in ALLOWED_CONTENT_TYPES:
                shown = media_type or "none given"
                raise ToolFailed(
                    f"Cannot read {_safe_url(resp.url)}: its content type is '{shown}'; only "
                    "HTML and plain-text pages can be read.",
                    code="unsupported_content",
                )
            body, truncated = await _read_capped(resp, max_bytes)
            return _Fetched(str(resp.url), resp.status_code, media_type,
                            resp.charset_encoding, body, truncated)
        finally:
            await resp.aclose()


def _decode(body: bytes, charset: str | None, *, truncated: bool) -> str:
    if charset:
        try:
            return body.decode(charset, errors="replace")
        except LookupError:
            pass
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as exc:
        if truncated and exc.start >= len(body) - 4:
            return body.decode("utf-8", errors="ignore")  # cap cut a character in half
    return trafilatura.utils.decode_file(body)


_SPACE_RE = re.compile(r"\s+")


def _title(html: str) -> str | None:
    """The document's <title>, else the title trafilatura's metadata finds."""
    try:
        tree = trafilatura.load_html(html)
        node = tree.find(".//title") if tree is not None else None
        if node is not None:
            title = _SPACE_RE.sub(" ", node.text_content()).strip()
            if title:
                return title
        meta = trafilatura.extract_metadata(html)
        if meta is not None and meta.title:
            return str(meta.title).strip() or None
    except Exception:  # noqa: BLE001 - the title is best effort
        log.debug("web.title_failed", exc_info=True)
    return None


def _extract_html(html: str, url: str) -> tuple[str | None, str]:
    """(title, readable text) of an HTML document. CPU-bound: run in a thread (see _readable)."""
    text: str | None = None
    try:
        text = trafilatura.extract(
            html, url=url, include_comments=False, include_tables=True,
            include_links=False, include_images=False, output_format="txt",
        )
    except Exception:  # noqa: BLE001 - fall back to the plain text below
        log.debug("web.extract_failed", exc_info=True)
    if not text:
        try:
            text = trafilatura.html2txt(html)
        except Exception:  # noqa: BLE001
            log.debug("web.html2txt_failed", exc_info=True)
            text = ""
    return _title(html), (text or "").strip()


def _readable(fetched: _Fetched) -> tuple[str | None, str]:
    """(title, text) of a fetched page: decoding (charset detection can take a while on odd
    bytes) and extraction. CPU-bound: ``read_url`` runs it in the reader process."""
    decoded = _decode(fetched.body, fetched.charset, truncated=fetched.truncated)
    if fetched.media_type == "text/plain":
        return None, decoded.strip()
    return _extract_html(decoded, fetched.url)


def readable_in_worker(request: dict[str, Any], body: bytes) -> list[str | None]:
    """The reader process's side of ``_READER``: [title, text], the text cut one character past
    ``max_chars`` (so the caller still sees that it was longer)."""
    fetched = _Fetched(request["url"], 0, request["media_type"], request["charset"], body, request["truncated"])
    title, text = _readable(fetched)
    return [title, text[: request["max_chars"] + 1]]


_READER = ProcessWorker("tools.web:readable_in_worker", time_limit_s=EXTRACT_TIME_LIMIT_S)


async def _read_text(fetched: _Fetched, max_chars: int) -> tuple[str | None, str]:
    request = {"url": fetched.url, "media_type": fetched.media_type, "charset": fetched.charset,
               "truncated": fetched.truncated, "max_chars": max_chars}
    try:
        title, text = await _READER.call(request, fetched.body)
    except WorkerTimeout as exc:
        raise ToolFailed(
            f"Could not extract the text of {_safe_url(fetched.url)} within {exc.limit_s:g}s; "
            "the page is too large or too complex.",
            code="timeout",
        ) from None
    return title, text


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
    shown = _safe_url(url)
    try:
        async with asyncio.timeout(timeout_s):
            if client is None:
                tls = await _tls_context(trust_env=False)  # as PinnedTransport's own default would be
                transport = PinnedTransport(allow_private=allow_private, verify=tls)
                async with httpx.AsyncClient(
                    transport=transport, timeout=timeout_s, trust_env=False
                ) as own_client:
                    fetched = await _fetch(
                        own_client, url, guard=guard, allow_private=allow_private,
                        max_bytes=max_bytes, max_redirects=max_redirects,
                    )
            else:
                fetched = await _fetch(
                    client, url, guard=guard, allow_private=allow_private,
                    max_bytes=max_bytes, max_redirects=max_redirects,
                )
    except (TimeoutError, httpx.TimeoutException):
        raise ToolFailed(
            f"Timed out fetching {shown} (limit {timeout_s:g}s).", code="timeout"
        ) from None
    except (httpx.InvalidURL, httpx.UnsupportedProtocol) as exc:
        raise ToolFailed(f"The URL {shown} is not valid: {exc}", code="invalid_url") from None
    except httpx.HTTPError as exc:
        log.info("web.read_url.connection_error", host=_host(url), error=type(exc).__name__)
        raise ToolFailed(
            f"Could not connect to {_host(url)}: {type(exc).__name__}"
            + (f" ({exc})" if str(exc) else "") + ".",
            code="connection_error",
        ) from None

    truncated = fetched.truncated
    title, text = await _read_text(fetched, max_chars)
    if len(text) > max_chars:
        text = text[:max_chars]
        truncated = True
    log.info("web.read_url", host=_host(fetched.url), status=fetched.status,
             bytes=len(fetched.body), chars=len(text), truncated=truncated)
    return {
        "url": _safe_url(fetched.url),
        "status": fetched.status,
        "title": title,
        "text": text,
        "truncated": truncated,
    }


# --------------------------------------------------------------------------- search


class SearchBackend(Protocol):
    """A web search provider. ``search`` returns dicts with title, url, snippet."""

    name: str

    async def search(self, query: str, max_results: int) -> list[dict[str, str]]: ...


_TAG_RE = re.compile(r"<[^>]+>")


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
            body, truncated = await _read_capped(resp, MAX_SEARCH_RESPONSE_BYTES)
        if truncated:
            raise ResponseTooLarge(f"the answer is larger than {MAX_SEARCH_RESPONSE_BYTES} bytes")
        return body

    async def _get_results(self, url: str, params: dict[str, Any], headers: dict[str, str] | None, *,
                           rows_of: Callable[[Any], Any], keys: tuple[str, str, str],
                           max_results: int) -> list[dict[str, str]]:
        hdrs = {"Accept": "application/json", "Accept-Encoding": _ACCEPT_ENCODING, "User-Agent": USER_AGENT,
                **(headers or {})}
        if self._client is not None:
            body = await self._get_body(self._client, url, params, hdrs)
        else:
            tls = await _tls_context(trust_env=True)  # as a default AsyncClient's would be
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
