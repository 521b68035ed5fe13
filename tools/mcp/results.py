"""An MCP tool's result as the model reads it: its text (capped) and its structured content."""

from __future__ import annotations

import json
from typing import Any

from bruce.errors import ToolFailed

__all__ = ["MAX_OUTPUT_CHARS", "tool_output"]

MAX_OUTPUT_CHARS = 16_000  # a result's text, and its structured content as JSON


def _text(result: Any) -> str:
    """The result's content blocks as text: resources by their text, anything else named, not shown."""
    parts = []
    for block in result.content or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind == "resource" and hasattr(block.resource, "text"):
            parts.append(block.resource.text)
        elif kind == "resource_link":
            parts.append(f"[link: {block.uri}]")
        else:
            parts.append(f"[{kind or 'content'}: {getattr(block, 'mime_type', '') or 'binary'}, not shown]")
    text = "\n".join(p for p in parts if p)
    if len(text) > MAX_OUTPUT_CHARS:
        text = text[:MAX_OUTPUT_CHARS] + f"… [{len(text) - MAX_OUTPUT_CHARS} more characters cut]"
    return text


def tool_output(server: str, result: Any) -> Any:
    """A tool's result for the model: its text (capped) and structured content; a tool error
    becomes ``tool_error`` with the server's words."""
    text = _text(result)
    if result.is_error:
        raise ToolFailed(f"the MCP server {server} reported an error: {text[:1000] or 'no details'}", code="tool_error")
    out: dict[str, Any] = {"content": text}
    if result.structured_content is not None:
        size = len(json.dumps(result.structured_content, default=str))
        out["structured"] = result.structured_content if size <= MAX_OUTPUT_CHARS else (
            f"[structured content of {size} characters, not shown]")
    return out
