"""Real servers on 127.0.0.1 for `bruce doctor`'s login checks: the mail servers of the email
tools' tests (aiosmtpd with a login, pymap; over TLS too, with a throwaway CA) and the Radicale of
the calendar's tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.tools.email.conftest import ca, imap, imap_starttls, imaps, smtp, smtp_starttls, smtps
from tests.tools.mcp_servers.calendar.radicale import Radicale, radicale

__all__ = ["ca", "dav", "imap", "imap_starttls", "imaps", "smtp", "smtp_starttls", "smtps"]


@pytest.fixture
def dav(tmp_path: Path) -> Iterator[Radicale]:
    with radicale(tmp_path) as server:
        yield server
