"""The database schema, as an ordered list of migrations keyed by ``PRAGMA user_version``.

Each schema version is one SQL script in ``bruce/store/schema/``, named ``vNN_<what it
changes>.sql``; ``MIGRATIONS`` holds them in order, as they are (version N is ``MIGRATIONS[N - 1]``).
To change the schema, add the next file; never edit one that has shipped. ``Database.migrate``
runs them with foreign keys off (so a table can be rebuilt, SQLite's way to change a CHECK) and
checks them with ``PRAGMA foreign_key_check`` before they commit.

A version is the number in its file's name. Every number from 1 up has its file: a gap is
refused at import, because a database migrated past an empty step would never run the script
that later fills it.
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["MIGRATIONS", "SCHEMA", "in_order", "versions"]

SCHEMA = Path(__file__).parent / "schema"  # shipped with the package (pyproject.toml, package-data)

_NAME = re.compile(r"v(\d+)_\w+\.sql")


def versions(folder: Path) -> dict[int, Path]:
    """The scripts of ``folder`` by the version their name gives; two for one version is an error."""
    found: dict[int, Path] = {}
    for script in sorted(folder.glob("v*.sql")):
        match = _NAME.fullmatch(script.name)
        if match is None:
            raise ValueError(f"{script.name}: a schema script is named vNN_<what it changes>.sql")
        number = int(match.group(1))
        if number in found:
            raise ValueError(f"{found[number].name} and {script.name}: two scripts for version {number}")
        found[number] = script
    return found


def in_order(found: dict[int, Path]) -> list[str]:
    """The scripts' texts, version 1 first; ValueError when a version has no script."""
    missing = [n for n in range(1, max(found, default=0) + 1) if n not in found]
    if missing:
        raise ValueError(f"no schema script for version {', '.join(map(str, missing))}: versions have no gaps")
    return [found[n].read_text(encoding="utf-8") for n in sorted(found)]


MIGRATIONS: list[str] = in_order(versions(SCHEMA))
