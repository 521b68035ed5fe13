"""The channel port: what every chat platform adapter (console, Telegram, Discord, web chat)
implements, the core's doors it may call, and the values that cross this seam. No platform SDK
type ever passes it.

Inbound: ``start(inbound)`` hands the adapter the core's doors. ``inbound.deliver(message)``
returns once the message is stored (a network adapter acknowledges the platform's update only
then) and returns a handle the adapter may await to know the turn finished.
``inbound.decide(...)`` turns a button press into a decision, under the same rules as
``/approve ID``. The console socket is also started with the owner's ``Operator`` doors
(``OperatorChannel``).
Outbound: ``send_text`` (one piece, already split to ``max_message_length``; platform errors
are raised as ``ChannelSendError``), ``thinking`` (held for the whole turn),
``send_confirmation`` (approve/deny controls), ``send_file``. A channel that can show live
progress also has ``progress(chat_id)`` (see ``bruce.turns.progress``); it replaces ``thinking``. A
channel that cuts replies itself (Discord keeps code fences whole) has ``split(text)``; the
outbox sends and counts those pieces instead of ``split_text``'s. A channel whose platform
drops a repeated send carrying the same key (Discord's ``nonce`` with ``enforce_nonce``) is a
``KeyedChannel``: the outbox sends through its ``*_keyed`` methods with a key made from the
outbound row and the piece, the same after a restart, so a resend after a crash is not doubled.

Media: a message may carry ``attachments`` (voice notes, photos, documents, or an ``OTHER``
such as a sticker), each described by the channel (kind, MIME type, size, name) with a ``ref``
the channel can fetch the bytes from later, even after a restart (a Telegram ``file_id``, a
Discord attachment URL, a web chat upload's id). A channel that can fetch them is a
``MediaChannel``; the core decides what to do with each (``bruce.media``) and fetches only
what it will use, never more than ``max_bytes``. An album (several photos sent together) is
one message with several attachments.
"""

from __future__ import annotations

from collections.abc import Awaitable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, fields
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from bruce.errors import ChannelSendError, MediaFetchError
from bruce.turns.progress import ProgressSink
from bruce.values import AttachmentKind, ConversationId, DecisionOutcome

__all__ = [
    "Attachment",
    "IncomingMessage",
    "ConfirmationRequest",
    "DecisionReport",
    "Inbound",
    "LocalDecision",
    "LocalInbound",
    "Operator",
    "OperatorChannel",
    "Channel",
    "ProgressChannel",
    "SplittingChannel",
    "KeyedChannel",
    "MediaChannel",
    "ChannelSendError",
    "MediaFetchError",
    "split_text",
]


@dataclass(frozen=True, slots=True)
class Attachment:
    """One file or item sent with a message, as the platform described it (nothing fetched yet)."""

    kind: AttachmentKind
    ref: str  # what the channel fetches the bytes with (``MediaChannel.fetch``); survives a restart
    mime: str | None = None  # e.g. "audio/ogg", "image/jpeg", "application/pdf"; None: not given
    size: int | None = None  # bytes, as the platform reports it; None: unknown (checked while fetching)
    name: str | None = None  # the file name, when there is one ("receipt.jpg")
    duration_s: float | None = None  # a voice note's or audio file's length, when the platform says
    transcript: str | None = None  # the platform's own transcript (Telegram Premium); no call is made
    label: str | None = None  # what an OTHER is, in a word or two: "sticker", "video", "location"

    def to_json(self) -> dict[str, Any]:
        """The stored form (the ``messages.attachments`` column holds a list of these)."""
        data = {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}
        return {**data, "kind": str(self.kind)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Attachment:
        known = {f.name: data[f.name] for f in fields(cls) if f.name in data}
        return cls(**{**known, "kind": AttachmentKind(data["kind"])})


@dataclass(frozen=True, slots=True)
class IncomingMessage:
    channel: str  # "console", "telegram", ...
    chat_id: str  # the platform's conversation id (a Telegram chat id, a Discord channel id)
    sender_id: str  # the platform's user id; checked against the allow-list
    text: str
    platform_message_id: str | None
    timestamp: datetime
    private: bool = True  # a one-to-one chat; False in a group: a stranger there is never answered
    sender_name: str | None = None  # the platform's display name, shown to the owner in `bruce pairing list`
    attachments: tuple[Attachment, ...] = ()  # voice notes, photos, files sent with it; ``text`` is their caption

    @property
    def conversation_id(self) -> ConversationId:
        return ConversationId(self.channel, self.chat_id)


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
    expires_shown: str = ""  # ``expires_at`` as the owner reads it (``14:15 CET``, assistant.timezone); "": not shown


@dataclass(frozen=True, slots=True)
class DecisionReport:
    """What a decision did, for the channel to show (edit the request, answer the button)."""

    outcome: DecisionOutcome
    text: str

    @property
    def accepted(self) -> bool:
        """The decision took effect (approved, queued or denied)."""
        return self.outcome in (DecisionOutcome.APPROVED, DecisionOutcome.QUEUED, DecisionOutcome.DENIED)


class Inbound(Protocol):
    """The core's doors for a channel."""

    async def deliver(self, message: IncomingMessage) -> Awaitable[None] | None: ...

    async def decide(
        self, conversation_id: ConversationId, user_id: str, confirmation_id: str, approve: bool,
    ) -> DecisionReport: ...


@dataclass(frozen=True, slots=True)
class LocalDecision:
    """What the owner's decision from the machine (``bruce approve`` / ``deny``) did."""

    outcome: DecisionOutcome
    tool_name: str | None = None
    conversation_id: str | None = None
    status: str | None = None  # the request's state when it was already handled
    runs_here: bool = False  # approved, and this daemon serves its conversation: it runs now


class LocalInbound(Inbound, Protocol):
    """The door only a channel on the owner's machine may use (the console socket, the admin
    page's chat): sending what waited for them while no terminal or page was there."""

    async def resend(self, conversation_id: ConversationId) -> None: ...

    async def pending_requests(self, conversation_id: ConversationId) -> list[ConfirmationRequest]:
        """The conversation's approval requests still waiting for a decision, as they were shown
        (the web chat rebuilds their cards when a page opens)."""
        ...


class Operator(Protocol):
    """What the owner may ask of the running daemon from the machine (``bruce doctor``, ``bruce
    jobs``, ``bruce mcp status``, ``bruce approve``, a terminal attaching), served only by the
    console socket. Built once in the assembly: ``bruce.runtime.control.Control``."""

    def health(self) -> dict[str, str | None]: ...

    async def jobs_changed(self) -> None: ...

    def mcp_status(self) -> list[dict[str, Any]]: ...

    async def decide_locally(self, confirmation_id: str, approve: bool) -> LocalDecision: ...

    async def resend(self, conversation_id: ConversationId) -> None: ...


@runtime_checkable
class OperatorChannel(Protocol):
    """Optional: a channel that also serves the owner's requests (the console socket). The app
    starts it with ``start_operated(inbound, operator)`` instead of ``start(inbound)``."""

    async def start_operated(self, inbound: Inbound, operator: Operator) -> None: ...


@runtime_checkable
class Channel(Protocol):
    name: str
    max_message_length: int

    async def start(self, inbound: Inbound) -> None:
        """Begin receiving; return once receiving has started (it runs in the background)."""
        ...

    async def stop(self) -> None: ...

    async def send_text(self, chat_id: str, text: str) -> None:
        """Send one piece; raise ``ChannelSendError`` when the platform refuses or is unreachable."""
        ...

    def thinking(self, chat_id: str) -> AbstractAsyncContextManager[None]:
        """Show a typing / thinking indicator while the block runs."""
        ...

    async def send_confirmation(self, chat_id: str, request: ConfirmationRequest) -> None: ...

    async def send_file(self, chat_id: str, path: Path, caption: str | None = None) -> None: ...


@runtime_checkable
class ProgressChannel(Protocol):
    """Optional: a channel that shows a turn's progress as well as its platform allows."""

    def progress(self, chat_id: str) -> AbstractAsyncContextManager[ProgressSink]: ...


@runtime_checkable
class SplittingChannel(Protocol):
    """Optional: a channel that cuts a reply into its platform's messages itself."""

    def split(self, text: str) -> list[str]:
        """The reply as pieces ``send_text`` sends one by one; never empty."""
        ...


@runtime_checkable
class KeyedChannel(Protocol):
    """Optional: a channel whose platform creates one message per key. ``key`` (at most 25
    characters, stable across restarts) names one piece of one outbound row; sending the same
    key again within the platform's window answers with the message already made."""

    async def send_text_keyed(self, chat_id: str, text: str, *, key: str) -> None: ...

    async def send_confirmation_keyed(self, chat_id: str, request: ConfirmationRequest, *, key: str) -> None: ...

    async def send_file_keyed(self, chat_id: str, path: Path, caption: str | None, *, key: str) -> None: ...


@runtime_checkable
class MediaChannel(Protocol):
    """Optional: a channel whose messages may carry attachments, and that fetches their bytes."""

    async def fetch(self, attachment: Attachment, *, max_bytes: int) -> bytes:
        """The attachment's bytes. Raise ``MediaFetchError`` (a clear reason) when it is gone,
        larger than ``max_bytes`` (stop reading there), or the platform fails or does not answer."""
        ...


def split_text(text: str, limit: int) -> list[str]:
    """Split a reply into pieces of at most ``limit`` characters, preferring paragraph, line,
    then word boundaries; never returns an empty piece. Only the separator at a cut is dropped,
    so indentation at the start of a piece (code) is kept."""
    if limit <= 0:
        raise ValueError("limit must be positive")
    text = text.strip() or "…"
    pieces: list[str] = []
    while len(text) > limit:
        cut, skip = _cut(text[: limit + 2], limit)  # room for a "\n\n" right after a full piece
        piece = text[:cut].rstrip()
        rest = text[cut + skip:]
        if not piece:  # only blanks before the cut: they are no piece, and no indentation either
            rest = rest.lstrip()
        elif skip and text[cut] == " ":  # a word boundary: the spaces there go
            rest = rest.lstrip(" ")
        if piece:
            pieces.append(piece)
        text = rest.lstrip("\n")  # no piece starts with blank lines; indentation after a line break stays
    if text.strip():
        pieces.append(text)
    return pieces or ["…"]


def _cut(window: str, limit: int) -> tuple[int, int]:
    """Where to cut ``window`` (up to ``limit`` kept) and how many separator characters to drop."""
    floor = max(limit // 2, 1)
    for separator in ("\n\n", "\n", " "):
        at = window.rfind(separator, 0, limit + len(separator))  # a separator right after a full piece counts
        if at >= floor:
            return at, len(separator)
    return limit, 0
