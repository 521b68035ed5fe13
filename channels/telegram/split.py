"""Telegram HTML split to Telegram's message size: ``split_html``, ours (no library splits
Telegram HTML). See its docstring for how it counts; ``channels/telegram/format.py`` makes the
HTML it splits.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass

from channels.telegram.format import TAG, plain_text

__all__ = ["MIN_SPLIT_LIMIT", "split_html"]

MIN_SPLIT_LIMIT = 16
_ATOM = re.compile(
    r"(?P<tag></?[A-Za-z][A-Za-z0-9-]*(?:\s[^<>]*)?/?>)"
    r"|(?P<entity>&(?:#[0-9]{1,8}|#[xX][0-9A-Fa-f]{1,8}|[A-Za-z][A-Za-z0-9]{0,31});)"
    r"|(?P<char>[\s\S])"
)
_TAG_NAME = re.compile(r"</?([A-Za-z][A-Za-z0-9-]*)")
_EMPTY_PAIR = re.compile(r"<([A-Za-z][A-Za-z0-9-]*)(?:\s[^<>]*)?></\1>")


@dataclass(frozen=True)
class _Atom:
    """A tag, an entity or one character: the units a cut may fall between."""

    raw: str
    kind: str  # "open", "close", "void" or "char"
    name: str = ""  # a tag's name, lowercased
    char: str = ""  # a char's (or entity's) text
    cost: int = 0  # UTF-16 code units of raw


def _u16(value: str) -> int:
    return len(value.encode("utf-16-le")) // 2


def _atoms(markup: str) -> list[_Atom]:
    atoms: list[_Atom] = []
    for match in _ATOM.finditer(markup):
        raw = match.group(0)
        if match.lastgroup == "tag":
            found = _TAG_NAME.match(raw)
            name = found.group(1).lower() if found else ""
            kind = "close" if raw.startswith("</") else "void" if raw.endswith("/>") else "open"
            atoms.append(_Atom(raw, kind, name=name, cost=_u16(raw)))
        else:
            atoms.append(_Atom(raw, "char", char=html.unescape(raw), cost=_u16(raw)))
    return atoms


def _closer(atom: _Atom) -> str:
    return f"</{atom.name}>"


def _push(stack: list[_Atom], atom: _Atom) -> None:
    """The open tags after ``atom``: a close pops up to its open tag; one never opened changes nothing."""
    if atom.kind == "open":
        stack.append(atom)
    elif atom.kind == "close":
        for depth in range(len(stack) - 1, -1, -1):
            if stack[depth].name == atom.name:
                del stack[depth:]
                return


_SEPARATORS = (("\n", "\n"), ("\n",), (" ",))  # paragraph, line, word: best first


def _boundary(atoms: Sequence[_Atom], at: int) -> int | None:
    """Which separator (an index into ``_SEPARATORS``) starts at ``atoms[at]``, if any."""
    for rank, separator in enumerate(_SEPARATORS):
        window = atoms[at: at + len(separator)]
        if len(window) == len(separator) and all(a.kind == "char" and a.char == c for a, c in zip(window, separator, strict=True)):
            return rank
    return None


@dataclass
class _Scan:
    """How far one piece can go from ``start`` with ``stack`` open, and its best cut."""

    end: int  # the piece can take atoms[start:end] (a hard cut there)
    cuts: dict[int, int]  # separator rank -> the last index where it starts with cost >= floor


def _scan(atoms: Sequence[_Atom], start: int, stack: Sequence[_Atom], limit: int) -> _Scan:
    open_tags = list(stack)
    closers = sum(len(_closer(a)) for a in open_tags)
    cost = sum(a.cost for a in open_tags) + closers  # of atoms[start:at] with its tags closed
    floor = limit // 2
    cuts: dict[int, int] = {}
    at = start
    while at < len(atoms):
        atom = atoms[at]
        if atom.kind == "char" and atom.char in "\n ":
            rank = _boundary(atoms, at)
            if rank is not None and at > start and cost >= floor:
                cuts[rank] = at
        after, after_closers = open_tags, closers
        if atom.kind in ("open", "close"):
            after = list(open_tags)
            _push(after, atom)
            after_closers = sum(len(_closer(a)) for a in after)
        grown = cost + atom.cost + after_closers - closers
        if grown > limit:
            break
        cost, open_tags, closers = grown, after, after_closers
        at += 1
    return _Scan(at, cuts)


def _drop_pair(atoms: list[_Atom], at: int) -> None:
    """Drop the open tag at ``atoms[at]`` (too long for any piece) and the close that matches it."""
    name, depth = atoms[at].name, 0
    for index in range(at + 1, len(atoms)):
        atom = atoms[index]
        if atom.kind == "open" and atom.name == name:
            depth += 1
        elif atom.kind == "close" and atom.name == name:
            if depth == 0:
                del atoms[index]
                break
            depth -= 1
    del atoms[at]


def _piece(stack: Sequence[_Atom], body: Sequence[_Atom], closing: Sequence[_Atom]) -> str:
    text = "".join(a.raw for a in stack) + "".join(a.raw for a in body)
    text += "".join(_closer(a) for a in reversed(closing))
    while True:  # a tag opened right at a cut, or reopened and closed at once, is no use
        cleaned = _EMPTY_PAIR.sub("", text)
        if cleaned == text:
            return text
        text = cleaned


def _is_blank(atom: _Atom) -> bool:
    return atom.kind == "char" and not atom.char.strip()


def _trimmed(body: Sequence[_Atom]) -> list[_Atom]:
    """``body`` without blank lines at its start or blanks at its end; tags there stay, and so
    does the indentation of its first line."""
    chars = [index for index, atom in enumerate(body) if atom.kind == "char"]
    solid = [index for index in chars if not _is_blank(body[index])]
    if not solid:
        return [atom for atom in body if atom.kind != "char"]
    first, last = solid[0], solid[-1]
    breaks = [index for index in chars if index < first and body[index].char in "\n\r"]
    lead = breaks[-1] if breaks else -1
    return [atom for index, atom in enumerate(body)
            if atom.kind != "char" or lead < index <= last]


def split_html(html_text: str, limit: int = 4096) -> list[str]:
    """Split Telegram HTML into well-formed pieces of at most ``limit`` characters.

    How it counts (conservatively): each piece's *raw* length, tags and entities included, in
    UTF-16 code units, is at most ``limit``. That is never less than what Telegram checks (the
    visible text after entity parsing, however it counts astral characters), so no piece is
    refused as too long; a reply heavy with markup gets a few more pieces than strictly needed.

    Cuts prefer a paragraph break, then a line break, then a space, in the second half of a
    piece; failing those, the last tag, entity or character boundary that fits. A cut never falls
    inside a tag or an entity. The separator at a cut is dropped (blank lines at a piece's start
    and blanks at its end too); indentation after a line break is kept (code). Every tag open at
    a cut is closed at the end of the piece and opened again, attributes and all, at the start of
    the next, so a ``<pre>`` block split in two is code in both. No piece is empty or blank.

    The input is assumed well-formed (as ``to_telegram_html`` makes it); a tag longer than any
    piece could be (a link with a huge URL) is dropped, its text kept. ``limit`` must be at least
    ``MIN_SPLIT_LIMIT``."""
    if limit < MIN_SPLIT_LIMIT:
        raise ValueError(f"limit must be at least {MIN_SPLIT_LIMIT}")
    if _already_one_piece(html_text, limit):  # most replies: skip the atom-by-atom scan
        return [html_text]
    return _split(html_text, limit)


def _already_one_piece(html_text: str, limit: int) -> bool:
    """True when ``_split`` would return ``[html_text]`` unchanged: it fits, its visible text is
    not blank and has no blanks to trim at either end, it has no empty tag pair, and its tags
    close in order. (Conservative: when in doubt, False, and ``_split`` decides.)"""
    if _u16(html_text) > limit or _EMPTY_PAIR.search(html_text):
        return False
    visible = plain_text(html_text)
    if not visible.strip() or visible != visible.strip():
        return False
    open_tags: list[str] = []
    for match in TAG.finditer(html_text):
        raw = match.group(0)
        name = match.group(1).lower()
        if raw.endswith("/>"):
            continue
        if not raw.startswith("</"):
            open_tags.append(name)
        elif not open_tags or open_tags.pop() != name:
            return False
    return not open_tags


def _split(html_text: str, limit: int) -> list[str]:
    atoms = _atoms(html_text)
    pieces: list[str] = []
    stack: list[_Atom] = []
    start = 0
    while start < len(atoms):
        scan = _scan(atoms, start, stack, limit)
        if scan.end == start:  # not even one atom fits
            if atoms[start].kind == "open" and not stack:
                _drop_pair(atoms, start)
                continue
            atoms[start:] = _atoms(html.escape(plain_text("".join(a.raw for a in atoms[start:])), quote=False))
            stack = []  # the rest, as plain text, always fits atom by atom
            continue
        end, skip, word = scan.end, 0, False
        if scan.end < len(atoms) and scan.cuts:
            rank = min(scan.cuts)
            end, skip, word = scan.cuts[rank], len(_SEPARATORS[rank]), _SEPARATORS[rank] == (" ",)
        closing = list(stack)
        for atom in atoms[start:end]:
            _push(closing, atom)
        piece = _piece(stack, _trimmed(atoms[start:end]), closing)
        if plain_text(piece).strip():
            pieces.append(piece)
        stack = closing
        start = end + skip
        while word and start < len(atoms) and atoms[start].kind == "char" and atoms[start].char == " ":
            start += 1  # a word boundary: all the spaces there go (indentation after a line break stays)
    return pieces
