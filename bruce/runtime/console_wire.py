"""The console socket's wire format, shared by its two sides: the daemon's
(``channels/console_socket.py``, a channel of the worker that also serves ``Control``) and the
terminal's (``bruce/cli/daemon.py``: ``bruce chat``, ``approve``, ``jobs``, ``doctor``, ``mcp
status``). JSON, one object per line, ``LINE_LIMIT`` bytes at most::

    terminal -> daemon                          daemon -> terminal
    {"op": "hello", "version": 1}               {"ev": "hello", "version": 1, "name": "Bruce"}
    {"op": "message", "ref": 1, "text": "hi"}   {"ev": "stored", "ref": 1}  (or "store_error")
                                                {"ev": "done", "ref": 1}    (the turn finished)
    {"op": "decide", "ref": 2, "id": "ab12cd34", "approve": true, "local": true}
                                                {"ev": "decided", "ref": 2, "outcome": "queued", ...}
    any time: {"ev": "text", "text": ...}, {"ev": "confirmation", ...}, {"ev": "file", ...},
              {"ev": "progress", "kind": "tool_started", "tool": ..., "activity": "Searching the web"},
              {"ev": "progress", "kind": "tool_finished", "tool": ..., "status": ...}
    {"op": "health", "ref": 3}                  {"ev": "health", "ref": 3, "last_receive": {"telegram": "2026-…Z"}}
    {"op": "jobs_changed", "ref": 4}            {"ev": "jobs_synced", "ref": 4}  (the scheduler re-read the jobs)
    {"op": "mcp_status", "ref": 5}              {"ev": "mcp_status", "ref": 5, "servers": [...]}
    a request it cannot read: {"ev": "error", "ref": ..., "error": "what was wrong"}

Each event that carries a value is written and read here, side by side.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import datetime
from typing import Any

from bruce.channel import ConfirmationRequest
from bruce.turns.progress import ProgressEvent, Thinking, ToolFinished, ToolStarted
from bruce.values import ToolStatus

__all__ = ["PROTOCOL_VERSION", "LINE_LIMIT", "CHAT_ID", "USER_ID", "CONNECT_TIMEOUT_S", "encode", "progress_event",
           "read_progress", "confirmation_event", "read_confirmation"]

PROTOCOL_VERSION = 1
LINE_LIMIT = 16 * 1024 * 1024  # one JSON line; a reply is at most 100 000 characters, escaped
CHAT_ID = "local"  # the console's one conversation: console:local
USER_ID = "local"
CONNECT_TIMEOUT_S = 2.0


def encode(obj: dict[str, Any]) -> bytes:
    return (json.dumps(obj, ensure_ascii=False, default=str) + "\n").encode("utf-8", "surrogatepass")


def progress_event(event: ProgressEvent) -> dict[str, Any] | None:
    match event:
        case Thinking():
            return {"ev": "progress", "kind": "thinking"}
        case ToolStarted(tool=tool, activity=activity):
            return {"ev": "progress", "kind": "tool_started", "tool": tool, "activity": activity}
        case ToolFinished(tool=tool, status=status):
            return {"ev": "progress", "kind": "tool_finished", "tool": tool, "status": str(status)}
    return None  # the text streams only to channels that show it live


def read_progress(event: dict[str, Any]) -> ProgressEvent | None:
    kind = event.get("kind")
    if kind == "thinking":
        return Thinking()
    if kind == "tool_started":
        return ToolStarted(str(event.get("tool")), str(event.get("activity") or ""))
    if kind == "tool_finished":
        try:
            return ToolFinished(str(event.get("tool")), ToolStatus(str(event.get("status"))))
        except ValueError:
            return None
    return None


def confirmation_event(request: ConfirmationRequest) -> dict[str, Any]:
    return {"ev": "confirmation", **asdict(request)}


def read_confirmation(event: dict[str, Any]) -> ConfirmationRequest:
    return ConfirmationRequest(
        id=str(event["id"]), tool_name=str(event["tool_name"]), risk=str(event["risk"]),
        summary=str(event["summary"]), side_effects=str(event["side_effects"]),
        preview=None if event.get("preview") is None else str(event["preview"]),
        expires_at=datetime.fromisoformat(str(event["expires_at"])), step_up=bool(event["step_up"]),
        expires_shown=str(event.get("expires_shown") or ""))
