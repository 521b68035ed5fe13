"""Grounding checks on the model's final text, done in code.

A link to one of our own artifacts (``/artifacts/...``) or to anything under the admin page's
base URL must have been returned by a successful tool call in this same turn. Otherwise the
model made it up: the link is removed and the user is told it could not be produced.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import structlog

from bruce.contracts import ToolResult

__all__ = ["GroundingReport", "check_links", "urls_in_results"]

log = structlog.get_logger(__name__)

UNGROUNDED_NOTE = "(I removed a link I could not actually produce: no tool created it in this turn.)"
_URL = re.compile(r"""(?:https?://[^\s<>()"'\]\[]+|(?<![\w/.])/artifacts/[^\s<>()"'\]\[]+)""")
_TRAILING = ".,;:!?)]}'\""


@dataclass(frozen=True, slots=True)
class GroundingReport:
    text: str
    removed: tuple[str, ...]


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _strings(v)


def urls_in_results(results: Iterable[ToolResult]) -> set[str]:
    """Every URL-like string inside the outputs of successful tool calls."""
    found: set[str] = set()
    for result in results:
        if not result.ok:
            continue
        for text in _strings(result.output if not isinstance(result.output, str) else [result.output]):
            found.update(m.rstrip(_TRAILING) for m in _URL.findall(text))
    return found


_LOCAL_ARTIFACT = re.compile(r"^https?://(localhost|127\.0\.0\.1|\[::1\])(:\d+)?/artifacts/")


def _is_ours(url: str, admin_base: str) -> bool:
    return (
        url.startswith("/artifacts/")
        or url.startswith(admin_base.rstrip("/") + "/")
        or bool(_LOCAL_ARTIFACT.match(url))
    )


def check_links(text: str, results: Iterable[ToolResult], *, admin_base: str) -> GroundingReport:
    produced = urls_in_results(results)
    produced_paths = {re.sub(r"^https?://[^/]+", "", u) for u in produced}
    removed: list[str] = []

    def replace(match: re.Match[str]) -> str:
        raw = match.group(0)
        url = raw.rstrip(_TRAILING)
        tail = raw[len(url):]
        if not _is_ours(url, admin_base):
            return raw
        path = re.sub(r"^https?://[^/]+", "", url)
        if url in produced or (path.startswith("/artifacts/") and path in produced_paths):
            return raw
        removed.append(url)
        return "[link removed]" + tail

    checked = _URL.sub(replace, text)
    if removed:
        log.warning("grounding.link_removed", urls=removed)
        checked = f"{checked}\n\n{UNGROUNDED_NOTE}"
    return GroundingReport(checked, tuple(removed))
