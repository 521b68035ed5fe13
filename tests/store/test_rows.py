"""Rows in and out of SQLite: a record built from a row's matching columns, a value as a JSON column."""

from __future__ import annotations

import sqlite3

from bruce.records import ArtifactRecord, from_json
from bruce.store.rows import from_row, to_json


def test_a_record_is_built_from_the_columns_it_names_extra_ones_ignored():
    conn = sqlite3.connect(":memory:")
    conn.row_factory = sqlite3.Row
    row = conn.execute("SELECT 'a1' AS id, NULL AS conversation_id, NULL AS turn_id, 'T' AS title, 'f.md' AS filename,"
                       " 'md' AS format, '/p' AS path, 3 AS size_bytes, 'ab' AS sha256, 'now' AS created_at,"
                       " 'extra' AS unknown").fetchone()
    conn.close()
    assert from_row(ArtifactRecord, row) == ArtifactRecord("a1", None, None, "T", "f.md", "md", "/p", 3, "ab", "now")


def test_a_value_written_as_json_reads_back_and_text_stays_text():
    assert to_json({"q": "café", "n": [1, 2]}) == '{"q": "café", "n": [1, 2]}'
    assert to_json("already text") == "already text"
    assert to_json({"when": sqlite3}).startswith('{"when": "<module')  # what JSON cannot hold, as text
    for value in ({"q": "café"}, [1, None], 3.5):
        assert from_json(to_json(value)) == value


def test_the_same_record_from_queries_of_different_columns():
    """Which fields a row holds is worked out once per query shape: a narrower query (defaults for the
    rest) and a wider one with the columns in another order each build their own record rightly."""
    from bruce.records import StoredMessage  # noqa: PLC0415

    conn = sqlite3.connect(":memory:")
    conn.row_factory = sqlite3.Row
    wide = ("SELECT 'x' AS extra, 1 AS id, 'c' AS conversation_id, 'out' AS direction, 'assistant' AS role, 'chat' AS kind,"
            " NULL AS sender_id, 'hi' AS text, NULL AS platform_message_id, 'sent' AS status, 't' AS created_at,"
            " 't1' AS turn_id, 2 AS parts_sent")
    narrow = ("SELECT 2 AS id, 'c' AS conversation_id, 'in' AS direction, 'user' AS role, 'chat' AS kind, 'u' AS sender_id,"
              " 'yo' AS text, 'p' AS platform_message_id, 'done' AS status, 't' AS created_at")
    for _ in range(2):  # the second time from what the first worked out
        first, second = (from_row(StoredMessage, conn.execute(sql).fetchone()) for sql in (wide, narrow))
        assert (first.id, first.turn_id, first.parts_sent, first.direction) == (1, "t1", 2, "out")
        assert (second.id, second.turn_id, second.parts_sent, second.sender_id) == (2, None, 0, "u")
    conn.close()
