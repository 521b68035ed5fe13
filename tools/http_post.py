"""http.post: send one JSON document to a URL the owner allow-listed (a webhook, a home-automation
endpoint), never anywhere else.

Allow-list rule (config key ``tools.http_post.allowed_urls``), for each entry:

* scheme, host and port must be equal (an omitted port means 80 for http, 443 for https);
* the host is compared in its ASCII (IDNA) form, so a unicode or ``xn--`` host is refused like
  any other host that is not on the list;
* the URL's path, percent-decoded, must be the entry's path or lie below it at a ``/`` boundary
  (entry ``/hooks`` allows ``/hooks`` and ``/hooks/x``, not ``/hooksx``);
* a path a server could read as another one is refused, as the model wrote it and as it would be
  sent: ``.``/``..`` segments, ``;`` (path parameters, ``..;/``), backslashes, empty segments
  (``//``), control characters, an encoded ``/`` (``%2f``), bytes that are not UTF-8, all of them
  in any percent-encoding (``%2e%2e``, ``%252e``) and Unicode compatibility form (``\uff0e\uff0e``);
* the query string must be exactly the entry's (an entry without one allows none);
* URLs with ``user:password@`` are never allowed.

The URL and path rules are ``bruce.config.rules``'s (``url_problem``, ``plain_path``): the config
checks each entry with the same rule this tool applies to every URL it is asked to use.

The dry-run preview shows the URL with its secrets masked (``?token=***``, see
``bruce.log.redact_urls``), as do error messages; the stored action keeps the URL that will run.
In a turn that read untrusted text, the request the owner sees starts with a note when the URL
was composed by the model rather than copied from the owner's message or a tool's result
(``url_args``; the rule is ``bruce.actions.provenance``).

Redirects are not followed: a 3xx answer is returned as it is. Failure codes: ``invalid_args``,
``url_not_allowed``, ``too_large`` (body over 100 kB), ``http_error`` (status >= 400),
``timeout``, ``connection_error``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, NamedTuple
from urllib.parse import urlsplit

import httpx

from bruce.config.rules import plain_path, url_problem
from bruce.contracts import DryRun, Risk, ToolContext, ToolContract, ToolHandler
from bruce.errors import ConfigError, ToolFailed
from bruce.log import redact_urls

__all__ = ["HTTP_POST", "http_post_tool", "MAX_BODY_BYTES", "CONFIG_KEY"]

MAX_BODY_BYTES = 100_000
CONFIG_KEY = "tools.http_post.allowed_urls"
DEFAULT_TIMEOUT_S = 15.0
DEFAULT_RESPONSE_CHARS = 2000
_DEFAULT_PORTS = {"http": 80, "https": 443}


class _Entry(NamedTuple):
    scheme: str
    host: str
    port: int
    path: str  # percent-decoded
    query: bytes


class _Target(NamedTuple):
    url: httpx.URL
    path: str  # percent-decoded, checked


def _parse(url: str) -> _Target | None:
    """The URL and its checked path, or None: the config's rule for an entry (``url_problem``), and a
    path that reads the same as the model wrote it and as it would be sent (httpx resolves "..")."""
    if url_problem(url) is not None:
        return None
    try:
        parsed = httpx.URL(url)
        written = plain_path(urlsplit(url).path or "/")
    except (httpx.InvalidURL, TypeError, ValueError):
        return None
    sent = plain_path(parsed.raw_path.decode("ascii").split("?", 1)[0])
    if written is None or written != sent:
        return None
    return _Target(parsed, written)


def _entry(target: _Target) -> _Entry:
    url = target.url
    port = url.port or _DEFAULT_PORTS[url.scheme]
    return _Entry(url.scheme, url.raw_host.decode("ascii").lower(), port, target.path, url.query)


def _allows(entry: _Entry, url: _Entry) -> bool:
    prefix = entry.path.rstrip("/")
    path_ok = url.path == entry.path or url.path == prefix or url.path.startswith(prefix + "/")
    same_origin = (entry.scheme, entry.host, entry.port) == (url.scheme, url.host, url.port)
    return same_origin and path_ok and entry.query == url.query


def _shown(url: str) -> str:
    """The URL for messages and previews: no user:password part, secrets masked."""
    try:
        parsed = httpx.URL(url)
        shown = str(parsed.copy_with(userinfo=b"")) if parsed.userinfo else str(parsed)
    except (httpx.InvalidURL, TypeError, ValueError):
        shown = url[:200]
    return redact_urls(shown)


def _description(max_response_chars: int) -> str:
    return (
        "Send a JSON document with an HTTP POST to one of the URLs the owner configured (for example a "
        "webhook or a home-automation endpoint). Other URLs are refused. Returns the HTTP status and the "
        f"start of the answer (at most {max_response_chars} characters)."
    )


HTTP_POST = ToolContract(
    name="http.post",
    activity="Preparing a request",
    description=_description(DEFAULT_RESPONSE_CHARS),
    category="network",
    risk=Risk.CRITICAL,
    autonomous=False,
    confirmation=True,
    step_up=True,
    dry_run=DryRun.REQUIRED,
    idempotent=False,
    input_schema={
        "type": "object",
        "properties": {
            "url": {"type": "string", "minLength": 1, "maxLength": 2048},
            "json": {"type": "object", "description": "The JSON object to send as the request body."},
        },
        "required": ["url", "json"],
        "additionalProperties": False,
    },
    output_schema={
        "type": "object",
        "properties": {
            "status": {"type": "integer"},
            "body": {"type": "string"},
            "truncated": {"type": "boolean"},
        },
        "required": ["status", "body", "truncated"],
    },
    permissions=("network:post-allowlisted",),
    url_args=("url",),  # always confirmed; after untrusted text, the request says when the model composed it
    side_effects=(
        "sends one JSON POST to an allow-listed URL; the receiver may act on it (trigger an automation, "
        "send a message); repeating the call sends it again"
    ),
    audit_event="http.posted",
    failure_modes=("invalid_args", "url_not_allowed", "too_large", "http_error", "timeout", "connection_error"),
    timeout_s=DEFAULT_TIMEOUT_S + 5.0,
    guideline=(
        "Posts: use http_post only when the user asks to send something to one of the configured URLs. Every "
        "post waits for the owner's approval on the machine where Bruce runs: nothing is sent before that."
    ),
)


def _contract(timeout_s: float, max_response_chars: int) -> ToolContract:
    """HTTP_POST with this instance's answer limit in its description and its timeout plus a margin."""
    return replace(HTTP_POST, description=_description(max_response_chars), timeout_s=timeout_s + 5.0)


def _entries(allowed_urls: Sequence[str]) -> tuple[_Entry, ...]:
    """The configured allow-list, or ConfigError naming the first unusable entry."""
    entries = []
    for i, raw in enumerate(allowed_urls):
        parsed = _parse(raw)
        if parsed is None:
            raise ConfigError(f"{CONFIG_KEY}[{i}]: not an http(s) URL with a host and no user:password part")
        entries.append(_entry(parsed))
    return tuple(entries)


def _body(document: Any) -> bytes:
    """The compact JSON request body, or ToolFailed(too_large)."""
    body = json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    if len(body) > MAX_BODY_BYTES:
        raise ToolFailed(
            f"the JSON body is {len(body)} bytes; http.post sends at most {MAX_BODY_BYTES} bytes.", code="too_large"
        )
    return body


def _http_error(url: str, status: int, text: str, truncated: bool) -> ToolFailed:
    snippet = text[:300] + ("..." if truncated or len(text) > 300 else "")
    return ToolFailed(f"{_shown(url)} answered HTTP {status}: {snippet or '(empty body)'}", code="http_error")


@dataclass(frozen=True, slots=True)
class _Poster:
    """The allow-list and limits of one http.post tool."""

    entries: tuple[_Entry, ...]
    timeout_s: float
    max_response_chars: int

    def check_url(self, url: str) -> None:
        if not self.entries:
            raise ToolFailed(
                f"cannot post to {_shown(url)}: no URLs are configured for http.post "
                f"(the owner can add some under {CONFIG_KEY}).",
                code="url_not_allowed",
            )
        parsed = _parse(url)
        if parsed is None or not any(_allows(entry, _entry(parsed)) for entry in self.entries):
            raise ToolFailed(
                f"cannot post to {_shown(url)}: only the URLs configured in {CONFIG_KEY} may be used, "
                "and this is not one of them.",
                code="url_not_allowed",
            )

    async def send(self, url: str, body: bytes) -> tuple[int, str, bool]:
        """POST ``body`` to ``url``: the status and the start of the answer (and whether it was cut)."""
        try:
            async with httpx.AsyncClient(timeout=self.timeout_s, follow_redirects=False) as client:
                async with client.stream(
                    "POST", url, content=body, headers={"Content-Type": "application/json"}
                ) as response:
                    text, truncated = await _read_text(response, self.max_response_chars)
        except httpx.TimeoutException:
            raise ToolFailed(
                f"{_shown(url)} did not answer within {self.timeout_s:g} seconds.", code="timeout"
            ) from None
        except httpx.TransportError:
            raise ToolFailed(
                f"could not reach {_shown(url)}: the connection failed or was cut off.", code="connection_error"
            ) from None
        return response.status_code, text, truncated

    async def http_post(self, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        url: str = args["url"]
        self.check_url(url)
        body = _body(args["json"])
        if ctx.dry_run:
            pretty = json.dumps(args["json"], ensure_ascii=False, indent=2)
            return {"method": "POST", "url": _shown(url), "body": pretty, "bytes": len(body)}
        status, text, truncated = await self.send(url, body)
        if status >= 400:
            raise _http_error(url, status, text, truncated)
        return {"status": status, "body": text, "truncated": truncated}


def http_post_tool(
    *,
    allowed_urls: Sequence[str],
    timeout_s: float = DEFAULT_TIMEOUT_S,
    max_response_chars: int = DEFAULT_RESPONSE_CHARS,
) -> tuple[ToolContract, ToolHandler]:
    poster = _Poster(_entries(allowed_urls), timeout_s, max_response_chars)
    return _contract(timeout_s, max_response_chars), poster.http_post


async def _read_text(response: httpx.Response, limit: int) -> tuple[str, bool]:
    """At most ``limit`` characters of the answer, without reading a huge body to the end."""
    parts: list[str] = []
    size = 0
    async for chunk in response.aiter_text():
        parts.append(chunk)
        size += len(chunk)
        if size > limit:
            return "".join(parts)[:limit], True
    return "".join(parts), False
