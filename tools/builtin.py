"""The built-in tools, as (contract, handler) pairs for the app to register."""

from __future__ import annotations

from bruce.config.schema import Config
from bruce.contracts import ToolContract, ToolHandler
from bruce.jobs.book import JobBook
from bruce.memory.long_term import Memory
from bruce.store import Store
from tools.artifacts import artifact_save_tool
from tools.calculator import MATH_CALCULATE, math_calculate
from tools.clock import CLOCK_NOW, clock_now
from tools.files import files_write_tool
from tools.http_post import http_post_tool
from tools.memory_tools import memory_tools
from tools.proactive import proactive_tools
from tools.procworker import shutdown as shutdown_tools
from tools.web_tools import web_tools

__all__ = ["builtin_tools", "shutdown_tools"]


def _email_tools(config: Config) -> list[tuple[ToolContract, ToolHandler]]:
    """The email tools when ``tools.email.enabled`` (their libraries load only then)."""
    if not config.tools.email.enabled:
        return []
    from tools.email.tools import email_tools

    return email_tools(config.tools.email)


def builtin_tools(config: Config, *, store: Store | None, jobs: JobBook | None = None,
                  memory: Memory | None = None) -> list[tuple[ToolContract, ToolHandler]]:
    """Every built-in tool. ``store`` and ``jobs`` may be None when only the contracts are wanted
    (``bruce tools``); the artifact and proactive tools then cannot run."""
    t = config.tools
    return [
        (CLOCK_NOW, clock_now),
        (MATH_CALCULATE, math_calculate),
        *web_tools(t.web),
        artifact_save_tool(store=store, artifacts_dir=t.artifacts.dir, base_url=config.admin.base_url,  # type: ignore[arg-type]
                           max_bytes=t.artifacts.max_bytes),
        files_write_tool(notes_dir=t.files.notes_dir, max_bytes=t.files.max_bytes),
        http_post_tool(allowed_urls=t.http_post.allowed_urls, timeout_s=t.http_post.timeout_s),
        *_email_tools(config),
        *proactive_tools(jobs),
        *memory_tools(memory),
    ]
