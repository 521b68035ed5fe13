"""What a remote tool is called: its contract name ``mcp.<server>.<tool>``, the wire name the
model sees (``[a-zA-Z0-9_-]{1,64}``, which every provider accepts), and its description, which
is the server's text and so untrusted: control characters out, length capped."""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Collection

__all__ = ["contract_name", "wire_name", "description", "MAX_DESCRIPTION"]

MAX_WIRE = 64
MAX_DESCRIPTION = 1024
_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")


def contract_name(server: str, tool: str, siblings: Collection[str] = ()) -> str:
    """``mcp.<server>.<tool>``; a tool already named ``<server>.x`` (the calendar server's
    ``calendar.free_busy``) is not prefixed twice, unless the server also has a tool ``x``."""
    short = tool.removeprefix(f"{server}.")
    if short != tool and (not short or short in siblings):
        short = tool
    return f"mcp.{server}.{short}"


def wire_name(server: str, tool: str, *, taken: Collection[str] = ()) -> str:
    """``mcp_<server>_<tool>``. A name that had to be made safe or shortened, or that another
    tool already has, ends in a hash of the real one, so two tools never share a wire name."""
    plain = f"mcp_{server}_{tool}"
    if len(plain) <= MAX_WIRE and not _UNSAFE.search(plain) and plain not in taken:
        return plain
    digest = hashlib.sha256(f"{server}\x00{tool}".encode()).hexdigest()
    for size in (8, 16, 64):
        hashed = f"{_UNSAFE.sub('_', plain)[: MAX_WIRE - size - 1]}_{digest[:size]}"
        if hashed not in taken:
            return hashed
    raise ValueError(f"no free wire name for {server}/{tool}")  # a sha-256 collision


def description(server: str, text: str | None, tool: str) -> str:
    """The server's description of a tool, prefixed with the server's name, as plain text of at
    most ``MAX_DESCRIPTION`` characters. It informs the model; it never sets risk or policy."""
    clean = "".join(" " if unicodedata.category(c)[0] == "C" else c for c in (text or "").strip())
    clean = re.sub(r"\s+", " ", clean).strip() or f"The {tool} tool."
    head = f"[MCP server {server}] "
    room = MAX_DESCRIPTION - len(head)
    return head + (clean if len(clean) <= room else clean[: room - 1] + "…")
