"""Reading back a JSON column the store wrote (tool inputs and outputs, a confirmation's arguments)."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["from_json"]


def from_json(text: Any) -> Any:
    """A column the store wrote as JSON, read back: the JSON value, or the text as it is when it is not JSON."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return text
