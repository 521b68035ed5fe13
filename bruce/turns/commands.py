"""Chat commands: the one table (``COMMANDS``) and the one parser (``parse_command``).

Every list of commands a user sees is made from the table: Telegram's command list
(``setMyCommands``), Discord's slash commands, and ``/help`` in every channel (``help_text``).

Commands are control, not conversation: ``/approve ID``, ``/deny ID``, ``/new``, ``/jobs``,
``/usage``, ``/memory`` (what Bruce remembers), ``/forget ID`` (forget one fact) and ``/help``
are parsed here, in code, and never reach the model. A plain "yes" is only text: the model may
not turn it into an approval, because a control signal must not travel in text that a model (or
a prompt injection in a web page it read) can produce. ``/new`` starts a fresh session in the
conversation (anything typed after it is ignored); ``/jobs`` lists the conversation's scheduled
jobs; ``/usage`` shows the model's use and cost of the last days. ``/id`` is about the user's
account on a chat platform: Telegram and Discord answer it themselves (to anyone, so a new user
learns their id); where it reaches the core (the console, the web chat, a platform that passes it
on) the core answers it, so every channel knows every command of the table and none reaches the model.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

__all__ = ["COMMANDS", "Command", "CommandName", "CommandSpec", "help_text", "parse_command"]

_DECISION = re.compile(r"^/(approve|deny)(?:@\w+)?(?:\s+([0-9a-fA-F]{8}))?\s*$")
_FORGET = re.compile(r"^/forget(?:@\w+)?(?:\s+(\d{1,12}))?\s*$")
_BARE = re.compile(r"^/(\w+)(?:@\w+)?(?=\s|$)")  # a command with no argument; what follows is ignored


@dataclass(frozen=True, slots=True)
class CommandSpec:
    """One chat command as users see it."""

    name: str
    argument: str | None  # what follows the name ("ID"), or None
    description: str  # one line; "{platform}" is the chat platform's name ("Telegram")
    in_menu: bool  # a one-tap command (Discord's slash tree); Telegram's list names every command
    ack: str = "Got it."  # said at once when a menu passes it on, before the answer arrives
    platform_only: bool = False  # about the user's platform account: that platform's channel answers it first
    elsewhere: str | None = None  # the description where there is no platform (the console, the web chat)

    @property
    def usage(self) -> str:
        """How it is typed: ``/approve ID``."""
        return f"/{self.name} {self.argument}" if self.argument else f"/{self.name}"

    def describe(self, platform: str = "") -> str:
        if not platform and self.elsewhere:
            return self.elsewhere
        return self.description.format(platform=platform)

    def menu_line(self, platform: str = "") -> str:
        """The description in a command list, with how to type a command that takes an argument."""
        return f"{self.describe(platform)}: {self.usage}" if self.argument else self.describe(platform)


COMMANDS: tuple[CommandSpec, ...] = (
    CommandSpec("help", None, "what I can do", in_menu=True),
    CommandSpec("id", None, "your {platform} user id, for the allow-list", in_menu=True, platform_only=True,
                elsewhere="your user id on Telegram or Discord, for the allow-list (ask the bot there)"),
    CommandSpec("approve", "ID", "approve a pending request", in_menu=False),
    CommandSpec("deny", "ID", "deny a pending request", in_menu=False),
    CommandSpec("new", None, "start a fresh conversation (a summary of this one is kept)", in_menu=True,
                ack="Starting a fresh conversation…"),
    CommandSpec("jobs", None, "your reminders and scheduled jobs, with their next run", in_menu=True,
                ack="Listing your scheduled jobs…"),
    CommandSpec("usage", None, "model calls, tokens and cost of the last days", in_menu=True,
                ack="Adding up the model's use…"),
    CommandSpec("memory", None, "what I remember about you", in_menu=False),
    CommandSpec("forget", "ID", "forget one thing I remember", in_menu=False),
)


class CommandName(StrEnum):
    """The commands the core answers: every entry of ``COMMANDS``."""

    APPROVE = "approve"
    DENY = "deny"
    NEW = "new"
    JOBS = "jobs"
    USAGE = "usage"
    MEMORY = "memory"
    FORGET = "forget"
    HELP = "help"
    ID = "id"


_NO_ARGUMENT = frozenset(CommandName(s.name) for s in COMMANDS if s.argument is None)


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
    if stripped.startswith("/forget") and (stripped == "/forget" or not stripped[7:8].isalpha()):
        match = _FORGET.match(stripped)  # a malformed /forget still is one: its usage is shown
        return Command(CommandName.FORGET, match.group(1) if match and match.group(1) else None)
    bare = _BARE.match(stripped)  # "/newsletter" is text
    if bare is None or bare.group(1) not in _NO_ARGUMENT:
        return None
    return Command(CommandName(bare.group(1)), None)


def help_text(assistant: str, *, about: str, platform: str | None = None) -> str:
    """The answer to ``/help``: who answers, ``about`` writing to them on this channel, and every
    command of the table (``/id`` described for this ``platform``, or for none)."""
    lines = [f"I'm {assistant}, your assistant. {about}", "", "Commands:"]
    lines += [f"{spec.usage}: {spec.describe(platform or '')}" for spec in COMMANDS]
    return "\n".join(lines)
