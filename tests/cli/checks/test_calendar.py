"""The doctor's check of the CalDAV calendars given to MCP servers, against Radicale on 127.0.0.1
(htpasswd login, one calendar "Work"): found is a tick; a refused login, a wrong URL, a stopped
server and no password are crosses that say what to do, and never show the password."""

from __future__ import annotations

from typing import Any

from bruce.cli.checks.calendar import caldav_url, check_calendars
from bruce.config.reader import expand
from bruce.config.schema import MCPServerConfig
from tests.tools.email.conftest import free_port
from tests.tools.mcp_servers.calendar.radicale import PASSWORD, USER, Radicale

ENV = {"CALDAV_PASSWORD": PASSWORD}


def servers(url: str, **extra: Any) -> dict[str, Any]:
    """mcp_servers as the owner writes it: the calendar server on --caldav URL, the password from $CALDAV_PASSWORD."""
    return {"mcp_servers": {"work": {
        "command": "python", "args": ["-m", "tools.mcp_servers.calendar", "--caldav", url],
        "env": {"CALDAV_USERNAME": USER, "CALDAV_PASSWORD": "${CALDAV_PASSWORD}"}, **extra}}}


async def check(raw: dict[str, Any], env: dict[str, str] = ENV) -> list[str]:
    config = {name: MCPServerConfig.model_validate(expand(s, env)) for name, s in raw["mcp_servers"].items()}
    lines = [f.line() for f in await check_calendars(config, raw, 5)]
    assert PASSWORD not in "\n".join(lines) and "wrong-password" not in "\n".join(lines)
    return lines


async def test_a_calendar_found_with_its_login_is_a_tick(dav: Radicale):
    assert await check(servers(dav.url)) == [
        f"✓ calendar work (CalDAV): login as {USER} accepted, calendar 'Work' found at {dav.url}"]
    assert dav.events() == []  # nothing written


async def test_a_wrong_password_is_a_refused_login_naming_the_variable(dav: Radicale):
    host = dav.base.split("/")[2]
    assert await check(servers(dav.url), {"CALDAV_PASSWORD": "wrong-password"}) == [
        f"✗ calendar work (CalDAV): {host} refused the login for {USER} — fix: check CALDAV_USERNAME and "
        "CALDAV_PASSWORD ($CALDAV_PASSWORD) in mcp_servers.work.env; Gmail, Fastmail and iCloud need an app "
        "password, not the account's own"]


async def test_no_calendar_at_the_url_lists_the_ones_the_login_has(dav: Radicale):
    assert await check(servers(f"{dav.base}{USER}/holidays/")) == [
        f"✗ calendar work (CalDAV): no calendar at {dav.base}{USER}/holidays/ (404) — fix: put the calendar's "
        f"own CalDAV URL after --caldav; this login has: {dav.url}"]


async def test_an_account_url_instead_of_a_calendar_says_so(dav: Radicale):
    assert await check(servers(f"{dav.base}{USER}/")) == [
        f"✗ calendar work (CalDAV): {dav.base}{USER}/ is not a calendar (principal, collection) — fix: put the "
        f"calendar's own CalDAV URL after --caldav; this login has: {dav.url}"]


async def test_a_stopped_server_is_unreachable(dav: Radicale):
    dav.stop()
    host = dav.base.split("/")[2]
    assert await check(servers(dav.url)) == [
        f"✗ calendar work (CalDAV): {host} refused the connection (nothing listens at {host}) — fix: check host "
        "and port, and that the server runs (the URL after --caldav)"]


async def test_an_empty_password_variable_is_named_and_nothing_is_tried():
    url = f"http://127.0.0.1:{free_port()}/{USER}/work/"  # nothing listens: a try would say so
    assert await check(servers(url), {}) == [
        "✗ calendar work (CalDAV): no password ($CALDAV_PASSWORD is empty) — fix: set CALDAV_PASSWORD to the "
        "calendar's password (Gmail, Fastmail and iCloud need an app password, not the account's own) in .env "
        "and load it: set -a; . ./.env; set +a"]


async def test_servers_without_caldav_or_disabled_give_no_line():
    url = f"http://127.0.0.1:{free_port()}/{USER}/work/"
    raw = {"mcp_servers": {
        "local": {"command": "python", "args": ["-m", "tools.mcp_servers.calendar", "--db", "data/calendar.db"]},
        "off": servers(url, enabled=False)["mcp_servers"]["work"],
        "remote": {"url": "https://mcp.example.org/mcp"},
    }}
    assert await check(raw) == []


async def test_google_is_told_it_needs_oauth_not_an_app_password():
    url = "https://apidata.googleusercontent.com/caldav/v2/me%40gmail.com/events/"
    (line,) = await check(servers(url), {})
    assert line.startswith("✗ calendar work (CalDAV): no password ($CALDAV_PASSWORD is empty) — fix: set "
                           "CALDAV_PASSWORD to the calendar's password (Google Calendar's CalDAV needs OAuth, ")


async def test_a_server_that_never_answers_times_out_within_the_timeout():
    import socket
    import time

    with socket.socket() as silent:  # takes connections, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        raw = servers(f"http://127.0.0.1:{port}/{USER}/work/")
        config = {name: MCPServerConfig.model_validate(expand(s, ENV)) for name, s in raw["mcp_servers"].items()}
        started = time.monotonic()
        (found,) = await check_calendars(config, raw, 0.5)
        assert time.monotonic() - started < 3
    assert found.line() == (f"✗ calendar work (CalDAV): 127.0.0.1:{port} did not answer within 0.5 s — fix: check "
                            "host and port, and that a firewall lets it through (the URL after --caldav)")


async def test_a_url_the_calendar_server_would_refuse_is_a_cross_without_its_login():
    lines = await check({"mcp_servers": {
        "clear": servers("http://dav.example.org/ana/work/")["mcp_servers"]["work"],
        "login": servers("https://ana:hunter2-secret@dav.example.org/ana/work/")["mcp_servers"]["work"],
    }})
    assert lines == [
        "✗ calendar clear (CalDAV): the URL after --caldav 'http://dav.example.org/ana/work/' uses http to another "
        "machine; use https, so that the password is not sent in clear — fix: correct mcp_servers.clear.args",
        "✗ calendar login (CalDAV): the URL after --caldav 'https://dav.example.org/ana/work/' holds a login; put it "
        "in CALDAV_USERNAME and CALDAV_PASSWORD in the server's env instead — fix: correct mcp_servers.login.args",
    ]


def test_the_url_is_read_from_either_form_of_the_option():
    assert caldav_url(["-m", "tools.mcp_servers.calendar", "--caldav", "https://dav.example.org/c/"]) == (
        "https://dav.example.org/c/")
    assert caldav_url(["--caldav=https://dav.example.org/c/"]) == "https://dav.example.org/c/"
    assert caldav_url(["-m", "tools.mcp_servers.calendar"]) is None
    assert caldav_url(["--caldav"]) is None
