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


# (record class, the row's columns) -> the record's fields among them: worked out once per query shape
# (a few dozen in all, each a SELECT in this package), not for every row
_PLANS: dict[tuple[type[Any], tuple[str, ...]], tuple[str, ...]] = {}


def from_row(cls: type[_R], row: sqlite3.Row) -> _R:
    """Build a record from a row holding (at least) its fields."""
    key = (cls, tuple(row.keys()))
    names = _PLANS.get(key)
    if names is None:
        columns = set(key[1])
        names = _PLANS[key] = tuple(f.name for f in fields(cls) if f.name in columns)  # type: ignore[arg-type]
    return cls(**{name: row[name] for name in names})


def to_json(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
