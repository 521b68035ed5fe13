"""The admin page's security and tool-log API, through aiohttp's test client on a real socket:
the token (Bearer or the login cookie), CSRF, the login rate limit, the security headers,
every filter and the cursor; a generated token file; no start beyond loopback without a token."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
import yaml
from aiohttp.test_utils import TestClient, TestServer

from bruce.admin import AdminServer
from bruce.admin.auth import resolve_token
from bruce.cli.main import main
from bruce.errors import ConfigError
from tests.fakes.llm_server import Step
from tests.helpers import ADMIN_TOKEN as TOKEN
from tests.helpers import BEARER, say


async def some_executions(app, fake_llm) -> None:
    """Three tool executions from two conversations: clock ok, math ok, math invalid."""
    fake_llm.add(Step.tool_calls(("clock_now", {})), Step.text("Noon."))
    await say(app, "time?")
    fake_llm.add(Step.tool_calls(("math_calculate", {"expression": "2+2"})), Step.text("4."))
    await say(app, "2+2?", chat="c2")
    app.clock.advance(hours=1)
    fake_llm.add(Step.tool_calls(("math_calculate", {"nope": 1})), Step.text("Hm."))
    await say(app, "again", chat="c2")


async def test_without_the_token_the_api_says_401_and_a_page_goes_to_login(admin):
    response = await admin.get("/api/tool-executions")
    assert response.status == 401 and (await response.json())["error"].startswith("the admin token is required")
    response = await admin.get("/api/tool-executions", headers={"Authorization": "Bearer wrong-token"})
    assert response.status == 401
    response = await admin.get("/logs", allow_redirects=False)
    assert response.status == 303 and response.headers["Location"] == "/login"
    response = await admin.get("/api/tool-executions", headers=BEARER)
    assert response.status == 200 and await response.json() == {"items": [], "next_cursor": None}


async def test_login_sets_a_strict_httponly_cookie_and_forms_need_the_csrf_token(admin):
    response = await admin.post("/login", data={"token": "not it"})
    assert response.status == 401 and "not the admin token" in await response.text()
    response = await admin.post("/login", data={"token": TOKEN}, allow_redirects=False)
    assert response.status == 303 and response.headers["Location"] == "/logs"
    cookie = response.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    page = await admin.get("/logs")
    assert page.status == 200 and "Tool logs" in await page.text()
    html = await page.text()
    csrf = html.split('name="csrf" value="', 1)[1].split('"', 1)[0]
    response = await admin.post("/logout", data={"csrf": "forged"}, allow_redirects=False)
    assert response.status == 403
    response = await admin.post("/logout", data={"csrf": csrf}, allow_redirects=False)
    assert response.status == 303 and response.headers["Location"] == "/login"
    response = await admin.get("/logs", allow_redirects=False)
    assert response.status == 303  # the session is over


async def test_login_attempts_are_rate_limited(admin):
    for _ in range(5):
        assert (await admin.post("/login", data={"token": "guess"})).status == 401
    response = await admin.post("/login", data={"token": TOKEN})
    assert response.status == 429 and "Too many attempts" in await response.text()


async def test_every_response_carries_the_security_headers(admin):
    for path, headers in (("/login", {}), ("/api/tool-executions", BEARER), ("/api/tool-executions", {}),
                          ("/healthz", {}), ("/nothing-here", BEARER), ("/static/admin.css", {})):
        response = await admin.get(path, headers=headers, allow_redirects=False)
        csp = response.headers.get("Content-Security-Policy", "")
        assert "frame-ancestors 'none'" in csp and "script-src 'self'" in csp and "unsafe-inline" not in csp, path
        assert response.headers.get("X-Content-Type-Options") == "nosniff", path


async def test_the_filters_and_the_cursor(app, admin, fake_llm):
    await some_executions(app, fake_llm)

    async def items(**query) -> dict:
        response = await admin.get("/api/tool-executions", params=query, headers=BEARER)
        assert response.status == 200, await response.text()
        return await response.json()

    everything = (await items())["items"]
    assert [i["tool_name"] for i in everything] == ["math.calculate", "math.calculate", "clock.now"]  # newest first
    first = everything[-1]
    assert set(first) == {"id", "tool_name", "status", "risk", "source", "conversation_id", "turn_id", "latency_ms",
                          "started_at", "input", "output", "error"}
    assert first["output"]["timezone"] == "America/Sao_Paulo" and first["source"] == "chat"
    assert [i["tool_name"] for i in (await items(tool="clock.now"))["items"]] == ["clock.now"]
    assert [i["status"] for i in (await items(status="invalid_args"))["items"]] == ["invalid_args"]
    assert len((await items(conversation="test:c2"))["items"]) == 2
    assert len((await items(source="chat"))["items"]) == 3 and (await items(source="proactive"))["items"] == []
    assert len((await items(since="2026-12-02T12:30:00Z"))["items"]) == 1
    assert len((await items(until="2026-12-02T12:30:00+00:00"))["items"]) == 2
    page = await items(limit="2")
    assert len(page["items"]) == 2 and page["next_cursor"] == page["items"][-1]["id"]
    rest = await items(limit="2", cursor=str(page["next_cursor"]))
    assert [i["tool_name"] for i in rest["items"]] == ["clock.now"] and rest["next_cursor"] is None
    one = await admin.get(f"/api/tool-executions/{first['id']}", headers=BEARER)
    assert (await one.json())["tool_name"] == "clock.now"


@pytest.mark.parametrize(("query", "named"), [
    ({"status": "great"}, "status"), ({"source": "email"}, "source"), ({"since": "yesterday"}, "since"),
    ({"until": "2026-12-02T12:00:00"}, "until"), ({"limit": "0"}, "limit"), ({"limit": "201"}, "limit"),
    ({"limit": "many"}, "limit"), ({"cursor": "-1"}, "cursor"), ({"colour": "red"}, "colour"),
])
async def test_a_bad_filter_is_a_400_naming_it(admin, query, named):
    response = await admin.get("/api/tool-executions", params=query, headers=BEARER)
    assert response.status == 400
    assert named in (await response.json())["error"]


async def test_the_logs_page_filters_and_shows_a_detail(app, admin, fake_llm):
    await some_executions(app, fake_llm)
    await admin.post("/login", data={"token": TOKEN})
    html = await (await admin.get("/logs", params={"status": "invalid_args"})).text()
    assert html.count("<tr class=\"status-") == 1 and "math.calculate" in html
    html = await (await admin.get("/logs", params={"tool": "clock.now"})).text()
    detail_id = html.split('href="/logs/', 1)[1].split('"', 1)[0]
    detail = await (await admin.get(f"/logs/{detail_id}")).text()
    assert '\n  &#34;timezone&#34;: &#34;America/Sao_Paulo&#34;' in detail  # pretty-printed, escaped
    assert (await admin.get("/logs/999999")).status == 404
    assert (await admin.get("/logs", params={"status": "great"})).status == 400


async def test_healthz_needs_no_token_and_says_what_runs(admin):
    response = await admin.get("/healthz")
    assert response.status == 200
    body = await response.json()
    assert body["status"] == "ok" and body["database"] == "ok" and body["scheduler"] == "running"
    assert "test" in body["channels"] and "llm_last_ok" in body


def test_a_token_is_generated_once_with_mode_0600(tmp_path: Path):
    token, path = resolve_token(None, host="127.0.0.1", data_dir=tmp_path / "data")
    assert path == tmp_path / "data" / "admin.token" and len(token) >= 32
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert resolve_token(None, host="127.0.0.1", data_dir=tmp_path / "data") == (token, path)
    assert resolve_token(TOKEN, host="0.0.0.0", data_dir=tmp_path) == (TOKEN, None)
    with pytest.raises(ConfigError, match="at least 16"):
        resolve_token("short", host="127.0.0.1", data_dir=tmp_path)


def test_a_host_beyond_loopback_without_a_token_is_refused(tmp_path: Path, capsys):
    with pytest.raises(ConfigError, match="admin.host is '0.0.0.0'"):
        resolve_token(None, host="0.0.0.0", data_dir=tmp_path)
    config = tmp_path / "config.yml"
    config.write_text(yaml.safe_dump({"storage": {"path": str(tmp_path / "bruce.db")}, "admin": {"host": "0.0.0.0"}}))
    assert main(["--config", str(config), "config", "check"]) == 2
    assert "admin.token: required when admin.host (0.0.0.0) is beyond this machine" in capsys.readouterr().err
    assert main(["--config", str(config), "run"]) == 2
    assert not (tmp_path / "bruce.db").exists()


@pytest.fixture
async def with_artifacts(app_factory, tmp_path, fake_llm):
    """An app with an artifacts folder, a saved HTML page, and the admin app over it."""
    folder = tmp_path / "artifacts"
    app = await app_factory(tools={"artifacts": {"dir": str(folder)}})
    fake_llm.add(Step.tool_calls(("artifact_save", {"filename": "plan.html", "format": "html", "title": "Plan",
                                                    "content": "<h1>Plan</h1><script>steal()</script>"})),
                 Step.text("Saved."))
    await say(app, "save my plan")
    (record,) = await app.store.artifacts.recent()
    server = AdminServer(store=app.store, clock=app.clock, token=TOKEN, host="127.0.0.1", port=0,
                         artifacts_dir=folder)
    client = TestClient(TestServer(server.app))
    await client.start_server()
    yield app, client, record
    await client.close()


async def test_an_artifact_is_served_sandboxed_behind_the_token(with_artifacts):
    _, client, record = with_artifacts
    url = f"/artifacts/{record.id}/{record.filename}"
    response = await client.get(url, allow_redirects=False)
    assert response.status == 303  # a page: log in first
    response = await client.get(url, headers=BEARER)
    assert response.status == 200 and "<h1>Plan</h1>" in await response.text()
    assert response.headers["Content-Security-Policy"] == "sandbox"
    assert response.headers["Content-Type"].startswith("text/html")
    listing = await (await client.get("/artifacts", headers=BEARER)).text()
    assert f'href="{url}"' in listing and "Plan" in listing


@pytest.mark.parametrize("path", [
    "/artifacts/{id}/..%2f..%2fbruce.db", "/artifacts/{id}/..%2F..%2Fbruce.db", "/artifacts/..%2f..%2f/bruce.db",
    "/artifacts/{id}/%2e%2e%2f%2e%2e%2fbruce.db", "/artifacts/{id}/other.html", "/artifacts/{id}/{name}%00.txt",
    "/artifacts/nosuchid/{name}", "/artifacts/{id}/..", "/artifacts/{id}%2f..%2f..%2fbruce.db/x",
])
async def test_no_path_in_an_artifact_url_reaches_the_file_system(with_artifacts, path):
    _, client, record = with_artifacts
    response = await client.get(path.format(id=record.id, name=record.filename), headers=BEARER)
    assert response.status in (400, 404)
    assert "SQLite" not in await response.text()


async def test_a_row_pointing_outside_the_artifacts_folder_is_not_served(with_artifacts, tmp_path):
    app, client, _ = with_artifacts
    secret = tmp_path / "secret.txt"
    secret.write_text("the owner's secret")
    await app.store.artifacts.add(artifact_id="evil0001", conversation_id=None, turn_id=None, title=None,
                                  filename="secret.txt", fmt="text", path=str(secret), size_bytes=18, sha256="x")
    response = await client.get("/artifacts/evil0001/secret.txt", headers=BEARER)
    assert response.status == 404 and "secret" not in await response.text()


async def test_a_turn_trace_has_the_message_each_call_in_order_and_the_reply(app, admin, fake_llm):
    steps = [Step.tool_calls(("math_calculate", {"expression": "2+2"})), Step.text("It is 4.")]

    def answer(body):  # each model call takes a second
        app.clock.advance(seconds=1)
        return steps.pop(0)

    fake_llm.responder = answer
    await say(app, "what is 2+2?")
    (item,) = (await (await admin.get("/api/tool-executions", headers=BEARER)).json())["items"]
    trace = await (await admin.get(f"/api/turns/{item['turn_id']}", headers=BEARER)).json()
    assert trace["message"]["text"] == "what is 2+2?" and trace["turn"]["status"] == "ok"
    assert [s["kind"] for s in trace["steps"]] == ["llm_call", "tool_execution", "llm_call"]
    assert trace["steps"][0]["prompt_tokens"] == 10 and trace["steps"][1]["tool_name"] == "math.calculate"
    assert [r["text"] for r in trace["replies"]] == ["It is 4."]
    html = await (await admin.get(f"/turns/{item['turn_id']}", headers=BEARER)).text()
    assert "what is 2+2?" in html and f'href="/logs/{item["id"]}"' in html and "It is 4." in html
    assert (await admin.get("/api/turns/nosuchturn", headers=BEARER)).status == 404


async def test_jobs_are_listed_and_changed_through_the_scheduler(app, admin):
    job = (await app.jobs.create("test:c1", {"execution_mode": "message", "content": "Call Ana",
                                             "in_seconds": 120})).job
    listed = (await (await admin.get("/api/jobs", headers=BEARER)).json())["items"]
    assert listed[0]["job_id"] == job.id and listed[0]["next_run"] == "Wed 2026-12-02 09:02 -03 (America/Sao_Paulo)"
    response = await admin.post(f"/api/jobs/{job.id}/pause", headers=BEARER)
    assert response.status == 200 and (await response.json())["status"] == "paused"
    assert (await admin.post(f"/api/jobs/{job.id}/explode", headers=BEARER)).status == 400
    assert "no job" in (await (await admin.post("/api/jobs/nosuch/pause", headers=BEARER)).json())["error"]
    await admin.post("/login", data={"token": TOKEN})
    assert (await admin.post(f"/jobs/{job.id}/resume", allow_redirects=False)).status == 403  # no CSRF token
    page = await (await admin.get("/jobs")).text()
    csrf = page.split('name="csrf" value="', 1)[1].split('"', 1)[0]
    response = await admin.post(f"/jobs/{job.id}/resume", data={"csrf": csrf}, allow_redirects=False)
    assert response.status == 303
    assert (await app.store.jobs.get(job.id)).status.value == "active"


async def test_llm_calls_filters_totals_budget_and_charts(app_factory, fake_llm):
    app = await app_factory(llm={"budget": {"daily_tokens": 1000}})
    server = AdminServer(store=app.store, clock=app.clock, token=TOKEN, host="127.0.0.1", port=0,
                         budget=app.llm.budget, zone=app.config.assistant.zone)
    client = TestClient(TestServer(server.app))
    await client.start_server()
    try:
        fake_llm.add(Step.text("one"), Step.error(400, "bad request"))
        await say(app, "hi")
        await say(app, "again")
        calls = (await (await client.get("/api/llm-calls", headers=BEARER)).json())["items"]
        assert [c["status"] for c in calls][:1] == ["error"] and calls[-1]["status"] == "ok"
        ok = (await (await client.get("/api/llm-calls", params={"status": "ok"}, headers=BEARER)).json())["items"]
        assert [c["prompt_tokens"] for c in ok] == [10]
        page = await (await client.get("/api/llm-calls", params={"limit": "1"}, headers=BEARER)).json()
        assert len(page["items"]) == 1 and page["next_cursor"] == page["items"][0]["id"]
        bad = await client.get("/api/llm-calls", params={"status": "cached"}, headers=BEARER)
        assert bad.status == 400 and "status" in (await bad.json())["error"]
        html = await (await client.get("/llm", headers=BEARER)).text()
        assert "Today (2026-12-02): " in html and "of 1,000 tokens" in html
        assert "openai/primary" in html and '<polyline class="latency" points="0.0,' in html
    finally:
        await client.close()


async def test_metrics_are_prometheus_text_behind_the_token(app, admin, fake_llm):
    fake_llm.add(Step.tool_calls(("math_calculate", {"expression": "2+2"})), Step.text("4."))
    await say(app, "2+2?")
    assert (await admin.get("/metrics")).status == 401
    response = await admin.get("/metrics", headers=BEARER)
    assert response.status == 200 and response.headers["Content-Type"].startswith("text/plain")
    text = await response.text()
    assert 'bruce_turns_total{source="chat",status="ok"} 1.0' in text
    assert 'bruce_llm_calls_total{model="openai/primary",status="ok"} 2.0' in text
    assert 'bruce_llm_tokens_total{kind="prompt",model="openai/primary"} 20.0' in text
    assert 'bruce_tool_executions_total{status="ok",tool="math.calculate"} 1.0' in text
    assert 'bruce_llm_call_latency_seconds_count 2.0' in text and 'bruce_tool_latency_seconds_bucket{le="+Inf"} 1.0' in text
    assert "bruce_outbox_unsent 0.0" in text
    assert all(line.startswith(("bruce_", "# HELP bruce_", "# TYPE bruce_")) for line in text.splitlines() if line)


async def test_pairing_requests_can_be_approved_and_denied_here(app, admin):
    codes = iter(["ABCD2345", "WXYZ6789"])
    for sender in ("555", "666"):
        await app.store.pairing.ask(channel="telegram", sender_id=sender, chat_id=sender, display_name=f"user {sender}",
                                    expires_at="2026-12-02T13:00:00.000000+00:00", max_pending=3,
                                    new_code=lambda: next(codes))
    listed = (await (await admin.get("/api/pairing", headers=BEARER)).json())["items"]
    assert [(r["code"], r["sender_id"]) for r in listed] == [("ABCD2345", "555"), ("WXYZ6789", "666")]
    response = await admin.post("/api/pairing/abcd-2345/approve", headers=BEARER)
    assert response.status == 200 and (await response.json())["outcome"] == "approved"
    assert await app.store.pairing.is_paired("telegram", "555")
    again = await admin.post("/api/pairing/ABCD2345/deny", headers=BEARER)
    assert again.status == 400 and "not pending" in (await again.json())["error"]
    await admin.post("/login", data={"token": TOKEN})
    page = await (await admin.get("/pairing")).text()
    assert "WXYZ6789" in page and "ABCD2345" not in page
    csrf = page.split('name="csrf" value="', 1)[1].split('"', 1)[0]
    assert (await admin.post("/pairing/WXYZ6789/deny", allow_redirects=False)).status == 403
    response = await admin.post("/pairing/WXYZ6789/deny", data={"csrf": csrf}, allow_redirects=False)
    assert response.status == 303 and not await app.store.pairing.is_paired("telegram", "666")
    assert (await (await admin.get("/api/pairing", headers=BEARER)).json())["items"] == []


async def test_new_tool_executions_arrive_live_over_server_sent_events(app, admin, fake_llm):
    import asyncio
    import json as _json

    fake_llm.add(Step.tool_calls(("clock_now", {})), Step.text("Noon."))
    await say(app, "time?")
    (first,) = (await (await admin.get("/api/tool-executions", headers=BEARER)).json())["items"]
    assert (await admin.get("/api/tool-executions/events", params={"after": "x"}, headers=BEARER)).status == 400
    stream = await admin.get("/api/tool-executions/events", params={"after": str(first["id"]), "tool": "math.calculate"},
                             headers=BEARER)
    assert stream.headers["Content-Type"] == "text/event-stream"
    fake_llm.add(Step.tool_calls(("clock_now", {}), ("math_calculate", {"expression": "6*7"})), Step.text("42."))
    await say(app, "time and 6*7?")
    async with asyncio.timeout(10):
        while True:
            line = (await stream.content.readline()).decode()
            if line.startswith("data: "):
                item = _json.loads(line[6:])
                break
    assert item["tool_name"] == "math.calculate" and item["id"] > first["id"]  # the filter holds, clock.now is not sent
    stream.close()


async def test_a_port_in_use_is_a_clear_start_up_error(app_factory, tmp_path):
    import socket

    from bruce.errors import BruceError

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        app = await app_factory(admin={"port": port, "token": TOKEN})
        with pytest.raises(BruceError, match=f"cannot listen on 127.0.0.1:{port}.*set admin.port"):
            await app.start_admin()
