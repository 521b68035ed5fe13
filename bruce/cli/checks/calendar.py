"""``bruce doctor``'s check of the calendars on CalDAV: each enabled MCP server whose ``args``
hold ``--caldav URL`` (the calendar server of ``tools/mcp_servers/calendar``) is logged in to with
its ``env``'s ``CALDAV_USERNAME`` and ``CALDAV_PASSWORD``, and the calendar is looked for at the
URL (one PROPFIND, in a worker thread, within the doctor's ``--timeout``), trusting the private CA
its ``CALDAV_CA_FILE`` names, as the calendar server does. Nothing is written.
No such server: no line (the MCP line says what is configured).
"""

from __future__ import annotations

import asyncio
import math
import ssl
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from pydantic import SecretStr

from bruce.cli.checks.findings import Finding, Mark, fill, variable
from bruce.cli.checks.mail import app_password, why_unreachable
from bruce.config.email import is_loopback
from bruce.config.schema import MCPServerConfig

__all__ = ["caldav_url", "check_calendars"]

_CALENDAR = "{urn:ietf:params:xml:ns:caldav}calendar"


def caldav_url(args: list[str]) -> str | None:
    """The URL after ``--caldav`` (or in ``--caldav=URL``), else None."""
    for i, arg in enumerate(args):
        if arg == "--caldav" and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith("--caldav="):
            return arg.removeprefix("--caldav=")
    return None


def _shown(url: str) -> str:
    """The URL without a login written into it."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[-1]))


class _NotACalendar(Exception):
    def __init__(self, kinds: list[str], others: list[str]) -> None:
        super().__init__("not a calendar")
        self.kinds, self.others = kinds, others


class _NoCalendar(Exception):
    def __init__(self, others: list[str]) -> None:
        super().__init__("no calendar")
        self.others = others


def _calendars_of(url: str, user: str | None, password: str | None, timeout_s: float, ca_file: str | None) -> list[str]:
    """The calendars this login has, asked at ``url`` then at the server's root, to say which URL
    to use (none when neither answers)."""
    from caldav.davclient import DAVClient
    from caldav.lib import error as dav_error

    parts = urlsplit(url)
    for base in dict.fromkeys((url, urlunsplit((parts.scheme, parts.netloc, "/", "", "")))):
        with DAVClient(url=base, username=user or None, password=password or None,
                       timeout=math.ceil(timeout_s), ssl_verify_cert=ca_file or True) as client:
            try:
                calendars = client.principal().calendars()  # type: ignore[no-untyped-call]
            except (OSError, dav_error.DAVError):
                continue
            return [_shown(str(c.url)) for c in calendars][:5]
    return []


def _find_calendar(url: str, user: str | None, password: str | None, timeout_s: float, ca_file: str | None) -> str:
    """The calendar's display name (its URL when it has none): in a worker thread. The certificate
    is verified as the calendar server does: against ``ca_file`` when given, else the system's store."""
    from caldav.collection import Calendar
    from caldav.davclient import DAVClient
    from caldav.elements import dav
    from caldav.lib import error as dav_error

    with DAVClient(url=url, username=user or None, password=password or None, timeout=math.ceil(timeout_s),
                   ssl_verify_cert=ca_file or True) as client:  # the wait is bounded by timeout_s anyway
        try:
            props: dict[str, Any] = Calendar(client=client, url=url).get_properties(  # type: ignore[assignment]
                [dav.DisplayName(), dav.ResourceType()])
        except dav_error.NotFoundError:
            raise _NoCalendar(_calendars_of(url, user, password, timeout_s, ca_file)) from None
    kinds = props.get("{DAV:}resourcetype") or []
    kinds = [kinds] if isinstance(kinds, str) else list(kinds)
    if _CALENDAR not in kinds:
        others = _calendars_of(url, user, password, timeout_s, ca_file)
        raise _NotACalendar([str(k).rpartition("}")[2] for k in kinds], others)
    return str(props.get("{DAV:}displayname") or _shown(url))


def _advice(url: str) -> str:
    """What to know about the password the provider at ``url`` wants."""
    host = urlsplit(url).hostname or ""
    if host.endswith(("google.com", "googleusercontent.com")):
        return "Google Calendar's CalDAV needs OAuth, which the calendar server does not do"
    return app_password(host)


def _secret(env: Mapping[str, SecretStr], key: str) -> str:
    value = env.get(key)
    return value.get_secret_value() if value is not None else ""


def _failed(exc: BaseException, name: str, url: str, user: str, raw: Any, timeout_s: float) -> Finding:
    from caldav.lib import error as dav_error

    label, shown, host = f"calendar {name} (CalDAV)", _shown(url), urlsplit(url).netloc.rsplit("@", 1)[-1]
    where = f"mcp_servers.{name}.env"
    if isinstance(exc, _NoCalendar | _NotACalendar):
        what = (f"no calendar at {shown} (404)" if isinstance(exc, _NoCalendar)
                else f"{shown} is not a calendar ({', '.join(exc.kinds) or 'no resource type'})")
        fix = "put the calendar's own CalDAV URL after --caldav"
        return Finding(Mark.FAIL, f"{label}: {what}",
                       fix + (f"; this login has: {', '.join(exc.others)}" if exc.others else
                              " (your provider's settings show it, often as \"CalDAV URL\")"))
    if isinstance(exc, dav_error.AuthorizationError):
        var = variable(raw, "mcp_servers", name, "env", "CALDAV_PASSWORD")
        login = f"for {user}" if user else "(no CALDAV_USERNAME set)"
        return Finding(Mark.FAIL, f"{label}: {host} refused the login {login}",
                       f"check CALDAV_USERNAME and CALDAV_PASSWORD{f' (${var})' if var else ''} in {where}; "
                       f"{_advice(url)}")
    unreachable = why_unreachable(exc, timeout_s, host, f"CALDAV_CA_FILE in {where}")
    if unreachable is not None:
        text, fix = unreachable
        return Finding(Mark.FAIL, f"{label}: {host} {text}", f"{fix} (the URL after --caldav)")
    return Finding(Mark.FAIL, f"{label}: {host} answered with an error ({type(exc).__name__})",
                   "check the URL after --caldav, and that it is a CalDAV server")


def _ca_file_problem(ca_file: str, url: str) -> str | None:
    """Why the calendar server will refuse ``CALDAV_CA_FILE`` at start, or None."""
    if urlsplit(url).scheme != "https":
        return "is set but the URL after --caldav is not https"
    if not Path(ca_file).is_file():
        return "names no file"
    try:
        ssl.create_default_context(cafile=ca_file)
    except (ssl.SSLError, OSError) as exc:
        return f"holds no PEM certificate that can be trusted ({getattr(exc, 'reason', None) or exc})"
    return None


def _url_problem(url: str) -> str | None:
    """Why the calendar server will refuse ``url`` at start (as ``tools/mcp_servers/calendar`` does), or None."""
    parts = urlsplit(url)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        return "is not an http(s) URL such as https://dav.example.org/user/calendar/"
    if parts.username or parts.password:
        return "holds a login; put it in CALDAV_USERNAME and CALDAV_PASSWORD in the server's env instead"
    if parts.scheme == "http" and not is_loopback(parts.hostname):
        return "uses http to another machine; use https, so that the password is not sent in clear"
    return None


async def _calendar(name: str, url: str, env: Mapping[str, SecretStr], raw: Any, timeout_s: float) -> Finding:
    user, password = _secret(env, "CALDAV_USERNAME"), _secret(env, "CALDAV_PASSWORD")
    ca_file = _secret(env, "CALDAV_CA_FILE") or None
    label = f"calendar {name} (CalDAV)"
    problem = _url_problem(url)
    if problem is not None:
        return Finding(Mark.FAIL, f"{label}: the URL after --caldav {_shown(url)[:100]!r} {problem}",
                       f"correct mcp_servers.{name}.args")
    ca_problem = _ca_file_problem(ca_file, url) if ca_file else None
    if ca_file and ca_problem is not None:
        return Finding(Mark.FAIL, f"{label}: CALDAV_CA_FILE {ca_file[:100]!r} {ca_problem}",
                       f"give the PEM certificate of the CA that signed the server's in mcp_servers.{name}.env, "
                       "or remove it")
    if user and not password:
        var = variable(raw, "mcp_servers", name, "env", "CALDAV_PASSWORD")
        return Finding(Mark.FAIL, f"{label}: no password" + (f" (${var} is empty)" if var else ""),
                       fill(var, f"the calendar's password ({_advice(url)})",
                            f"mcp_servers.{name}.env.CALDAV_PASSWORD"))
    try:
        shown = await asyncio.wait_for(asyncio.to_thread(_find_calendar, url, user, password, timeout_s, ca_file),
                                       timeout_s)
    except Exception as exc:  # noqa: BLE001 - every failure becomes a line with its fix
        return _failed(exc, name, url, user, raw, timeout_s)
    login = f"login as {user} accepted" if user else "no login needed"
    return Finding(Mark.OK, f"{label}: {login}, calendar {shown!r} found at {_shown(url)}")


async def check_calendars(servers: Mapping[str, MCPServerConfig], raw: Any, timeout_s: float) -> list[Finding]:
    """One line per enabled MCP server that serves a CalDAV calendar; none when there is no such server."""
    found = []
    for name, server in servers.items():
        url = caldav_url(server.args) if server.enabled and server.command else None
        if url is not None:
            found.append(await _calendar(name, url, server.env, raw, timeout_s))
    return found
