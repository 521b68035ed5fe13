"""The database schema, as an ordered list of migrations keyed by ``PRAGMA user_version``.

Each schema version is one SQL script in ``bruce/store/schema/``, named ``vNN_<what it
changes>.sql``; ``MIGRATIONS`` holds them in order, as they are (version N is ``MIGRATIONS[N - 1]``).
To change the schema, add the next file; never edit one that has shipped. ``Database.migrate``
runs them with foreign keys off (so a table can be rebuilt, SQLite's way to change a CHECK) and
checks them with ``PRAGMA foreign_key_check`` before they commit.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["MIGRATIONS", "SCHEMA"]

SCHEMA = Path(__file__).parent / "schema"  # shipped with the package (pyproject.toml, package-data)

MIGRATIONS: list[str] = [script.read_text(encoding="utf-8") for script in sorted(SCHEMA.glob("v*.sql"))]
