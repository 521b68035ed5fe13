"""Telegram's HTML rules as a checker, for the tests of channels/telegram/format.py and
channels/telegram/split.py: a real parser (html.parser) against Telegram's rules: only the tags
Telegram allows (with only their allowed attributes), balanced and properly nested, no entity
nested where Telegram forbids it, and no raw ``<``, ``>`` or bare ``&`` in the text."""

from __future__ import annotations

import re
from html.parser import HTMLParser

_ALLOWED = {"b", "strong", "i", "em", "u", "ins", "s", "strike", "del", "span", "tg-spoiler", "a", "code", "pre",
            "blockquote"}
_TAG = re.compile(r"</?[A-Za-z][A-Za-z0-9-]*(?:\s[^<>]*)?>")
_ENTITY = re.compile(r"&(?:lt|gt|amp|quot|#[0-9]+|#x[0-9A-Fa-f]+);")


class _Checker(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in _ALLOWED:
            self.errors.append(f"tag <{tag}> not allowed")
        self._attributes(tag, dict(attrs))
        if self.stack and self.stack[-1] == "code" or self.stack and self.stack[-1] == "pre" and tag != "code":
            self.errors.append(f"<{tag}> inside <{self.stack[-1]}>")
        if tag in ("a", "blockquote") and tag in self.stack:
            self.errors.append(f"<{tag}> inside <{tag}>")
        if tag in ("code", "pre") and "a" in self.stack:
            self.errors.append(f"<{tag}> inside <a>")
        self.stack.append(tag)

    def _attributes(self, tag: str, attrs: dict[str, str | None]) -> None:
        allowed = {"a": {"href"}, "code": {"class"}, "span": {"class"}, "blockquote": {"expandable"}}.get(tag, set())
        if set(attrs) - allowed:
            self.errors.append(f"<{tag}> with attributes {sorted(attrs)}")
        if tag == "a" and not re.match(r"(https?://[^/\s]|tg:)", attrs.get("href") or "", re.IGNORECASE):
            self.errors.append(f"href {attrs.get('href')!r}")
        if tag == "code" and "class" in attrs and not re.fullmatch(r"language-[\w+#.-]+", attrs["class"] or ""):
            self.errors.append(f"code class {attrs['class']!r}")
        if tag == "span" and attrs.get("class") != "tg-spoiler":
            self.errors.append("span without tg-spoiler")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.errors.append(f"self-closing <{tag}/>")

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1:] or 'nothing'}")
        else:
            self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def problems(markup: str) -> list[str]:
    """What Telegram's HTML parser would object to in ``markup`` (nothing: it is well-formed)."""
    checker = _Checker()
    checker.feed(markup)
    checker.close()
    errors = list(checker.errors)
    if checker.stack:
        errors.append(f"left open: {checker.stack}")
    text = _TAG.sub("", markup)
    if "<" in text or ">" in text:
        errors.append("raw < or > in text")
    if "&" in _ENTITY.sub("", text):
        errors.append("bare & in text")
    return errors


def well_formed(markup: str) -> bool:
    return not problems(markup)


def visible(markup: str) -> str:
    checker = _Checker()
    checker.feed(markup)
    checker.close()
    return "".join(checker.text)
