"""The channel a case talks through: it sends nothing anywhere and keeps what Bruce showed (the
replies are read back from the case's database; the approval requests only pass here)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from bruce.channel import ConfirmationRequest, Inbound

__all__ = ["CaptureChannel", "CHANNEL"]

CHANNEL = "eval"


class CaptureChannel:
    name = CHANNEL
    max_message_length = 100_000

    def __init__(self) -> None:
        self.texts: list[tuple[str, str]] = []
        self.confirmations: list[ConfirmationRequest] = []
        self.files: list[Path] = []

    async def start(self, inbound: Inbound) -> None:
        return None

    async def stop(self) -> None:
        return None

    async def send_text(self, chat_id: str, text: str) -> None:
        self.texts.append((chat_id, text))

    @asynccontextmanager
    async def thinking(self, chat_id: str) -> AsyncIterator[None]:
        yield

    async def send_confirmation(self, chat_id: str, request: ConfirmationRequest) -> None:
        self.confirmations.append(request)

    async def send_file(self, chat_id: str, path: Path, caption: str | None = None) -> None:
        self.files.append(path)
