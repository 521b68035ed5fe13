"""The list APIs' query (``/api/tool-executions``, ``/api/llm-calls``): filters by name, a
``limit`` and a ``cursor`` (the last id of the page before). A bad one is ``BadRequest``, whose
text names the parameter: the page answers 400 with it, never 500."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Protocol, TypeVar

from bruce.clock import utc_iso
from bruce.values import LLMCallKind, TurnSource

__all__ = ["BadRequest", "MAX_LIMIT", "parse_filters", "one_page"]

MAX_LIMIT = 200


class _Row(Protocol):
    @property
    def id(self) -> int: ...


_R = TypeVar("_R", bound=_Row)


class BadRequest(ValueError):
    """A query the API cannot answer; the text names the parameter."""


def parse_filters(query: Mapping[str, str], known: Mapping[str, str],
                  statuses: tuple[str, ...]) -> tuple[dict[str, str], int, int | None]:
    """(filters by column, limit, cursor); ``known`` maps a parameter to its column."""
    unknown = sorted(set(query) - set(known) - {"limit", "cursor"})
    if unknown:
        raise BadRequest(f"unknown parameter {unknown[0][:40]!r}; use {', '.join([*known, 'limit', 'cursor'])}")
    filters: dict[str, str] = {}
    for name, column in known.items():
        value = query.get(name, "").strip()
        if value:
            filters[column] = _checked(name, value, statuses)[:200]
    limit_text = query.get("limit", "50")
    if not limit_text.isdigit() or not 1 <= int(limit_text) <= MAX_LIMIT:
        raise BadRequest(f"limit: a whole number from 1 to {MAX_LIMIT} (got {limit_text[:20]!r})")
    cursor_text = query.get("cursor", "")
    if cursor_text and (not cursor_text.isdigit() or len(cursor_text) > 18):
        raise BadRequest(f"cursor: give the next_cursor of the previous page (got {cursor_text[:20]!r})")
    return filters, int(limit_text), int(cursor_text) if cursor_text else None


def _checked(name: str, value: str, statuses: tuple[str, ...]) -> str:
    """One filter's value, as the store compares it (a moment in UTC)."""
    if name == "status" and value not in statuses:
        raise BadRequest(f"status: {value[:40]!r} is not one of {', '.join(statuses)}")
    if name == "kind" and value not in {k.value for k in LLMCallKind}:
        raise BadRequest(f"kind: {value[:40]!r} is not one of {', '.join(k.value for k in LLMCallKind)}")
    if name == "source" and value not in {s.value for s in TurnSource}:
        raise BadRequest(f"source: {value[:40]!r} is not one of {', '.join(s.value for s in TurnSource)}")
    if name in ("since", "until"):
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            raise BadRequest(f"{name}: {value[:40]!r} is not an ISO 8601 date-time") from None
        if moment.tzinfo is None:
            raise BadRequest(f"{name}: give a UTC offset, e.g. {value[:19]}Z")
        return utc_iso(moment)
    return value


def one_page(rows: list[_R], limit: int) -> tuple[list[_R], int | None]:
    """``rows`` asked for as ``limit + 1``: the page, and the cursor of the next (None: no more)."""
    more = len(rows) > limit
    rows = rows[:limit]
    return rows, (rows[-1].id if more and rows else None)
