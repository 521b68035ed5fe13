"""split_text: how a long reply is cut into the pieces a channel sends.

The rules (bruce/channel.py, docs/architecture.md "the outbox"): pieces of at most ``limit``
characters, cut preferably at a paragraph break, then a line break, then a space, but only when
that keeps at least half the limit in the piece (otherwise a hard cut at the limit); only the
separator at a cut is dropped, so indentation at the start of a piece is kept; no piece is empty
or starts with blank lines; an empty reply is sent as "…".
"""

from __future__ import annotations

import random

import pytest

from bruce.channel import split_text


def test_a_text_of_exactly_the_limit_is_one_piece():
    assert split_text("abcde", 5) == ["abcde"]
    assert split_text("abcdef", 5) == ["abcde", "f"]
    assert split_text("x" * 12, 4) == ["xxxx", "xxxx", "xxxx"]


def test_surrounding_whitespace_is_not_sent():
    assert split_text("  hi  \n", 10) == ["hi"]
    assert split_text("\n\n  hello there  \n", 6) == ["hello", "there"]


@pytest.mark.parametrize("blank", ["", "   ", "  \n\t ", "\n\n"])
def test_an_empty_reply_is_an_ellipsis(blank):
    assert split_text(blank, 4) == ["…"]
    assert split_text(blank, 1) == ["…"]


@pytest.mark.parametrize("limit", [0, -1])
def test_the_limit_must_be_positive(limit):
    with pytest.raises(ValueError, match="^limit must be positive$"):
        split_text("a", limit)


def test_a_limit_of_one_cuts_every_character():
    assert split_text("abc", 1) == ["a", "b", "c"]
    assert split_text("a b", 1) == ["a", "b"]
    assert split_text("a\nb\n\nc", 1) == ["a", "b", "c"]


def test_a_separator_is_used_only_if_it_keeps_half_the_limit():
    # limit 8: the cut must leave at least 4 characters in the piece
    assert split_text("abcd efgh", 8) == ["abcd", "efgh"]  # space at 4: a word cut
    assert split_text("abc defgh", 8) == ["abc defg", "h"]  # space at 3: too early, hard cut
    assert split_text("ab\n\ncdefgh", 8) == ["ab\n\ncdef", "gh"]
    assert split_text("abc\ndefgh", 8) == ["abc\ndefg", "h"]
    # an odd limit rounds the half down
    assert split_text("ab cdefg", 5) == ["ab", "cdefg"]
    assert split_text("a bcdefg", 5) == ["a bcd", "efg"]


def test_a_limit_of_two_or_three_still_cuts_at_words():
    assert split_text("a b", 2) == ["a", "b"]
    assert split_text("ab c", 3) == ["ab", "c"]
    assert split_text("a bc d", 3) == ["a", "bc", "d"]  # half of 3 is one character


def test_a_paragraph_break_is_preferred_to_a_line_break_and_a_line_break_to_a_space():
    assert split_text("aaaaa\n\nb\nc d e f", 10) == ["aaaaa", "b\nc d e f"]
    assert split_text("aaaaa\nb c d e", 10) == ["aaaaa", "b c d e"]
    assert split_text("aaaa b\n\ncc", 9) == ["aaaa b", "cc"]


def test_the_last_separator_inside_the_limit_is_used():
    assert split_text("aaaaa bb cc dd", 10) == ["aaaaa bb", "cc dd"]
    assert split_text("aaaaa\nbb\ncc dd", 10) == ["aaaaa\nbb", "cc dd"]
    assert split_text("aaaaa\n\nbb\n\ncc", 11) == ["aaaaa\n\nbb", "cc"]
    assert split_text("aa bb cc dd", 9) == ["aa bb cc", "dd"]
    assert split_text("aa\nbb\ncc\ndd", 9) == ["aa\nbb\ncc", "dd"]
    assert split_text("aa\n\nbb\n\ncc\n\ndd", 11) == ["aa\n\nbb\n\ncc", "dd"]


def test_a_separator_ending_at_the_limit_is_used():
    assert split_text("aaaa bb\ncc", 8) == ["aaaa bb", "cc"]  # the line break is the 8th character
    assert split_text("aaaa\n\nbb", 5) == ["aaaa", "bb"]  # the paragraph break straddles the limit
    assert split_text("aaa\n\nbbbb", 4) == ["aaa", "bbbb"]


def test_only_the_separator_at_a_cut_is_dropped_and_indentation_stays():
    code = "def f():\n    return 1"
    assert split_text(code, 12) == ["def f():", "    return 1"]
    assert split_text("aaaa\n\n  bbbb", 6) == ["aaaa", "  bbbb"]
    assert split_text("aaaa\n\n bbbb", 5) == ["aaaa", " bbbb"]
    assert split_text("aaaa  bbbb", 5) == ["aaaa", "bbbb"]  # spaces at a word boundary all go


def test_every_space_at_a_word_boundary_goes_but_indentation_after_a_line_break_stays():
    assert split_text("aaaa   bbbb", 5) == ["aaaa", "bbbb"]
    assert split_text("aaaa  \n  bb", 5) == ["aaaa", "  bb"]


def test_a_piece_may_start_with_any_character():
    assert split_text("see\nXML", 4) == ["see", "XML"]
    assert split_text("aaaa XXbb", 5) == ["aaaa", "XXbb"]


def test_no_piece_starts_with_blank_lines():
    assert split_text("aa\n\n\n\nbb", 3) == ["aa", "bb"]
    assert split_text("aaaa\n\n\n\n\nbbbb", 5) == ["aaaa", "bbbb"]


def test_no_piece_is_blank():
    assert split_text("a\n      b", 3) == ["a", "b"]  # the blank run between them is no piece of its own


def test_pieces_keep_every_character_in_order_within_the_limit():
    rng = random.Random(7)
    for _ in range(3000):
        text = "".join(rng.choice("ab  \n") for _ in range(rng.randint(0, 30)))
        limit = rng.randint(1, 9)
        pieces = split_text(text, limit)
        assert pieces and all(0 < len(p) <= limit and p.strip() for p in pieces), (text, limit, pieces)
        assert not any(p.startswith("\n") or p.endswith((" ", "\n")) for p in pieces), (text, limit, pieces)
        if not text.strip():
            assert pieces == ["…"]
            continue
        assert "".join("".join(pieces).split()) == "".join(text.split()), (text, limit, pieces)
        rest = text
        for piece in pieces:  # each piece is the next stretch of the text, only whitespace skipped
            at = rest.index(piece)
            assert not rest[:at].strip(), (text, limit, pieces)
            rest = rest[at + len(piece):]


def test_a_word_that_ends_exactly_at_the_limit_is_not_split():
    assert split_text("hello world", 5) == ["hello", "world"]
    assert split_text("abcd efgh", 4) == ["abcd", "efgh"]
    assert split_text("ab cd", 2) == ["ab", "cd"]


def test_a_paragraph_break_right_after_a_full_piece_is_used():
    assert split_text("aaa\n\nbb\n\ncc", 7) == ["aaa\n\nbb", "cc"]
