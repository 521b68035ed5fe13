"""Where a URL in a tool's arguments came from: copied, or composed by the model.

In a turn that read untrusted text (``TurnScope.tainted``), a call whose URL argument (named by
the contract's ``url_args``) holds a value nobody wrote needs the user's yes: a URL the model
composed (``http://attacker/collect?leak=<a fact>``) is how data leaves, while a link copied from
a page, a search result or the owner's own message is read as always. ``composed_urls`` is the
rule; ``is_copied`` the matching, pure and on its own so that it is tested row by row.

A value is *copied* when, after stripping surrounding whitespace, one of its forms is found as a
substring of one of the sources' forms:

* the value's forms: the value; the value without one trailing ``/``; each of these without a
  leading ``http://`` or ``https://`` (the owner typed ``example.com/page``); and the *decoded*
  form of each, but only when the value is written uniformly (``_spellings``: all percent-encoded
  as ``quote`` does it or not at all, all ``&amp;`` or all ``&``, composed or decomposed Unicode).
  A value written mixed (``q=A%41%41A``, ``%80%9F`` for two undecodable bytes) is not decoded:
  each such choice is a bit the server sees while the decoded text stays the same, so decoding it
  would let the model spell a secret into a copied URL. A form shorter than ``MIN_MATCH``
  characters never counts (``"a"`` is in any text). A form is found only where it ends as a link
  or a part of one ends (``_found``): a link cut at any letter would let the cut's length carry bits.
* the sources: the owner's text of the turn (``TurnScope.owner_text``) and every string, at any
  depth (keys too), of the output of each earlier successful call of the turn (the registry adds
  those of earlier turns whose answers made this one tainted, ``TurnScope.carried``, as audited)
  *to a tool whose output is text from outside* (``untrusted_output``: a page, a search result, an MCP result), as
  it is and decoded. Bruce's own tools do not vouch: what they return is Bruce's data or what the
  model wrote into it earlier (a reminder's content read back by ``proactive.list``), so a URL
  the model composed, stored and listed again is still composed. An output does not count for a
  value that the same call's own arguments contain (by this same matching): a tool that echoes
  what it was given (``web.search`` returns its query) cannot turn a composed URL into a copied one.
* decoding, in order: JSON string escapes (``\\/`` and ``\\uXXXX``, as in a JSON document read as
  text), HTML character references (``&amp;`` in a page's links), percent-decoding (``%2F``),
  then Unicode NFC. The same decoding is applied to a uniformly written value, so a link copied
  with ``&amp;`` or with ``&`` both match.

A value the same tool already sent in a successful call of this turn (reading a page again; a
dry run sent nothing and does not count)
counts as copied too: it has left already, and saying it again tells no one anything new.

Nothing else is forgiven: case (a host or a path written in other letters), a changed query,
an added fragment, or a URL pieced together from two places all count as composed.
"""

from __future__ import annotations

import html
import json
import re
import unicodedata
from collections.abc import Callable, Iterable, Iterator
from typing import Any
from urllib.parse import quote, unquote

from bruce.contracts import ToolContract, ToolResult

__all__ = ["MIN_MATCH", "composed_urls", "is_copied", "strings_in", "url_values"]

MIN_MATCH = 8  # the shortest form that counts as found (``https://`` alone is 8)
_JSON_ESCAPES = re.compile(r"(?:\\u[0-9a-fA-F]{4})+")
_SCHEMES = ("https://", "http://")
_URL_SAFE = "-._~:/?#[]@!$&'()*+,;="
_URL_RUN = re.compile(r"[\w\-.~:/?#\[\]@!$&'()*+,;=%]+")  # characters a link goes on with
_NEW_PART = "/?#&"
_CLOSING = ".,;:!?)]'*"  # left as they are when a decoded URL is percent-encoded again


def strings_in(value: Any) -> Iterator[str]:
    """Every string in a JSON-like value, at any depth: dict keys and values, list items."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict):
            for key, child in item.items():
                stack.extend((key, child))
        elif isinstance(item, (list, tuple)):
            stack.extend(item)


def _unescape_json(text: str) -> str:
    def one(match: re.Match[str]) -> str:
        try:
            decoded: str = json.loads(f'"{match.group(0)}"')
        except ValueError:
            return match.group(0)
        return decoded

    return _JSON_ESCAPES.sub(one, text.replace("\\/", "/"))


def _decoded(text: str) -> str:
    """JSON escapes, then HTML references, then percent-escapes undone; NFC."""
    plain = unquote(html.unescape(_unescape_json(text)), errors="replace")
    return unicodedata.normalize("NFC", plain)


def _spellings(decoded: str) -> set[str]:
    """The few uniform ways to write ``decoded`` in a URL: as it is or percent-encoded (upper-case
    hex, as ``quote`` writes it), in composed or decomposed Unicode, with ``&`` or ``&amp;``."""
    letters = {decoded, unicodedata.normalize("NFD", decoded)}
    written = letters | {quote(text, safe=_URL_SAFE) for text in letters}
    return written | {text.replace("&", "&amp;") for text in written}


def _decoded_form(value: str) -> str | None:
    """``value`` decoded, when ``value`` is one of its uniform spellings; else None. Decoding a
    value written *mixed* (``A%41A``, ``%80`` for one byte and ``%81`` for another, ``&amp;`` in one
    place and ``&`` in the next) is refused: those many spellings of one decoded URL could each
    carry a bit the server reads, so such a value must be found as it is written."""
    decoded = _decoded(value)
    return decoded if decoded != value and value in _spellings(decoded) else None


def _forms(value: str) -> set[str]:
    """The spellings of ``value`` that count as the same URL (see the module's docstring)."""
    base = {value, value[:-1] if value.endswith("/") else value}
    base |= {form[len(s):] for form in base for s in _SCHEMES if form.startswith(s)}
    forms = base | {d for d in map(_decoded_form, base) if d is not None}
    return {form for form in forms if len(form) >= MIN_MATCH}


def is_copied(value: str, sources: Iterable[str]) -> bool:
    """True when ``value`` (a URL argument) is found in one of ``sources`` (the module's rule)."""
    forms = _forms(value.strip())
    if not forms:
        return False
    for source in sources:
        if any(_found(form, source) for form in forms):
            return True
        decoded = _decoded(source)
        if decoded != source and any(_found(form, decoded) for form in forms):
            return True
    return False


def _found(form: str, source: str) -> bool:
    """``form`` occurs in ``source`` and ends where a link, or a part of one, ends: the source goes
    on with no URL character, only closing punctuation (``a.example/x.`` at a sentence's end), or
    a new part (``/``, ``?``, ``#``, ``&``). Cutting a link anywhere else (``q=AAAA`` out of
    ``q=AAAAAAAA…``) would let the length of the cut carry bits of a fact."""
    start = source.find(form)
    while start != -1:
        end = start + len(form)
        rest = _URL_RUN.match(source, end)
        tail = rest.group(0) if rest else ""
        if not tail or tail[0] in _NEW_PART or not tail.strip(_CLOSING):
            return True
        start = source.find(form, start + 1)
    return False


def url_values(contract: ToolContract, arguments: dict[str, Any]) -> list[str]:
    """The non-empty strings under the contract's ``url_args`` (a string, or strings in a list)."""
    values: list[str] = []
    for name in contract.url_args:
        raw = arguments.get(name)
        for item in raw if isinstance(raw, list) else [raw]:
            if isinstance(item, str) and item.strip():
                values.append(item)
    return values


def _sources(owner_text: str, results: Iterable[ToolResult], value: str,
             outside: Callable[[str], bool]) -> Iterator[str]:
    """What ``value`` may have been copied from: the owner's text and the outputs of the turn's
    successful calls to tools whose output is text from outside (``outside`` of the tool's
    name), whose own arguments do not already hold it (an echo vouches for nothing)."""
    yield owner_text
    for result in results:
        if not result.ok or result.output is None or not outside(result.name):
            continue
        if is_copied(value, strings_in(result.arguments)):
            continue
        yield from strings_in(result.output)


def _ran(result: ToolResult, contract: ToolContract) -> bool:
    """An earlier call of this tool that did what it does (not a dry run: that sent nothing)."""
    dry = isinstance(result.output, dict) and result.output.get("dry_run") is True
    return result.ok and not dry and result.name == contract.name and isinstance(result.arguments, dict)


def composed_urls(contract: ToolContract, arguments: dict[str, Any], *, tainted: bool, owner_text: str,
                  results: Iterable[ToolResult], outside: Callable[[str], bool] | None = None) -> list[str]:
    """The URL arguments of this call that were composed rather than copied; always empty in a
    turn without untrusted text (``tainted`` False) or for a tool without ``url_args``.
    ``outside`` tells, by a tool's name, whether its output is text from outside and so may vouch
    for a URL (the registry: ``untrusted_output``); None lets every output vouch."""
    from_outside = outside if outside is not None else (lambda _name: True)
    if not tainted or not contract.url_args:
        return []
    done = list(results)
    sent = {v.strip() for r in done if _ran(r, contract) for v in url_values(contract, r.arguments)}
    return [v for v in url_values(contract, arguments)
            if v.strip() not in sent and not is_copied(v, _sources(owner_text, done, v.strip(), from_outside))]
