"""What the browser tests share: Debian's chromium, the console's errors, and logging in."""

from __future__ import annotations

import shutil
from typing import Any

import pytest

__all__ = ["chromium", "console_errors", "log_in"]


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.fail("the browser tests need Debian's chromium: apt-get install chromium (.ci/run does)")
    return found


def console_errors(page: Any) -> list[str]:
    """The page's console errors, as they come (a test ends by asserting there were none)."""
    errors: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    return errors


async def log_in(page: Any, base: str, token: str) -> None:
    """The login form, with the admin token."""
    await page.goto(f"{base}/login")
    await page.fill("#token", token)
    await page.click("button[type=submit]")
