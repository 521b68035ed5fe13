"""``python -m tools.mcp_servers.calendar [--db PATH] [--timezone ZONE]``: the calendar over stdio.

Defaults: the database is ``$BRUCE_CALENDAR_DB`` or ``data/calendar.db`` (relative to the working
directory; missing directories are created); the timezone is ``$BRUCE_CALENDAR_TZ``, else
``$TZ``, else UTC. Standard output carries only the protocol; logs go to standard error. An
unknown timezone or a database that cannot be opened is reported there, with exit status 2.
"""

from __future__ import annotations

import argparse
import logging
import os
import sqlite3
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

DEFAULT_DB = "data/calendar.db"

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
        "--timezone", default=environ.get("BRUCE_CALENDAR_TZ") or environ.get("TZ") or "UTC",
        help="IANA timezone for times without an offset and for output (default: $BRUCE_CALENDAR_TZ, $TZ or UTC)",
    )
    return parser.parse_args(argv)


def _zone(name: str) -> ZoneInfo | None:
    try:
        return ZoneInfo(name.removeprefix(":"))  # TZ may be written ":Europe/Lisbon"
    except (ZoneInfoNotFoundError, ValueError, OSError):  # OSError: a name too long for a file name
        return None


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
    from tools.mcp_servers.calendar.store import CalendarStore

    try:
        store = CalendarStore(args.db)
    except (OSError, sqlite3.Error) as exc:
        print(f"calendar: cannot open the database {str(args.db)!r}: {exc}", file=sys.stderr)
        return 2
    log.info("calendar: database %s, timezone %s", args.db, zone.key)
    anyio.run(build_server(store, zone).run_stdio_async)
    return 0


if __name__ == "__main__":
    sys.exit(main())
