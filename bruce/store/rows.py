"""Rows in and out of SQLite: a record built from a ``sqlite3.Row``, a value written as a JSON
column (``bruce.records.from_json`` reads it back). The records themselves live in
``bruce.records``."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import fields
from typing import Any, TypeVar

__all__ = ["from_row", "to_json"]

_R = TypeVar("_R")


def from_row(cls: type[_R], row: sqlite3.Row) -> _R:
    """Build a record from a row holding (at least) its fields."""
    names = row.keys()
    return cls(**{f.name: row[f.name] for f in fields(cls) if f.name in names})  # type: ignore[arg-type]


def to_json(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
