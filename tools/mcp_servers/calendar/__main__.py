"""``python -m tools.mcp_servers.calendar [--db PATH | --caldav URL] [--timezone ZONE]``: the calendar over stdio.

``--caldav URL`` uses the calendar collection at URL on a CalDAV server instead of the SQLite file,
logging in with ``$CALDAV_USERNAME`` and ``$CALDAV_PASSWORD`` (none when unset). The URL must be
https, or http to this machine (127.0.0.1, ::1, localhost): a password never travels in clear.
An https server's certificate is always verified: against the system's store, or against the PEM
certificate of a private CA named by ``$CALDAV_CA_FILE`` (which must exist and be PEM, or the
server stops at start).
The server is not contacted at start: a calendar that is down makes the tools answer
``unavailable`` until it is back. Defaults: the database is ``$BRUCE_CALENDAR_DB`` or ``data/calendar.db`` (relative to the working
directory; missing directories are created); the timezone is ``$BRUCE_CALENDAR_TZ``, else
``$TZ``, else UTC. Standard output carries only the protocol; logs go to standard error. An
unknown timezone or a database that cannot be opened is reported there, with exit status 2.
"""

from __future__ import annotations

import argparse
import logging
import os
import sqlite3
import ssl
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

if TYPE_CHECKING:
    from tools.mcp_servers.calendar.backend import CalendarBackend

DEFAULT_DB = "data/calendar.db"
_LOOPBACK = ("127.0.0.1", "::1", "localhost")

log = logging.getLogger("tools.mcp_servers.calendar")


def _arguments(argv: Sequence[str] | None, environ: Mapping[str, str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m tools.mcp_servers.calendar", description="A local calendar as an MCP server over stdio."
    )
    parser.add_argument(
        "--db", type=Path, default=Path(environ.get("BRUCE_CALENDAR_DB") or DEFAULT_DB),
        help=f"SQLite file (default: $BRUCE_CALENDAR_DB or {DEFAULT_DB})",
    )
    parser.add_argument(
        "--caldav", metavar="URL", default=None,
        help="a CalDAV calendar collection instead of the SQLite file; login from $CALDAV_USERNAME, $CALDAV_PASSWORD",
    )
    parser.add_argument(
        "--timezone", default=environ.get("BRUCE_CALENDAR_TZ") or environ.get("TZ") or "UTC",
        help="IANA timezone for times without an offset and for output (default: $BRUCE_CALENDAR_TZ, $TZ or UTC)",
    )
    return parser.parse_args(argv)


def _zone(name: str) -> ZoneInfo | None:
    try:
        return ZoneInfo(name.removeprefix(":"))  # TZ may be written ":Europe/Lisbon"
    except (ZoneInfoNotFoundError, ValueError, OSError):  # OSError: a name too long for a file name
        return None


def _caldav_problem(url: str) -> str | None:
    """Why ``url`` cannot be a CalDAV calendar's address, or None."""
    parts = urlsplit(url)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        return "is not an http(s) URL such as https://dav.example.org/user/calendar/"
    if parts.username or parts.password:
        return "holds a login; put it in CALDAV_USERNAME and CALDAV_PASSWORD in the server's env instead"
    if parts.scheme == "http" and parts.hostname not in _LOOPBACK:
        return "uses http to another machine; use https, so that the password is not sent in clear"
    return None


def _ca_file_problem(path: str, url: str) -> str | None:
    """Why ``CALDAV_CA_FILE`` cannot be used, or None."""
    if urlsplit(url).scheme != "https":
        return "is set but the calendar's URL is not https; remove it or use https"
    if not Path(path).is_file():
        return "no such file; give the PEM certificate of the CA that signed the CalDAV server's certificate"
    try:
        ssl.create_default_context(cafile=path)
    except (ssl.SSLError, OSError) as exc:
        return f"holds no PEM certificate that can be trusted ({getattr(exc, 'reason', None) or exc})"
    return None


def _backend(args: argparse.Namespace, zone: ZoneInfo, environ: Mapping[str, str]) -> CalendarBackend | str:
    """The calendar the options name, or why it cannot be opened."""
    if args.caldav is not None:
        problem = _caldav_problem(args.caldav)
        if problem is not None:
            parts = urlsplit(args.caldav)
            shown = parts._replace(netloc=parts.netloc.rsplit("@", 1)[-1]).geturl()  # never echo a password
            return f"--caldav {shown[:100]!r} {problem}"
        ca_file = environ.get("CALDAV_CA_FILE") or None
        problem = _ca_file_problem(ca_file, args.caldav) if ca_file else None
        if ca_file and problem is not None:
            return f"CALDAV_CA_FILE {ca_file[:200]!r}: {problem}"
        from tools.mcp_servers.calendar.caldav_store import CalDavStore  # only a CalDAV calendar loads the library

        return CalDavStore(args.caldav, zone, environ.get("CALDAV_USERNAME"), environ.get("CALDAV_PASSWORD"),
                           ca_file=ca_file)
    from tools.mcp_servers.calendar.store import CalendarStore

    try:
        return CalendarStore(args.db)
    except (OSError, sqlite3.Error) as exc:
        return f"cannot open the database {str(args.db)!r}: {exc}"


def main(argv: Sequence[str] | None = None) -> int:
    args = _arguments(argv, os.environ)
    zone = _zone(args.timezone)
    if zone is None:
        print(f"calendar: unknown timezone {args.timezone[:60]!r}; use an IANA name such as America/Sao_Paulo",
              file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    import anyio  # imported late: a bad option fails fast, without loading the MCP SDK

    from tools.mcp_servers.calendar.server import build_server

    store = _backend(args, zone, os.environ)
    if isinstance(store, str):
        print(f"calendar: {store}", file=sys.stderr)
        return 2
    log.info("calendar: %s, timezone %s", f"CalDAV {args.caldav}" if args.caldav else f"database {args.db}", zone.key)
    anyio.run(build_server(store, zone).run_stdio_async)
    return 0


if __name__ == "__main__":
    sys.exit(main())
