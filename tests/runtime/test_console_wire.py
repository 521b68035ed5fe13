"""The console socket's wire format: what the daemon writes, the terminal reads back the same."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from bruce.channel import ConfirmationRequest
from bruce.runtime.console_wire import (
    confirmation_event,
    encode,
    progress_event,
    read_confirmation,
    read_progress,
)
from bruce.turns.progress import TextDelta, Thinking, ToolFinished, ToolStarted
from bruce.values import ToolStatus


def over_the_wire(event: dict) -> dict:
    line = encode(event)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    return json.loads(line)


def test_progress_events_are_read_back_as_they_were_sent():
    for event in (Thinking(), ToolStarted("web.search"), ToolFinished("web.search", ToolStatus.OK)):
        sent = progress_event(event)
        assert sent is not None and read_progress(over_the_wire(sent)) == event


def test_streamed_text_does_not_go_over_the_socket_and_an_unknown_status_is_dropped():
    assert progress_event(TextDelta("hel")) is None
    assert read_progress({"ev": "progress", "kind": "tool_finished", "tool": "x", "status": "exploded"}) is None
    assert read_progress({"ev": "progress", "kind": "dancing"}) is None


def test_a_confirmation_request_is_read_back_whole():
    request = ConfirmationRequest(id="ab12cd34", tool_name="files.write", risk="high", summary="write notes.md",
                                  side_effects="a file changes", preview=None,
                                  expires_at=datetime(2026, 12, 2, 12, 30, tzinfo=UTC), step_up=True)
    assert read_confirmation(over_the_wire(confirmation_event(request))) == request


def test_text_that_is_not_valid_unicode_still_goes_out():
    assert json.loads(encode({"ev": "text", "text": "bad \udcff byte"}).decode("utf-8", "surrogatepass"))
