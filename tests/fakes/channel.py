"""A recording channel: what Bruce sent, and when the thinking indicator was on."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from bruce.channel import ConfirmationRequest, Deliver


class RecordingChannel:
    def __init__(self, name: str = "test", max_message_length: int = 4096) -> None:
        self.name = name
        self.max_message_length = max_message_length
        self.sent: list[tuple[str, str]] = []
        self.confirmations: list[tuple[str, ConfirmationRequest]] = []
        self.files: list[tuple[str, Path, str | None]] = []
        self.thinking_spans: list[str] = []
        self.thinking_now = 0  # how many thinking indicators are on at this moment
        self.deliver: Deliver | None = None
        self.fail_sends = False

    async def start(self, deliver: Deliver) -> None:
        self.deliver = deliver

    async def stop(self) -> None:
        self.deliver = None

    async def send_text(self, chat_id: str, text: str) -> None:
        if self.fail_sends:
            raise ConnectionError("platform unreachable")
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
        self.confirmations.append((chat_id, request))

    async def send_file(self, chat_id: str, path: Path, caption: str | None = None) -> None:
        self.files.append((chat_id, path, caption))

    def texts(self, chat_id: str | None = None) -> list[str]:
        return [t for c, t in self.sent if chat_id is None or c == chat_id]
