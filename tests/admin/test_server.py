"""The admin server's own part, through aiohttp's test client on a real socket: the token (Bearer
or the login cookie), CSRF, the login rate limit, the security headers, ``/healthz``; a generated
token file; no start beyond loopback without a token; a port in use. The pages' own tests are in
``tests/admin/pages/``."""

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
from bruce.store import Store
from tests.helpers import ADMIN_TOKEN as TOKEN
from tests.helpers import BEARER


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
    assert response.status == 303 and response.headers["Location"] == "/"  # the overview
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


async def test_healthz_needs_no_token_and_says_what_runs(admin):
    response = await admin.get("/healthz")
    assert response.status == 200
    body = await response.json()
    assert body["status"] == "ok" and body["database"] == "ok" and body["scheduler"] == "running"
    assert "test" in body["channels"] and "llm_last_ok" in body


async def test_healthz_says_503_degraded_when_the_database_fails(tmp_path, clock):
    store = await Store.open(tmp_path / "b.db", clock)
    server = AdminServer(store=store, clock=clock, token=TOKEN, host="127.0.0.1", port=0)
    client = TestClient(TestServer(server.app))
    await client.start_server()
    try:
        await store.close()  # every read fails from now on
        response = await client.get("/healthz")
        assert response.status == 503
        body = await response.json()
        assert body["status"] == "degraded" and body["database"].startswith("error: ") and body["llm_last_ok"] is None
    finally:
        await client.close()


def test_a_token_is_generated_once_with_mode_0600(tmp_path: Path):
    token, path = resolve_token(None, host="127.0.0.1", data_dir=tmp_path / "data")
    assert path == tmp_path / "data" / "admin.token" and len(token) >= 32
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert resolve_token(None, host="127.0.0.1", data_dir=tmp_path / "data") == (token, path)
    assert resolve_token(TOKEN, host="0.0.0.0", data_dir=tmp_path) == (TOKEN, None)
    with pytest.raises(ConfigError, match="admin.token: at least 32 characters"):
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
