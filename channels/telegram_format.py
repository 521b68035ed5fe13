"""The model's Markdown as Telegram HTML, split to Telegram's message size, and its plain fallback.

``to_telegram_html`` parses the Markdown with **markdown-it-py** (the executablebooks project's
CommonMark parser: maintained, spec-tested, already installed here through ``rich``) and renders
its token stream with a renderer of our own that knows only Telegram's tag set. Well-formedness
is structural, not a matter of cleaning up afterwards:

* raw HTML is off in the parser (``html=False``), so ``<script>`` or ``<b>`` typed by the model is
  a text token, and every text token is escaped (``&``, ``<``, ``>``);
* markdown-it pairs delimiters itself (an unclosed ``**`` or backtick stays literal text), and the
  renderer keeps its own stack of open tags: a close that does not match the innermost open tag is
  dropped, anything still open at the end of a paragraph is closed, a tag already open is not
  opened again (``<i>`` inside ``<i>``), a quote inside a quote is flattened, and code inside a
  link is text (Telegram lets links and code contain no other entity);
* only ``http``/``https`` (with a host) and ``tg`` URLs become ``<a href>``, the href escaped with
  its quotes; any other link is its label followed by the URL in parentheses, as text
  (markdown-it already leaves ``javascript:``, ``vbscript:``, ``file:`` and ``data:`` links as
  their literal Markdown);
* a fence's language becomes ``<pre><code class="language-x">`` only if it is a plain name.

Headings are bold lines, lists plain lines with ``•`` (indented when nested) or their numbers,
tables one line a row (``a | b``, the header bold), rules ``———``, images a link to the image
(with its alt text). Everything the renderer emits is one of ``b i s a code pre blockquote``.

Rejected: ``chatgpt-md-converter`` (regex based: ``[x](javascript:alert(1))`` became an
``<a href>``, a ``"`` in a URL broke out of the href, and ``**b *c** d*`` gave the mis-nested
``<b>b <i>c</b> d</i>``, which Telegram refuses); ``telegramify-markdown`` (targets MarkdownV2,
not HTML); ``mistune`` (would do, but markdown-it-py is already a dependency of our
dependencies, and its flat token stream makes a renderer with its own tag stack simple).

``split_html`` is ours: no library splits Telegram HTML. See its docstring for how it counts.
``plain_text`` is the fallback when Telegram still refuses the HTML ("can't parse entities").
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from markdown_it import MarkdownIt
from markdown_it.token import Token

__all__ = ["MIN_SPLIT_LIMIT", "plain_text", "split_html", "to_telegram_html"]

_MD = MarkdownIt("commonmark", {"html": False, "maxNesting": 50}).enable(["strikethrough", "table"])
_INLINE_TAGS = {"strong": "b", "em": "i", "s": "s"}
_LANGUAGE = re.compile(r"[A-Za-z0-9_+#.-]{1,40}")
_RULE = "———"


def _text(value: str) -> str:
    return html.escape(value, quote=False)


def _allowed_href(href: str) -> bool:
    """Whether Telegram should get ``href`` as a link: http(s) with a host, or tg:."""
    try:
        parts = urlsplit(href)
    except ValueError:
        return False
    scheme = parts.scheme.lower()
    if scheme in ("http", "https"):
        return bool(parts.netloc)
    return scheme == "tg" and len(href) > len("tg:")


def _visible(parts: Sequence[str]) -> str:
    return plain_text("".join(parts))


@dataclass
class _Open:
    """A tag the inline renderer has opened (or chosen not to: ``emitted`` False)."""

    tag: str  # "b", "i", "s", "a", or "link-text" for a link shown as text
    emitted: bool
    where: int  # its index in parts
    href: str = ""


@dataclass
class _Inline:
    """Renders one inline token's children; every tag it opens it closes, properly nested."""

    outer: frozenset[str] = frozenset()  # tags already open around this text (a heading's <b>)
    parts: list[str] = field(default_factory=list)
    stack: list[_Open] = field(default_factory=list)

    def open_names(self) -> set[str]:
        return set(self.outer) | {entry.tag for entry in self.stack if entry.emitted}

    def open(self, tag: str, href: str = "") -> None:
        emit = tag not in self.open_names()
        self.stack.append(_Open(tag, emit, len(self.parts), href))
        if emit:
            self.parts.append(f'<a href="{html.escape(href, quote=True)}">' if tag == "a" else f"<{tag}>")

    def close(self, tag: str) -> _Open | None:
        if not self.stack or self.stack[-1].tag != tag:
            return None  # not the innermost open tag: dropped (markdown-it never does this)
        entry = self.stack.pop()
        if entry.emitted and tag != "link-text":
            self.parts.append(f"</{tag}>")
        return entry

    def render(self, tokens: Sequence[Token]) -> str:
        for token in tokens:
            self.token(token)
        while self.stack:
            self.close(self.stack[-1].tag)
        return "".join(self.parts)

    def token(self, token: Token) -> None:
        kind = token.type
        if kind.endswith("_open") and kind[: -len("_open")] in _INLINE_TAGS:
            self.open(_INLINE_TAGS[kind[: -len("_open")]])
        elif kind.endswith("_close") and kind[: -len("_close")] in _INLINE_TAGS:
            self.close(_INLINE_TAGS[kind[: -len("_close")]])
        elif kind in ("softbreak", "hardbreak"):
            self.parts.append("\n")
        elif kind == "code_inline":
            code = _text(token.content)
            self.parts.append(code if "a" in self.open_names() else f"<code>{code}</code>")
        elif kind == "link_open":
            self.link_open(str(token.attrGet("href") or ""))
        elif kind == "link_close":
            self.link_close()
        elif kind == "image":
            self.image(token)
        else:  # text, and anything a plugin might add: its text only
            self.parts.append(_text(token.content))

    def link_open(self, href: str) -> None:
        if _allowed_href(href) and "a" not in self.open_names():
            self.open("a", href)
        else:
            self.stack.append(_Open("link-text", False, len(self.parts), href))

    def link_close(self) -> None:
        tag = self.stack[-1].tag if self.stack else ""
        entry = self.close(tag) if tag in ("a", "link-text") else None
        if entry is None:
            return
        label = _visible(self.parts[entry.where + 1 if entry.emitted else entry.where:])
        if not entry.emitted:
            if entry.href and entry.href != label:
                self.parts.append(_text(f" ({entry.href})"))  # not a link: its URL as text
        elif not label.strip():  # an empty label: show the URL
            self.parts.insert(len(self.parts) - 1, _text(entry.href))

    def image(self, token: Token) -> None:
        src = str(token.attrGet("src") or "")
        alt = token.content or src
        if _allowed_href(src) and "a" not in self.open_names():
            self.parts.append(f'<a href="{html.escape(src, quote=True)}">{_text(alt)}</a>')
        else:
            self.parts.append(_text(alt))


@dataclass
class _Blocks:
    """Renders the block token stream: paragraphs apart by a blank line, list items by a line."""

    out: list[str] = field(default_factory=list)
    pending: int = 0  # line breaks owed before the next content
    fresh: bool = True  # at the start of the message or of a quote: no breaks owed
    markers: list[str] = field(default_factory=list)  # an item's marker, written with its content
    lists: list[bool] = field(default_factory=list)  # ordered?
    quote_depth: int = 0
    quote_at: int = 0  # where the open <blockquote> is in out
    heading: bool = False
    cells: int = 0

    def brk(self, lines: int) -> None:
        self.pending = max(self.pending, lines)

    def write(self, chunk: str) -> None:
        if not chunk:
            return
        if not self.fresh and self.pending:
            self.out.append("\n" * self.pending)
        self.fresh, self.pending = False, 0
        if self.markers:
            self.out.append(_text("".join(self.markers)))
            self.markers.clear()
        self.out.append(chunk)

    def render(self, tokens: Sequence[Token]) -> str:
        handlers = self.handlers()
        for token in tokens:
            handler = handlers.get(token.type)
            if handler is not None:
                handler(token)
            elif token.type == "inline":
                self.inline(token)
        while self.quote_depth:
            self.quote_close(None)
        return "".join(self.out).strip()

    def handlers(self) -> dict[str, Callable[[Token], None]]:
        return {
            "paragraph_open": lambda t: self.brk(1 if t.hidden else 2),
            "paragraph_close": lambda t: self.brk(1 if t.hidden else 2),
            "heading_open": self.heading_open,
            "heading_close": self.heading_close,
            "blockquote_open": self.quote_open,
            "blockquote_close": self.quote_close,
            "bullet_list_open": lambda t: self.list_open(False),
            "ordered_list_open": lambda t: self.list_open(True),
            "bullet_list_close": self.list_close,
            "ordered_list_close": self.list_close,
            "list_item_open": self.item_open,
            "list_item_close": self.item_close,
            "fence": self.code,
            "code_block": self.code,
            "hr": self.rule,
            "table_open": lambda t: self.brk(2),
            "table_close": lambda t: self.brk(2),
            "tr_open": self.row_open,
            "th_open": self.cell_open,
            "td_open": self.cell_open,
            "th_close": self.cell_close,
            "td_close": self.cell_close,
        }

    def inline(self, token: Token) -> None:
        outer = frozenset({"b"}) if self.heading else frozenset()
        self.write(_Inline(outer=outer).render(token.children or []))

    def heading_open(self, token: Token | None) -> None:
        self.brk(2)
        self.write("<b>")
        self.heading = True

    def heading_close(self, token: Token | None) -> None:
        self.heading = False
        if self.out and self.out[-1] == "<b>":
            self.out.pop()  # an empty heading
        else:
            self.out.append("</b>")
        self.brk(2)

    def quote_open(self, token: Token | None) -> None:
        self.quote_depth += 1
        if self.quote_depth == 1:
            self.brk(2)
            self.write("<blockquote>")
            self.quote_at = len(self.out) - 1
            self.fresh = True

    def quote_close(self, token: Token | None) -> None:
        self.quote_depth -= 1
        if self.quote_depth == 0:
            if len(self.out) - 1 == self.quote_at:
                self.out.pop()  # an empty quote
            else:
                self.out.append("</blockquote>")
            self.fresh, self.pending = False, 2

    def list_open(self, ordered: bool) -> None:
        self.brk(1 if self.lists else 2)
        self.lists.append(ordered)

    def list_close(self, token: Token | None) -> None:
        self.lists.pop()
        self.brk(1 if self.lists else 2)

    def item_open(self, token: Token) -> None:
        self.brk(1)
        self.markers.clear()  # an empty item before this one shows no marker
        indent = "   " * (len(self.lists) - 1)
        number = f"{token.info}{token.markup or '.'} " if token.info else "1. "
        self.markers.append(indent + (number if self.lists[-1] else "• "))

    def item_close(self, token: Token | None) -> None:
        self.brk(1)

    def code(self, token: Token) -> None:
        body = token.content.rstrip("\n")
        if not body.strip():
            return
        language = (token.info or "").split()[0] if (token.info or "").strip() else ""
        opening = f'<code class="language-{language}">' if _LANGUAGE.fullmatch(language) else "<code>"
        self.brk(1 if self.markers or self.lists else 2)
        self.write(f"<pre>{opening}{_text(body)}</code></pre>")
        self.brk(2)

    def rule(self, token: Token | None) -> None:
        self.brk(2)
        self.write(_RULE)
        self.brk(2)

    def row_open(self, token: Token | None) -> None:
        self.brk(1)
        self.cells = 0

    def cell_open(self, token: Token) -> None:
        if self.cells:
            self.write(" | ")
        self.cells += 1
        if token.type == "th_open":
            self.write("<b>")
            self.heading = True

    def cell_close(self, token: Token) -> None:
        if token.type == "th_close":
            self.heading_close(None)
            self.pending = 0  # the next cell is on the same line


def to_telegram_html(markdown: str) -> str:
    """The model's Markdown as Telegram HTML (``parse_mode="HTML"``), well-formed whatever the input.

    ``**bold**``, ``*italic*``/``_italic_``, ``~~strike~~``, `` `code` ``, fenced code (with a
    language: ``<pre><code class="language-x">``), ``[text](url)`` (a link only for http, https
    and tg URLs), ``>`` quotes, headings as bold lines, lists as lines with ``•`` or numbers;
    everything else is escaped text. Blank Markdown gives ``""`` (and ``split_html`` of that, no
    piece): the caller decides what to send instead."""
    return _Blocks().render(_MD.parse(markdown))


# ---- splitting ------------------------------------------------------------------------------

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
    for match in _TAG.finditer(html_text):
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
            atoms[start:] = _atoms(_text(plain_text("".join(a.raw for a in atoms[start:]))))
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


_TAG = re.compile(r"</?([A-Za-z][A-Za-z0-9-]*)(?:\s[^<>]*)?/?>")


def plain_text(html_text: str) -> str:
    """The text of Telegram HTML without its tags, entities unescaped: what to send, without a
    parse mode, when Telegram refuses the HTML ("can't parse entities"). A ``<`` that starts no
    tag (``a < b``) is kept as text."""
    return html.unescape(_TAG.sub("", html_text))
