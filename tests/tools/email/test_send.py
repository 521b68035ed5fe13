"""emails.send_external and emails.draft against aiosmtpd and pymap on 127.0.0.1: what leaves, when
(never before the owner's step-up approval), what goes to Sent and Drafts, and each failure mode."""

from __future__ import annotations

from typing import Any
from zoneinfo import ZoneInfo

import pytest

from bruce.actions.checks import check_contract
from bruce.config.email import EmailConfig
from bruce.contracts import DryRun, Risk, ToolContext
from bruce.errors import ToolFailed
from tests.fakes.clock import FakeClock
from tests.tools.email.conftest import USER, ImapServer, SmtpServer, email_section
from tools.email.tools import email_tools

MESSAGE = {"to": ["ana@example.net"], "cc": ["rui@example.net"], "subject": "Dinner on Friday",
           "body": "Hi Ana,\n\nFriday at 8 works for me.\n\nBruno\n"}


def ctx(*, dry_run: bool = False) -> ToolContext:
    return ToolContext(clock=FakeClock(), zone=ZoneInfo("UTC"), conversation_id=None, turn_id=None, dry_run=dry_run)


def tools(smtp: SmtpServer, imap: ImapServer, **extra: Any) -> dict[str, Any]:
    return {c.name: h for c, h in email_tools(EmailConfig.model_validate(email_section(smtp.port, imap.port, **extra)))}


def test_the_contracts_are_the_issues():
    found = {c.name: c for c, _ in email_tools(EmailConfig.model_validate(email_section(1, 2)))}
    assert list(found) == ["emails.search", "emails.read", "emails.draft", "emails.send_external"]
    assert all(check_contract(c) == [] for c in found.values())
    assert found["emails.search"].risk is Risk.LOW and found["emails.search"].untrusted_output
    assert found["emails.read"].risk is Risk.LOW and found["emails.read"].untrusted_output
    assert found["emails.draft"].risk is Risk.MEDIUM and found["emails.draft"].confirmation
    send = found["emails.send_external"]
    assert send.risk is Risk.CRITICAL and send.step_up and send.dry_run is DryRun.REQUIRED and send.idempotent
    assert send.audit_event == "email.sent" and set(send.input_schema["properties"]) == {
        "to", "cc", "subject", "body", "reply_to_message_id"}
    assert set(send.output_schema["properties"]) == {"message_id", "status"}
    assert send.failure_modes == ("recipient_not_allowed", "auth_failed", "smtp_unavailable", "rejected_by_server",
                                  "rate_limited", "too_large")
    assert email_tools(EmailConfig()) == []  # off by default: no tools


async def test_a_dry_run_shows_the_whole_message_escaped_and_sends_nothing(smtp, imap):
    send = tools(smtp, imap)["emails.send_external"]
    out = await send({**MESSAGE, "body": "Hi\x1b[2K\u202e there"}, ctx(dry_run=True))
    again = await send({**MESSAGE, "body": "Hi\x1b[2K\u202e there"}, ctx(dry_run=True))
    assert out == again  # the same arguments preview the same message (the approved one is what leaves)
    lines = out["preview"].splitlines()
    assert lines[:4] == [f"From: {USER}", "To: ana@example.net", "Cc: rui@example.net", "Subject: Dinner on Friday"]
    assert lines[4].startswith("Message-ID: <") and lines[5] == "Date: (set when it is sent)"
    assert lines[-1] == "Hi^[[2K<U+202E> there"
    assert out["recipients"] == ["ana@example.net", "rui@example.net"]
    assert smtp.attempts == 0 and imap.messages("Sent") == []


async def test_a_send_delivers_exactly_the_message_and_files_it_in_sent(smtp, imap):
    out = await tools(smtp, imap)["emails.send_external"](MESSAGE, ctx())
    assert out["status"] == "sent" and out["message_id"].endswith("@example.org>")
    [arrived] = smtp.arrived
    assert arrived["from"] == USER and arrived["rcpt"] == ["ana@example.net", "rui@example.net"]
    msg = arrived["message"]
    assert (msg["From"], msg["To"], msg["Cc"], msg["Subject"]) == (USER, "ana@example.net", "rui@example.net",
                                                                   "Dinner on Friday")
    assert msg["Message-ID"] == out["message_id"] and msg["Date"] and msg["Bcc"] is None
    assert msg.get_content() == MESSAGE["body"]
    [copy] = imap.messages("Sent")
    assert copy["Message-ID"] == out["message_id"] and copy.get_content() == MESSAGE["body"]


async def test_a_reply_keeps_in_reply_to_and_references(smtp, imap):
    imap.seed("INBOX", b"From: ana@example.net\r\nTo: me@example.org\r\nSubject: Dinner?\r\n"
                       b"Message-ID: <q2@example.net>\r\nReferences: <q1@example.net>\r\n\r\nFriday?\r\n")
    await tools(smtp, imap)["emails.send_external"](
        {**MESSAGE, "subject": "Re: Dinner?", "reply_to_message_id": "<q2@example.net>"}, ctx())
    msg = smtp.messages()[0]
    assert msg["In-Reply-To"] == "<q2@example.net>"
    assert msg["References"] == "<q1@example.net> <q2@example.net>"


async def test_recipients_outside_the_allow_list_are_refused_before_anything(smtp, imap):
    send = tools(smtp, imap, allowed_recipients=["ana@example.net"])["emails.send_external"]
    for dry_run in (True, False):
        with pytest.raises(ToolFailed) as info:
            await send(MESSAGE, ctx(dry_run=dry_run))  # rui is in cc
        assert info.value.code == "recipient_not_allowed" and "rui@example.net" in str(info.value)
    await send({**MESSAGE, "cc": []}, ctx())
    assert [a["rcpt"] for a in smtp.arrived] == [["ana@example.net"]]


@pytest.mark.parametrize("args", [
    {**MESSAGE, "subject": "Hello\r\nBcc: thief@evil.example"},
    {**MESSAGE, "to": ["ana@example.net\r\nBcc: thief@evil.example"]},
    {**MESSAGE, "to": ["ana@example.net, thief@evil.example"]},
    {**MESSAGE, "reply_to_message_id": "<a@b>\nBcc: thief@evil.example"},
])
async def test_a_header_injection_is_refused(smtp, imap, args):
    with pytest.raises(ToolFailed) as info:
        await tools(smtp, imap)["emails.send_external"](args, ctx())
    assert info.value.code == "invalid_args"
    assert smtp.attempts == 0


@pytest.mark.parametrize(("answer", "code"), [
    ("554 5.7.1 Message rejected as spam", "rejected_by_server"),
    ("451 4.7.1 Too many messages, slow down", "rate_limited"),
    ("552 5.3.4 Message size exceeds fixed limit", "too_large"),
    ("drop", "smtp_unavailable"),
])
async def test_server_answers_map_to_failure_modes_and_nothing_is_sent_twice(smtp, imap, answer, code):
    smtp.answer = answer
    with pytest.raises(ToolFailed) as info:
        await tools(smtp, imap)["emails.send_external"](MESSAGE, ctx())
    assert info.value.code == code
    assert smtp.attempts == 1 and smtp.arrived == [] and imap.messages("Sent") == []


async def test_a_wrong_password_is_auth_failed(smtp, imap):
    section = email_section(smtp.port, imap.port)
    section["smtp"]["password"] = "wrong"
    [*_, (_, send)] = email_tools(EmailConfig.model_validate(section))
    with pytest.raises(ToolFailed) as info:
        await send(MESSAGE, ctx())
    assert info.value.code == "auth_failed" and "app password" in str(info.value)
    assert smtp.attempts == 0


async def test_nothing_listening_is_smtp_unavailable(imap):
    from tests.tools.email.conftest import free_port

    section = email_section(free_port(), imap.port)
    [*_, (_, send)] = email_tools(EmailConfig.model_validate(section))
    with pytest.raises(ToolFailed) as info:
        await send(MESSAGE, ctx())
    assert info.value.code == "smtp_unavailable"


async def test_too_large_is_refused_before_connecting(smtp, imap):
    with pytest.raises(ToolFailed) as info:
        await tools(smtp, imap)["emails.send_external"]({**MESSAGE, "body": "é" * 900_000}, ctx())
    assert info.value.code == "too_large"
    assert smtp.attempts == 0


async def test_a_draft_goes_to_drafts_and_nothing_is_sent(smtp, imap):
    out = await tools(smtp, imap)["emails.draft"](MESSAGE, ctx())
    [draft] = imap.messages("Drafts")
    assert out == {"message_id": draft["Message-ID"], "folder": "Drafts"}
    assert draft["To"] == "ana@example.net" and draft.get_content() == MESSAGE["body"]
    assert smtp.attempts == 0
