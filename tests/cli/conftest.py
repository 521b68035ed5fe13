"""Real servers on 127.0.0.1 for `bruce doctor`'s login checks: the mail servers of the email
tools' tests (aiosmtpd with a login, pymap) and the Radicale of the calendar's tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.tools.email.conftest import imap, smtp
from tests.tools.mcp_servers.calendar.radicale import Radicale, radicale

__all__ = ["dav", "imap", "smtp"]


@pytest.fixture
def dav(tmp_path: Path) -> Iterator[Radicale]:
    with radicale(tmp_path) as server:
        yield server
