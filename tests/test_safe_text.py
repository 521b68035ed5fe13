"""bruce.safe_text: text from outside, made safe to show on a terminal and to store."""

from __future__ import annotations

import json

import pytest

from bruce.safe_text import read_json, visible, visible_json


def test_control_characters_are_written_out_and_newlines_and_tabs_stay():
    assert visible("a\x1b[2K\x1b[1Gb") == "a^[[2K^[[1Gb"
    assert visible("\x00\x07\r\x7f") == "^@^G^M^?"
    assert visible("line\r\nnext\ttab") == "line\nnext\ttab"
    assert visible("\x9b2K \u202egnp.exe \ud800") == "<U+009B>2K <U+202E>gnp.exe <U+D800>"


def test_letters_emoji_and_joiners_are_shown_as_they_are():
    assert visible("São Paulo, 東京, 👩\u200d💻") == "São Paulo, 東京, 👩\u200d💻"


@pytest.mark.parametrize("text", ["a\x1b[2Kb", "csi \x9b2K", "\u202eabc", "del \x7f", "lone \ud800", "ok São"])
def test_json_for_a_terminal_has_nothing_raw_and_reads_back_the_same(text):
    out = visible_json({"content": text, "list": [text]})
    assert visible(out) == out  # nothing a terminal would act on
    assert json.loads(out) == {"content": text, "list": [text]}


def test_json_keeps_letters_readable():
    assert visible_json(["São"], indent=None) == '["São"]'


def test_json_from_outside_reads_lone_surrogates_and_bad_bytes_as_replacement_characters():
    assert read_json(b'{"text": "a \\ud800 b", "\\udc00": ["\\ud83d"]}') == {"text": "a \ufffd b", "\ufffd": ["\ufffd"]}
    assert read_json(b'{"text": "caf\xe9"}') == {"text": "caf\ufffd"}
    assert read_json('{"text": "\\ud83d\\ude00"}') == {"text": "😀"}  # a pair is one character


def test_json_from_outside_raises_what_json_raises():
    with pytest.raises(ValueError):
        read_json(b"not json")
