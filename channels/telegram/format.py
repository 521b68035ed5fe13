"""The model's Markdown as Telegram HTML, and its plain fallback.

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

``plain_text`` is the fallback when Telegram still refuses the HTML ("can't parse entities").
Splitting the HTML to Telegram's message size is ``channels/telegram/split.py``.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from markdown_it import MarkdownIt
from markdown_it.token import Token

__all__ = ["TAG", "plain_text", "to_telegram_html"]

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


TAG = re.compile(r"</?([A-Za-z][A-Za-z0-9-]*)(?:\s[^<>]*)?/?>")  # a tag, its name the group


def plain_text(html_text: str) -> str:
    """The text of Telegram HTML without its tags, entities unescaped: what to send, without a
    parse mode, when Telegram refuses the HTML ("can't parse entities"). A ``<`` that starts no
    tag (``a < b``) is kept as text."""
    return html.unescape(TAG.sub("", html_text))
