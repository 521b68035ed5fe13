"""The channel port: what every chat platform adapter (console, Telegram, Discord, web chat)
implements, and the values that cross it. No platform SDK type ever passes this seam.

Inbound: the adapter turns a platform event into an ``IncomingMessage`` and hands it to the
``deliver`` callback it was started with; the callback returns once the message is stored
and returns a handle the adapter may await to know the turn finished (the console does;
network adapters don't need to).
Outbound: ``send_text`` (already split to ``max_message_length``), ``thinking`` (a context
manager held for the whole turn), ``send_confirmation`` (approve/deny controls),
``send_file``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Protocol, runtime_checkable

__all__ = ["IncomingMessage", "ConfirmationRequest", "Channel", "Deliver", "split_text"]


@dataclass(frozen=True, slots=True)
class IncomingMessage:
    channel: str  # "console", "telegram", ...
    chat_id: str  # the platform's conversation id (a Telegram chat id, a Discord channel id)
    sender_id: str  # the platform's user id; checked against the allow-list
    text: str
    platform_message_id: str | None
    timestamp: datetime

    @property
    def conversation_id(self) -> str:
        return f"{self.channel}:{self.chat_id}"


@dataclass(frozen=True, slots=True)
class ConfirmationRequest:
    """A tool call waiting for the user's explicit decision."""

    id: str
    tool_name: str
    risk: str
    summary: str  # what will happen, in one or two lines
    side_effects: str
    preview: str | None  # the dry-run preview, when the tool has one
    expires_at: datetime
    step_up: bool  # True: cannot be approved from chat; approve locally


Deliver = Callable[[IncomingMessage], Awaitable[Awaitable[None] | None]]


@runtime_checkable
class Channel(Protocol):
    name: str
    max_message_length: int

    async def start(self, deliver: Deliver) -> None:
        """Begin receiving; return once receiving has started (it runs in the background)."""
        ...

    async def stop(self) -> None: ...

    async def send_text(self, chat_id: str, text: str) -> None: ...

    def thinking(self, chat_id: str) -> AbstractAsyncContextManager[None]:
        """Show a typing / thinking indicator while the block runs."""
        ...

    async def send_confirmation(self, chat_id: str, request: ConfirmationRequest) -> None: ...

    async def send_file(self, chat_id: str, path: Path, caption: str | None = None) -> None: ...


def split_text(text: str, limit: int) -> list[str]:
    """Split a reply into pieces of at most ``limit`` characters, preferring paragraph, line,
    then word boundaries; never returns an empty piece."""
    if limit <= 0:
        raise ValueError("limit must be positive")
    text = text.strip() or "…"
    pieces: list[str] = []
    while len(text) > limit:
        window = text[:limit]
        cut = max(window.rfind("\n\n"), 0)
        if cut < limit // 2:
            cut = window.rfind("\n")
        if cut < limit // 2:
            cut = window.rfind(" ")
        if cut < limit // 2:
            cut = limit
        pieces.append(text[:cut].rstrip())
        text = text[cut:].lstrip()
    if text:
        pieces.append(text)
    return pieces
