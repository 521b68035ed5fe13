"""The email tools' handlers: ``emails.search``, ``emails.read``, ``emails.draft`` and
``emails.send_external`` on the owner's mailbox (``tools.email`` in the config).

The send is the critical one: the registry parks it until the owner approves it locally (step-up)
after seeing ``preview``; here it checks the allow-list, builds the message (the same arguments give
the same Message-ID, so what was approved is what leaves), sends it once, and files a copy in Sent.
"""

from __future__ import annotations

import asyncio
from typing import Any

from bruce.config.email import EmailConfig, MailServerConfig
from bruce.contracts import ToolContext, ToolContract, ToolHandler
from bruce.errors import ToolFailed
from tools.email.contracts import EMAILS_DRAFT, EMAILS_READ, EMAILS_SEARCH, EMAILS_SEND_EXTERNAL
from tools.email.mailbox import Mailbox, search_criteria
from tools.email.message import MAX_MESSAGE_BYTES, build_message, dated, parse, preview, recipients, reply_id
from tools.email.reader import html_text
from tools.email.sender import send

__all__ = ["email_tools", "Email"]

MAX_TEXT_CHARS = 20_000


class Email:
    """One configured mailbox and its four tools."""

    def __init__(self, config: EmailConfig) -> None:
        assert config.address and config.imap and config.smtp
        self._config = config
        self._address: str = config.address
        self._mailbox = Mailbox(config.imap)
        self._smtp: MailServerConfig = config.smtp

    async def search(self, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        folder = args.get("folder", "INBOX")
        criteria = search_criteria(args)
        limit = int(args.get("limit", 10))
        senders = tuple(args.get("senders") or ())
        found = await self._mailbox.run(lambda c: Mailbox.summaries(c, folder, criteria, limit, senders))
        return {"messages": found}

    async def read(self, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        folder = args.get("folder", "INBOX")
        raw = await self._mailbox.run(lambda c: Mailbox.fetch_raw(c, folder, args["uid"]))
        parsed = await asyncio.to_thread(parse, raw)
        text = parsed.plain
        if not text and parsed.html is not None:
            text = await html_text(*parsed.html, MAX_TEXT_CHARS)
        text = text or ""
        return {**parsed.headers, "text": text[:MAX_TEXT_CHARS], "truncated": len(text) > MAX_TEXT_CHARS,
                "attachments": parsed.attachments}

    async def _message(self, args: dict[str, Any]) -> Any:
        reply_to = reply_id(args.get("reply_to_message_id"))
        references = None
        if reply_to:
            references = await self._mailbox.run(lambda c: Mailbox.references_of(c, "INBOX", reply_to))
        msg = build_message(self._address, args, references)
        size = len(msg.as_bytes())
        if size > MAX_MESSAGE_BYTES:
            raise ToolFailed(f"the message is {size} bytes; at most {MAX_MESSAGE_BYTES} are sent.", code="too_large")
        return msg

    async def draft(self, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        msg = await self._message(args)
        if ctx.dry_run:
            return {"preview": preview(msg)}
        raw = dated(msg)
        folder = self._config.drafts_folder
        await self._mailbox.run(lambda c: Mailbox.append(c, folder, raw, (b"\\Draft", b"\\Seen")))
        return {"message_id": str(msg["Message-ID"]), "folder": folder}

    def _check_recipients(self, args: dict[str, Any]) -> list[str]:
        everyone = recipients(args.get("to", []), "to") + recipients(args.get("cc", []), "cc")
        allowed = self._config.allowed_recipients
        refused = [a for a in everyone if allowed and a.lower() not in allowed]
        if refused:
            raise ToolFailed(f"cannot send to {', '.join(refused)}: only the addresses in "
                             "tools.email.allowed_recipients may receive email from Bruce.", code="recipient_not_allowed")
        return everyone

    async def send_external(self, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        everyone = self._check_recipients(args)
        msg = await self._message(args)
        if ctx.dry_run:
            return {"preview": preview(msg), "recipients": everyone}
        raw = dated(msg)
        await send(self._smtp, self._address, everyone, raw)
        status = "sent"
        try:
            sent = self._config.sent_folder
            await self._mailbox.run(lambda c: Mailbox.append(c, sent, raw, (b"\\Seen",)))
        except ToolFailed:
            status = "sent; the copy to Sent failed"
        return {"message_id": str(msg["Message-ID"]), "status": status}


def email_tools(config: EmailConfig) -> list[tuple[ToolContract, ToolHandler]]:
    """The four tools when ``tools.email.enabled``, else none."""
    if not config.enabled:
        return []
    mail = Email(config)
    return [(EMAILS_SEARCH, mail.search), (EMAILS_READ, mail.read), (EMAILS_DRAFT, mail.draft),
            (EMAILS_SEND_EXTERNAL, mail.send_external)]


