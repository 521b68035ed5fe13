"""tools.web.search: the search backends against a local aiohttp server, and web_search's refusals."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from aiohttp import web
from ddgs.exceptions import DDGSException

from bruce.errors import ToolFailed
from tests.fakes.web_site import LocalServer
from tools.web.search import BraveBackend, DuckDuckGoBackend, SearxNGBackend, web_search


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
