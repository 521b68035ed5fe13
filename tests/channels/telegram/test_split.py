"""channels.telegram.split: Telegram HTML split into well-formed pieces of Telegram's size."""

from __future__ import annotations

import html
import random
import re

import pytest

from channels.telegram.format import plain_text, to_telegram_html
from channels.telegram.split import MIN_SPLIT_LIMIT, split_html
from tests.channels.telegram.html_rules import problems, visible, well_formed


def _long_answer() -> str:
    rng = random.Random(7)
    words = ["assistant", "telegram", "message", "**bold**", "split", "piece", "paragraph", "text", "`code`", "&"]
    paragraphs: list[str] = []
    while sum(len(p) + 2 for p in paragraphs) < 9000:
        paragraphs.append(" ".join(rng.choice(words) for _ in range(rng.randint(20, 60))))
    return "\n\n".join(paragraphs)[:9000].rstrip()


def test_a_9000_character_answer_splits_into_three_well_formed_pieces() -> None:
    answer = _long_answer()
    assert len(answer) >= 8990
    out = to_telegram_html(answer)
    pieces = split_html(out)
    assert len(pieces) == 3
    for piece in pieces:
        assert len(piece) <= 4096
        assert well_formed(piece), problems(piece)
        assert piece == piece.strip()
    assert " ".join(plain_text(p) for p in pieces).split() == plain_text(out).split()


def test_pieces_are_cut_at_paragraphs_when_they_can_be() -> None:
    out = "\n\n".join(["word " * 50] * 10).replace(" \n", "\n").strip()
    pieces = split_html(out, 1000)
    assert all(p.endswith("word") and p.startswith("word") for p in pieces)
    assert all(len(p) <= 1000 for p in pieces)
    assert sum(p.count("\n\n") for p in pieces) + len(pieces) - 1 == 9


def test_a_long_code_block_is_pre_in_every_piece() -> None:
    lines = [f"    value_{n} = compute({n}) < limit & flag  # line {n}" for n in range(200)]
    out = to_telegram_html("Here:\n\n```python\n" + "\n".join(lines) + "\n```\n\nThat is all.")
    pieces = split_html(out, 3000)
    code_pieces = [p for p in pieces if "value_" in p]
    assert len(code_pieces) >= 3
    for piece in code_pieces:
        assert well_formed(piece), problems(piece)
        start = piece.index('<pre><code class="language-python">')
        assert piece.index("value_") > start
        assert piece.rindex("value_") < piece.index("</code></pre>", start)
    code = "\n".join(visible(p).removeprefix("Here:\n\n").removesuffix("\n\nThat is all.") for p in code_pieces)
    assert code == "\n".join(lines)  # every line whole, its indentation kept


def test_a_cut_never_lands_inside_an_entity_or_a_tag() -> None:
    markup = to_telegram_html("&&&&<<<>>> **&&&** [a&b](https://example.com/?x=1&y=2) `<&>`" * 20)
    for limit in range(MIN_SPLIT_LIMIT, 90):
        pieces = split_html(markup, limit)
        for piece in pieces:
            assert len(piece) <= limit
            assert well_formed(piece), (limit, piece, problems(piece))
        assert "".join(plain_text(p) for p in pieces).replace(" ", "") == plain_text(markup).replace(" ", "")


def test_a_tag_open_at_a_cut_is_closed_and_reopened() -> None:
    markup = '<b>bold <a href="https://example.com">' + "link " * 30 + "</a> tail</b>"
    pieces = split_html(markup, 80)
    assert len(pieces) > 2
    for piece in pieces:
        assert well_formed(piece), problems(piece)
        assert piece.startswith("<b>") and piece.endswith("</b>")
    assert all('<a href="https://example.com">' in p for p in pieces[1:-1])


def test_words_are_not_cut_when_a_space_fits() -> None:
    text = " ".join(f"word{n}" for n in range(400))
    pieces = split_html(text, 100)
    assert " ".join(pieces) == text
    assert all(re.fullmatch(r"word\d+( word\d+)*", p) for p in pieces)


def test_a_word_longer_than_a_piece_is_cut_hard() -> None:
    pieces = split_html("x" * 250, 100)
    assert pieces == ["x" * 100, "x" * 100, "x" * 50]


def test_astral_characters_count_as_two() -> None:
    pieces = split_html("😀" * 30, 20)
    assert all(len(p.encode("utf-16-le")) // 2 <= 20 for p in pieces)
    assert "".join(pieces) == "😀" * 30


def test_no_piece_is_empty_or_blank() -> None:
    markup = "a" + "\n" * 300 + "<b>" + " " * 300 + "</b>" + "\n\n" + "b"
    pieces = split_html(markup, 50)
    assert pieces == ["a", "b"]
    assert split_html("   \n\n  ") == []


def test_a_short_message_is_one_piece_unchanged() -> None:
    markup = to_telegram_html("**hi** there")
    assert split_html(markup) == [markup]


def test_a_tag_longer_than_any_piece_is_dropped_and_its_text_kept() -> None:
    markup = to_telegram_html(f"see [the page](https://example.com/{'a' * 200}) now")
    pieces = split_html(markup, 100)
    assert all(well_formed(p) and len(p) <= 100 for p in pieces)
    assert " ".join(pieces) == "see the page now"


def test_a_limit_too_small_is_refused() -> None:
    with pytest.raises(ValueError, match="at least"):
        split_html("text", MIN_SPLIT_LIMIT - 1)


def test_the_visible_text_survives_a_split() -> None:
    markdown = "# Title\n\n" + "\n\n".join(f"Para {n}: **bold {n}** & _it_ `c<{n}>`" for n in range(60))
    out = to_telegram_html(markdown)
    pieces = split_html(out, 300)
    assert all(well_formed(p) for p in pieces)
    assert html.unescape(" ".join(plain_text(p) for p in pieces)).split() == plain_text(out).split()


def test_the_one_piece_shortcut_gives_what_the_full_split_gives() -> None:
    """``split_html`` returns a text that is already one piece as it is; checked against the
    atom-by-atom split on short replies, edge cases and random markup."""
    from channels.telegram.split import _already_one_piece, _split

    fragments = ["word", " ", "\n", "\n\n", "<b>", "</b>", "<i>", "</i>", "&amp;", "&#32;", "&nbsp;", "&#10;", "<br/>",
                 '<a href="https://example.com">', "</a>", "<pre>", "</pre>", "<code>", "</code>", "x" * 30, "é🙂", "<",
                 "<b></b>", "   "]
    cases = ["hi", " hi", "hi ", "\nhi", "<b>hi</b>", "<b> hi</b>", "<b>hi </b>", "<b>hi", "hi</b>", "<b><i>x</b></i>",
             "<b></b>hi", "hi<b></b>", "&#32;hi", "hi&#10;", "&nbsp;", "<br/>", "a < b", "🙂" * 20, "x" * 17,
             to_telegram_html("Sure! Here is a **short** answer with a [link](https://example.org) and `code`.")]
    rng = random.Random(11)
    cases += ["".join(rng.choice(fragments) for _ in range(rng.randint(1, 12))) for _ in range(3000)]
    for text in cases:
        for limit in (MIN_SPLIT_LIMIT, 40, 4096):
            assert split_html(text, limit) == _split(text, limit), (text, limit)
    assert _already_one_piece(cases[19], 4096) and not _already_one_piece("<b> hi</b>", 4096)
