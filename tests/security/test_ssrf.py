"""The SSRF guard (tools/netguard.py) as a table: each row is a URL the model (or a page's redirect)
asks Bruce to fetch and what the guard answers: ``ok`` or the refusal code the model sees.

Names resolve through a fake resolver (``DNS`` below, standing in for the network's DNS); IP
literals in any spelling go to the system's own parser with AI_NUMERICHOST, as the HTTP client's
connect does, so no row ever reaches the internet. A new address form is one more row.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from aiohttp import web

from bruce.errors import ToolFailed
from tests.fakes.web_site import LocalServer
from tools.netguard import resolve_and_check
from tools.web.page import read_url

OK, BLOCKED, DNS_ERROR, BAD_SCHEME, INVALID = "ok", "blocked_address", "dns_error", "unsupported_scheme", "invalid_url"

DNS: dict[str, list[str]] = {
    "public.example": ["93.184.216.34"],
    "public6.example": ["2606:4700:4700::1111"],
    "localhost": ["127.0.0.1", "::1"],
    "intranet.example": ["10.1.2.3"],
    "metadata.google.internal": ["169.254.169.254"],
    "mixed.example": ["93.184.216.34", "192.168.1.10"],
    "ula.example": ["fd12:3456::1"],
    "mapped.example": ["::ffff:127.0.0.1"],
    "empty.example": [],
}

ROWS = [
    # public addresses pass
    ("http://93.184.216.34/", OK),
    ("https://8.8.8.8/dns-query", OK),
    ("http://[2606:4700:4700::1111]/", OK),
    ("http://public.example/page", OK),
    ("https://public6.example/", OK),
    ("HTTP://93.184.216.34/", OK),
    ("http://134744072/", OK),  # 8.8.8.8 in decimal
    ("http://127.0.0.1:80@93.184.216.34/", OK),  # userinfo, the host is the public one
    # loopback, in every spelling
    ("http://127.0.0.1/", BLOCKED),
    ("http://127.0.0.1:8765/admin", BLOCKED),
    ("http://127.255.255.254/", BLOCKED),
    ("http://127.1/", BLOCKED),
    ("http://2130706433/", BLOCKED),
    ("http://017700000001/", BLOCKED),
    ("http://0x7f000001/", BLOCKED),
    ("http://0x7f.0.0.1/", BLOCKED),
    ("http://0x7f.1/", BLOCKED),
    ("http://127.0.0.1./", BLOCKED),
    ("http://localhost/", BLOCKED),
    ("http://LOCALHOST:8765/", BLOCKED),
    ("http://[::1]/", BLOCKED),
    ("http://[0:0:0:0:0:0:0:1]/", BLOCKED),
    # unspecified
    ("http://0.0.0.0/", BLOCKED),
    ("http://0/", BLOCKED),
    ("http://0.0.0.0./", BLOCKED),
    ("http://[::]/", BLOCKED),
    # private networks
    ("http://10.0.0.1/", BLOCKED),
    ("http://172.16.0.1/", BLOCKED),
    ("http://172.31.255.255/", BLOCKED),
    ("http://192.168.1.1/", BLOCKED),
    ("http://0xc0a80101/", BLOCKED),  # 192.168.1.1 in hex
    ("http://3232235777/", BLOCKED),  # 192.168.1.1 in decimal
    # link-local and cloud metadata
    ("http://169.254.169.254/latest/meta-data", BLOCKED),
    ("http://2852039166/", BLOCKED),  # 169.254.169.254 in decimal
    ("http://[fe80::1]/", BLOCKED),
    ("http://[fe80::1%25eth0]/", BLOCKED),
    # shared address space (CGNAT), benchmarking, documentation, reserved, broadcast
    ("http://100.64.0.1/", BLOCKED),
    ("http://100.127.255.254/", BLOCKED),
    ("http://198.18.0.1/", BLOCKED),
    ("http://192.0.2.1/", BLOCKED),
    ("http://240.0.0.1/", BLOCKED),
    ("http://255.255.255.255/", BLOCKED),
    # multicast
    ("http://224.0.0.1/", BLOCKED),
    ("http://239.255.255.250/", BLOCKED),
    ("http://[ff02::1]/", BLOCKED),
    # IPv6 unique-local, site-local (deprecated, still routed inside some networks), documentation
    ("http://[fc00::1]/", BLOCKED),
    ("http://[fd12:3456::1]/", BLOCKED),
    ("http://[fec0::1]/", BLOCKED),
    ("http://[2001:db8::1]/", BLOCKED),
    # IPv4 inside IPv6: mapped, compatible, translated, 6to4, Teredo, NAT64
    ("http://[::ffff:127.0.0.1]/", BLOCKED),
    ("http://[::ffff:7f00:1]/", BLOCKED),
    ("http://[::ffff:169.254.169.254]/", BLOCKED),
    ("http://[0:0:0:0:0:ffff:10.0.0.1]/", BLOCKED),
    ("http://[::127.0.0.1]/", BLOCKED),
    ("http://[::ffff:0:127.0.0.1]/", BLOCKED),
    ("http://[2002:7f00:1::]/", BLOCKED),
    ("http://[2002:a9fe:a9fe::]/", BLOCKED),
    ("http://[2001:0:4136:e378:8000:63bf:80ff:fffe]/", BLOCKED),
    ("http://[64:ff9b::7f00:1]/", BLOCKED),
    ("http://[64:ff9b::a9fe:a9fe]/", BLOCKED),
    # names that resolve to any blocked address
    ("http://intranet.example/", BLOCKED),
    ("http://metadata.google.internal/computeMetadata/v1/", BLOCKED),
    ("http://mixed.example/", BLOCKED),
    ("http://ula.example/", BLOCKED),
    ("http://mapped.example/", BLOCKED),
    # names that do not resolve
    ("http://nowhere.invalid/", DNS_ERROR),
    ("http://empty.example/", DNS_ERROR),
    # other schemes, broken URLs
    ("ftp://93.184.216.34/file", BAD_SCHEME),
    ("file:///etc/passwd", BAD_SCHEME),
    ("gopher://127.0.0.1:25/", BAD_SCHEME),
    ("dict://127.0.0.1:11211/stat", BAD_SCHEME),
    ("http:///nohost", INVALID),
    ("http://[::1/", INVALID),
    ("http://0177.0.0.1/", INVALID),  # octal parts: httpx refuses the URL
]


@pytest.fixture
async def fake_dns(monkeypatch: pytest.MonkeyPatch) -> None:
    loop = asyncio.get_running_loop()
    numeric = loop.getaddrinfo

    async def getaddrinfo(host: str, port: int, **kwargs: Any) -> list[Any]:
        if host in DNS:
            return [(socket.AF_INET6 if ":" in ip else socket.AF_INET, socket.SOCK_STREAM, 6, "", (ip, port))
                    for ip in DNS[host]]
        try:
            return await numeric(host, port, flags=socket.AI_NUMERICHOST, **kwargs)
        except socket.gaierror:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known") from None

    monkeypatch.setattr(loop, "getaddrinfo", getaddrinfo)


@pytest.mark.parametrize(("url", "verdict"), ROWS, ids=[row[0] for row in ROWS])
async def test_address_form(fake_dns: None, url: str, verdict: str) -> None:
    if verdict == OK:
        await resolve_and_check(url, allow_private=False)
        return
    with pytest.raises(ToolFailed) as refused:
        await resolve_and_check(url, allow_private=False)
    assert refused.value.code == verdict
    if verdict == BLOCKED:
        assert "private, local or otherwise non-public" in str(refused.value)


REDIRECT_TARGETS = [
    "http://127.0.0.1:{port}/secret",
    "http://localhost:{port}/secret",
    "http://127.1:{port}/secret",
    "http://2130706433:{port}/secret",
    "http://0x7f000001:{port}/secret",
    "http://127.0.0.1.:{port}/secret",
    "http://0.0.0.0:{port}/secret",
    "http://[::ffff:127.0.0.1]:{port}/secret",
    "http://169.254.169.254/latest/meta-data",
    "http://intranet.example/",
]


class Redirector(LocalServer):
    """A page on 127.0.0.1 that redirects to ``target`` (``{port}``: its own port), and the secret."""

    def __init__(self) -> None:
        super().__init__()
        self.target = ""
        self.route("/start", self.start_page)
        self.route("/secret", self.secret_page)

    async def start_page(self, _: web.Request) -> web.Response:
        raise web.HTTPFound(self.target.format(port=self.port))

    async def secret_page(self, _: web.Request) -> web.Response:
        return web.Response(text="the secret", content_type="text/plain")


@pytest.fixture
async def redirector() -> AsyncIterator[Redirector]:
    server = Redirector()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@pytest.mark.parametrize("target", REDIRECT_TARGETS)
async def test_a_redirect_to_a_blocked_address_is_refused_before_it_is_followed(
    fake_dns: None, redirector: Redirector, target: str,
) -> None:
    """The first page is treated as public; its redirect target is checked again, as every hop is."""
    redirector.target = target
    first = redirector.url("/start")

    async def guard(url: str, *, allow_private: bool) -> None:
        if url != first:
            await resolve_and_check(url, allow_private=allow_private)

    async with httpx.AsyncClient() as client:  # a plain client: only the per-hop check protects here
        with pytest.raises(ToolFailed) as refused:
            await read_url(first, guard=guard, client=client, timeout_s=5)
    assert refused.value.code == BLOCKED
    assert redirector.paths == ["/start"]  # the target was never requested
