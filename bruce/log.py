"""structlog set-up: JSON lines for the daemon, readable lines in a terminal, secrets redacted.

Redaction happens in one processor that every event passes, including stdlib ``logging``
records from libraries (aiosqlite, litellm, httpx): values under secret-looking keys are
replaced, and any known secret string (from config) or token-shaped text is masked wherever
it appears in a value.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Iterable, MutableMapping
from typing import Any, TextIO

import structlog

__all__ = ["Redactor", "configure_logging"]

_SECRET_KEYS = re.compile(r"(api[_-]?key|token|secret|password|authorization|cookie)", re.I)
_URL_CREDENTIALS = re.compile(r"(?<=://)[^/\s:@]+:[^/\s@]+@")  # https://user:pass@host
_TOKEN_SHAPES = re.compile(
    r"(sk-[A-Za-z0-9_\-]{8,}"  # OpenAI-style keys
    r"|\b\d{6,12}:[A-Za-z0-9_\-]{30,}"  # Telegram bot tokens
    r"|Bearer\s+[A-Za-z0-9._\-]{8,})"
)
MASK = "***"


class Redactor:
    """Masks secrets in nested values; shared by logging and the audit table."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._secrets: set[str] = set()
        self.add(secrets)

    def add(self, secrets: Iterable[str]) -> None:
        self._secrets.update(s for s in secrets if s and len(s) >= 4)

    def text(self, value: str) -> str:
        for secret in self._secrets:
            if secret in value:
                value = value.replace(secret, MASK)
        value = _URL_CREDENTIALS.sub(MASK + "@", value)
        return _TOKEN_SHAPES.sub(MASK, value)

    def value(self, value: Any, key: str | None = None) -> Any:
        if key is not None and _SECRET_KEYS.search(key) and isinstance(value, str) and value:
            return MASK  # secrets are strings: a count such as max_tokens=50 stays readable
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {k: self.value(v, str(k)) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.value(v) for v in value]
        return value

    def __call__(self, _logger: Any, _name: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
        for key in list(event):
            if key in ("event", "timestamp", "level", "logger"):
                if key == "event" and isinstance(event[key], str):
                    event[key] = self.text(event[key])
                continue
            event[key] = self.value(event[key], key)
        return event


def configure_logging(
    *,
    level: str = "info",
    fmt: str = "auto",
    redactor: Redactor | None = None,
    stream: TextIO | None = None,
) -> Redactor:
    """Configure structlog and stdlib logging once for the process; return the redactor."""
    redactor = redactor or Redactor()
    stream = stream or sys.stderr
    as_json = fmt == "json" or (fmt == "auto" and not stream.isatty())
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.format_exc_info,
        redactor,
    ]
    renderer: Any = (
        structlog.processors.JSONRenderer() if as_json else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,
    )
    handler = logging.StreamHandler(stream)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=shared,
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for noisy in ("LiteLLM", "litellm", "httpx", "httpcore", "aiosqlite", "openai", "asyncio"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
    return redactor
