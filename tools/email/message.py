"""Email messages: the one ``emails.send_external`` and ``emails.draft`` build, its preview, and a
fetched message taken apart (``parse``: headers, text, the HTML part for ``tools/email/reader.py``,
attachments listed by name and size only).

Nothing here touches the network. Every header value the model gives is checked for line breaks
first (``_no_breaks``): a subject with ``\\r\\nBcc: x`` would otherwise add a recipient.
"""

from __future__ import annotations

import email
import email.policy
import hashlib
import json
import re
from email.message import EmailMessage, Message
from email.utils import formatdate, getaddresses
from typing import Any, NamedTuple

from bruce.errors import ToolFailed
from bruce.safe_text import visible

__all__ = ["one_line", "build_message", "preview", "parse", "Parsed", "recipients", "MAX_MESSAGE_BYTES"]

MAX_MESSAGE_BYTES = 2_000_000  # what one message may weigh when it leaves (text only: no attachments)
_MESSAGE_ID = re.compile(r"<[^<>\s]{1,900}>")


def one_line(text: str) -> str:
    """A header value as one visible line: its line breaks written out (``\\r\\n``), never a new header."""
    return visible(text.replace("\r", "\\r").replace("\n", "\\n"))


def _no_breaks(name: str, value: str) -> str:
    if any(c in value for c in "\r\n\x00"):
        raise ToolFailed(f"{name} must be one line: a line break there could add headers.", code="invalid_args")
    return value


def recipients(values: list[str], field: str) -> list[str]:
    """Plain addresses from the model's list, or ToolFailed(invalid_args)."""
    found = []
    for raw in values:
        _no_breaks(field, raw)
        parsed = getaddresses([raw])
        if len(parsed) != 1 or "@" not in parsed[0][1] or parsed[0][1].count("@") != 1:
            raise ToolFailed(f"{field}: {raw[:80]!r} is not one email address.", code="invalid_args")
        found.append(parsed[0][1])
    return found


def _message_id(sender: str, args: dict[str, Any]) -> str:
    """The same arguments give the same Message-ID: the preview the owner approved is what leaves,
    and a retried send is recognisable as the same message."""
    canonical = json.dumps({k: args.get(k) for k in ("to", "cc", "subject", "body", "reply_to_message_id")},
                           sort_keys=True, ensure_ascii=False)
    digest = hashlib.sha256(f"{sender}\n{canonical}".encode()).hexdigest()[:32]
    return f"<{digest}@{sender.rsplit('@', 1)[1]}>"


def reply_id(value: str | None) -> str | None:
    """A Message-ID as ``emails.search`` gives it (``<id@host>``), or ToolFailed(invalid_args)."""
    if value is None or value == "":
        return None
    if not _MESSAGE_ID.fullmatch(value):
        raise ToolFailed(f"reply_to_message_id must be one Message-ID like <id@host>, not {value[:80]!r}.",
                         code="invalid_args")
    return value


def build_message(sender: str, args: dict[str, Any], references: str | None = None) -> EmailMessage:
    """The message as it will leave, without its Date (set when it is sent)."""
    msg = EmailMessage(policy=email.policy.SMTP)
    msg["From"] = sender
    msg["To"] = ", ".join(recipients(args.get("to", []), "to"))
    cc = recipients(args.get("cc", []), "cc")
    if cc:
        msg["Cc"] = ", ".join(cc)
    msg["Subject"] = _no_breaks("subject", args.get("subject", ""))
    msg["Message-ID"] = _message_id(sender, args)
    reply_to = reply_id(args.get("reply_to_message_id"))
    if reply_to:
        msg["In-Reply-To"] = reply_to
        msg["References"] = f"{references} {reply_to}".strip() if references else reply_to
    msg.set_content(args.get("body", ""))
    return msg


def dated(msg: EmailMessage) -> bytes:
    msg["Date"] = formatdate(localtime=False, usegmt=True)
    return msg.as_bytes()


def preview(msg: EmailMessage) -> str:
    """The full message as it will leave, headers and body, with control and bidi characters written out."""
    headers = "".join(f"{k}: {v}\n" for k, v in msg.items() if k.lower() not in ("content-type",
                      "content-transfer-encoding", "mime-version"))
    body = msg.get_content()
    return visible(f"{headers}Date: (set when it is sent)\n\n{body}")


def _decoded(part: Message) -> str:
    payload = part.get_payload(decode=True)
    raw = payload if isinstance(payload, bytes) else b""
    charset = part.get_content_charset() or "utf-8"
    try:
        return raw.decode(charset, errors="replace")
    except LookupError:  # a charset Python does not know
        return raw.decode("utf-8", errors="replace")


class Parsed(NamedTuple):
    """A fetched message taken apart: headers, its plain text (None: it has none), its first HTML
    part as bytes and charset (for the page reader), and its attachments."""

    headers: dict[str, str]
    plain: str | None
    html: tuple[bytes, str | None] | None
    attachments: list[dict[str, Any]]


def parse(raw: bytes) -> Parsed:
    """CPU-bound on a large message (base64 attachments are decoded to be measured): run it in a thread."""
    msg = email.message_from_bytes(raw, policy=email.policy.default)
    plain: str | None = None
    html: tuple[bytes, str | None] | None = None
    attachments = []
    for part in msg.walk():
        if part.is_multipart():
            continue
        if part.get_content_disposition() == "attachment" or part.get_filename():
            data = part.get_payload(decode=True)
            attachments.append({"name": visible(part.get_filename() or "(no name)"),
                                "type": part.get_content_type(), "bytes": len(data) if isinstance(data, bytes) else 0})
        elif part.get_content_type() == "text/plain" and plain is None:
            plain = visible(_decoded(part).replace("\r\n", "\n")).strip()
        elif part.get_content_type() == "text/html" and html is None:
            payload = part.get_payload(decode=True)
            html = (payload if isinstance(payload, bytes) else b"", part.get_content_charset())
    headers = {k.lower(): one_line(str(msg.get(k, ""))) for k in ("From", "To", "Cc", "Subject", "Date",
                                                                   "Message-ID", "In-Reply-To", "References")}
    return Parsed({k: v for k, v in headers.items() if v}, plain, html, attachments)
