"""The database schema, as an ordered list of migrations keyed by ``PRAGMA user_version``.

Each schema version is one SQL script in ``bruce/store/schema/``, named ``vNN_<what it
changes>.sql``; ``MIGRATIONS`` holds them in order, as they are (version N is ``MIGRATIONS[N - 1]``).
To change the schema, add the next file; never edit one that has shipped. ``Database.migrate``
runs them with foreign keys off (so a table can be rebuilt, SQLite's way to change a CHECK) and
checks them with ``PRAGMA foreign_key_check`` before they commit.

A version is the number in its file's name, not its place in the folder: a number with no file
(one kept for a migration written beside this one) is an empty step, so the versions after it
keep their numbers.
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["MIGRATIONS", "SCHEMA", "versions"]

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


def _in_order(found: dict[int, Path]) -> list[str]:
    return [found[n].read_text(encoding="utf-8") if n in found else "" for n in range(1, max(found, default=0) + 1)]


MIGRATIONS: list[str] = _in_order(versions(SCHEMA))
