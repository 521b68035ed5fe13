"""Text from outside (a model, a web page, a stranger, a platform's JSON) made safe to show and
to store.

* ``visible``: for a terminal, which must never act on what it prints. Control characters (C0
  but newline and tab, DEL, C1), bidi overrides and other invisible format characters are
  written out (``ESC`` as ``^[``, U+202E as ``<U+202E>``), so ``ESC[2K`` cannot erase a line
  and redraw it as something harmless-looking. ``bruce chat`` and every ``bruce`` command
  that prints stored text use it.
* ``visible_json``: JSON for a terminal. ``json.dumps`` escapes C0 controls but, with
  ``ensure_ascii=False``, leaves DEL, C1 (``\\x9b`` is a one-byte CSI), bidi overrides and
  lone surrogates raw; here they are ``\\uXXXX`` escapes too, so the data read back is the same.
* ``read_json``: JSON from a platform. Undecodable bytes, and the lone surrogates a
  ``"\\ud800"`` escape decodes to (which no UTF-8 encoder takes, so the message could never be
  stored), become U+FFFD.
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any

__all__ = ["visible", "visible_json", "read_json"]

# bidi embeddings, overrides and isolates, and the marks: they reorder what follows on screen
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
# format characters that only join or hyphenate (emoji sequences, Indic scripts): shown as they are
_HARMLESS_FORMAT = frozenset("\u00ad\u200c\u200d")
_ASCII_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _hidden(char: str) -> bool:
    """Would a terminal act on this character (or not show it) instead of printing it?"""
    if char in "\n\t":
        return False
    code = ord(char)
    if code < 0x20 or 0x7F <= code <= 0x9F or char in _BIDI:
        return True
    category = unicodedata.category(char)
    return category in ("Cs", "Zl", "Zp") or (category == "Cf" and char not in _HARMLESS_FORMAT)


def _shown(char: str) -> str:
    code = ord(char)
    if code < 0x20:
        return "^" + chr(code + 0x40)  # caret notation: ESC is ^[
    if code == 0x7F:
        return "^?"
    return f"<U+{code:04X}>"


def visible(text: str) -> str:
    """``text`` with every character a terminal would act on (or hide) written out instead;
    newlines and tabs stay (a CRLF pair becomes a newline)."""
    text = text.replace("\r\n", "\n")
    if text.isascii() and not _ASCII_CONTROL.search(text):
        return text
    return "".join(_shown(c) if _hidden(c) else c for c in text)


def visible_json(data: Any, *, indent: int | None = 2) -> str:
    """``data`` as JSON (non-ASCII letters kept readable) in which nothing a terminal acts on
    is raw: such characters, only ever inside strings, are ``\\uXXXX`` escapes."""
    text = json.dumps(data, ensure_ascii=False, indent=indent, default=str)
    if text.isascii() and not _ASCII_CONTROL.search(text):
        return text
    return "".join(f"\\u{ord(c):04x}" if c not in "\n\t" and _hidden(c) else c for c in text)


def _replaced(value: Any) -> Any:
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_replaced(v) for v in value]
    if isinstance(value, dict):
        return {_replaced(k): _replaced(v) for k, v in value.items()}
    return value


def read_json(raw: bytes | str) -> Any:
    """``json.loads`` for text from outside: bytes that are not UTF-8 and lone surrogates are
    read as U+FFFD. Raises what ``json.loads`` raises (``ValueError``, ``RecursionError``)."""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    data = json.loads(text)
    if _SURROGATE_ESCAPE.search(text) or _SURROGATE.search(text):
        return _replaced(data)
    return data
