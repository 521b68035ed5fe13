"""bruce.errors: the tree callers catch by, and the fields each error carries."""

from __future__ import annotations

import pytest

from bruce import errors
from bruce.errors import (
    BruceError,
    ChannelError,
    ChannelSendError,
    ConfigError,
    LLMCallFailed,
    LLMError,
    LLMNotConfigured,
    LLMUnavailable,
    OverBudget,
    StoreBusy,
    StoreError,
    ToolError,
    ToolFailed,
    ToolInputInvalid,
)
from bruce.values import LLMCallStatus


def test_the_tree_drawn_in_the_docstring_is_the_class_tree() -> None:
    """Every line of the drawing names a class whose base is the line it hangs from."""
    assert errors.__doc__ is not None
    tree = errors.__doc__.split("\n\n", 1)[1]  # below the first line
    parents: list[str] = []  # the names on the path to the current line, by depth
    drawn = []
    for line in tree.strip().splitlines():
        name = line.lstrip("│├└─ ").split()[0]
        depth = (len(line) - len(line.lstrip("│├└─ "))) // 4  # "├── " is one level
        del parents[depth:]
        if parents:
            assert getattr(errors, name).__base__ is getattr(errors, parents[-1]), name
        parents.append(name)
        drawn.append(name)
    assert sorted(drawn) == sorted(errors.__all__)


@pytest.mark.parametrize("error", [ConfigError("x"), StoreBusy("locked"), OverBudget("spent"),
                                   ChannelSendError("down", retryable=True), ToolFailed("no")])
def test_every_error_is_a_bruce_error(error: Exception) -> None:
    assert isinstance(error, BruceError)


def test_a_busy_store_is_caught_as_a_store_error() -> None:
    with pytest.raises(StoreError):
        raise StoreBusy("database is locked")


def test_config_error_lists_each_problem_under_its_source() -> None:
    err = ConfigError(["llm.timeout_s: must be positive", "storage.path: missing"], source="config.yml")
    assert err.problems == ["llm.timeout_s: must be positive", "storage.path: missing"]
    assert str(err) == ("invalid configuration in config.yml:\n"
                        "  llm.timeout_s: must be positive\n  storage.path: missing")
    assert str(ConfigError("admin.port: not a port")) == "invalid configuration:\n  admin.port: not a port"


def test_llm_errors_carry_what_the_caller_needs() -> None:
    failed = LLMCallFailed(status=LLMCallStatus.TIMEOUT, reason="timeout after 60s", retryable=True)
    assert (failed.status, failed.reason, failed.retryable, str(failed)) == (
        LLMCallStatus.TIMEOUT, "timeout after 60s", True, "timeout after 60s")
    hint = LLMNotConfigured("set llm.api_key")
    assert hint.hint == str(hint) == "set llm.api_key"
    down = LLMUnavailable([("openai/a", "timeout"), ("openai/b", "HTTP 503")])
    assert down.attempts == [("openai/a", "timeout"), ("openai/b", "HTTP 503")]
    assert str(down) == "no model answered (openai/a: timeout; openai/b: HTTP 503)"
    assert all(isinstance(e, LLMError) for e in (failed, hint, down, OverBudget("spent")))


def test_tool_errors_carry_a_failure_code() -> None:
    assert ToolError("x").code == "error"
    assert ToolInputInvalid("missing 'query'").code == "invalid_args"
    assert ToolFailed("gone").code == "failed"
    failed = ToolFailed("The server answered HTTP 404", code="http_error")
    assert (failed.code, str(failed)) == ("http_error", "The server answered HTTP 404")


def test_channel_send_error_says_whether_and_when_to_retry() -> None:
    err = ChannelSendError("429 Too Many Requests", retryable=True, retry_after=3.0)
    assert (err.reason, err.retryable, err.retry_after) == ("429 Too Many Requests", True, 3.0)
    assert ChannelSendError("chat not found", retryable=False).retry_after is None
    assert isinstance(err, ChannelError)
