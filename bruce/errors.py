"""Bruce's error tree. Errors are translated into these where they enter our code.

BruceError
├── ConfigError            a config file or value is wrong (carries the key path)
├── ContractError          a tool contract is incomplete or contradicts its risk
├── ShuttingDown           the daemon is stopping: no new turn is started
├── StoreError             the database failed or was asked for something impossible
│   └── StoreBusy          locked by another process past the busy timeout: worth trying again
├── LLMError               the language model could not answer
│   ├── LLMNotConfigured   no key / api_base: we never tried the network
│   ├── OverBudget         the day's LLM budget does not allow this call: we never tried
│   ├── LLMCallFailed      one attempt failed (inside llm.py: retried, then a fallback)
│   └── LLMUnavailable     every model (primary and fallbacks) failed
├── ChannelError           a chat platform failed
│   ├── ChannelSendError   a send failed; ``retryable`` and ``retry_after`` tell the outbox what to do
│   └── MediaFetchError    an attachment's bytes could not be fetched (gone, too large, timed out)
├── MediaError             an attachment could not be used (damaged, empty, no text layer); says why
└── ToolError              raised by tool handlers; turned into a result for the model
    ├── ToolInputInvalid   the arguments do not fit the tool's input schema
    ├── ToolFailed         the tool ran and failed in a way it can explain
    └── NeedsConfirmation  this call needs the user's yes first (raised before acting; the registry asks)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bruce.llm.budget import Spend
    from bruce.values import LLMCallStatus

__all__ = [
    "BruceError",
    "ConfigError",
    "ContractError",
    "ShuttingDown",
    "StoreError",
    "StoreBusy",
    "LLMError",
    "LLMNotConfigured",
    "LLMCallFailed",
    "LLMUnavailable",
    "OverBudget",
    "ChannelError",
    "ChannelSendError",
    "MediaFetchError",
    "MediaError",
    "ToolError",
    "ToolInputInvalid",
    "ToolFailed",
    "NeedsConfirmation",
]  # the tree drawn above, and only it (tests/test_errors.py); ``causes`` below is a helper beside it


class BruceError(Exception):
    """Base of every error Bruce raises on purpose."""


class ConfigError(BruceError):
    """A configuration problem; ``problems`` holds one line per bad key."""

    def __init__(self, problems: list[str] | str, *, source: str | None = None) -> None:
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        self.source = source
        head = f"invalid configuration in {source}" if source else "invalid configuration"
        super().__init__(head + ":\n" + "\n".join(f"  {p}" for p in self.problems))


class ContractError(BruceError):
    """A tool contract is incomplete or contradicts its own risk; rejected at registration."""


class ShuttingDown(BruceError):
    """The daemon is draining for shutdown and starts no new turn; try again after the restart."""


class StoreError(BruceError):
    """The database could not do what was asked."""


class StoreBusy(StoreError):
    """The database is locked by another process (a backup, another tool) for longer than the
    busy timeout; the same write may succeed a moment later."""


class LLMError(BruceError):
    """The language model could not produce an answer."""


class LLMNotConfigured(LLMError):
    """No credentials or endpoint are configured; ``hint`` says how to fix it."""

    def __init__(self, hint: str) -> None:
        self.hint = hint
        super().__init__(hint)


class LLMCallFailed(LLMError):
    """One attempt at one model failed: ``status`` (an llm_calls status), ``reason`` (a short
    label for logs and the audit row) and whether another attempt could help."""

    def __init__(self, *, status: LLMCallStatus, reason: str, retryable: bool) -> None:
        self.status = status
        self.reason = reason
        self.retryable = retryable
        super().__init__(reason)


class OverBudget(LLMError):
    """The day's LLM budget (``llm.budget``) does not allow this call; nothing was sent.
    ``spend``: the day's spend that stopped it (its limits and reset time), when known."""

    def __init__(self, message: str, *, spend: Spend | None = None) -> None:
        self.spend = spend
        super().__init__(message)


class LLMUnavailable(LLMError):
    """Every configured model failed; ``attempts`` lists (model, reason)."""

    def __init__(self, attempts: list[tuple[str, str]]) -> None:
        self.attempts = attempts
        detail = "; ".join(f"{m}: {r}" for m, r in attempts)
        super().__init__(f"no model answered ({detail})")


class ToolError(BruceError):
    """Base for errors a tool handler raises; the message is shown to the model."""

    code = "error"


class ToolInputInvalid(ToolError):
    code = "invalid_args"


class ToolFailed(ToolError):
    """The tool ran and failed; ``code`` is one of the contract's failure modes."""

    def __init__(self, message: str, *, code: str = "failed") -> None:
        self.code = code
        super().__init__(message)


class NeedsConfirmation(ToolError):
    """The handler found that this call needs the user's yes (an agent job asked for in a tainted
    turn), before doing anything. The registry then asks, as for a contract that needs
    confirmation, showing ``preview``; the approved call runs with ``ToolContext.approved``."""

    code = "awaiting_confirmation"

    def __init__(self, preview: str) -> None:
        self.preview = preview
        super().__init__("this call needs the user's approval first")


class ChannelError(BruceError):
    """A chat platform failed; channels translate their SDK's errors into these."""


class ChannelSendError(ChannelError):
    """A send did not go through. ``retryable``: trying again later may work (rate limit,
    network, 5xx); ``retry_after``: the platform's own wait, in seconds, when it gave one."""

    def __init__(self, reason: str, *, retryable: bool, retry_after: float | None = None) -> None:
        self.reason = reason
        self.retryable = retryable
        self.retry_after = retry_after
        super().__init__(reason)


class MediaFetchError(ChannelError):
    """A channel could not fetch an attachment's bytes; the message says why, for the user."""


class MediaError(BruceError):
    """An attachment cannot be used as sent (a damaged voice note, a PDF that is not one, an
    empty file, a scan with no text); the message is the user's clear reply."""


def causes(exc: BaseException) -> list[BaseException]:
    """``exc`` and what it was raised from or during, outermost first, each once: libraries wrap
    the socket's or TLS's own error, and the words for the owner come from the innermost."""
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen
