"""structlog set-up: JSON lines for the daemon, readable lines in a terminal, secrets redacted.

Redaction happens in one processor that every event passes, including stdlib ``logging``
records from libraries (aiosqlite, litellm, httpx): values under secret-looking keys are
replaced, and any known secret string (from config) or token-shaped text is masked wherever
it appears in a value.

In a URL (``scheme://...``) inside any value, :func:`redact_urls` masks what carries a secret:
the whole ``user:password@`` part (up to the last ``@``, so a password holding an ``@`` does
not leak), the values of query and fragment parameters whose names look like secrets
(``token``, ``access_token``, ``key``, ``api_key``, ``secret``, ``password``, ``passwd``,
``sig``, ``signature``, ``auth``, ``credential``, ``session``, ...), a path segment following
one so named (``/key/VALUE``), and the path after ``/webhook/`` or ``/webhooks/`` (Discord,
Home Assistant) and after ``hooks.slack.com/services/``, where webhook services put their token.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Iterable, MutableMapping
from typing import Any, TextIO

import structlog

__all__ = ["Redactor", "configure_logging", "redact_urls"]

_SECRET_KEYS = re.compile(r"(api[_-]?key|token|secret|password|authorization|cookie)", re.I)
_URL = re.compile(r"\b[a-z][a-z0-9+.\-]*://[^\s<>\"'`]+", re.I)
_USERINFO = re.compile(r"^([^:]+://)[^/\\?#]*@")  # greedy: up to the last @ before the path
_PARAM = re.compile(r"([?&#;])([^=&#;/?]+)=([^&#;]*)")
# (what stays, the secret): /key/VALUE, and the rest of a webhook's path
_SECRET_SEGMENT = re.compile(
    r"(/(?:api[_-]?key|apikey|key|token|access[_-]?token|secret|sig|signature|passw(?:or)?d)/)([^/?#]+)", re.I)
_WEBHOOK_PATH = re.compile(r"(/webhooks?/|//hooks\.slack\.com/services/)([^?#]+)", re.I)
_NAME_PARTS = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")
_SECRET_NAME_PART = re.compile(
    r"token|secret|passw|pwd|signature|credential|cookie|session|key$|^(?:sig|auth|authorization|pw|jwt|otp|hmac|sid)$")
_PUNCTUATION = ".,;:!?)]}'\""
_TOKEN_SHAPES = re.compile(
    r"(sk-[A-Za-z0-9_\-]{8,}"  # OpenAI-style keys
    r"|\b\d{6,12}:[A-Za-z0-9_\-]{30,}"  # Telegram bot tokens
    r"|Bearer\s+[A-Za-z0-9._\-]{8,})"
)
MASK = "***"
MAX_DEPTH = 64  # deeper values are cut: redaction must never raise RecursionError on what a tool returned
TOO_DEEP = "[nested too deeply to record]"


def _masked(value: str) -> str:
    """MASK in place of ``value``, keeping the punctuation of the sentence around it."""
    kept = value.rstrip(_PUNCTUATION)
    return (MASK + value[len(kept):]) if kept else value


def _secret_name(name: str) -> bool:
    """``access_token``, ``apiKey``, ``X-Amz-Signature``, ``sig``: yes; ``author``, ``keyword``, ``page``: no."""
    return any(_SECRET_NAME_PART.search(part.lower()) for part in _NAME_PARTS.findall(name))


def _masked_param(match: re.Match[str]) -> str:
    sep, name, value = match.groups()
    return f"{sep}{name}={_masked(value)}" if value and _secret_name(name) else match.group(0)


def _masked_second(match: re.Match[str]) -> str:
    return match.group(1) + _masked(match.group(2))


def _masked_url(match: re.Match[str]) -> str:
    url = _USERINFO.sub(lambda m: m.group(1) + MASK + "@", match.group(0), count=1)
    url = _WEBHOOK_PATH.sub(_masked_second, url)
    url = _SECRET_SEGMENT.sub(_masked_second, url)
    return _PARAM.sub(_masked_param, url)


def redact_urls(text: str) -> str:
    """``text`` with the secret parts of every URL in it masked (see the module's docstring)."""
    return _URL.sub(_masked_url, text) if "://" in text else text


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
        value = redact_urls(value)
        return _TOKEN_SHAPES.sub(MASK, value)

    def value(self, value: Any, key: str | None = None, _depth: int = 0) -> Any:
        if key is not None and _SECRET_KEYS.search(key) and isinstance(value, str) and value:
            return MASK  # secrets are strings: a count such as max_tokens=50 stays readable
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, (dict, list, tuple)) and _depth >= MAX_DEPTH:
            return TOO_DEEP
        if isinstance(value, dict):
            return {k: self.value(v, str(k), _depth + 1) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.value(v, None, _depth + 1) for v in value]
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
