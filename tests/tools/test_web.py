"""tools.web and tools.netguard against local aiohttp servers on 127.0.0.1 only."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from aiohttp import web
from ddgs.exceptions import DDGSException

from bruce.errors import ToolFailed
from tools.netguard import PinnedTransport, is_blocked_ip, resolve_and_check
from tools.web import (
    BraveBackend,
    DuckDuckGoBackend,
    SearxNGBackend,
    read_url,
    web_search,
)

ARTICLE = (
    "<html><head><title>Bruce Test Page</title></head><body>"
    "<nav><a href='/a'>Home</a> <a href='/b'>About</a></nav>"
    "<article><h1>Otters</h1>"
    + "<p>Sea otters hold hands while they sleep so they do not drift apart. "
    "They also keep a favourite stone in a pouch of loose skin.</p>" * 3
    + "</article><footer>Copyright nobody</footer></body></html>"
)


class LocalServer:
    """An aiohttp app on 127.0.0.1:<random port> that logs every request path."""

    def __init__(self) -> None:
        self.app = web.Application()
        self.requests: list[str] = []
        self.headers: list[dict[str, str]] = []
        self.port = 0
        self.stopping = asyncio.Event()  # slow handlers end early when the server stops
        self._runner: web.AppRunner | None = None

        @web.middleware
        async def record(request: web.Request, handler: Any) -> web.StreamResponse:
            self.requests.append(request.path_qs)
            self.headers.append(dict(request.headers))
            return await handler(request)

        self.app.middlewares.append(record)

    def url(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def route(self, path: str, handler: Any) -> None:
        self.app.router.add_get(path, handler)

    async def start(self) -> None:
        self._runner = web.AppRunner(self.app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = self._runner.addresses[0][1]

    async def stop(self) -> None:
        self.stopping.set()
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def paths(self) -> list[str]:
        return [p.split("?", 1)[0] for p in self.requests]


async def article_page(_: web.Request) -> web.Response:
    return web.Response(text=ARTICLE, content_type="text/html")


async def big_page(_: web.Request) -> web.Response:
    return web.Response(text="abcdefghij" * 5_000, content_type="text/plain")


async def missing_page(_: web.Request) -> web.Response:
    return web.Response(status=404, text="nope", content_type="text/html")


async def image_page(_: web.Request) -> web.Response:
    return web.Response(body=b"\x89PNG\r\n\x1a\n", content_type="image/png")


async def loop_page(_: web.Request) -> web.Response:
    raise web.HTTPFound("/loop")


async def secret_page(_: web.Request) -> web.Response:
    return web.Response(text="the secret", content_type="text/plain")


async def hop_page(_: web.Request) -> web.Response:
    raise web.HTTPMovedPermanently("/")


async def to_ftp_page(_: web.Request) -> web.Response:
    raise web.HTTPFound("ftp://127.0.0.1/file")


async def plain_page(_: web.Request) -> web.Response:
    return web.Response(body="café au lait".encode("latin-1"),
                        headers={"Content-Type": "text/plain; charset=iso-8859-1"})


@pytest.fixture
async def site() -> AsyncIterator[LocalServer]:
    server = LocalServer()

    async def start(_: web.Request) -> web.Response:  # an absolute redirect needs the server's port
        raise web.HTTPFound(server.url("/secret"))

    async def slow(_: web.Request) -> web.Response:
        try:
            await asyncio.wait_for(server.stopping.wait(), 5)
        except TimeoutError:
            pass
        return web.Response(text="late", content_type="text/plain")

    for path, handler in {
        "/": article_page, "/big": big_page, "/missing": missing_page, "/image": image_page, "/loop": loop_page,
        "/start": start, "/secret": secret_page, "/hop": hop_page, "/to-ftp": to_ftp_page, "/slow": slow,
        "/plain": plain_page,
    }.items():
        server.route(path, handler)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


async def allow_all(url: str, *, allow_private: bool) -> None:
    """A guard that lets everything through (to prove the transport check holds)."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --------------------------------------------------------------------------- netguard


@pytest.mark.parametrize(
    "ip",
    ["127.0.0.1", "10.0.0.1", "172.16.5.4", "192.168.1.1", "169.254.169.254", "100.64.0.1",
     "224.0.0.1", "0.0.0.0", "240.0.0.1", "255.255.255.255", "::1", "::", "fe80::1",
     "fc00::1", "ff02::1", "::ffff:127.0.0.1", "::ffff:169.254.169.254", "2002:7f00:1::",
     "64:ff9b::a00:1", "not-an-ip"],
)
def test_blocked_ips(ip: str) -> None:
    assert is_blocked_ip(ip)


@pytest.mark.parametrize("ip", ["8.8.8.8", "93.184.216.34", "2606:4700:4700::1111"])
def test_public_ips_pass(ip: str) -> None:
    assert not is_blocked_ip(ip)


async def test_literal_public_ip_needs_no_dns() -> None:
    await resolve_and_check("https://8.8.8.8/dns-query", allow_private=False)


async def test_any_private_resolution_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    loop = asyncio.get_running_loop()

    async def fake_getaddrinfo(host: str, port: int, **_: Any) -> list[Any]:
        assert host == "mixed.example"
        return [
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.216.34", port)),
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.1.2.3", port)),
        ]

    monkeypatch.setattr(loop, "getaddrinfo", fake_getaddrinfo)
    with pytest.raises(ToolFailed) as err:
        await resolve_and_check("http://mixed.example/", allow_private=False)
    assert err.value.code == "blocked_address"
    assert "mixed.example" in str(err.value)
    # allow_private skips the address check (and the lookup) entirely
    await resolve_and_check("http://mixed.example/", allow_private=True)


async def test_public_resolution_passes_and_dns_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    loop = asyncio.get_running_loop()

    async def fake_getaddrinfo(host: str, port: int, **_: Any) -> list[Any]:
        if host == "public.example":
            return [(socket.AF_INET6, socket.SOCK_STREAM, 6, "",
                     ("2606:4700:4700::1111", port, 0, 0))]
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(loop, "getaddrinfo", fake_getaddrinfo)
    await resolve_and_check("https://public.example/page", allow_private=False)
    with pytest.raises(ToolFailed) as err:
        await resolve_and_check("https://nowhere.invalid/", allow_private=False)
    assert err.value.code == "dns_error"


async def test_allowed_hosts_refuse_another_host_before_any_dns_lookup(monkeypatch: pytest.MonkeyPatch) -> None:
    """A URL the model made up from a page it read (``http://<secret>.attacker.example/``) must not
    reach DNS at all when tools.web.allowed_hosts is set: the lookup alone would leak the name."""
    from tools.web_tools import only_hosts

    looked_up: list[str] = []

    async def fake_getaddrinfo(host: str, port: int, **_: Any) -> list[Any]:
        looked_up.append(host)
        address = "10.0.0.7" if host == "intranet.example" else "93.184.216.34"
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]

    monkeypatch.setattr(asyncio.get_running_loop(), "getaddrinfo", fake_getaddrinfo)
    guard = only_hosts(["docs.example", "intranet.example"])
    with pytest.raises(ToolFailed) as err:
        await guard("https://c2VjcmV0LWRhdGE.attacker.example/x", allow_private=False)
    assert err.value.code == "blocked_address" and "attacker.example" in str(err.value)
    assert looked_up == []
    with pytest.raises(ToolFailed) as err:
        await guard("ftp://docs.example/file", allow_private=False)
    assert err.value.code == "unsupported_scheme" and looked_up == []
    await guard("https://docs.example/page", allow_private=False)  # allowed: looked up and checked as before
    assert looked_up == ["docs.example"]
    with pytest.raises(ToolFailed) as err:  # allowed, but private: still refused after its lookup
        await guard("http://intranet.example/", allow_private=False)
    assert err.value.code == "blocked_address" and looked_up[-1] == "intranet.example"


async def test_pinned_transport_needs_no_proxy() -> None:
    with pytest.raises(TypeError):
        PinnedTransport(proxy="http://127.0.0.1:3128")


# --------------------------------------------------------------------------- read_url: refusals


async def test_refuses_loopback_ip(site: LocalServer) -> None:
    with pytest.raises(ToolFailed) as err:
        await read_url(site.url("/"))
    assert err.value.code == "blocked_address"
    assert "127.0.0.1" in str(err.value) and "private" in str(err.value).lower()
    assert site.requests == []


async def test_refuses_cloud_metadata() -> None:
    with pytest.raises(ToolFailed) as err:
        await read_url("http://169.254.169.254/latest/meta-data", timeout_s=2)
    assert err.value.code == "blocked_address"


async def test_refuses_ipv6_loopback(site: LocalServer) -> None:
    with pytest.raises(ToolFailed) as err:
        await read_url(f"http://[::1]:{site.port}/")
    assert err.value.code == "blocked_address"
    assert site.requests == []


async def test_refuses_hostname_resolving_to_loopback(site: LocalServer) -> None:
    with pytest.raises(ToolFailed) as err:
        await read_url(f"http://localhost:{site.port}/")
    assert err.value.code == "blocked_address"
    assert "localhost" in str(err.value)
    assert site.requests == []


@pytest.mark.parametrize("url", ["ftp://example.com/file.txt", "file:///etc/passwd",
                                 "gopher://127.0.0.1/"])
async def test_refuses_other_schemes(url: str) -> None:
    with pytest.raises(ToolFailed) as err:
        await read_url(url)
    assert err.value.code == "unsupported_scheme"


async def test_redirect_to_loopback_is_refused(site: LocalServer) -> None:
    first = site.url("/start")
    checked: list[str] = []

    async def guard(url: str, *, allow_private: bool) -> None:
        checked.append(url)
        if url == first:  # pretend the first server is on the public internet
            return
        await resolve_and_check(url, allow_private=allow_private)

    # A plain client: only the per-hop guard protects us here.
    async with httpx.AsyncClient() as client:
        with pytest.raises(ToolFailed) as err:
            await read_url(first, guard=guard, client=client)
    assert err.value.code == "blocked_address"
    assert checked == [first, site.url("/secret")]
    assert site.paths == ["/start"]  # the secret page was never requested


async def test_pinned_transport_blocks_even_if_guard_is_fooled(site: LocalServer) -> None:
    """DNS rebinding: the pre-check says public, but the socket lands on 127.0.0.1."""
    with pytest.raises(ToolFailed) as err:
        await read_url(site.url("/"), guard=allow_all)
    assert err.value.code == "blocked_address"
    assert site.requests == []


async def test_redirect_to_other_scheme_is_refused(site: LocalServer) -> None:
    with pytest.raises(ToolFailed) as err:
        await read_url(site.url("/to-ftp"), allow_private=True)
    assert err.value.code == "unsupported_scheme"


# --------------------------------------------------------------------------- read_url: reading


async def test_reads_local_page_when_private_allowed(site: LocalServer) -> None:
    result = await read_url(site.url("/"), allow_private=True)
    assert result["status"] == 200
    assert result["url"] == site.url("/")
    assert result["title"] == "Bruce Test Page"
    assert "Sea otters hold hands" in result["text"]
    assert "<p>" not in result["text"]
    assert result["truncated"] is False
    assert "Bruce" in site.headers[0].get("User-Agent", "")


async def test_follows_relative_redirect(site: LocalServer) -> None:
    result = await read_url(site.url("/hop"), allow_private=True)
    assert result["url"] == site.url("/")
    assert result["title"] == "Bruce Test Page"
    assert site.paths == ["/hop", "/"]


async def test_oversize_body_is_truncated(site: LocalServer) -> None:
    result = await read_url(site.url("/big"), allow_private=True, max_bytes=1_000)
    assert result["truncated"] is True
    assert result["text"] == ("abcdefghij" * 100)
    assert result["title"] is None


async def test_text_is_capped_at_max_chars(site: LocalServer) -> None:
    result = await read_url(site.url("/big"), allow_private=True, max_chars=25)
    assert result["text"] == "abcdefghij" * 2 + "abcde"
    assert result["truncated"] is True


async def test_plain_text_charset_is_honoured(site: LocalServer) -> None:
    result = await read_url(site.url("/plain"), allow_private=True)
    assert result["text"] == "café au lait"
    assert result["truncated"] is False


async def test_404_is_http_error(site: LocalServer) -> None:
    with pytest.raises(ToolFailed) as err:
        await read_url(site.url("/missing"), allow_private=True)
    assert err.value.code == "http_error"
    assert "404" in str(err.value)


async def test_non_html_is_refused(site: LocalServer) -> None:
    with pytest.raises(ToolFailed) as err:
        await read_url(site.url("/image"), allow_private=True)
    assert err.value.code == "unsupported_content"
    assert "image/png" in str(err.value)


async def test_redirect_loop(site: LocalServer) -> None:
    with pytest.raises(ToolFailed) as err:
        await read_url(site.url("/loop"), allow_private=True, max_redirects=3)
    assert err.value.code == "too_many_redirects"
    assert site.paths == ["/loop"] * 4  # the first request plus three redirects


async def test_timeout(site: LocalServer) -> None:
    with pytest.raises(ToolFailed) as err:
        await read_url(site.url("/slow"), allow_private=True, timeout_s=0.3)
    assert err.value.code == "timeout"


async def test_connection_refused() -> None:
    with pytest.raises(ToolFailed) as err:
        await read_url(f"http://127.0.0.1:{free_port()}/", allow_private=True, timeout_s=5)
    assert err.value.code == "connection_error"


async def test_credentials_never_echoed(site: LocalServer) -> None:
    with pytest.raises(ToolFailed) as err:
        await read_url(f"http://bob:hunter2@127.0.0.1:{site.port}/missing", allow_private=True)
    assert err.value.code == "http_error"
    assert "hunter2" not in str(err.value)


# --------------------------------------------------------------------------- search


@pytest.fixture
async def search_server() -> AsyncIterator[LocalServer]:
    server = LocalServer()

    async def searx(request: web.Request) -> web.Response:
        assert request.query["format"] == "json"
        q = request.query["q"]
        return web.json_response({"query": q, "results": [
            {"title": f"{q} result {i}", "url": f"https://example.org/{i}",
             "content": f"about {q} &amp; more {i}", "engine": "x"}
            for i in range(8)
        ] + [{"title": "no url"}]})

    async def brave(request: web.Request) -> web.Response:
        if request.headers.get("X-Subscription-Token") != "brave-key-123":
            return web.json_response({"error": "unauthorized"}, status=401)
        return web.json_response({"type": "search", "web": {"results": [
            {"title": "Brave <strong>one</strong>", "url": "https://brave.example/1",
             "description": "first <strong>hit</strong>"},
            {"title": "Brave two", "url": "https://brave.example/2", "description": "second"},
            {"title": "Brave three", "url": "https://brave.example/3", "description": "third"},
        ]}})

    server.route("/search", searx)
    server.route("/res/v1/web/search", brave)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


async def test_searxng_backend(search_server: LocalServer) -> None:
    backend = SearxNGBackend(search_server.url("/"))
    out = await web_search("  otters  ", backend=backend, max_results=3)
    assert out["query"] == "otters"
    assert out["backend"] == "searxng"
    assert out["results"] == [
        {"title": f"otters result {i}", "url": f"https://example.org/{i}",
         "snippet": f"about otters & more {i}"}
        for i in range(3)
    ]
    assert search_server.requests == ["/search?q=otters&format=json"]


async def test_searxng_backend_with_injected_client(search_server: LocalServer) -> None:
    async with httpx.AsyncClient() as client:
        backend = SearxNGBackend(search_server.url(""), client=client)
        out = await web_search("beavers", backend=backend, max_results=20)
    assert len(out["results"]) == 8  # the row without a url is dropped


async def test_brave_backend_sends_key(search_server: LocalServer) -> None:
    backend = BraveBackend("brave-key-123", base_url=search_server.url("/res/v1"))
    out = await web_search("otters", backend=backend, max_results=2)
    assert out["backend"] == "brave"
    assert out["results"] == [
        {"title": "Brave one", "url": "https://brave.example/1", "snippet": "first hit"},
        {"title": "Brave two", "url": "https://brave.example/2", "snippet": "second"},
    ]
    assert search_server.headers[0]["X-Subscription-Token"] == "brave-key-123"
    assert search_server.requests == ["/res/v1/web/search?q=otters&count=2"]
    assert "brave-key-123" not in repr(backend)


async def test_brave_bad_key_is_backend_error_without_key(search_server: LocalServer) -> None:
    backend = BraveBackend("wrong-secret-key", base_url=search_server.url("/res/v1"))
    with pytest.raises(ToolFailed) as err:
        await web_search("otters", backend=backend)
    assert err.value.code == "backend_error"
    assert "brave" in str(err.value) and "401" in str(err.value)
    assert "wrong-secret-key" not in str(err.value)


class FakeDDGS:
    calls: list[tuple[str, dict[str, Any]]] = []

    def text(self, query: str, **kwargs: Any) -> list[dict[str, Any]]:
        FakeDDGS.calls.append((query, kwargs))
        return [
            {"title": "Duck one", "href": "https://duck.example/1", "body": "quack"},
            {"title": "Duck two", "href": "https://duck.example/2", "body": "quack quack"},
            {"title": "Duck three", "href": "https://duck.example/3", "body": "more"},
        ]


async def test_duckduckgo_backend_with_fake_ddgs() -> None:
    FakeDDGS.calls = []
    out = await web_search("ducks", backend=DuckDuckGoBackend(FakeDDGS), max_results=2)
    assert out["backend"] == "duckduckgo"
    assert out["results"] == [
        {"title": "Duck one", "url": "https://duck.example/1", "snippet": "quack"},
        {"title": "Duck two", "url": "https://duck.example/2", "snippet": "quack quack"},
    ]
    assert FakeDDGS.calls[0][0] == "ducks"
    assert FakeDDGS.calls[0][1]["max_results"] == 2


async def test_duckduckgo_no_results_is_empty() -> None:
    class Empty:
        def text(self, query: str, **kwargs: Any) -> list[dict[str, Any]]:
            raise DDGSException("No results found.")

    out = await web_search("zzzz", backend=DuckDuckGoBackend(Empty))
    assert out["results"] == []


async def test_backend_exception_is_backend_error() -> None:
    class Broken:
        name = "broken"

        async def search(self, query: str, max_results: int) -> list[dict[str, str]]:
            raise RuntimeError("boom with token sk-live-SECRET")

    with pytest.raises(ToolFailed) as err:
        await web_search("anything", backend=Broken())
    assert err.value.code == "backend_error"
    assert "broken" in str(err.value)
    assert "SECRET" not in str(err.value)


async def test_ddgs_failure_is_backend_error() -> None:
    class Limited:
        def text(self, query: str, **kwargs: Any) -> list[dict[str, Any]]:
            raise DDGSException("ratelimit from https://duckduckgo.com")

    with pytest.raises(ToolFailed) as err:
        await web_search("x", backend=DuckDuckGoBackend(Limited))
    assert err.value.code == "backend_error"
    assert "duckduckgo" in str(err.value)


@pytest.mark.parametrize("query", ["", "   ", "\n"])
async def test_empty_query(query: str) -> None:
    with pytest.raises(ToolFailed) as err:
        await web_search(query, backend=DuckDuckGoBackend(FakeDDGS))
    assert err.value.code == "invalid_query"


async def test_bad_max_results() -> None:
    with pytest.raises(ToolFailed) as err:
        await web_search("x", backend=DuckDuckGoBackend(FakeDDGS), max_results=0)
    assert err.value.code == "invalid_args"
