"""SSRF guard: refuse to fetch URLs that point at private or local networks.

The model chooses which URLs Bruce fetches, and a web page can redirect
anywhere, so every URL (the first one and every redirect target) is checked
before it is requested:

* only ``http`` and ``https`` are allowed (``unsupported_scheme``);
* the host is resolved with the event loop's ``getaddrinfo`` and the request
  is refused if ANY address it resolves to (or the literal IP in the URL) is
  private, loopback, link-local (incl. the cloud metadata address
  169.254.169.254), multicast, reserved, unspecified, shared CGNAT
  (100.64.0.0/10) or otherwise not globally routable (``blocked_address``).
  IPv4 addresses embedded in IPv6 ones (IPv4-mapped ``::ffff:a.b.c.d``, 6to4,
  Teredo, NAT64 ``64:ff9b::/96``) are unwrapped and checked as IPv4; IPv6
  site-local ``fec0::/10`` (deprecated, still routed inside some networks) is
  refused too;
* a host is an IP literal in any spelling the system's resolver accepts (``127.1``,
  decimal ``2130706433``, hex ``0x7f000001``, one trailing dot ``127.0.0.1.``):
  it is checked as that address, without a DNS lookup;
* a name that does not resolve gives ``dns_error``.

Known limit, and how it is closed
---------------------------------
:func:`resolve_and_check` resolves the name itself, and the HTTP client later
resolves it *again* when it connects. A hostile DNS server can answer with a
public address the first time and ``127.0.0.1`` the second (DNS rebinding): a
time-of-check/time-of-use gap.

:class:`PinnedTransport` closes that gap for clients built with it (the
default client of ``tools.web.page.read_url`` is). It is an
``httpx.AsyncHTTPTransport`` whose network backend checks the address of the
peer the socket is *actually connected to*, right after the TCP connect and
before a single byte is sent, and aborts the connection if it is blocked.
It reaches one private attribute of httpx (``transport._pool``) and of
httpcore (``pool._network_backend``); if a future release renames them the
constructor raises instead of silently running unpinned, and the test suite
fails.

Still not covered:

* a caller-supplied ``httpx.AsyncClient`` (``read_url(client=...)``) only gets
  the pre-connect check, so it keeps the TOCTOU gap;
* ``PinnedTransport`` does not support HTTP proxies (the connect check would
  see the proxy's address, not the target's), so the default client ignores
  ``HTTP(S)_PROXY`` environment variables.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
from collections.abc import Iterable
from typing import Any

import httpcore
import httpx
import structlog

from bruce.errors import ToolFailed

__all__ = [
    "ALLOWED_SCHEMES",
    "PinnedTransport",
    "is_blocked_ip",
    "resolve_and_check",
]

log = structlog.get_logger(__name__)

ALLOWED_SCHEMES = frozenset({"http", "https"})

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_CGNAT = ipaddress.IPv4Network("100.64.0.0/10")
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries (mapped, 6to4, Teredo, NAT64), if any."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]  # (server, client): the client is the one reached
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def is_blocked_ip(ip: IPAddress | str) -> bool:
    """True if ``ip`` is not a public unicast address Bruce may connect to."""
    if isinstance(ip, str):
        parsed = _literal_ip(ip)
        if parsed is None:
            return True  # not an IP address at all: fail closed
        ip = parsed
    if isinstance(ip, ipaddress.IPv6Address):
        inner = _embedded_ipv4(ip)
        if inner is not None and is_blocked_ip(inner):
            return True
    return (
        ip.is_private
        or (isinstance(ip, ipaddress.IPv6Address) and ip.is_site_local)
        or ip.is_loopback
        or ip.is_link_local
        or ip.is_multicast
        or ip.is_reserved
        or ip.is_unspecified
        or (isinstance(ip, ipaddress.IPv4Address) and ip in _CGNAT)
        or not ip.is_global
    )


_NUMERIC_IPV4 = re.compile(r"(?:0x[0-9a-f]*|[0-9]+)(?:\.(?:0x[0-9a-f]*|[0-9]+)){0,3}", re.IGNORECASE)


def _literal_ip(host: str) -> IPAddress | None:
    """The address ``host`` spells, if it is an IP literal: standard forms, and the IPv4 forms
    (``127.1``, ``2130706433``, ``0x7f.1``) that ``getaddrinfo`` turns into an address, as
    ``inet_aton`` does, without asking DNS. One trailing dot is the same host."""
    host = host.split("%", 1)[0]
    if host.endswith(".") and not host.endswith(".."):
        host = host[:-1]
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    if not _NUMERIC_IPV4.fullmatch(host):
        return None
    try:
        return ipaddress.IPv4Address(socket.inet_aton(host))
    except OSError:
        return None


def _blocked(host: str, ip: str) -> ToolFailed:
    return ToolFailed(
        f"Refused to fetch from host '{host}': it resolves to {ip}, a private, local "
        "or otherwise non-public network address. Private/local addresses are "
        "refused for safety; only public internet addresses can be fetched.",
        code="blocked_address",
    )


async def resolve_and_check(url: str, *, allow_private: bool) -> None:
    """Raise ``ToolFailed`` unless ``url`` is http(s) and its host is public.

    Codes: ``unsupported_scheme``, ``invalid_url``, ``dns_error``,
    ``blocked_address``. With ``allow_private=True`` only the URL's form and
    scheme are checked (no DNS lookup).
    """
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError, ValueError) as exc:
        raise ToolFailed(f"The URL is not valid: {exc}", code="invalid_url") from None

    scheme = parsed.scheme.lower()
    if scheme not in ALLOWED_SCHEMES:
        shown = scheme or "(none)"
        raise ToolFailed(
            f"Unsupported URL scheme '{shown}': only http:// and https:// URLs can be fetched.",
            code="unsupported_scheme",
        )
    # raw_host is what httpx will connect to (IDNA-encoded, IPv6 without brackets).
    host = parsed.raw_host.decode("ascii", errors="replace")
    if not host:
        raise ToolFailed("The URL has no host name.", code="invalid_url")
    if allow_private:
        return

    literal = _literal_ip(host)
    if literal is not None:
        if is_blocked_ip(literal):
            log.info("netguard.blocked", host=host, ip=str(literal))
            raise _blocked(host, str(literal))
        return

    port = parsed.port or (443 if scheme == "https" else 80)
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError, OSError) as exc:
        raise ToolFailed(
            f"Could not resolve host '{host}' (DNS lookup failed: {exc}).", code="dns_error"
        ) from None
    addresses = {str(info[4][0]) for info in infos}
    if not addresses:
        raise ToolFailed(f"Host '{host}' did not resolve to any address.", code="dns_error")
    for address in sorted(addresses):
        if is_blocked_ip(address):
            log.info("netguard.blocked", host=host, ip=address)
            raise _blocked(host, address.split("%", 1)[0])


class _PeerCheckingBackend(httpcore.AsyncNetworkBackend):
    """Wraps httpcore's network backend; checks the connected peer's IP."""

    def __init__(self, inner: httpcore.AsyncNetworkBackend) -> None:
        self._inner = inner

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        stream = await self._inner.connect_tcp(
            host, port, timeout=timeout, local_address=local_address,
            socket_options=socket_options,
        )
        peer = stream.get_extra_info("server_addr")
        ip = str(peer[0]) if isinstance(peer, tuple) and peer else None
        blocked = True if ip is None else is_blocked_ip(ip)
        if blocked:
            await stream.aclose()
            log.info("netguard.blocked_at_connect", host=host, ip=ip)
            raise _blocked(host, ip.split("%", 1)[0] if ip else "an unknown address")
        return stream

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise ToolFailed("Unix sockets cannot be fetched.", code="blocked_address")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class PinnedTransport(httpx.AsyncHTTPTransport):
    """An httpx transport that refuses to talk to non-public peers.

    The check runs on the socket's real peer address after each TCP connect,
    so it also holds against DNS rebinding. With ``allow_private=True`` it is
    a plain ``AsyncHTTPTransport``. Proxies and Unix sockets are not
    supported; other keyword arguments go to ``httpx.AsyncHTTPTransport``.
    """

    def __init__(self, *, allow_private: bool = False, **kwargs: Any) -> None:
        for unsupported in ("proxy", "uds"):
            if kwargs.get(unsupported) is not None:
                raise TypeError(f"PinnedTransport does not support {unsupported}=")
        kwargs.setdefault("trust_env", False)
        super().__init__(**kwargs)
        self.allow_private = allow_private
        if allow_private:
            return
        pool = getattr(self, "_pool", None)
        inner = getattr(pool, "_network_backend", None)
        if not isinstance(pool, httpcore.AsyncConnectionPool) or not isinstance(
            inner, httpcore.AsyncNetworkBackend
        ):
            raise RuntimeError(
                "httpx/httpcore internals changed: cannot pin connections to public "
                "addresses; update tools.netguard.PinnedTransport"
            )
        pool._network_backend = _PeerCheckingBackend(inner)
