"""channels.discord.format: replies cut to Discord's 2000 characters with whole code fences."""

from __future__ import annotations

import random
import re

import pytest

from channels.discord.format import MIN_LIMIT, fences_balanced, split_message

FENCE = "```"


def _joined(parts: list[str]) -> str:
    """The parts put back together without the fences the splitter added, blanks ignored."""
    text = "\n".join(parts)
    text = re.sub(r"\n```\n```[A-Za-z0-9_+#.-]*\n", "\n", text)  # a block closed, then reopened
    return re.sub(r"\s+", "", text)


def _check(parts: list[str], limit: int) -> None:
    assert parts and all(p.strip() for p in parts)
    assert all(len(p) <= limit for p in parts), [len(p) for p in parts]
    assert all(fences_balanced(p) for p in parts), [p.count(FENCE) for p in parts]


def test_a_short_text_is_one_part_unchanged():
    assert split_message("hello **there**") == ["hello **there**"]
    assert split_message("   ") == ["…"]
    assert split_message("x" * 2000) == ["x" * 2000]


def test_it_prefers_paragraphs_then_lines_then_words():
    text = "the first paragraph is here.\nA line.\n\nAnd the second paragraph, a bit longer than the first one."
    assert split_message(text, 60) == ["the first paragraph is here.\nA line.",
                                       "And the second paragraph, a bit longer than the first one."]
    assert split_message("one line of text here\nand a second line of text here", 44) == [
        "one line of text here", "and a second line of text here"]
    assert split_message("word " * 30, 40)[0] == ("word " * 7).strip()


def test_a_five_thousand_character_answer_with_a_code_block():
    code = "\n".join(f"    total += item_{i} * weight({i})  # step {i}" for i in range(70))
    answer = ("Here is the script you asked for. " * 30 + "\n\n```python\ndef score(items):\n    total = 0\n"
              + code + "\n    return total\n```\n\n" + "It adds the weighted items. " * 35)
    assert 4800 < len(answer) < 5600
    parts = split_message(answer)
    _check(parts, 2000)
    assert len(parts) == 4  # the prose, the code block in two parts, the prose after it
    inside = [p for p in parts if "total +=" in p]
    assert len(inside) == 2 and all(p.count("```python\n") == 1 for p in inside)  # reopened with its language
    assert all(p.endswith("\n```") for p in inside[:-1])  # closed at the end of the part
    assert _joined(parts) == re.sub(r"\s+", "", answer)
    assert "    total += item_40" in answer and any("\n    total += item_" in p for p in inside[1:])  # indentation kept


def test_a_fence_without_a_language_is_reopened_bare():
    text = "```\n" + "\n".join(f"line {i}" for i in range(100)) + "\n```"
    parts = split_message(text, 200)
    _check(parts, 200)
    assert all(p.startswith("```\n") for p in parts)


def test_an_unclosed_fence_is_closed_at_the_end():
    parts = split_message("look:\n```js\nlet a = 1;")
    assert parts == ["look:\n```js\nlet a = 1;\n```"]


def test_inline_fences_count_like_discord_counts_them():
    text = "run ```ls -la``` then " + "more words " * 30
    parts = split_message(text, 100)
    _check(parts, 100)


def test_no_part_ends_with_a_block_just_opened_or_starts_with_one_closed_at_once():
    text = ("intro " * 15).strip() + "\n```sh\n" + "echo hi\n" * 30 + "```\n" + ("outro " * 15).strip()
    for limit in range(MIN_LIMIT, 160, 7):
        parts = split_message(text, limit)
        _check(parts, limit)
        assert not any(re.search(r"```[a-z]*\n```$", p) for p in parts), (limit, parts)
        assert not any(p.startswith("```sh\n```") for p in parts), (limit, parts)


def test_a_word_longer_than_the_limit_is_cut_and_fences_stay_whole():
    parts = split_message("a" * 50 + "```" + "b" * 50, 48)
    _check(parts, 48)
    assert "".join(parts).count("a") == 50


@pytest.mark.parametrize("seed", range(40))
def test_random_markdown_always_splits_into_valid_parts(seed):
    rng = random.Random(seed)
    pieces = []
    for _ in range(rng.randint(1, 40)):
        kind = rng.random()
        if kind < 0.3:
            lang = rng.choice(["", "python", "js", "c++"])
            lines = ["    " * rng.randint(0, 2) + "x" * rng.randint(0, 90) for _ in range(rng.randint(0, 30))]
            pieces.append(f"```{lang}\n" + "\n".join(lines) + "\n```")
        elif kind < 0.35:
            pieces.append("```" + "y" * rng.randint(0, 10))
        else:
            pieces.append(" ".join("w" * rng.randint(1, 15) for _ in range(rng.randint(1, 80))))
    text = rng.choice(["\n\n", "\n", " "]).join(pieces)
    limit = rng.choice([MIN_LIMIT, 60, 120, 500, 2000])
    parts = split_message(text, limit)
    _check(parts, limit)


def test_a_limit_too_small_is_refused():
    with pytest.raises(ValueError):
        split_message("hello", MIN_LIMIT - 1)
