"""A recording channel: what Bruce sent, and when the thinking indicator was on.

``failures`` scripts send failures: each ``send_text`` pops the first one and raises it (a
``ChannelSendError``, or any exception to play a channel bug; None lets that send through);
``file_failures`` does the same for ``send_file``, and ``files`` records each file with how many
texts had been sent before it; ``confirmation_failures`` and ``texts_before_confirmation`` do the
same for ``send_confirmation``. It is a ``MediaChannel``: ``fetch`` serves the bytes registered in
``media`` for an attachment's ref (or raises the exception registered there; ``HANG`` never
answers), records each fetch in ``fetched``, and refuses a file over ``max_bytes`` as a platform
would. ``ProgressRecordingChannel``
also shows progress, and records every event it was shown.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

from bruce.channel import Attachment, ConfirmationRequest, Inbound
from bruce.errors import ChannelSendError, MediaFetchError
from bruce.turns.progress import ProgressEvent

HANG = object()  # registered in ``RecordingChannel.media``: that fetch never answers


class RecordingChannel:
    def __init__(self, name: str = "test", max_message_length: int = 4096) -> None:
        self.name = name
        self.max_message_length = max_message_length
        self.sent: list[tuple[str, str]] = []
        self.attempts = 0  # every send_text call, failed or not
        self.confirmations: list[tuple[str, ConfirmationRequest]] = []
        self.files: list[tuple[str, Path, str | None]] = []
        self.texts_before_file: list[int] = []  # for each file sent: len(sent) at that moment
        self.file_failures: list[BaseException | None] = []
        self.texts_before_confirmation: list[int] = []  # for each request sent: len(sent) at that moment
        self.confirmation_failures: list[BaseException | None] = []
        self.thinking_spans: list[str] = []
        self.thinking_now = 0  # how many thinking indicators are on at this moment
        self.inbound: Inbound | None = None
        self.failures: list[BaseException | None] = []  # None: that send goes through
        self.fail_sends = False  # every send fails, permanently
        self.refused: set[str] = set()  # texts the platform always rejects, permanently
        self.media: dict[str, bytes | BaseException | object] = {}  # ref -> the bytes fetch serves, or what it raises
        self.fetched: list[tuple[str, int]] = []  # (ref, max_bytes) of every fetch, in order

    async def start(self, inbound: Inbound) -> None:
        self.inbound = inbound

    async def stop(self) -> None:
        self.inbound = None

    async def send_text(self, chat_id: str, text: str) -> None:
        self.attempts += 1
        if self.fail_sends:
            raise ChannelSendError("platform unreachable", retryable=False)
        if text in self.refused:
            raise ChannelSendError("message rejected", retryable=False)
        failure = self.failures.pop(0) if self.failures else None
        if failure is not None:
            raise failure
        self.sent.append((chat_id, text))

    @asynccontextmanager
    async def thinking(self, chat_id: str) -> AsyncIterator[None]:
        self.thinking_spans.append(chat_id)
        self.thinking_now += 1
        try:
            yield
        finally:
            self.thinking_now -= 1

    async def send_confirmation(self, chat_id: str, request: ConfirmationRequest) -> None:
        failure = self.confirmation_failures.pop(0) if self.confirmation_failures else None
        if failure is not None:
            raise failure
        self.confirmations.append((chat_id, request))
        self.texts_before_confirmation.append(len(self.sent))

    async def send_file(self, chat_id: str, path: Path, caption: str | None = None) -> None:
        failure = self.file_failures.pop(0) if self.file_failures else None
        if failure is not None:
            raise failure
        self.files.append((chat_id, path, caption))
        self.texts_before_file.append(len(self.sent))

    async def fetch(self, attachment: Attachment, *, max_bytes: int) -> bytes:
        self.fetched.append((attachment.ref, max_bytes))
        served = self.media.get(attachment.ref)
        if served is HANG:
            await asyncio.Event().wait()
        if isinstance(served, BaseException):
            raise served
        if not isinstance(served, bytes):
            raise MediaFetchError("the file is no longer available")
        if len(served) > max_bytes:
            raise MediaFetchError(f"the file is larger than {max_bytes} bytes")
        return served

    def texts(self, chat_id: str | None = None) -> list[str]:
        return [t for c, t in self.sent if chat_id is None or c == chat_id]


class _Recorder:
    def __init__(self, events: list[ProgressEvent]) -> None:
        self._events = events

    async def emit(self, event: ProgressEvent) -> None:
        self._events.append(event)


class ProgressRecordingChannel(RecordingChannel):
    def __init__(self, name: str = "test", max_message_length: int = 4096) -> None:
        super().__init__(name, max_message_length)
        self.events: list[ProgressEvent] = []

    @asynccontextmanager
    async def progress(self, chat_id: str) -> AsyncIterator[_Recorder]:
        async with self.thinking(chat_id):
            yield _Recorder(self.events)


class KeyedRecordingChannel(RecordingChannel):
    """A channel whose platform makes one message per key, as Discord does with an enforced nonce:
    a send with a key it has seen is answered without a second message. ``keys`` holds every key
    given, in order; ``before_send`` hooks see each key just before its text goes out."""

    def __init__(self, name: str = "test", max_message_length: int = 4096) -> None:
        super().__init__(name, max_message_length)
        self.keys: list[str] = []
        self._made: set[str] = set()
        self.before_send: list[Callable[[str], None]] = []  # run with the key before each keyed text goes out

    async def send_text_keyed(self, chat_id: str, text: str, *, key: str) -> None:
        self.keys.append(key)
        for hook in self.before_send:
            hook(key)
        if key not in self._made:
            await self.send_text(chat_id, text)
            self._made.add(key)

    async def send_confirmation_keyed(self, chat_id: str, request: ConfirmationRequest, *, key: str) -> None:
        self.keys.append(key)
        if key not in self._made:
            await self.send_confirmation(chat_id, request)
            self._made.add(key)

    async def send_file_keyed(self, chat_id: str, path: Path, caption: str | None, *, key: str) -> None:
        self.keys.append(key)
        if key not in self._made:
            await self.send_file(chat_id, path, caption)
            self._made.add(key)
