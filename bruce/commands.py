"""Chat commands that are control, not conversation: ``/approve ID`` and ``/deny ID``.

They are parsed here, in code, and never reach the model. A plain "yes" is only text: the
model may not turn it into an approval, because a control signal must not travel in text
that a model (or a prompt injection in a web page it read) can produce.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Command", "parse_command"]

_COMMAND = re.compile(r"^/(approve|deny)(?:@\w+)?(?:\s+([0-9a-fA-F]{8}))?\s*$")


@dataclass(frozen=True, slots=True)
class Command:
    name: str  # "approve" | "deny"
    confirmation_id: str | None  # None: the id is missing or malformed


def parse_command(text: str) -> Command | None:
    stripped = text.strip()
    if not stripped.startswith(("/approve", "/deny")):
        return None
    match = _COMMAND.match(stripped)
    if match is None:
        name = "approve" if stripped.startswith("/approve") else "deny"
        return Command(name, None)
    return Command(match.group(1), match.group(2).lower() if match.group(2) else None)
