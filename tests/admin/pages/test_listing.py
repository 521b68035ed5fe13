"""The list APIs' query (``bruce.admin.pages.listing``): filters by column, moments in UTC, the
limit and the cursor; every bad parameter a ``BadRequest`` naming it; a page and its cursor."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from bruce.admin.pages.listing import MAX_LIMIT, BadRequest, one_page, parse_filters

KNOWN = {"tool": "tool_name", "status": "status", "source": "source", "since": "since", "until": "until"}
STATUSES = ("ok", "error")


def test_filters_become_columns_and_moments_utc():
    filters, limit, cursor = parse_filters({"tool": " clock.now ", "status": "ok", "source": "chat",
                                            "since": "2026-12-02T09:30:00-03:00", "limit": "20", "cursor": "41"},
                                           KNOWN, STATUSES)
    assert filters == {"tool_name": "clock.now", "status": "ok", "source": "chat",
                       "since": "2026-12-02T12:30:00.000000+00:00"}
    assert (limit, cursor) == (20, 41)
    assert parse_filters({"tool": "", "status": "  "}, KNOWN, STATUSES) == ({}, 50, None)
    assert parse_filters({"tool": "x" * 300}, KNOWN, STATUSES)[0]["tool_name"] == "x" * 200


@pytest.mark.parametrize(("query", "message"), [
    ({"colour": "red"}, "unknown parameter 'colour'; use tool, status, source, since, until, limit, cursor"),
    ({"status": "cached"}, "status: 'cached' is not one of ok, error"),
    ({"source": "email"}, "source: 'email' is not one of"),
    ({"since": "yesterday"}, "since: 'yesterday' is not an ISO 8601 date-time"),
    ({"until": "2026-12-02T12:00:00"}, "until: give a UTC offset, e.g. 2026-12-02T12:00:00Z"),
    ({"limit": "0"}, f"limit: a whole number from 1 to {MAX_LIMIT}"),
    ({"limit": str(MAX_LIMIT + 1)}, "limit:"),
    ({"cursor": "-1"}, "cursor: give the next_cursor of the previous page"),
    ({"cursor": "9" * 19}, "cursor:"),
])
def test_a_bad_parameter_is_named(query, message):
    with pytest.raises(BadRequest) as raised:
        parse_filters(query, KNOWN, STATUSES)
    assert str(raised.value).startswith(message)


@dataclass(frozen=True)
class Row:
    id: int


def test_one_page_and_the_cursor_of_the_next():
    rows = [Row(i) for i in (9, 8, 7)]
    assert one_page(rows, 2) == ([Row(9), Row(8)], 8)
    assert one_page(rows, 3) == (rows, None)
    assert one_page([], 5) == ([], None)
