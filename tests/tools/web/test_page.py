"""tools.web.page.read_url against local aiohttp servers on 127.0.0.1 only."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator

import httpx
import pytest
from aiohttp import web

from bruce.errors import ToolFailed
from tests.fakes.web_site import LocalServer
from tools.netguard import resolve_and_check
from tools.web.page import read_url

ARTICLE = (
    "<html><head><title>Bruce Test Page</title></head><body>"
    "<nav><a href='/a'>Home</a> <a href='/b'>About</a></nav>"
    "<article><h1>Otters</h1>"
    + "<p>Sea otters hold hands while they sleep so they do not drift apart. "
    "They also keep a favourite stone in a pouch of loose skin.</p>" * 3
    + "</article><footer>Copyright nobody</footer></body></html>"
)


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
