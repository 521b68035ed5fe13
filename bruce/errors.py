"""Bruce's error tree. Errors are translated into these where they enter our code.

BruceError
├── ConfigError            a config file or value is wrong (carries the key path)
├── ContractError          a tool contract is incomplete or contradicts its risk
├── StoreError             the database failed or was asked for something impossible
├── LLMError               the language model could not answer
│   ├── LLMNotConfigured   no key / api_base: we never tried the network
│   ├── LLMTimeout         one call took longer than llm.timeout_s
│   └── LLMUnavailable     every model (primary and fallbacks) failed
└── ToolError              raised by tool handlers; turned into a result for the model
    ├── ToolInputInvalid   the arguments do not fit the tool's input schema
    ├── ToolFailed         the tool ran and failed in a way it can explain
    ├── ToolRetry          the model should call again with different arguments
    └── ToolDenied         policy refused the call (forbidden, not allowed by config)
"""

from __future__ import annotations

__all__ = [
    "BruceError",
    "ConfigError",
    "ContractError",
    "StoreError",
    "LLMError",
    "LLMNotConfigured",
    "LLMTimeout",
    "LLMUnavailable",
    "ToolError",
    "ToolInputInvalid",
    "ToolFailed",
    "ToolRetry",
    "ToolDenied",
]


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


class StoreError(BruceError):
    """The database could not do what was asked."""


class LLMError(BruceError):
    """The language model could not produce an answer."""


class LLMNotConfigured(LLMError):
    """No credentials or endpoint are configured; ``hint`` says how to fix it."""

    def __init__(self, hint: str) -> None:
        self.hint = hint
        super().__init__(hint)


class LLMTimeout(LLMError):
    def __init__(self, *, model: str, timeout_s: float) -> None:
        self.model = model
        self.timeout_s = timeout_s
        super().__init__(f"{model} did not answer within {timeout_s}s")


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


class ToolRetry(ToolError):
    code = "retry"


class ToolDenied(ToolError):
    code = "denied"
