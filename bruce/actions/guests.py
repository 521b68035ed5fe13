"""What a guest may use: the tools ``access.guest_tools`` names (``*`` patterns), and never a tool
of risk high, critical or forbidden (an MCP tool is high by default) nor the owner's own things
(artifacts, the notes folder), whatever the config says. The registry applies ``GuestTools`` to
every turn of a guest (``TurnScope.person``): such a tool is neither offered nor runnable.
``guest_tool_problems`` is the config check: an entry naming a built-in tool a guest can never
have, or naming no tool at all, is refused by ``bruce config check`` and ``bruce run``.
"""

from __future__ import annotations

from collections.abc import Iterable
from fnmatch import fnmatchcase

from bruce.config.people import DEFAULT_GUEST_TOOLS
from bruce.contracts import Risk, ToolContract

__all__ = ["GuestTools", "guest_tool_problems", "OWNER_ONLY", "NEVER_FOR_GUESTS"]

NEVER_FOR_GUESTS = frozenset({Risk.HIGH, Risk.CRITICAL, Risk.FORBIDDEN})
OWNER_ONLY = ("artifact.", "files.")  # the owner's artifacts and notes folder (usage is a command: /usage)


def _owner_only(contract: ToolContract) -> bool:
    return contract.name.startswith(OWNER_ONLY)


def _why_never(contract: ToolContract) -> str | None:
    if contract.risk in NEVER_FOR_GUESTS:
        return f"{contract.name} (risk {contract.risk}): a guest never gets a tool of risk high or critical"
    if _owner_only(contract):
        return f"{contract.name}: the owner's own things (artifacts, the notes folder) are never a guest's"
    return None


class GuestTools:
    """``allows(contract)``: whether a guest may be offered and run this tool."""

    def __init__(self, patterns: Iterable[str] = DEFAULT_GUEST_TOOLS) -> None:
        self.patterns = tuple(patterns)

    def allows(self, contract: ToolContract) -> bool:
        return _why_never(contract) is None and any(fnmatchcase(contract.name, p) for p in self.patterns)


def guest_tool_problems(patterns: Iterable[str], contracts: Iterable[ToolContract]) -> list[str]:
    """One problem per ``access.guest_tools`` entry that names a built-in tool a guest can never
    have, or no tool at all (an ``mcp.`` entry is known once its server connects; a tool of risk
    high it names is still never a guest's)."""
    known = [c for c in contracts if c.server is None]
    problems = []
    for pattern in patterns:
        named = [c for c in known if fnmatchcase(c.name, pattern)]
        if not named and not pattern.startswith("mcp."):
            problems.append(f"access.guest_tools: {pattern!r} names no tool (known tools: "
                            f"{', '.join(sorted(c.name for c in known))})")
        problems += [f"access.guest_tools: {pattern!r} names {why}" for c in named if (why := _why_never(c))]
    return problems
