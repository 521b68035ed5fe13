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
