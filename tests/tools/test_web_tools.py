"""web.read_url and web.search as the model uses them, configured through config.yml keys."""

from __future__ import annotations

import asyncio
import json
import tracemalloc
import zlib

import pytest
from aiohttp import web

from bruce.cli.main import main
from bruce.config.loader import parse_config
from bruce.errors import ConfigError
from tests.fakes.llm_server import Step
from tests.helpers import rows, say
from tools import calculator
from tools.web import page as page_module
from tools.web import search as search_module

PAGE = ("<html><head><title>Tide tables</title></head><body><article><h1>Tides</h1>"
        "<p>High tide in Recife is at 10:42 today, and the next low tide follows six hours later.</p>"
        "</article></body></html>")


def spin_reader(request, body):
    """A page-reader target (runs in the worker process) that never finishes."""
    while True:
        pass


def packed(data: bytes, wbits: int, *, padding: int = 0) -> bytes:
    """``data`` then ``padding`` zero bytes, compressed (gzip: wbits 31; raw deflate: -15),
    without ever holding the padding in memory."""
    packer = zlib.compressobj(9, zlib.DEFLATED, wbits)
    out = [packer.compress(data)]
    block = bytes(1 << 20)
    for _ in range(padding // len(block)):
        out.append(packer.compress(block))
    return b"".join(out) + packer.flush()


@pytest.fixture(autouse=True, scope="module")
def stop_the_worker_processes():
    yield
    calculator.shutdown()  # the page reader's process (and the calculator's) do not outlive these tests


@pytest.fixture
async def odd_site():
    """Pages a hostile or odd server sends: compressed ones, a compression bomb, a huge search answer."""
    bomb = packed(PAGE.encode(), 31, padding=100 << 20)  # 100 MB of zeros after the page, about 100 kB sent
    routes = {
        "/gzip": (packed(PAGE.encode(), 31), {"Content-Type": "text/html", "Content-Encoding": "gzip"}),
        "/deflate": (packed(PAGE.encode(), -15), {"Content-Type": "text/html", "Content-Encoding": "deflate"}),
        "/brotli": (b"\x8b\x03\x80hello\x03", {"Content-Type": "text/html", "Content-Encoding": "br"}),
        "/bomb": (bomb, {"Content-Type": "text/html", "Content-Encoding": "gzip"}),
        "/search": (json.dumps({"results": [{"title": "t", "url": f"https://x.example/{i}", "content": "c" * 1000}
                                            for i in range(3000)]}).encode(), {"Content-Type": "application/json"}),
    }

    async def serve(request: web.Request) -> web.Response:
        body, headers = routes[request.path]
        return web.Response(body=body, headers=headers)

    app = web.Application()
    for path in routes:
        app.router.add_get(path, serve)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    await runner.cleanup()


@pytest.fixture
async def site():
    """A local web site: an article page and a SearxNG-style JSON search endpoint."""
    hits: list[str] = []

    async def article(request: web.Request) -> web.Response:
        hits.append(request.path)
        return web.Response(text=PAGE, content_type="text/html")

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
    assert set(lines) == {"artifact.save", "clock.now", "files.write", "http.post", "math.calculate", "memory.forget", "memory.remember", "memory.search",
                          "proactive.cancel", "proactive.create", "proactive.list", "proactive.update",
                          "web.read_url", "web.search"}
    assert lines["http.post"][1:5] == ["critical", "true", "false", "local"]
    assert lines["files.write"][1:6] == ["high", "true", "false", "true", "required"]
    assert lines["web.search"][2] == "false"
    assert main(["--config", str(config), "tools", "show", "files.write"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["risk"] == "high" and shown["dry_run"] == "required" and "notes" in shown["side_effects"]
    assert main(["--config", str(config), "tools", "show", "nope.nothing"]) == 1


async def read_through_the_tool(app_factory, fake_llm, url, **web_config):
    app = await app_factory(tools={"web": {"allow_private": True, **web_config}})
    fake_llm.add(Step.tool_calls(("web_read_url", {"url": url})), Step.text("Done."))
    await say(app, "read it")
    return tool_feedback(fake_llm)


@pytest.mark.parametrize("path", ["/gzip", "/deflate"])
async def test_compressed_pages_are_read(app_factory, fake_llm, odd_site, path):
    feedback = await read_through_the_tool(app_factory, fake_llm, f"{odd_site}{path}")
    assert feedback["result"]["title"] == "Tide tables" and "10:42" in feedback["result"]["text"]


async def test_an_encoding_we_cannot_decode_is_refused_not_read_as_garbage(app_factory, fake_llm, odd_site):
    feedback = await read_through_the_tool(app_factory, fake_llm, f"{odd_site}/brotli")
    assert feedback["status"] == "error"
    assert feedback["error"] == (f"unsupported_content: Cannot read {odd_site}/brotli: it is compressed as 'br'; "
                                 "only gzip and deflate can be read.")


async def test_a_compression_bomb_is_inflated_only_up_to_the_size_limit(app_factory, fake_llm, odd_site):
    tracemalloc.start()
    try:
        feedback = await read_through_the_tool(app_factory, fake_llm, f"{odd_site}/bomb", read_max_bytes=200_000)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    result = feedback["result"]
    assert result["truncated"] is True and result["title"] == "Tide tables" and "10:42" in result["text"]
    assert peak < 30_000_000  # the 100 MB behind the page were never inflated at once


async def test_a_search_answer_over_the_size_limit_is_a_backend_error(app_factory, fake_llm, odd_site):
    app = await app_factory(tools={"web": {"search_backend": "searxng", "searxng_url": odd_site}})
    fake_llm.add(Step.tool_calls(("web_search", {"query": "x"})), Step.text("Search is broken."))
    await say(app, "search")
    feedback = tool_feedback(fake_llm)
    assert feedback["status"] == "error"
    assert feedback["error"] == ("backend_error: The 'searxng' search backend failed (the answer is larger than "
                                 f"{search_module.MAX_SEARCH_RESPONSE_BYTES} bytes). Try again later or rephrase the query.")


async def test_page_extraction_runs_in_a_process_that_is_stopped_at_its_time_limit(
        app_factory, fake_llm, site, monkeypatch):
    base, _ = site
    reader = calculator.ProcessWorker(f"{__name__}:spin_reader", time_limit_s=0.3)
    monkeypatch.setattr(page_module, "_READER", reader)
    try:
        reading = asyncio.create_task(read_through_the_tool(app_factory, fake_llm, f"{base}/article"))
        while reader.pid is None and not reading.done():  # until the page is handed to the reader
            await asyncio.sleep(0.01)
        pid = reader.pid
        assert not reading.done()  # the loop runs this test meanwhile
        feedback = await reading
    finally:
        reader.shutdown()
    assert feedback["status"] == "error"
    assert feedback["error"] == (f"timeout: Could not extract the text of {base}/article within 0.3s; "
                                 "the page is too large or too complex.")
    assert reader.pid is None and pid is not None


async def test_allowed_hosts_keep_read_url_and_every_redirect_on_those_hosts(app_factory, fake_llm, odd_site):
    """tools.web.allowed_hosts (what `bruce eval` uses to keep its cases local): a page on an allowed
    host is read; a redirect to another host, or any other URL, is refused before a connection."""
    async def page(request: web.Request) -> web.Response:
        return web.Response(text=PAGE, content_type="text/html")

    async def hop(request: web.Request) -> web.Response:
        raise web.HTTPFound(f"{odd_site}/gzip")  # another port: another host

    site = web.Application()
    site.router.add_get("/page", page)
    site.router.add_get("/hop", hop)
    runner = web.AppRunner(site)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    host = f"127.0.0.1:{runner.addresses[0][1]}"
    try:
        app = await app_factory(tools={"web": {"allow_private": True, "allowed_hosts": [host]}})
        fake_llm.add(Step.tool_calls(("web_read_url", {"url": f"http://{host}/page"}),
                                     ("web_read_url", {"url": f"http://{host}/hop"}),
                                     ("web_read_url", {"url": "https://example.com/"})), Step.text("Read."))
        await say(app, "read these")
        read, redirected, public = [json.loads(m["content"]) for m in fake_llm.requests[1]["messages"]
                                    if m["role"] == "tool"]
        assert read["ok"] and "10:42" in read["result"]["text"]
        other = odd_site.removeprefix("http://").split(":")[1]
        assert redirected["error"] == (f"blocked_address: Refused to fetch from host '127.0.0.1': only {host} may be "
                                       "fetched here (tools.web.allowed_hosts).")
        assert other not in redirected["error"]
        assert public["error"].startswith("blocked_address: Refused to fetch from host 'example.com'")
    finally:
        await runner.cleanup()
    with pytest.raises(ConfigError, match=r"tools.web.allowed_hosts\[0\]: 'http://x' is not a host name or host:port"):
        parse_config({"tools": {"web": {"allowed_hosts": ["http://x"]}}}, environ={})
