"""What a check of ``bruce doctor`` finds, and how it names a secret without showing it.

A secret is named by the variable it came from (``$TELEGRAM_BOT_TOKEN``), or by its last four
characters when the config file holds it; ``raw`` is the config file as parsed YAML, before
``${NAME}`` references were filled in.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from bruce.safe_text import visible

__all__ = ["Finding", "Mark", "check_secrets_in_file", "fill", "named", "variable"]

_REF = re.compile(r"\s*\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-[^}]*)?\}\s*")


class Mark(StrEnum):
    OK = "✓"
    FAIL = "✗"
    WARN = "!"
    SKIP = "–"


@dataclass(frozen=True, slots=True)
class Finding:
    mark: Mark
    text: str
    fix: str | None = None

    def line(self) -> str:
        """The finding as printed; a server's or a platform's own words in it are shown, never
        acted on (``visible``)."""
        return visible(f"{self.mark} {self.text}" + (f" — fix: {self.fix}" if self.fix else ""))


def _raw_at(raw: Any, *keys: str | int) -> Any:
    for key in keys:
        if isinstance(raw, dict) and isinstance(key, str):
            raw = raw.get(key)
        elif isinstance(raw, list) and isinstance(key, int) and key < len(raw):
            raw = raw[key]
        else:
            return None
    return raw


def variable(raw: Any, *keys: str | int) -> str | None:
    """The NAME of a value written as ``${NAME}`` in the file, else None."""
    value = _raw_at(raw, *keys)
    match = _REF.fullmatch(value) if isinstance(value, str) else None
    return match.group(1) if match else None


def named(raw: Any, keys: tuple[str | int, ...], value: str) -> str:
    """How to refer to a secret without showing it."""
    name = variable(raw, *keys)
    if name:
        return f"${name}"
    return f"****{value[-4:]}" if len(value) >= 12 else "****"


def fill(var: str | None, what: str, key: str) -> str:
    """The fix for a secret that is not set."""
    if var is None:
        return f'set {key}: "${{NAME}}" and NAME to {what} in .env'
    return f"set {var} to {what} in .env and load it: set -a; . ./.env; set +a"


_SECRET_KEYS: tuple[tuple[str, ...], ...] = (
    ("llm", "api_key"), ("channels", "telegram", "token"), ("channels", "discord", "token"), ("admin", "token"),
    ("tools", "web", "brave_api_key"),
)


def check_secrets_in_file(raw: Any) -> list[Finding]:
    found = []
    for keys in _SECRET_KEYS:
        value = _raw_at(raw, *keys)
        if isinstance(value, str) and value.strip() and "${" not in value:
            path = ".".join(keys)
            found.append(Finding(Mark.WARN, f"{path} is written in the config file itself",
                                 f"move it to .env and write {path.rsplit('.', 1)[-1]}: \"${{NAME}}\""))
    return found
