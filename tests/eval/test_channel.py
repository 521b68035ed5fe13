"""bruce.eval.channel: the channel a case talks through keeps what Bruce showed and sends
nothing anywhere."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from bruce.channel import ConfirmationRequest
from bruce.eval.channel import CHANNEL, CaptureChannel


async def test_it_keeps_texts_requests_and_files_in_order(tmp_path: Path) -> None:
    channel = CaptureChannel()
    assert channel.name == CHANNEL == "eval"
    request = ConfirmationRequest(id="ab12cd34", tool_name="files.write", risk="high", summary="Write a note",
                                  side_effects="creates a file", preview=None,
                                  expires_at=datetime(2026, 3, 7, 13, 0, tzinfo=UTC), step_up=False)
    async with channel.thinking("c1"):
        await channel.send_text("c1", "first")
    await channel.send_confirmation("c1", request)
    await channel.send_file("c1", tmp_path / "report.html", "your report")
    await channel.send_text("c2", "second")
    assert channel.texts == [("c1", "first"), ("c2", "second")]
    assert channel.confirmations == [request]
    assert channel.files == [tmp_path / "report.html"]


async def test_a_long_reply_is_never_split() -> None:
    channel = CaptureChannel()
    assert channel.max_message_length >= 100_000
    await channel.send_text("c1", "x" * 50_000)
    assert channel.texts == [("c1", "x" * 50_000)]
