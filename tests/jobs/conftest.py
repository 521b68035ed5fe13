"""The real mail servers of the email tools' tests (aiosmtpd, pymap on 127.0.0.1), for the
morning briefing's runs (tests/jobs/test_briefing.py)."""

from tests.tools.email.conftest import imap, smtp  # noqa: F401
