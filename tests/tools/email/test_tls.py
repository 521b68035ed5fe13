"""The email tools over TLS, as providers serve them: SMTP with implicit TLS (465) and with STARTTLS
(587), IMAP with implicit TLS (993) and with STARTTLS (143), each a real server on 127.0.0.1 with a
certificate from a throwaway CA that Bruce trusts only through ``ca_file``. A certificate Bruce
does not trust, or a server that does not offer STARTTLS, sends nothing: no message, no password."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from bruce.config.email import EmailConfig
from bruce.config.loader import parse_config
from bruce.contracts import ToolContext
from bruce.errors import ConfigError, ToolFailed
from tests.fakes.clock import FakeClock
from tests.fakes.tls import TestCA, ca_file_case, make_ca
from tests.tools.email.conftest import PASSWORD, USER, ImapServer, TlsSmtpServer, free_port, pymap, smtp_server
from tools.email.tools import email_tools

MESSAGE = {"to": ["ana@example.net"], "subject": "Dinner on Friday", "body": "Hi Ana,\n\nFriday at 8 works.\n"}
NOTE = (b"From: Ana <ana@example.net>\r\nTo: me@example.org\r\nSubject: Lunch on Tuesday\r\n"
        b"Message-ID: <lunch@example.net>\r\n\r\nShall we have lunch on Tuesday?\r\n")


def ctx() -> ToolContext:
    return ToolContext(clock=FakeClock(), zone=ZoneInfo("UTC"), conversation_id=None, turn_id=None)


def server(port: int, security: str, ca: TestCA | None = None, host: str = "127.0.0.1") -> dict[str, Any]:
    found = {"host": host, "port": port, "security": security, "user": USER, "password": PASSWORD, "timeout_s": 5}
    return {**found, "ca_file": str(ca.ca_file)} if ca else found


def tools(imap: dict[str, Any], smtp: dict[str, Any]) -> dict[str, Any]:
    config = EmailConfig.model_validate({"enabled": True, "address": USER, "imap": imap, "smtp": smtp})
    return {c.name: h for c, h in email_tools(config)}


# ---- SMTP ----


async def test_a_send_over_implicit_tls_delivers_exactly_one_message(smtps: TlsSmtpServer, imap: ImapServer,
                                                                     ca: TestCA) -> None:
    out = await tools(server(imap.port, "none"), server(smtps.port, "ssl", ca))["emails.send_external"](MESSAGE, ctx())
    assert out["status"] == "sent"
    [msg] = smtps.messages()
    assert (msg["To"], msg["Subject"], msg.get_content()) == ("ana@example.net", "Dinner on Friday", MESSAGE["body"])
    assert smtps.attempts == 1 and smtps.logins == 1
    assert [m["Message-ID"] for m in imap.messages("Sent")] == [out["message_id"]]


async def test_a_send_over_starttls_delivers_exactly_one_message(smtp_starttls: TlsSmtpServer, imap: ImapServer,
                                                                 ca: TestCA) -> None:
    # localhost, not the address: the name in the certificate is what is checked either way
    smtp = server(smtp_starttls.port, "starttls", ca, host="localhost")
    out = await tools(server(imap.port, "none"), smtp)["emails.send_external"](MESSAGE, ctx())
    assert out["status"] == "sent"
    [msg] = smtp_starttls.messages()
    assert msg["Message-ID"] == out["message_id"] and msg.get_content() == MESSAGE["body"]
    assert smtp_starttls.attempts == 1


@pytest.mark.parametrize("security", ["ssl", "starttls"])
async def test_a_certificate_bruce_does_not_trust_sends_nothing(request: pytest.FixtureRequest, imap: ImapServer,
                                                                ca: TestCA, security: str) -> None:
    smtp: TlsSmtpServer = request.getfixturevalue("smtps" if security == "ssl" else "smtp_starttls")
    send = tools(server(imap.port, "none"), server(smtp.port, security))["emails.send_external"]  # no ca_file
    with pytest.raises(ToolFailed) as info:
        await send(MESSAGE, ctx())
    assert info.value.code == "smtp_unavailable"
    text = str(info.value)
    assert "certificate" in text and "ca_file" in text and "not sent" in text
    assert smtp.attempts == 0 and smtp.logins == 0 and imap.messages("Sent") == []


async def test_a_certificate_for_another_name_sends_nothing(tmp_path: Path, imap: ImapServer, ca: TestCA) -> None:
    elsewhere = make_ca(tmp_path / "elsewhere", hosts=("mail.example.org",))  # trusted, but not for 127.0.0.1
    with smtp_server(ssl_context=elsewhere.server_context()) as smtp:
        send = tools(server(imap.port, "none"), server(smtp.port, "ssl", elsewhere))["emails.send_external"]
        with pytest.raises(ToolFailed) as info:
            await send(MESSAGE, ctx())
    assert info.value.code == "smtp_unavailable" and "mismatch" in str(info.value).lower()
    assert smtp.attempts == 0 and smtp.logins == 0


async def test_starttls_against_a_server_that_does_not_offer_it_never_sends_in_clear(
        smtp_clear: TlsSmtpServer, imap: ImapServer, ca: TestCA) -> None:
    send = tools(server(imap.port, "none"), server(smtp_clear.port, "starttls", ca))["emails.send_external"]
    with pytest.raises(ToolFailed) as info:
        await send(MESSAGE, ctx())
    assert info.value.code == "smtp_unavailable"
    assert "does not offer STARTTLS" in str(info.value) and "nothing was sent" in str(info.value)
    assert smtp_clear.attempts == 0 and smtp_clear.logins == 0  # neither the message nor the password went out


# ---- IMAP ----


async def test_search_and_read_over_implicit_tls(imaps: tuple[ImapServer, int], smtp_clear: TlsSmtpServer,
                                                 ca: TestCA) -> None:
    imap, port = imaps
    imap.seed("INBOX", NOTE)
    mail = tools(server(port, "ssl", ca), server(smtp_clear.port, "none"))
    [found] = (await mail["emails.search"]({"from": "ana@example.net"}, ctx()))["messages"]
    assert found["subject"] == "Lunch on Tuesday" and found["message_id"] == "<lunch@example.net>"
    read = await mail["emails.read"]({"uid": found["uid"]}, ctx())
    assert read["text"] == "Shall we have lunch on Tuesday?"


async def test_search_read_and_draft_over_starttls(imap_starttls: ImapServer, smtp_clear: TlsSmtpServer,
                                                   ca: TestCA) -> None:
    imap_starttls.seed("INBOX", NOTE)
    mail = tools(server(imap_starttls.port, "starttls", ca, host="localhost"), server(smtp_clear.port, "none"))
    [found] = (await mail["emails.search"]({"subject": "lunch"}, ctx()))["messages"]
    read = await mail["emails.read"]({"uid": found["uid"]}, ctx())
    assert read["from"] == "Ana <ana@example.net>" and read["text"] == "Shall we have lunch on Tuesday?"
    await mail["emails.draft"]({**MESSAGE, "reply_to_message_id": "<lunch@example.net>"}, ctx())
    [draft] = imap_starttls.messages("Drafts")
    assert draft["In-Reply-To"] == "<lunch@example.net>" and smtp_clear.attempts == 0


@pytest.mark.parametrize("security", ["ssl", "starttls"])
async def test_an_imap_certificate_bruce_does_not_trust_is_named(request: pytest.FixtureRequest,
                                                                 smtp_clear: TlsSmtpServer, security: str) -> None:
    port = request.getfixturevalue("imaps")[1] if security == "ssl" else request.getfixturevalue("imap_starttls").port
    mail = tools(server(port, security), server(smtp_clear.port, "none"))  # no ca_file
    with pytest.raises(ToolFailed) as info:
        await mail["emails.search"]({}, ctx())
    assert info.value.code == "imap_unavailable"
    assert "certificate" in str(info.value) and "ca_file" in str(info.value)


async def test_imap_starttls_against_a_server_that_does_not_offer_it_is_refused(
        tmp_path: Path, smtp_clear: TlsSmtpServer, ca: TestCA) -> None:
    port = free_port()
    with pymap(tmp_path, port):  # no TLS at all: a login would go in clear
        mail = tools(server(port, "starttls", ca), server(smtp_clear.port, "none"))
        with pytest.raises(ToolFailed) as info:
            await mail["emails.search"]({}, ctx())
    assert info.value.code == "imap_unavailable"
    assert "does not offer STARTTLS" in str(info.value) and "not even your password" in str(info.value)


# ---- ca_file in config.yml ----


def email_config(tmp_path: Path, **imap: Any) -> Any:
    section = {"enabled": True, "address": USER, "imap": {**server(993, "ssl", host="imap.example.org"), **imap},
               "smtp": server(465, "ssl", host="smtp.example.org")}
    return parse_config({"tools": {"email": section}}, environ={}, base_dir=tmp_path)


def test_ca_file_is_optional_and_the_issues_keys_stay_as_they_were(tmp_path: Path, ca: TestCA) -> None:
    section = email_config(tmp_path).tools.email
    assert section.imap.ca_file is None and section.smtp.ca_file is None
    assert email_config(tmp_path, ca_file=str(ca.ca_file)).tools.email.imap.ca_file == ca.ca_file


@pytest.mark.parametrize(("ca_file", "security", "message"), [
    ("missing.pem", "ssl", "tools.email.imap.ca_file: must be an absolute path"),
    ("/nowhere/ca.pem", "ssl", "no file at '/nowhere/ca.pem'"),
    ("NOT-PEM", "ssl", "holds no PEM certificate"),
    ("CA", "none", "ca_file is used only with security: ssl or starttls"),
])
def test_a_ca_file_that_cannot_be_used_is_named(tmp_path: Path, ca: TestCA, ca_file: str, security: str,
                                                message: str) -> None:
    ca_file = ca_file_case(ca_file, tmp_path, ca)
    host = "127.0.0.1" if security == "none" else "imap.example.org"
    with pytest.raises(ConfigError) as info:
        email_config(tmp_path, ca_file=ca_file, security=security, host=host)
    assert message in str(info.value)
