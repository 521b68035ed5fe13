"""Grounding checks on the model's final text, done in code.

A link to one of our own artifacts (``/artifacts/...`` on the admin page) must have been returned
as a ``url`` field by a successful tool call in this same turn. Otherwise the model made it up:
the link is removed and the user is told it could not be produced. URLs that merely appear in
tool output text (a web page Bruce read, say) do not count: only a tool's own ``url`` result
vouches for a link.

Every spelling a browser, or the server behind it, reads as the same link counts. A candidate is
parsed as a browser parses it (the WHATWG URL Standard, by ada-url): IPv4 shorthand, decimal, hex
and octal hosts become dotted quads, IPv6 hosts (IPv4-mapped too) are compressed, names are
lower-cased and IDNA-mapped, backslashes are slashes and dot segments are resolved. Then as a
server routes it: a trailing dot of the host is dropped, the path is percent-decoded, look-alike
slashes (U+2215 and friends) and backslashes count as ``/``, repeated slashes as one, and dot
segments are resolved again. A link is ours when it is a bare path, or its host is the admin
page's, a ``localhost`` name, or any loopback or unspecified address (on any port: the admin
page may be reached through more than one). Produced links are compared in the same form.

``check_links`` grounds a reply against the turn's tool results; ``keep_links`` against any set
of artifact paths (a reminder's, against the store: ``bruce.jobs.links``).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import structlog
from ada_url import parse_url

from bruce.contracts import ToolResult
from bruce.texts import UNGROUNDED_LINK

__all__ = ["GroundingReport", "artifact_paths", "check_links", "keep_links", "produced_urls"]

log = structlog.get_logger(__name__)

_PREFIX = "/artifacts/"
_LEADING = "*_~>|"  # markdown emphasis, quotes and tables around a link
_TRAILING = ".,;:!?)]}'\"*_~|"
# a run of URL characters; square brackets only around an IPv6 literal (they contain a colon);
# possessive, so a long "[::::" with no "]" costs linear time
_CANDIDATE = re.compile(r"""(?:\[[\w.%]*+:[\w:.%]*+\]|[^\s<>()\[\]"'`])++""")
_EMBEDDED_SCHEME = re.compile(r"https?:", re.IGNORECASE)
_ANY_SCHEME = re.compile(r"[a-z][a-z0-9+.\-]*://", re.IGNORECASE)
_SLASHES = str.maketrans(dict.fromkeys("\\\u2215\u2044\u29f8\u2571\uff0f\u29f5\u29f9\u2216\uff3c", "/"))
_REPEATED_SLASHES = re.compile(r"/{2,}")
_MAX_ROUNDS = 4  # percent-encoding nested deeper than this is not undone by anyone


@dataclass(frozen=True, slots=True)
class GroundingReport:
    text: str
    removed: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class _Link:
    host: str | None  # None: a bare path (relative to wherever it is shown)
    path: str  # as a server routes it


def _url_fields(value: Any) -> Iterable[str]:
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "url" and isinstance(item, str):
                yield item
            else:
                yield from _url_fields(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _url_fields(item)


def _unquote_all(text: str) -> str:
    for _ in range(_MAX_ROUNDS):
        decoded = unquote(text, errors="replace")
        if decoded == text:
            break
        text = decoded
    return text


def _without_dot_segments(path: str) -> str:
    kept: list[str] = []
    segments = path.split("/")[1:]
    for segment in segments:
        if segment == "..":
            if kept:
                kept.pop()
        elif segment != ".":
            kept.append(segment)
    trailing = "/" if segments and segments[-1] in (".", "..") else ""
    return "/" + "/".join(kept) + trailing


def _routed_path(path: str) -> str:
    """The path a server routes: decoded, one kind of slash, no repeats, no dot segments."""
    for _ in range(_MAX_ROUNDS):
        routed = _without_dot_segments(_REPEATED_SLASHES.sub("/", _unquote_all(path).translate(_SLASHES)))
        if routed == path:
            break
        path = routed
    return path


def _parse(link: str) -> _Link | None:
    """Host and routed path of a link as written in text, or None if no browser would open it."""
    text = link.translate(_SLASHES)
    scheme = _ANY_SCHEME.match(text)
    if scheme:  # whatever the scheme, read the host as a browser reads an http one
        url, bare = "http://" + text[scheme.end():], False
    elif text.lower().startswith(("http:", "https:")):
        url, bare = text, False  # "http:/host/..." and "http:host/...": browsers fix these up
    elif text.startswith(("/", ".")):
        url, bare = "http://localhost/" + text, True
    else:
        url, bare = "http://" + text, False  # a bare host[:port]/path
    try:
        parts = parse_url(url, attributes=("hostname", "pathname"))
    except ValueError:
        return None
    return _Link(None if bare else parts["hostname"], _routed_path(parts["pathname"]))


def _artifact_path(link: _Link) -> str | None:
    """The ``/artifacts/...`` path a link points at (the prefix in any letter case), or None."""
    if not link.path.lower().startswith(_PREFIX):
        return None
    return _PREFIX + link.path[len(_PREFIX):]


def _canonical_host(host: str) -> str:
    return host.strip("[]").rstrip(".").lower()


def _is_ours(link: _Link, admin_host: str) -> bool:
    if link.host is None:
        return True  # a bare /artifacts/... path
    host = _canonical_host(link.host)
    if host in (admin_host, "localhost") or host.endswith(".localhost"):
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback or ip.is_unspecified


def produced_urls(results: Iterable[ToolResult]) -> set[str]:
    """Artifact paths vouched for by successful tool calls (their ``url`` fields)."""
    found = set()
    for result in results:
        if result.ok:
            for url in _url_fields(result.output):
                link = _parse(url)
                path = _artifact_path(link) if link else None
                if path is not None:
                    found.add(path)
    return found


def _split(raw: str) -> tuple[str, str, str]:
    """``raw`` as (text before the link, the link, text after it)."""
    link = raw.lstrip(_LEADING)
    head = raw[: len(raw) - len(link)]
    scheme = _EMBEDDED_SCHEME.search(link)
    if scheme and scheme.start() > 0 and not any(c in link[: scheme.start()] for c in "/\\"):
        head, link = head + link[: scheme.start()], link[scheme.start():]  # "url=http://...", "see:http://..."
    stripped = link.rstrip(_TRAILING)
    return head, stripped, link[len(stripped):]


def check_links(
    text: str, results: Iterable[ToolResult], *, admin_base: str, existing: set[str] | None = None,
) -> GroundingReport:
    """``existing``: the artifact paths that really exist (from the store); a ``url`` a tool
    returned still has to point at one of them (a search result can carry any URL)."""
    produced = produced_urls(results)
    if existing is not None:
        produced &= existing
    return keep_links(text, produced, admin_base=admin_base)


def artifact_paths(text: str, *, admin_base: str) -> set[str]:
    """The ``/artifacts/...`` paths that the links to our admin page in ``text`` point at."""
    admin_host = _admin_host(admin_base)
    found: set[str] = set()
    for match in _CANDIDATE.finditer(text):
        link = _our_artifact(match.group(0), admin_host)
        if link is not None:
            found.add(link[3])
    return found


def keep_links(text: str, grounded: set[str], *, admin_base: str, note: str = UNGROUNDED_LINK) -> GroundingReport:
    """``text`` with every link to one of our artifacts whose path is not in ``grounded``
    replaced by ``[link removed]``, and ``note`` added when any was."""
    admin_host = _admin_host(admin_base)
    removed: list[str] = []

    def replace(match: re.Match[str]) -> str:
        raw = match.group(0)
        link = _our_artifact(raw, admin_host)
        if link is None or link[3] in grounded:
            return raw
        head, written, tail, _ = link
        removed.append(written)
        return f"{head}[link removed]{tail}"

    checked = _CANDIDATE.sub(replace, text)
    if removed:
        log.warning("grounding.link_removed", urls=removed)
        checked = f"{checked}\n\n{note}"
    return GroundingReport(checked, tuple(removed))


def _admin_host(admin_base: str) -> str:
    admin = _parse(admin_base)
    return _canonical_host(admin.host) if admin and admin.host else ""


def _our_artifact(raw: str, admin_host: str) -> tuple[str, str, str, str] | None:
    """For a candidate that links to one of our artifacts: (text before the link, the link as
    written, text after it, the artifact path it points at); else None."""
    if _PREFIX.strip("/") not in _unquote_all(raw).lower():
        return None  # cheap: most words of an answer are not links to artifacts
    head, link, tail = _split(raw)
    parsed = _parse(link)
    if parsed is None or not _is_ours(parsed, admin_host):
        return None
    path = _artifact_path(parsed)
    return None if path is None else (head, link, tail, path)
