"""Grounding checks on the model's final text, done in code.

A link to one of our own artifacts (``/artifacts/...`` on the admin page, with or without a
scheme, in any letter case) must have been returned as a ``url`` field by a successful tool call
in this same turn. Otherwise the model made it up: the link is removed and the user is told it
could not be produced. URLs that merely appear in tool output text (a web page Bruce read, say)
do not count: only a tool's own ``url`` result vouches for a link.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import structlog

from bruce.contracts import ToolResult
from bruce.texts import UNGROUNDED_LINK

__all__ = ["GroundingReport", "check_links", "produced_urls"]

log = structlog.get_logger(__name__)

_TRAILING = ".,;:!?)]}'\""
# anything that may be a link to our artifacts: a URL, a bare host[:port]/artifacts/..., or a path
_CANDIDATE = re.compile(
    r"""(?:https?://|\b(?:localhost|127\.0\.0\.1|\[::1\]|[\w.-]+:\d+)(?=/))?[^\s<>()"'\[\]]*/artifacts/[^\s<>()"'\[\]]*""",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class GroundingReport:
    text: str
    removed: tuple[str, ...]


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


def _artifact_path(link: str) -> str | None:
    """The ``/artifacts/...`` path a link points at, or None if it is not one of ours."""
    text = link if "://" in link or link.startswith("/") else f"http://{link}"
    parts = urlsplit(text)
    path = parts.path
    if not path.lower().startswith("/artifacts/"):
        return None
    return "/artifacts/" + path[len("/artifacts/"):]


def produced_urls(results: Iterable[ToolResult]) -> set[str]:
    """Artifact paths vouched for by successful tool calls (their ``url`` fields)."""
    found = set()
    for result in results:
        if result.ok:
            for url in _url_fields(result.output):
                path = _artifact_path(url)
                if path:
                    found.add(path)
    return found


def _is_ours(link: str, admin_base: str) -> bool:
    admin = urlsplit(admin_base)
    text = link if "://" in link or link.startswith("/") else f"http://{link}"
    parts = urlsplit(text)
    if not parts.netloc:
        return True  # a bare /artifacts/... path
    host = (parts.hostname or "").lower()
    return host in {"localhost", "127.0.0.1", "::1", (admin.hostname or "").lower()}


def check_links(
    text: str, results: Iterable[ToolResult], *, admin_base: str, existing: set[str] | None = None,
) -> GroundingReport:
    """``existing``: the artifact paths that really exist (from the store); a ``url`` a tool
    returned still has to point at one of them (a search result can carry any URL)."""
    produced = produced_urls(results)
    if existing is not None:
        produced &= existing
    removed: list[str] = []

    def replace(match: re.Match[str]) -> str:
        raw = match.group(0)
        link = raw.rstrip(_TRAILING)
        tail = raw[len(link):]
        path = _artifact_path(link)
        if path is None or not _is_ours(link, admin_base) or path in produced:
            return raw
        removed.append(link)
        return "[link removed]" + tail

    checked = _CANDIDATE.sub(replace, text)
    if removed:
        log.warning("grounding.link_removed", urls=removed)
        checked = f"{checked}\n\n{UNGROUNDED_LINK}"
    return GroundingReport(checked, tuple(removed))
