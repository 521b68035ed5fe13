"""The doctor's check of the mailbox against real servers on 127.0.0.1 (pymap for IMAP, aiosmtpd
with a login for SMTP): a login that works is a tick and sends nothing; each problem (no password,
a refused login, nothing listening, no answer, TLS, no STARTTLS) is a cross that names the server
and says what to do, and never shows the password."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest

from bruce.cli.checks.mail import app_password, check_email, why_unreachable
from bruce.config.email import EmailConfig
from bruce.config.reader import expand
from tests.tools.email.conftest import PASSWORD, USER, ImapServer, SmtpServer, free_port

ENV = {"IMAP_PASSWORD": PASSWORD, "SMTP_PASSWORD": PASSWORD}


def section(imap_port: int, smtp_port: int, **servers: Any) -> dict[str, Any]:
    """tools.email as the owner writes it, passwords from ${IMAP_PASSWORD} and ${SMTP_PASSWORD}."""
    base = {"host": "127.0.0.1", "security": "none", "user": USER}
    return {"tools": {"email": {
        "enabled": True, "address": USER,
        "imap": {**base, "port": imap_port, "password": "${IMAP_PASSWORD}", **servers.get("imap", {})},
        "smtp": {**base, "port": smtp_port, "password": "${SMTP_PASSWORD}", **servers.get("smtp", {})},
    }}}


async def check(raw: dict[str, Any], env: dict[str, str] = ENV, timeout_s: float = 5) -> list[str]:
    email = EmailConfig.model_validate(expand(raw["tools"]["email"], env))
    lines = [f.line() for f in await check_email(email, raw, timeout_s)]
    assert PASSWORD not in "\n".join(lines) and "wrong-password" not in "\n".join(lines)
    return lines


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that takes connections and never says a word (no IMAP greeting, no SMTP banner)."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        yield server.getsockname()[1]


async def test_email_off_is_one_neutral_line():
    assert [f.line() for f in await check_email(EmailConfig(), {}, 5)] == ["– email: off"]


async def test_working_logins_are_ticks_and_no_mail_is_sent(imap: ImapServer, smtp: SmtpServer):
    with imap.client() as client:
        client.create_folder("Drafts")
        client.create_folder("Sent")
    lines = await check(section(imap.port, smtp.port))
    assert lines == [f"✓ email IMAP {USER} at 127.0.0.1:{imap.port} (none): login accepted",
                     f"✓ email SMTP {USER} at 127.0.0.1:{smtp.port} (none): login accepted (no mail sent)"]
    assert smtp.arrived == [] and smtp.attempts == 0  # logged in and out, no MAIL FROM, no DATA


async def test_missing_drafts_and_sent_folders_are_warnings_with_the_servers_folders(imap: ImapServer,
                                                                                      smtp: SmtpServer):
    lines = await check(section(imap.port, smtp.port))
    assert lines[1:3] == [
        "! email IMAP: no folder 'Drafts' yet; Bruce makes it at first use — fix: if your mail app keeps them "
        "elsewhere, set tools.email.drafts_folder to that folder (the server has: INBOX)",
        "! email IMAP: no folder 'Sent' yet; Bruce makes it at first use — fix: if your mail app keeps them "
        "elsewhere, set tools.email.sent_folder to that folder (the server has: INBOX)",
    ]
    assert lines[0].startswith("✓ email IMAP ") and lines[3].startswith("✓ email SMTP ")


async def test_a_wrong_password_is_a_refused_login_with_the_app_password_advice(imap: ImapServer,
                                                                                 smtp: SmtpServer):
    lines = await check(section(imap.port, smtp.port), {"IMAP_PASSWORD": "wrong-password",
                                                         "SMTP_PASSWORD": "wrong-password"})
    assert lines == [
        f"✗ email IMAP 127.0.0.1:{imap.port}: login refused for {USER} — fix: check tools.email.imap.user and "
        "the password in $IMAP_PASSWORD; Gmail, Fastmail and iCloud need an app password, not the account's own",
        f"✗ email SMTP 127.0.0.1:{smtp.port}: login refused for {USER} (535 5.7.8 Authentication credentials "
        "invalid) — fix: check tools.email.smtp.user and the password in $SMTP_PASSWORD; Gmail, Fastmail and "
        "iCloud need an app password, not the account's own",
    ]
    assert smtp.arrived == [] and smtp.attempts == 0


async def test_an_empty_password_variable_is_named_and_nothing_is_tried():
    lines = await check(section(free_port(), free_port()), {})  # nothing listens: a try would say so
    assert lines == [
        "✗ email IMAP: no password ($IMAP_PASSWORD is empty) — fix: set IMAP_PASSWORD to the mailbox's password "
        "(Gmail, Fastmail and iCloud need an app password, not the account's own) in .env and load it: "
        "set -a; . ./.env; set +a",
        "✗ email SMTP: no password ($SMTP_PASSWORD is empty) — fix: set SMTP_PASSWORD to the mailbox's password "
        "(Gmail, Fastmail and iCloud need an app password, not the account's own) in .env and load it: "
        "set -a; . ./.env; set +a",
    ]


async def test_stopped_servers_are_unreachable():
    imap_port, smtp_port = free_port(), free_port()
    lines = await check(section(imap_port, smtp_port))
    assert lines == [
        f"✗ email IMAP 127.0.0.1:{imap_port}: refused the connection (nothing listens at 127.0.0.1:{imap_port}) "
        "— fix: check host and port, and that the server runs (tools.email.imap)",
        f"✗ email SMTP 127.0.0.1:{smtp_port}: refused the connection (nothing listens at 127.0.0.1:{smtp_port}) "
        "— fix: check host and port, and that the server runs (tools.email.smtp)",
    ]


async def test_a_server_that_never_answers_times_out_within_the_timeout(silent_port: int):
    import time

    started = time.monotonic()
    lines = await check(section(silent_port, silent_port), timeout_s=0.5)
    assert time.monotonic() - started < 3
    assert lines == [
        f"✗ email IMAP 127.0.0.1:{silent_port}: did not answer within 0.5 s — fix: check host and port, and that "
        "a firewall lets it through (tools.email.imap)",
        f"✗ email SMTP 127.0.0.1:{silent_port}: did not answer within 0.5 s — fix: check host and port, and that "
        "a firewall lets it through (tools.email.smtp)",
    ]


async def test_tls_against_a_plain_server_is_a_failed_handshake(imap: ImapServer, smtp: SmtpServer):
    lines = await check(section(imap.port, smtp.port, imap={"security": "ssl"}, smtp={"security": "ssl"}))
    assert lines == [
        f"✗ email IMAP 127.0.0.1:{imap.port}: the TLS handshake failed (WRONG_VERSION_NUMBER) — fix: check "
        "security and port: the server may not speak TLS on this port (ssl is port 993, starttls port 143) "
        "(tools.email.imap)",
        f"✗ email SMTP 127.0.0.1:{smtp.port}: the TLS handshake failed (WRONG_VERSION_NUMBER) — fix: check "
        "security and port: the server may not speak TLS on this port (ssl is port 465, starttls port 587) "
        "(tools.email.smtp)",
    ]


async def test_starttls_that_the_server_does_not_offer_is_refused_not_skipped(imap: ImapServer, smtp: SmtpServer):
    lines = await check(section(imap.port, smtp.port, imap={"security": "starttls"},
                                smtp={"security": "starttls"}))
    assert lines == [
        f"✗ email IMAP 127.0.0.1:{imap.port}: does not offer STARTTLS — fix: set tools.email.imap.security: ssl "
        "and its port (ssl is port 993, starttls port 143)",
        f"✗ email SMTP 127.0.0.1:{smtp.port}: does not offer STARTTLS — fix: set tools.email.smtp.security: ssl "
        "and its port (ssl is port 465, starttls port 587)",
    ]
    assert smtp.arrived == []


def test_the_app_password_advice_names_the_provider():
    assert app_password("imap.gmail.com", "me@gmail.com").startswith("Gmail needs an app password")
    assert app_password("smtp.example.org", "me@fastmail.com").startswith("Fastmail needs an app password")
    assert app_password("caldav.icloud.com", "").startswith("iCloud needs an app-specific password")
    assert app_password("mail.example.org", "me@example.org") == (
        "Gmail, Fastmail and iCloud need an app password, not the account's own")


def test_a_certificate_that_is_not_accepted_is_named_with_the_reason():
    """What ssl raises for a self-signed or expired certificate (wrapped by the libraries) becomes the line's text."""
    import ssl

    refused = ssl.SSLCertVerificationError(1, "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed")
    refused.verify_message = "self-signed certificate"
    try:
        try:
            raise refused
        except ssl.SSLError as exc:
            raise OSError("connection failed") from exc
    except OSError as wrapped:
        assert why_unreachable(wrapped, 5, "imap.example.org:993") == (
            "its TLS certificate is not accepted (self-signed certificate)",
            "use the host name the certificate of imap.example.org:993 is made for, or renew the certificate")
