"""The admin page answers only to its own names (issue 30, point 10: DNS rebinding).

A page on ``evil.example`` that re-points its name at 127.0.0.1 makes the owner's browser talk to
the admin page as ``evil.example``: same origin for the browser, so without a Host check its
script could read ``/healthz`` or, with a token it guessed, the whole page. Every request, open
routes and the web chat's included, is refused (421) unless its Host is loopback, the address the
page listens on, or an ``admin.allowed_hosts`` entry. Over real sockets, as a browser would."""

from __future__ import annotations

import aiohttp
import pytest

from bruce.admin import AdminServer
from bruce.app import build_app
from bruce.config.loader import parse_config
from bruce.errors import ConfigError
from channels.web_chat import WebChat
from tests.helpers import ADMIN_TOKEN, BEARER


@pytest.fixture
async def served(make_config, clock):
    """A daemon with the web chat, and its admin page listening on 127.0.0.1 (a free port)."""
    chat = WebChat(clock=clock)
    app = await build_app(make_config(), clock=clock, environ={}, extra_channels=[chat])
    await app.start()
    server = AdminServer(store=app.store, clock=clock, token=ADMIN_TOKEN, host="127.0.0.1", port=0,
                         chat_routes=chat.routes(), allowed_hosts=["bruce.example.org", "proxy.lan:8443"])
    url = await server.start()
    yield url
    await server.stop()
    await app.stop()


async def status(url: str, path: str, host: str, *, method: str = "GET", **kwargs) -> int:
    async with aiohttp.ClientSession() as http, http.request(method, url + path, headers={"Host": host, **BEARER},
                                                             allow_redirects=False, **kwargs) as response:
        return response.status


@pytest.mark.parametrize("path,method", [("/healthz", "GET"), ("/login", "GET"), ("/login", "POST"),
                                         ("/logs", "GET"), ("/api/tool-executions", "GET"),
                                         ("/api/chat/messages", "POST"), ("/static/admin.css", "GET")])
async def test_a_rebound_name_is_refused_on_every_route_even_with_the_token(served, path, method):
    assert await status(served, path, "evil.example", method=method) == 421
    assert await status(served, path, "evil.example:8765", method=method) == 421


async def test_a_missing_or_garbled_host_is_refused(served):
    assert await status(served, "/healthz", "") == 421
    assert await status(served, "/healthz", "127.0.0.1@evil.example") == 421
    assert await status(served, "/healthz", "bruce.example.org.evil.example") == 421


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.1:8765", "localhost", "LOCALHOST:1", "[::1]", "[::1]:8765",
                                  "127.0.0.2", "bruce.example.org", "bruce.example.org:443", "proxy.lan:8443"])
async def test_loopback_and_the_allowed_hosts_are_answered(served, host):
    assert await status(served, "/healthz", host) == 200
    assert await status(served, "/api/tool-executions", host) == 200


async def test_an_allowed_host_with_a_port_allows_that_port_only(served):
    assert await status(served, "/healthz", "proxy.lan") == 421
    assert await status(served, "/healthz", "proxy.lan:9999") == 421


async def test_bruce_run_takes_the_allowed_hosts_from_the_config(app_factory):
    app = await app_factory(admin={"port": 0, "token": ADMIN_TOKEN, "allowed_hosts": ["Bruce.Example.org"]})
    url = await app.start_admin()
    assert await status(url, "/healthz", "bruce.example.org:8765") == 200
    assert await status(url, "/healthz", "127.0.0.1") == 200
    assert await status(url, "/healthz", "attacker.example") == 421


def test_an_allowed_host_that_is_no_host_name_is_refused_by_the_config():
    with pytest.raises(ConfigError, match=r"admin\.allowed_hosts\[0\]: .* is not a host name"):
        parse_config({"admin": {"allowed_hosts": ["https://bruce.example.org/"]}}, environ={})
