"""Splitting a reply to Discord's message size without breaking a code fence.

Discord shows the model's Markdown as it is, so the text goes out unchanged; only its length
needs care: a message holds at most 2000 characters. ``split_message`` cuts on a paragraph
break, else a line break, else a space (else, for one very long word, at the limit), like
``bruce.channel.split_text``, and keeps every part's code fences balanced: a part that ends
inside a code block gets a closing `````` and the next part reopens the block with its
language (```````` ```python ````````), so each message renders on its own.

How fences are counted: Discord opens or closes a code block at every `````` in the text (not
only at the start of a line), so every occurrence toggles; an opening one names a language when
it is followed directly by a word and a line break. Text with an odd number of fences (the
model forgot to close one) has the last block closed at its end.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

__all__ = ["MESSAGE_LIMIT", "MIN_LIMIT", "split_message", "fences_balanced"]

MESSAGE_LIMIT = 2000  # Discord's limit on a message's content
MIN_LIMIT = 40  # room for a reopened fence, its closing and a little text
FENCE = "```"
_CLOSE = "\n```"
_LANGUAGE = re.compile(r"([A-Za-z0-9_+#.-]{1,20})\n")
_SEPARATORS = ("\n\n", "\n", " ")


def fences_balanced(text: str) -> bool:
    """Every code block opened in ``text`` is closed in it."""
    return text.count(FENCE) % 2 == 0


def split_message(text: str, limit: int = MESSAGE_LIMIT) -> list[str]:
    """``text`` as parts of at most ``limit`` characters, each with balanced code fences;
    never an empty part."""
    if limit < MIN_LIMIT:
        raise ValueError(f"limit must be at least {MIN_LIMIT}")
    rest = text.strip() or "…"
    parts: list[str] = []
    language: str | None = None  # the open block's language ("" for none); None: not in a code block
    while rest:
        prefix = f"{FENCE}{language}\n" if language is not None else ""
        end_state = _state_after(rest, len(rest), language)
        whole = prefix + rest + (_CLOSE if end_state is not None else "")
        if len(whole) <= limit:
            parts.append(whole)
            break
        budget = limit - len(prefix) - len(_CLOSE)
        cut, skip = _choose_cut(rest, budget, language)
        piece = rest[:cut].rstrip()
        language_after = _state_after(rest, cut, language)
        if piece:
            parts.append(prefix + piece + (_CLOSE if language_after is not None else ""))
        rest = rest[cut + skip:]
        # outside a block the blanks at a cut go; inside one only line breaks do (indentation is code)
        rest = rest.lstrip("\n") if language_after is not None else rest.lstrip()
        language = language_after
    return parts or ["…"]


def _choose_cut(rest: str, budget: int, language: str | None) -> tuple[int, int]:
    """Where to cut (and how many separator characters to drop): the best boundary that does
    not leave an empty code block on either side of the cut; the best boundary if all do."""
    first: tuple[int, int] | None = None
    for cut, skip in _candidates(rest, budget):
        after = _state_after(rest, cut, language)
        if after is not None and skip == 1 and rest[cut] == " ":
            skip = 0  # a word cut inside code: the space is code too
        if first is None:
            first = (cut, skip)
        if after is None or not _leaves_empty_block(rest, cut, skip, language):
            return cut, skip
    assert first is not None  # the hard cut is always a candidate
    return first


def _candidates(rest: str, budget: int) -> Iterator[tuple[int, int]]:
    """Cut positions within ``budget``, best first: paragraph, line, then word boundaries,
    each from the furthest back to half the budget; then a hard cut."""
    floor = max(budget // 2, 1)
    window = rest[: budget + 2]
    for separator in _SEPARATORS:
        at = window.rfind(separator, 0, budget + len(separator))
        while at >= floor:
            if at <= budget:
                yield at, len(separator)
            at = window.rfind(separator, 0, at)
    yield _hard_cut(rest, budget), 0


def _hard_cut(rest: str, budget: int) -> int:
    """At the budget, but never inside a run of backticks (a fence cut in two is no fence)."""
    cut = budget
    while 0 < cut < len(rest) and rest[cut - 1] == "`" and rest[cut] == "`":
        cut -= 1
    return cut if cut > 0 else budget


def _leaves_empty_block(rest: str, cut: int, skip: int, language: str | None) -> bool:
    """Cutting here would end a part with a block just opened, or start the next part with a
    reopened block that closes at once."""
    opened_at = _last_fence(rest, cut, language)
    if opened_at is not None and "\n" not in rest[opened_at:cut].rstrip():
        return True
    return rest[cut + skip:].lstrip().startswith(FENCE)


def _fences(text: str, end: int) -> Iterator[int]:
    at = text.find(FENCE, 0, end)
    while at != -1 and at + len(FENCE) <= end:
        yield at
        at = text.find(FENCE, at + len(FENCE), end)


def _state_after(text: str, end: int, language: str | None) -> str | None:
    """The open block's language after ``text[:end]``, starting in ``language``'s state."""
    for at in _fences(text, end):
        if language is None:
            named = _LANGUAGE.match(text, at + len(FENCE))
            language = named.group(1) if named else ""
        else:
            language = None
    return language


def _last_fence(text: str, end: int, language: str | None) -> int | None:
    """Where the block still open after ``text[:end]`` was opened (None: none is, or it was
    opened before ``text``)."""
    opened: int | None = None
    state = language
    for at in _fences(text, end):
        if state is None:
            opened, state = at, ""
        else:
            opened, state = None, None
    return opened if state is not None else None
