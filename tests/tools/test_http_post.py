"""http.post against a local aiohttp server: allow-list, dry run, errors."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from aiohttp import web

from bruce.actions.checks import check_contract
from bruce.contracts import DryRun, Risk, ToolContext
from bruce.errors import ConfigError, ToolFailed
from tests.fakes.clock import FakeClock
from tests.fakes.llm_server import Step
from tests.helpers import rows, say
from tools.http_post import http_post_tool


class Receiver:
    """A tiny webhook receiver on 127.0.0.1 that records every request."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.port = 0
        self.base = ""

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        self.requests.append({"path": request.path, "query": request.query_string, "body": body,
                              "content_type": request.content_type})
        if request.path.endswith("/fail"):
            return web.Response(status=500, text="boom: database down")
        if request.path.endswith("/slow"):
            await asyncio.sleep(2)
        if request.path.endswith("/big"):
            return web.Response(text="x" * 5000)
        if request.path.endswith("/redirect"):
            raise web.HTTPFound("/hooks/other")
        return web.json_response({"received": True})


@pytest.fixture
async def receiver(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Receiver]:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    rec = Receiver()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", rec.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    rec.port = runner.addresses[0][1]
    rec.base = f"http://127.0.0.1:{rec.port}"
    yield rec
    await runner.cleanup()


def ctx(*, dry_run: bool = False) -> ToolContext:
    return ToolContext(clock=FakeClock(), zone=ZoneInfo("UTC"), conversation_id=None, turn_id=None, dry_run=dry_run)


@pytest.fixture
def handler(receiver: Receiver):
    return http_post_tool(allowed_urls=[f"{receiver.base}/hooks", f"{receiver.base}/exact?token=abc"],
                          timeout_s=1.0, max_response_chars=100)[1]


def test_contract_declares_its_policy():
    contract, handler = http_post_tool(allowed_urls=["https://example.org/hook"])
    assert check_contract(contract) == []
    assert contract.name == "http.post" and contract.risk is Risk.CRITICAL and contract.dry_run is DryRun.REQUIRED
    assert contract.confirmation and contract.step_up and not contract.autonomous and not contract.idempotent
    assert contract.permissions == ("network:post-allowlisted",)


@pytest.mark.parametrize("bad", ["ftp://example.org/x", "https://user:pw@example.org/x", "not a url", "/relative"])
def test_bad_allow_list_entries_are_a_config_error(bad: str):
    with pytest.raises(ConfigError) as info:
        http_post_tool(allowed_urls=["https://ok.example/x", bad])
    assert "tools.http_post.allowed_urls[1]" in str(info.value)


async def test_posts_json_to_an_allowed_url(handler, receiver: Receiver):
    out = await handler({"url": f"{receiver.base}/hooks/lights", "json": {"on": True, "room": "sala ☀"}}, ctx())
    assert out == {"status": 200, "body": '{"received": true}', "truncated": False}
    [request] = receiver.requests
    assert request["path"] == "/hooks/lights" and request["content_type"] == "application/json"
    assert json.loads(request["body"]) == {"on": True, "room": "sala ☀"}


async def test_the_entry_itself_and_an_exact_query_are_allowed(handler, receiver: Receiver):
    await handler({"url": f"{receiver.base}/hooks", "json": {}}, ctx())
    await handler({"url": f"{receiver.base}/exact?token=abc", "json": {"a": 1}}, ctx())
    assert [(r["path"], r["query"]) for r in receiver.requests] == [("/hooks", ""), ("/exact", "token=abc")]


async def test_long_answers_are_truncated(handler, receiver: Receiver):
    out = await handler({"url": f"{receiver.base}/hooks/big", "json": {}}, ctx())
    assert out == {"status": 200, "body": "x" * 100, "truncated": True}


async def test_redirects_are_not_followed(handler, receiver: Receiver):
    out = await handler({"url": f"{receiver.base}/hooks/redirect", "json": {}}, ctx())
    assert out["status"] == 302 and len(receiver.requests) == 1


@pytest.mark.parametrize(
    "url",
    [
        "{base}/other", "{base}/hooksx", "{base}/Hooks/x", "{base}/hooks/../admin", "{base}/hooks/%2e%2e/admin",
        "{base}/hooks/x?extra=1", "{base}/exact", "{base}/exact?token=abd",
        "http://localhost:{port}/hooks/x", "http://127.0.0.2:{port}/hooks/x", "http://127.0.0.1:1/hooks/x",
        "https://127.0.0.1:{port}/hooks/x", "http://u:p@127.0.0.1:{port}/hooks/x", "not a url", "file:///etc/passwd",
        # path tricks a server may read as a way out of /hooks
        "{base}/hooks/..;/admin", "{base}/hooks/..%3b/admin", "{base}/hooks/..\\admin", "{base}/hooks/%5c..%5cadmin",
        "{base}/hooks//admin", "{base}/hooks/;/../admin", "{base}/hooks/x;jsessionid=1",
        # IDNA hosts: refused like any host not on the list, not a crash
        "http://xn--n3h.example:{port}/hooks/x", "http://xn--abc.example/hooks", "http://\u2603.example/hooks",
        "http://ex\u00e4mple.org/hooks",
    ],
)
async def test_urls_not_on_the_list_are_refused(handler, receiver: Receiver, url: str):
    url = url.format(base=receiver.base, port=receiver.port)
    for dry_run in (True, False):
        with pytest.raises(ToolFailed) as info:
            await handler({"url": url, "json": {"x": 1}}, ctx(dry_run=dry_run))
        assert info.value.code == "url_not_allowed"
        assert "tools.http_post.allowed_urls" in str(info.value) and "u:p" not in str(info.value)
    assert receiver.requests == []


async def test_an_empty_allow_list_says_how_to_configure_it(receiver: Receiver):
    handler = http_post_tool(allowed_urls=[])[1]
    with pytest.raises(ToolFailed) as info:
        await handler({"url": f"{receiver.base}/hooks", "json": {}}, ctx())
    assert info.value.code == "url_not_allowed"
    assert "no URLs are configured" in str(info.value) and "tools.http_post.allowed_urls" in str(info.value)
    assert receiver.requests == []


async def test_dry_run_previews_and_sends_nothing(handler, receiver: Receiver):
    out = await handler({"url": f"{receiver.base}/hooks/a", "json": {"msg": "olá", "n": [1, 2]}}, ctx(dry_run=True))
    assert out == {
        "method": "POST", "url": f"{receiver.base}/hooks/a",
        "body": '{\n  "msg": "olá",\n  "n": [\n    1,\n    2\n  ]\n}',
        "bytes": len('{"msg":"olá","n":[1,2]}'.encode()),
    }
    assert receiver.requests == []


async def test_the_preview_masks_a_secret_in_the_url_but_the_post_uses_it(handler, receiver: Receiver):
    url = f"{receiver.base}/exact?token=abc"
    preview = await handler({"url": url, "json": {"a": 1}}, ctx(dry_run=True))
    assert preview["url"] == f"{receiver.base}/exact?token=***"
    await handler({"url": url, "json": {"a": 1}}, ctx())
    assert [r["query"] for r in receiver.requests] == ["token=abc"]


async def test_a_parked_post_shows_and_audits_the_webhook_url_masked(app_factory, fake_llm, channel, receiver: Receiver):
    url = f"{receiver.base}/exact?token=abc"
    app = await app_factory(tools={"http_post": {"allowed_urls": [url]}})
    fake_llm.add(Step.tool_calls(("http_post", {"url": url, "json": {"lights": "off"}})),
                 Step.text("The owner has to approve that first."))
    await say(app, "turn off the lights")

    [(_, request)] = channel.confirmations
    assert request.preview is not None and "token=***" in request.preview and "abc" not in request.preview
    assert "token=***" in request.summary and "abc" not in request.summary  # the one-line summary too
    audits = await rows(app, "SELECT status, input, output FROM tool_executions")
    assert [a["status"] for a in audits] == ["awaiting_confirmation"]
    assert json.loads(audits[0]["input"])["url"] == f"{receiver.base}/exact?token=***"
    [pending] = await rows(app, "SELECT arguments, preview FROM pending_confirmations")
    assert json.loads(pending["preview"])["url"] == f"{receiver.base}/exact?token=***"
    assert json.loads(pending["arguments"])["url"] == url  # what will run once approved
    assert receiver.requests == []


async def test_too_large_body_is_refused_before_sending(handler, receiver: Receiver):
    for dry_run in (True, False):
        with pytest.raises(ToolFailed) as info:
            await handler({"url": f"{receiver.base}/hooks", "json": {"blob": "x" * 100_001}}, ctx(dry_run=dry_run))
        assert info.value.code == "too_large"
    assert receiver.requests == []


async def test_server_error_is_an_http_error(handler, receiver: Receiver):
    with pytest.raises(ToolFailed) as info:
        await handler({"url": f"{receiver.base}/hooks/fail", "json": {}}, ctx())
    assert info.value.code == "http_error"
    assert "HTTP 500" in str(info.value) and "boom: database down" in str(info.value)
    assert len(receiver.requests) == 1


async def test_timeout(handler, receiver: Receiver):
    with pytest.raises(ToolFailed) as info:
        await handler({"url": f"{receiver.base}/hooks/slow", "json": {}}, ctx())
    assert info.value.code == "timeout" and "1 seconds" in str(info.value)


async def test_connection_error():
    with socket.socket() as probe:  # a port on 127.0.0.1 where nothing listens
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    handler = http_post_tool(allowed_urls=[f"http://127.0.0.1:{port}/hooks"], timeout_s=2.0)[1]
    with pytest.raises(ToolFailed) as info:
        await handler({"url": f"http://127.0.0.1:{port}/hooks/x", "json": {}}, ctx())
    assert info.value.code == "connection_error" and f"127.0.0.1:{port}" in str(info.value)
