"""Chat commands that are control, not conversation: ``/approve ID``, ``/deny ID``, ``/new``, ``/jobs``,
``/usage``, ``/memory`` (what Bruce remembers) and ``/forget ID`` (forget one fact).

They are parsed here, in code, and never reach the model. A plain "yes" is only text: the
model may not turn it into an approval, because a control signal must not travel in text
that a model (or a prompt injection in a web page it read) can produce. ``/new`` starts a
fresh session in the conversation (anything typed after it is ignored); ``/jobs`` lists the
conversation's scheduled jobs; ``/usage`` shows the model's use and cost of the last days.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

__all__ = ["Command", "CommandName", "parse_command"]

_DECISION = re.compile(r"^/(approve|deny)(?:@\w+)?(?:\s+([0-9a-fA-F]{8}))?\s*$")
_NEW = re.compile(r"^/new(?:@\w+)?(?=\s|$)")
_JOBS = re.compile(r"^/jobs(?:@\w+)?(?=\s|$)")
_USAGE = re.compile(r"^/usage(?:@\w+)?(?=\s|$)")
_MEMORY = re.compile(r"^/memory(?:@\w+)?(?=\s|$)")
_FORGET = re.compile(r"^/forget(?:@\w+)?(?:\s+(\d{1,12}))?\s*$")


class CommandName(StrEnum):
    APPROVE = "approve"
    DENY = "deny"
    NEW = "new"
    JOBS = "jobs"
    USAGE = "usage"
    MEMORY = "memory"
    FORGET = "forget"


@dataclass(frozen=True, slots=True)
class Command:
    name: CommandName
    confirmation_id: str | None  # None: the id is missing or malformed (and for /new, /jobs); /forget: the fact id


def parse_command(text: str) -> Command | None:
    stripped = text.strip()
    if stripped.startswith(("/approve", "/deny")):  # a malformed decision still is one: its usage is shown
        match = _DECISION.match(stripped)
        if match is None:
            return Command(CommandName.APPROVE if stripped.startswith("/approve") else CommandName.DENY, None)
        return Command(CommandName(match.group(1)), match.group(2).lower() if match.group(2) else None)
    if _JOBS.match(stripped) is not None:
        return Command(CommandName.JOBS, None)
    if _USAGE.match(stripped) is not None:
        return Command(CommandName.USAGE, None)
    if _MEMORY.match(stripped) is not None:
        return Command(CommandName.MEMORY, None)
    if stripped.startswith("/forget") and (stripped == "/forget" or not stripped[7:8].isalpha()):
        match = _FORGET.match(stripped)  # a malformed /forget still is one: its usage is shown
        return Command(CommandName.FORGET, match.group(1) if match and match.group(1) else None)
    if _NEW.match(stripped) is None:  # "/newsletter" is text
        return None
    return Command(CommandName.NEW, None)
