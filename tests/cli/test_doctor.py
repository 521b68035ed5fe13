"""`bruce doctor` against local fakes: a Telegram and a Discord API that check the token, the fake
LLM server, a closed port; each problem is a ✗ line with its fix, and the exit status says
whether Bruce could start."""

from __future__ import annotations

import getpass
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web

from bruce.cli.doctor import diagnose
from bruce.cli.main import main
from bruce.store import Store
from bruce.store.migrations import MIGRATIONS
from tests.fakes.clock import FakeClock
from tests.fakes.llm_server import FakeLLMServer, Step, closed_base_url

GOOD_TG = "111111:good-telegram-token-value"
BAD_TG = "222222:revoked-telegram-token-value"
GOOD_DC = "good.discord.token-value-0123"
ENV = {"DOCTOR_LLM_KEY": "sk-doctor-llm-key-0123456789", "DOCTOR_TG_TOKEN": GOOD_TG,
       "DOCTOR_DC_TOKEN": GOOD_DC, "DOCTOR_ADMIN_TOKEN": "a-long-enough-admin-token-0123456789"}


@pytest.fixture
async def fake_platforms() -> AsyncIterator[str]:
    """Telegram's getMe (/bot<token>/getMe) and Discord's /api/v10/users/@me, knowing one good token each."""

    async def get_me(request: web.Request) -> web.Response:
        if request.match_info["token"] != GOOD_TG:
            return web.json_response({"ok": False, "error_code": 401, "description": "Unauthorized"}, status=401)
        return web.json_response({"ok": True, "result": {"id": 111111, "is_bot": True, "username": "doctor_bot"}})

    async def users_me(request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != f"Bot {GOOD_DC}":
            return web.json_response({"message": "401: Unauthorized", "code": 0}, status=401)
        return web.json_response({"id": "42", "username": "doctor-dc", "bot": True})

    app = web.Application()
    app.router.add_get("/bot{token}/getMe", get_me)
    app.router.add_get("/api/v10/users/@me", users_me)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


def write(tmp_path: Path, data: dict[str, Any]) -> Path:
    path = tmp_path / "config.yml"
    path.write_text(yaml.safe_dump({"storage": {"path": "data/bruce.db"}, **data}))
    return path


def marked(lines: list[str], mark: str) -> list[str]:
    return [line for line in lines if line.startswith(mark + " ")]


def test_an_override_naming_an_unknown_tool_fails_the_config_line_and_stops(tmp_path, capsys):
    path = write(tmp_path, {"tools": {"overrides": {"web.serch": {"enabled": False}}}})
    assert main(["--config", str(path), "doctor"]) == 2
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"✗ config {path} is invalid — fix: ")
    assert any("tools.overrides.web.serch: unknown tool" in line for line in lines[1:])
    assert not any(line.startswith(("✓", "– ")) for line in lines)  # nothing else was checked
    assert not (tmp_path / "data").exists()


def test_a_short_admin_token_fails_the_config_line_as_run_would(tmp_path, capsys):
    path = write(tmp_path, {"admin": {"token": "short"}})
    assert main(["--config", str(path), "doctor"]) == 2
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"✗ config {path} is invalid — fix: ")
    assert any("admin.token: at least 32 characters (it has 5)" in line for line in lines[1:])


async def test_each_problem_is_a_cross_with_its_fix_and_the_exit_is_non_zero(tmp_path, fake_platforms,
                                                                              fake_llm: FakeLLMServer):
    fake_llm.responder = lambda body: Step.error(500, "upstream exploded")
    unit = tmp_path / "bruce.service"
    unit.write_text(f"[Unit]\nDescription=x\n\n[Service]\nUser={getpass.getuser()}\n"
                    f"WorkingDirectory={tmp_path}\nExecStart=/nonexistent/bin/bruce --config missing.yml run\n"
                    "ProtectSystem=strict\nReadWritePaths=/var/lib/elsewhere\n")
    path = write(tmp_path, {
        "llm": {"model": "openai/primary", "api_base": closed_base_url(), "api_key": "${DOCTOR_LLM_KEY}",
                "fallbacks": [{"model": "openai/backup", "api_base": fake_llm.base_url,
                               "api_key": "${DOCTOR_LLM_KEY}"}]},
        "channels": {"telegram": {"enabled": True, "token": "${DOCTOR_TG_TOKEN}", "api_base": fake_platforms,
                                  "allowed_users": []}},
        "admin": {"enabled": True, "port": 0, "token": "written-in-the-file-0123456789abcdef"},
    })
    lines: list[str] = []
    code = await diagnose(path, environ={**ENV, "DOCTOR_TG_TOKEN": BAD_TG}, timeout_s=5, unit=unit, out=lines.append)
    text = "\n".join(lines)

    assert code == 1, text
    failed = marked(lines, "✗")
    assert all(" — fix: " in line for line in failed)
    assert any(line.startswith("✗ llm openai/primary: did not answer (connection refused)") for line in failed)
    assert any(line.startswith("✗ llm fallback 1 openai/backup: did not answer (provider error (500))")
               for line in failed)
    assert any(line.startswith("✗ telegram: token from $DOCTOR_TG_TOKEN refused (401: Unauthorized)")
               for line in failed)
    assert any(line.startswith("✗ telegram: allowed_users is empty") for line in failed)
    assert any("ExecStart's program /nonexistent/bin/bruce" in line for line in failed)
    assert any("ExecStart's --config missing.yml does not exist" in line for line in failed)
    assert any(line.startswith("✗ systemd: ReadWritePaths does not cover") and str(tmp_path / "data") in line
               for line in failed)
    assert any(line.startswith("! admin.token is written in the config file itself") for line in lines)
    assert marked(lines, "✓")[0] == f"✓ config {path}: valid, as `bruce run` checks it"
    for secret in (BAD_TG, ENV["DOCTOR_LLM_KEY"], "short"):
        assert secret not in text


async def test_a_good_setup_is_all_ticks_and_exits_zero(tmp_path, fake_platforms, fake_llm: FakeLLMServer):
    fake_llm.add(Step.text("ok"), model="primary")
    fake_llm.add(Step.text("ok"), model="backup")
    store = await Store.open(tmp_path / "data" / "bruce.db", FakeClock())  # an existing database
    await store.close()
    unit = tmp_path / "bruce.service"
    unit.write_text(f"[Service]\nUser={getpass.getuser()}\nWorkingDirectory={tmp_path}\n"
                    f"ExecStart={sys.executable} --config config.yml run\n"
                    f"ProtectSystem=strict\nReadWritePaths=-{tmp_path / 'data'}\n")
    path = write(tmp_path, {
        "assistant": {"timezone": "Asia/Tokyo"},
        "llm": {"model": "openai/primary", "api_base": fake_llm.base_url, "api_key": "${DOCTOR_LLM_KEY}",
                "fallbacks": ["openai/backup"]},
        "channels": {
            "telegram": {"enabled": True, "token": "${DOCTOR_TG_TOKEN}", "api_base": fake_platforms,
                         "allowed_users": [1]},
            "discord": {"enabled": True, "token": "${DOCTOR_DC_TOKEN}", "api_base": f"{fake_platforms}/api/v10",
                        "allowed_users": ["2"]},
        },
        "admin": {"enabled": True, "port": 0, "token": "${DOCTOR_ADMIN_TOKEN}"},
        "tools": {"artifacts": {"dir": "data/artifacts"}, "files": {"notes_dir": "data/notes"}},
    })
    lines: list[str] = []
    code = await diagnose(path, environ=ENV, timeout_s=5, unit=unit, out=lines.append)
    text = "\n".join(lines)

    assert code == 0, text
    assert all(line.startswith(("✓ ", "– ")) for line in lines), text
    assert f"✓ database {tmp_path / 'data' / 'bruce.db'}: writable, schema version {len(MIGRATIONS)}" in lines
    assert any(line.startswith("✓ timezone: Asia/Tokyo (now ") and "UTC+0900" in line for line in lines)
    assert any(line.startswith("✓ llm openai/primary: answered in ") for line in lines)
    assert any(line.startswith("✓ llm fallback 1 openai/backup: answered in ") for line in lines)
    assert "✓ telegram: token from $DOCTOR_TG_TOKEN works (bot @doctor_bot)" in lines
    assert "✓ discord: token from $DOCTOR_DC_TOKEN works (bot @doctor-dc)" in lines
    assert "– MCP: none configured" in lines
    assert "✓ admin: token from $DOCTOR_ADMIN_TOKEN is set" in lines
    assert any(line.startswith("✓ systemd: ") for line in lines)
    assert [r["model"] for r in fake_llm.requests] == ["primary", "backup"]  # one call per model
    assert all(len(r["messages"]) == 1 for r in fake_llm.requests)
    assert all(secret not in text for secret in ENV.values())


def test_no_database_yet_is_fine_and_doctor_does_not_create_one(tmp_path, capsys):
    path = write(tmp_path, {"admin": {"enabled": False}})
    code = main(["--config", str(path), "doctor", "--no-llm", "--unit", str(tmp_path / "none.service")])
    lines = capsys.readouterr().out.splitlines()
    assert code == 0, lines
    db = tmp_path / "data" / "bruce.db"
    assert f"✓ database: no database yet, it will be created at {db} on first run" in lines
    assert "– llm: not called (--no-llm)" in lines and "– admin: disabled" in lines
    assert f"– systemd: no unit at {tmp_path / 'none.service'}" in lines
    assert not (tmp_path / "data").exists()


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_the_admin_port_held_by_the_running_daemon_is_no_warning(tmp_path, clock):
    """doctor reported the daemon running, then warned that its admin port was in use."""
    from bruce.app import build_app, socket_console
    from bruce.config.loader import load_config

    port = free_port()
    path = write(tmp_path, {"console": {"socket_path": str(tmp_path / "bruce.sock")},
                            "admin": {"port": port, "token": "${DOCTOR_ADMIN_TOKEN}"}})
    config = load_config(path, ENV)
    app = await build_app(config, clock=clock, environ={}, extra_channels=[socket_console(config, clock)])
    await app.start_admin()  # as `bruce run` does
    await app.start()
    try:
        lines: list[str] = []
        await diagnose(path, environ=ENV, llm=False, timeout_s=5, unit=tmp_path / "none.service", out=lines.append)
    finally:
        await app.stop()
    assert f"✓ daemon: running, console socket {tmp_path / 'bruce.sock'}" in lines
    assert f"✓ admin: 127.0.0.1:{port} is served by the running daemon" in lines
    assert not [line for line in lines if line.startswith("! admin:")]

    lines = []  # the daemon gone, another program on the port is still a warning
    import socket

    with socket.socket() as other:
        other.bind(("127.0.0.1", port))
        other.listen()
        await diagnose(path, environ=ENV, llm=False, timeout_s=5, unit=tmp_path / "none.service", out=lines.append)
    assert (f"! admin: 127.0.0.1:{port} is in use (by a Bruce already running, or another program) — fix: stop the "
            "other program or set admin.port") in lines


async def test_the_llm_line_reports_the_models_own_time_not_the_start_up(tmp_path, monkeypatch, fake_llm):
    """"answered in 5.3 s" counted loading litellm; the line now gives the model's time alone."""
    import time

    from bruce.llm import service

    loaded = service.load_litellm

    def slow_start() -> object:
        time.sleep(1.5)  # a cold import of litellm takes seconds
        return loaded()

    monkeypatch.setattr(service, "load_litellm", slow_start)
    fake_llm.add(Step.delay(0.3, Step.text("ok")), model="primary")
    path = write(tmp_path, {"llm": {"model": "openai/primary", "api_base": fake_llm.base_url,
                                    "api_key": "${DOCTOR_LLM_KEY}"}, "admin": {"enabled": False}})
    lines: list[str] = []
    await diagnose(path, environ=ENV, timeout_s=5, unit=tmp_path / "none.service", out=lines.append)
    (line,) = [line for line in lines if line.startswith("✓ llm openai/primary: answered in ")]
    seconds = float(line.removeprefix("✓ llm openai/primary: answered in ").removesuffix(" s"))
    assert 0.3 <= seconds < 1.0, line


def mail_and_calendar(tmp_path: Path, imap_port: int, smtp_port: int, caldav: str) -> Path:
    """A setup with the mailbox (tools.email) and a CalDAV calendar, every password from .env."""
    from tests.tools.email.conftest import USER as MAIL_USER
    from tests.tools.mcp_servers.calendar.radicale import USER as DAV_USER

    server = {"host": "127.0.0.1", "security": "none", "user": MAIL_USER}
    return write(tmp_path, {
        "admin": {"enabled": False},
        "tools": {"email": {"enabled": True, "address": MAIL_USER,
                            "imap": {**server, "port": imap_port, "password": "${IMAP_PASSWORD}"},
                            "smtp": {**server, "port": smtp_port, "password": "${SMTP_PASSWORD}"}}},
        "mcp_servers": {"calendar": {"command": "python", "args": ["-m", "tools.mcp_servers.calendar", "--caldav", caldav],
                                     "env": {"CALDAV_USERNAME": DAV_USER, "CALDAV_PASSWORD": "${CALDAV_PASSWORD}"}}},
    })


async def test_the_mail_and_calendar_logins_are_ticks_and_no_mail_is_sent(tmp_path, imap, smtp, dav):
    from tests.tools.email.conftest import PASSWORD as MAIL_PASSWORD
    from tests.tools.mcp_servers.calendar.radicale import PASSWORD as DAV_PASSWORD

    with imap.client() as client:  # the folders a mail app made
        client.create_folder("Drafts")
        client.create_folder("Sent")
    path = mail_and_calendar(tmp_path, imap.port, smtp.port, dav.url)
    env = {"IMAP_PASSWORD": MAIL_PASSWORD, "SMTP_PASSWORD": MAIL_PASSWORD, "CALDAV_PASSWORD": DAV_PASSWORD}
    lines: list[str] = []
    code = await diagnose(path, environ=env, llm=False, timeout_s=5, unit=tmp_path / "none.service",
                          out=lines.append)
    text = "\n".join(lines)

    assert code == 0, text
    assert all(line.startswith(("✓ ", "– ")) for line in lines), text
    assert f"✓ email IMAP me@example.org at 127.0.0.1:{imap.port} (none): login accepted" in lines
    assert f"✓ email SMTP me@example.org at 127.0.0.1:{smtp.port} (none): login accepted (no mail sent)" in lines
    assert f"✓ calendar calendar (CalDAV): login as ana accepted, calendar 'Work' found at {dav.url}" in lines
    assert smtp.arrived == [] and smtp.attempts == 0
    assert MAIL_PASSWORD not in text and DAV_PASSWORD not in text


async def test_wrong_passwords_and_stopped_servers_are_crosses_with_their_fix(tmp_path, imap, smtp, dav):
    from tests.tools.email.conftest import free_port

    path = mail_and_calendar(tmp_path, imap.port, smtp.port, dav.url)
    env = {"IMAP_PASSWORD": "wrong-imap-pass", "SMTP_PASSWORD": "wrong-smtp-pass", "CALDAV_PASSWORD": "wrong-dav-pass"}
    lines: list[str] = []
    code = await diagnose(path, environ=env, llm=False, timeout_s=5, unit=tmp_path / "none.service",
                          out=lines.append)
    text = "\n".join(lines)

    assert code == 1, text
    failed = marked(lines, "✗")
    assert [line.split(":")[0] for line in failed] == ["✗ calendar calendar (CalDAV)", "✗ email IMAP 127.0.0.1",
                                                        "✗ email SMTP 127.0.0.1"], text
    assert all("refused the login" in line or "login refused" in line for line in failed), text
    assert all(" — fix: " in line and "need an app password" in line for line in failed), text
    assert "$IMAP_PASSWORD" in failed[1] and "$SMTP_PASSWORD" in failed[2] and "$CALDAV_PASSWORD" in failed[0]
    assert smtp.arrived == [] and smtp.attempts == 0
    assert not any(secret in text for secret in env.values())

    dav.stop()  # and a mail server gone: nothing listens any more
    lines = []
    path = mail_and_calendar(tmp_path, imap.port, free_port(), dav.url)
    code = await diagnose(path, environ={**env, "IMAP_PASSWORD": "app-password-1"}, llm=False, timeout_s=5,
                          unit=tmp_path / "none.service", out=lines.append)
    assert code == 1
    unreachable = [line for line in marked(lines, "✗") if "refused the connection (nothing listens at" in line]
    assert [line.split(":")[0] for line in unreachable] == ["✗ calendar calendar (CalDAV)", "✗ email SMTP 127.0.0.1"]
