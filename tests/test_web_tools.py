"""web.read_url and web.search as the model uses them, configured through config.yml keys."""

from __future__ import annotations

import json

import pytest
from aiohttp import web

from bruce.cli import main
from tests.fakes.llm_server import Step
from tests.helpers import rows, say


@pytest.fixture
async def site():
    """A local web site: an article page and a SearxNG-style JSON search endpoint."""
    hits: list[str] = []

    async def article(request: web.Request) -> web.Response:
        hits.append(request.path)
        body = ("<html><head><title>Tide tables</title></head><body><article><h1>Tides</h1>"
                "<p>High tide in Recife is at 10:42 today, and the next low tide follows six hours later.</p>"
                "</article></body></html>")
        return web.Response(text=body, content_type="text/html")

    async def search(request: web.Request) -> web.Response:
        hits.append(f"search:{request.query['q']}")
        return web.json_response({"results": [
            {"title": "Tide tables", "url": "https://tides.example/recife", "content": "High tide at 10:42"}]})

    app = web.Application()
    app.router.add_get("/article", article)
    app.router.add_get("/search", search)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    yield f"http://127.0.0.1:{runner.addresses[0][1]}", hits
    await runner.cleanup()


def tool_feedback(fake_llm, index=1):
    return [json.loads(m["content"]) for m in fake_llm.requests[index]["messages"] if m["role"] == "tool"][0]


async def test_read_url_refuses_local_addresses_by_default(app_factory, fake_llm, site):
    base, hits = site
    app = await app_factory()
    fake_llm.add(Step.tool_calls(("web_read_url", {"url": f"{base}/article"})), Step.text("I can't read that."))
    await say(app, "read my local page")
    feedback = tool_feedback(fake_llm)
    assert feedback["status"] == "error" and feedback["error"].startswith("blocked_address")
    assert hits == []
    (audit,) = await rows(app, "SELECT tool_name, status FROM tool_executions")
    assert audit == {"tool_name": "web.read_url", "status": "error"}


async def test_read_url_reads_a_local_page_when_config_allows_it(app_factory, fake_llm, site):
    base, hits = site
    app = await app_factory(tools={"web": {"allow_private": True}})
    fake_llm.add(Step.tool_calls(("web_read_url", {"url": f"{base}/article"})), Step.text("High tide is at 10:42."))
    await say(app, "when is high tide?")
    result = tool_feedback(fake_llm)["result"]
    assert result["title"] == "Tide tables" and "10:42" in result["text"]
    assert hits == ["/article"]


async def test_search_uses_the_configured_searxng_backend(app_factory, fake_llm, site):
    base, hits = site
    app = await app_factory(tools={"web": {"search_backend": "searxng", "searxng_url": base}})
    fake_llm.add(Step.tool_calls(("web_search", {"query": "tides recife"})), Step.text("Found it."))
    await say(app, "search tides")
    result = tool_feedback(fake_llm)["result"]
    assert result["backend"] == "searxng"
    assert result["results"] == [{"title": "Tide tables", "url": "https://tides.example/recife",
                                  "snippet": "High tide at 10:42"}]
    assert hits == ["search:tides recife"]


async def test_search_backend_failure_is_a_structured_error(app_factory, fake_llm):
    app = await app_factory(tools={"web": {"search_backend": "searxng", "searxng_url": "http://127.0.0.1:9"}})
    fake_llm.add(Step.tool_calls(("web_search", {"query": "x"})), Step.text("Search is down."))
    await say(app, "search")
    feedback = tool_feedback(fake_llm)
    assert feedback["status"] == "error" and feedback["error"].startswith("backend_error")


def test_tools_command_lists_contracts_with_their_policy(capsys, tmp_path):
    config = tmp_path / "c.yml"
    config.write_text("tools: {overrides: {web.search: {enabled: false}}}\n")
    assert main(["--config", str(config), "tools"]) == 0
    lines = {line.split()[0]: line.split() for line in capsys.readouterr().out.splitlines()[1:]}
    assert set(lines) == {"artifact.save", "clock.now", "files.write", "http.post", "math.calculate",
                          "web.read_url", "web.search"}
    assert lines["http.post"][1:5] == ["critical", "true", "false", "local"]
    assert lines["files.write"][1:6] == ["high", "true", "false", "true", "required"]
    assert lines["web.search"][2] == "false"
    assert main(["--config", str(config), "tools", "show", "files.write"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["risk"] == "high" and shown["dry_run"] == "required" and "notes" in shown["side_effects"]
    assert main(["--config", str(config), "tools", "show", "nope.nothing"]) == 1
