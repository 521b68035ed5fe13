"""The HTTP side both web tools share: what a request says about us, TLS settings made once,
and a response body read within a size limit.

A compressed body (gzip or deflate, the only encodings asked for) is inflated here, never more
than the limit at a time, so a small "compression bomb" costs no more than a body of the limit;
other encodings are refused (``unsupported_content``).
"""

from __future__ import annotations

import asyncio
import functools
import ssl
import zlib

import httpx

from bruce.errors import ToolFailed

__all__ = ["ACCEPT_ENCODING", "USER_AGENT", "host_of", "read_capped", "safe_url", "tls_context"]

USER_AGENT = "Mozilla/5.0 (compatible; Bruce/0.1; personal assistant)"
ACCEPT_ENCODING = "gzip, deflate"  # what _Inflater can decode within a size limit


@functools.cache
def _tls(trust_env: bool) -> ssl.SSLContext:
    """The TLS settings httpx would make for a new client (loading the CA bundle takes 60-170 ms),
    made once."""
    return httpx.create_ssl_context(trust_env=trust_env)


async def tls_context(*, trust_env: bool) -> ssl.SSLContext:
    """``_tls``, its first (slow) making done in a thread rather than on the loop."""
    return await asyncio.to_thread(_tls, trust_env)


def safe_url(url: httpx.URL | str) -> str:
    """The URL without any ``user:password@`` part, for messages and results."""
    try:
        parsed = httpx.URL(str(url))
        return str(parsed.copy_with(userinfo=b"")) if parsed.userinfo else str(parsed)
    except (httpx.InvalidURL, TypeError, ValueError):
        return "(invalid URL)"


def host_of(url: httpx.URL | str) -> str:
    try:
        return httpx.URL(str(url)).host or "?"
    except (httpx.InvalidURL, TypeError, ValueError):
        return "?"


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
        f"Cannot read {safe_url(resp.url)}: it is compressed as '{', '.join(codings)}'; only gzip and deflate "
        "can be read.",
        code="unsupported_content",
    )


async def read_capped(resp: httpx.Response, max_bytes: int) -> tuple[bytes, bool]:
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
