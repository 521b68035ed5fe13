"""The outbox: every reply is stored first, then split, sent and marked, and never dropped.

``post`` stores a reply and sends it; ``flush`` sends what is stored and unsent for one
conversation, oldest first, so replies keep their order: a reply waits behind an earlier one
that the platform could not take for now. A channel raises ``ChannelSendError``: a retryable
failure is tried again with exponential backoff (or the platform's ``retry_after``, when it is
short enough), up to ``send_retries`` times; then, or on a permanent failure, the reply stays
``unsent`` with its error, and is tried again at the next start and every
``resend_interval_s``. A permanent failure (the platform refused that message) does not hold
back the replies after it: one bad message must not silence a conversation. A platform wait longer
than ``max_retry_after_s`` is stored (``retry_at``) and respected by every later try. An
unsent reply older than ``resend_max_age_s`` is given up (``failed``, logged). Each piece that
went out is counted in the row as soon as the platform has answered, before anything else runs,
so a resend never repeats a piece the row counts. Only a crash between the platform's answer and
that write can repeat one; a ``KeyedChannel`` gets each piece with its ``send_key`` (the same
after a restart), so a platform that enforces it (Discord's nonce) makes no second message.

It is the one outbound door: an approval request with its buttons (``post_confirmation``) and a
file (``post_file``) are outbound rows too (``payload_kind``, with a JSON ``payload``), queued
in the same conversation order as the replies and sent by ``send_confirmation`` / ``send_file``
under the same retries, backoff and resends. One difference: a file the platform refused for
good (or that can no longer be read) is given up at once (``failed``, logged): sending the same
document again would be refused again, and the reply that came before it has its link.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any

import structlog

from bruce.channel import (
    Channel,
    ChannelSendError,
    ConfirmationRequest,
    KeyedChannel,
    SplittingChannel,
    split_text,
)
from bruce.clock import Clock, parse_iso, utc_iso
from bruce.errors import StoreError
from bruce.records import StoredMessage
from bruce.store import Store
from bruce.values import ConversationId, MessageKind, MessageStatus, PayloadKind

__all__ = ["Outbox", "OutboxSettings", "send_key"]

log = structlog.get_logger(__name__)

_Send = Callable[[], Awaitable[None]]  # one piece of an outbound row, sent


@dataclass(frozen=True, slots=True)
class OutboxSettings:
    send_retries: int = 5
    backoff_s: float = 1.0
    max_backoff_s: float = 30.0
    max_retry_after_s: float = 60.0  # a longer platform wait is left to the background resend
    resend_interval_s: float = 60.0
    resend_max_age_s: float = 86400.0  # an unsent reply older than this is given up (status failed)


class Outbox:
    def __init__(self, *, store: Store, channels: Mapping[str, Channel], clock: Clock,
                 settings: OutboxSettings | None = None) -> None:
        self._outbound = store.outbound
        self._channels = channels
        self._clock = clock
        self._settings = settings or OutboxSettings()
        self._locks: dict[ConversationId, asyncio.Lock] = {}

    @property
    def resend_interval_s(self) -> float:
        return self._settings.resend_interval_s

    async def post(
        self, conversation_id: ConversationId, text: str, *, kind: MessageKind = MessageKind.CHAT,
        turn_id: str | None = None,
        inbound_id: int | None = None, inbound_status: MessageStatus = MessageStatus.DONE,
    ) -> int:
        """Store a reply (closing ``inbound_id`` in the same transaction), then send it."""
        reply_id = await asyncio.shield(self._outbound.add(
            str(conversation_id), text, turn_id=turn_id, kind=kind, inbound_id=inbound_id, inbound_status=inbound_status))
        await self.flush(conversation_id)
        return reply_id

    async def pending_requests(self, conversation_id: ConversationId) -> list[ConfirmationRequest]:
        """The conversation's approval requests still waiting for a decision, as they were shown."""
        rows = await self._outbound.pending_confirmations(str(conversation_id), now=utc_iso(self._clock.now()))
        return [_confirmation(_payload(row)) for row in rows]

    async def post_confirmation(self, conversation_id: ConversationId, request: ConfirmationRequest) -> int:
        """Store an approval request with what its buttons need, then send it after what was queued before."""
        row_id = await asyncio.shield(self._outbound.add(
            str(conversation_id), f"approval request {request.id}: {request.tool_name}", turn_id=None,
            kind=MessageKind.NOTICE, payload_kind=PayloadKind.CONFIRMATION, payload=_confirmation_json(request)))
        await self.flush(conversation_id)
        return row_id

    async def post_file(self, conversation_id: ConversationId, path: Path, caption: str | None = None) -> int:
        """Store a file to send (its path and caption), then send it after what was queued before."""
        row_id = await asyncio.shield(self._outbound.add(
            str(conversation_id), f"file {path.name}", turn_id=None, kind=MessageKind.NOTICE,
            payload_kind=PayloadKind.FILE, payload=json.dumps({"path": str(path), "caption": caption})))
        await self.flush(conversation_id)
        return row_id

    async def flush(self, conversation: ConversationId) -> None:
        """Send every stored, unsent outbound row (reply, approval request, file) of this
        conversation, oldest first; stop at the first that cannot go out, so that order is kept."""
        channel = self._channels.get(conversation.channel)
        if channel is None:
            log.warning("outbox.no_channel", conversation=str(conversation))
            return
        try:
            async with self._locks.setdefault(conversation, asyncio.Lock()):
                for message in await self._outbound.unsent(str(conversation)):
                    if await self._give_up(message):
                        continue
                    failure = await self._due(message) or await self._send(channel, conversation.chat_id, message)
                    if failure is not None and failure.retryable:
                        return  # the platform cannot take it now: later replies wait behind it
        except StoreError:  # the replies stay stored; the next flush or resend continues
            log.exception("outbox.store_failed", conversation=str(conversation))

    async def _due(self, message: StoredMessage) -> ChannelSendError | None:
        """The platform asked us to wait past now (a long ``retry_after``): not yet."""
        if message.retry_at is None or message.retry_at <= utc_iso(self._clock.now()):
            return None
        return ChannelSendError("waiting for the platform's retry_after", retryable=True)

    async def _give_up(self, message: StoredMessage) -> bool:
        age = self._clock.now() - parse_iso(message.created_at)
        if message.status is not MessageStatus.UNSENT or age.total_seconds() <= self._settings.resend_max_age_s:
            return False
        await self._outbound.record_send(message.id, status=MessageStatus.FAILED, parts_sent=message.parts_sent,
                                         attempts=0, error=message.send_error)
        log.error("outbox.given_up", message_id=message.id, reason=message.send_error)
        return True

    async def resend_all(self) -> None:
        """Try every unsent reply of the channels this process serves (start-up and background)."""
        for stored in await self._outbound.conversations_with_unsent():
            conversation = ConversationId.parse(stored)
            if conversation.channel in self._channels:
                await self.flush(conversation)

    async def _send(self, channel: Channel, chat_id: str, message: StoredMessage) -> ChannelSendError | None:
        """Send the rest of one outbound row; the failure that left it unsent, or None once it is sent."""
        try:
            pieces = _pieces(channel, chat_id, message)
        except (ValueError, KeyError, TypeError):  # a payload this Bruce cannot read: it never will
            log.exception("outbox.unreadable_payload", message_id=message.id)
            error = ChannelSendError("unreadable payload", retryable=False)
            await asyncio.shield(self._outbound.record_send(
                message.id, status=MessageStatus.FAILED, parts_sent=message.parts_sent, attempts=0, error=error.reason))
            return error
        sent, failures = min(message.parts_sent, len(pieces)), 0
        while sent < len(pieces):
            try:
                await pieces[sent]()
            except ChannelSendError as exc:
                error = exc
            except Exception as exc:  # a channel bug (or a file gone): not worth retrying at once, kept for later
                error = _unexpected(message, exc)
            else:
                sent += 1
                if sent < len(pieces):
                    await asyncio.shield(self._outbound.record_part_sent(message.id, sent))
                continue
            failures += 1
            delay = self._delay(error, failures)
            if delay is None:
                final = message.payload_kind is PayloadKind.FILE and not error.retryable
                await asyncio.shield(self._outbound.record_send(
                    message.id, status=MessageStatus.FAILED if final else MessageStatus.UNSENT, parts_sent=sent,
                    attempts=failures, error=error.reason, retry_at=self._retry_at(error)))
                log.warning("outbox.file_refused" if final else "outbox.unsent", message_id=message.id,
                            reason=error.reason, attempts=failures)
                return error
            log.info("outbox.retry", message_id=message.id, reason=error.reason, wait_s=delay)
            await self._clock.sleep(delay)
        await asyncio.shield(self._outbound.record_send(
            message.id, status=MessageStatus.SENT, parts_sent=sent, attempts=failures + 1, error=None))
        return None

    def _retry_at(self, error: ChannelSendError) -> str | None:
        if not error.retryable or error.retry_after is None:
            return None
        return utc_iso(self._clock.now() + timedelta(seconds=error.retry_after))

    def _delay(self, error: ChannelSendError, failures: int) -> float | None:
        """How long to wait before the next try, or None to stop trying for now."""
        s = self._settings
        if not error.retryable or failures > s.send_retries:
            return None
        wait = error.retry_after
        if wait is not None:
            return wait if wait <= s.max_retry_after_s else None
        return min(s.backoff_s * 2.0 ** (failures - 1), s.max_backoff_s)


def _pieces(channel: Channel, chat_id: str, message: StoredMessage) -> list[_Send]:
    """What sending this row takes, one call per piece: a reply's pieces, or the one request or file.
    On a ``KeyedChannel`` each piece carries its key (``send_key``)."""
    keyed = channel if isinstance(channel, KeyedChannel) else None
    if message.payload_kind is PayloadKind.CONFIRMATION:
        request = _confirmation(_payload(message))
        if keyed is not None:
            return [partial(keyed.send_confirmation_keyed, chat_id, request, key=send_key(message.id, 0))]
        return [partial(channel.send_confirmation, chat_id, request)]
    if message.payload_kind is PayloadKind.FILE:
        file = _payload(message)
        path, caption = Path(str(file["path"])), None if file["caption"] is None else str(file["caption"])
        if keyed is not None:
            return [partial(keyed.send_file_keyed, chat_id, path, caption, key=send_key(message.id, 0))]
        return [partial(channel.send_file, chat_id, path, caption)]
    texts = (channel.split(message.text) if isinstance(channel, SplittingChannel)
             else split_text(message.text, channel.max_message_length))
    if keyed is not None:
        return [partial(keyed.send_text_keyed, chat_id, text, key=send_key(message.id, i)) for i, text in enumerate(texts)]
    return [partial(channel.send_text, chat_id, text) for text in texts]


def send_key(message_id: int, piece: int) -> str:
    """The key of one piece of one outbound row: the same for every try, before and after a
    restart, and different for every other piece of this database (at most 25 characters)."""
    return f"bruce.{message_id}.{piece}"


def _unexpected(message: StoredMessage, exc: Exception) -> ChannelSendError:
    """A failure that is no ``ChannelSendError``: a file that cannot be read, or a channel bug."""
    if message.payload_kind is PayloadKind.FILE and isinstance(exc, OSError):
        log.warning("outbox.file_unreadable", message_id=message.id, error=type(exc).__name__)
    else:
        log.exception("outbox.channel_crashed", message_id=message.id)
    return ChannelSendError(type(exc).__name__, retryable=False)


def _payload(message: StoredMessage) -> dict[str, Any]:
    value = json.loads(message.payload or "")
    if not isinstance(value, dict):
        raise ValueError("an outbound payload is a JSON object")
    return value


def _confirmation_json(request: ConfirmationRequest) -> str:
    return json.dumps({"id": request.id, "tool_name": request.tool_name, "risk": request.risk,
                       "summary": request.summary, "side_effects": request.side_effects, "preview": request.preview,
                       "expires_at": utc_iso(request.expires_at), "step_up": request.step_up,
                       "expires_shown": request.expires_shown})


def _confirmation(payload: dict[str, Any]) -> ConfirmationRequest:
    preview = payload["preview"]
    return ConfirmationRequest(
        id=str(payload["id"]), tool_name=str(payload["tool_name"]), risk=str(payload["risk"]),
        summary=str(payload["summary"]), side_effects=str(payload["side_effects"]),
        preview=None if preview is None else str(preview), expires_at=parse_iso(str(payload["expires_at"])),
        step_up=bool(payload["step_up"]), expires_shown=str(payload.get("expires_shown") or ""))
