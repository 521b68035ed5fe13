"""The owner's mailbox over IMAP: imapclient (blocking, mature, used by many projects) run in a
worker thread, one short connection per call, so a slow or dead server holds a thread, never the
event loop, and no session state survives between calls.

The connection is over TLS (``ssl``, or ``starttls`` when the server offers it: never on in clear)
with the certificate verified (``bruce.config.email.tls_context``). Every failure becomes a
ToolFailed with a code: ``auth_failed``, ``imap_unavailable`` (naming a certificate problem), ``not_found``.
"""

from __future__ import annotations

import asyncio
import imaplib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import date
from email.header import decode_header, make_header
from typing import Any, TypeVar

from imapclient import IMAPClient
from imapclient.exceptions import IMAPClientError, LoginError

from bruce.config.email import MailServerConfig, tls_context
from bruce.errors import ToolFailed
from bruce.safe_text import visible
from tools.email.message import one_line
from tools.email.tls import no_starttls, tls_problem

__all__ = ["Mailbox", "search_criteria", "from_known"]

T = TypeVar("T")
SNIPPET_BYTES = 2048
MAX_SCANNED = 500  # messages whose From is checked against ``senders``, newest first


def _header(raw: bytes | None) -> str:
    if not raw:
        return ""
    try:
        return one_line(str(make_header(decode_header(raw.decode("utf-8", "replace")))))
    except (UnicodeError, LookupError, ValueError):
        return one_line(raw.decode("utf-8", "replace"))


def _address(addresses: Any) -> str:
    out = []
    for a in addresses or ():
        mailbox = (a.mailbox or b"").decode("utf-8", "replace")
        host = (a.host or b"").decode("utf-8", "replace")
        name = _header(a.name)
        out.append(f"{name} <{mailbox}@{host}>" if name else f"{mailbox}@{host}")
    return visible(", ".join(out))


def search_criteria(args: dict[str, Any]) -> list[Any]:
    """IMAP SEARCH keys for ``emails.search``'s arguments (strings go as literals, never spliced)."""
    criteria: list[Any] = []
    for key, imap_key in (("from", "FROM"), ("subject", "SUBJECT"), ("text", "TEXT")):
        if args.get(key):
            criteria += [imap_key, args[key]]
    senders = args.get("senders") or []
    if senders:  # the server narrows (FROM matches any part of the header); ``from_known`` decides
        criteria += ["OR"] * (len(senders) - 1) + [item for s in senders for item in ("FROM", s)]
    if args.get("unread"):
        criteria.append("UNSEEN")
    if args.get("since"):
        criteria += ["SENTSINCE", date.fromisoformat(args["since"])]
    if args.get("before"):
        criteria += ["SENTBEFORE", date.fromisoformat(args["before"])]
    return criteria or ["ALL"]


def from_known(client: IMAPClient, uids: list[int], senders: Sequence[str]) -> list[int]:
    """Those of ``uids`` whose From address is one of ``senders`` (``name@domain``) or at one of
    their domains (``@domain``), compared whole and without case."""
    wanted = {s.lower() for s in senders}
    if not uids:
        return []
    envelopes = client.fetch(uids, ["ENVELOPE"])
    kept = []
    for uid in uids:
        env = envelopes.get(uid, {}).get(b"ENVELOPE")
        for a in (env.from_ or ()) if env is not None else ():
            address = f"{(a.mailbox or b'').decode('utf-8', 'replace')}@{(a.host or b'').decode('utf-8', 'replace')}"
            if address.lower() in wanted or "@" + address.lower().rpartition("@")[2] in wanted:
                kept.append(uid)
                break
    return kept


class Mailbox:
    def __init__(self, server: MailServerConfig) -> None:
        self._server = server

    async def run(self, work: Callable[[IMAPClient], T]) -> T:
        return await asyncio.to_thread(self._run, work)

    def _run(self, work: Callable[[IMAPClient], T]) -> T:
        with self._connected() as client:
            return work(client)

    @contextmanager
    def _connected(self) -> Iterator[IMAPClient]:
        s = self._server
        where = f"the IMAP server {s.host}:{s.port}"
        context = tls_context(s)
        try:
            client = IMAPClient(s.host, port=s.port, ssl=s.security == "ssl", ssl_context=context, timeout=s.timeout_s)
            if s.security == "starttls":
                if b"STARTTLS" not in client.capabilities():
                    client.shutdown()
                    raise ToolFailed(no_starttls(where, "imap"), code="imap_unavailable")
                client.starttls(context)
            client.login(s.user, s.password.get_secret_value())
        except LoginError:
            raise ToolFailed(f"{where} refused the login for {s.user}: check tools.email.imap's user and password "
                             "(Gmail and Fastmail need an app password).", code="auth_failed") from None
        except (TimeoutError, OSError, IMAPClientError, imaplib.IMAP4.error) as exc:
            problem = tls_problem(exc, where, "imap")
            raise ToolFailed(problem or f"{where} could not be reached: {exc}", code="imap_unavailable") from None
        try:
            yield client
        except (OSError, IMAPClientError, imaplib.IMAP4.error) as exc:
            raise ToolFailed(f"{where} failed during the call: {exc}", code="imap_unavailable") from None
        finally:
            try:
                client.logout()
            except Exception:  # noqa: BLE001 - the answer is already in hand
                pass

    @staticmethod
    def summaries(client: IMAPClient, folder: str, criteria: list[Any], limit: int,
                  senders: Sequence[str] = ()) -> list[dict[str, Any]]:
        """The newest ``limit`` messages found; given ``senders``, only those whose From address is
        one of them, or at one of their @domains (a display name or a look-alike never counts)."""
        client.select_folder(folder, readonly=True)
        uids = sorted(client.search(criteria), reverse=True)
        if senders:
            uids = from_known(client, uids[:MAX_SCANNED], senders)
        uids = uids[:limit]
        if not uids:
            return []
        fetched = client.fetch(uids, ["ENVELOPE", "FLAGS", "RFC822.SIZE", f"BODY.PEEK[TEXT]<0.{SNIPPET_BYTES}>"])
        out = []
        for uid in uids:
            data = fetched.get(uid)
            if data is None:
                continue
            env = data[b"ENVELOPE"]
            snippet = next((v for k, v in data.items() if k.startswith(b"BODY[TEXT]")), b"") or b""
            out.append({
                "uid": uid, "folder": folder, "from": _address(env.from_), "to": _address(env.to),
                "subject": _header(env.subject), "date": env.date.isoformat() if env.date else None,
                "message_id": visible((env.message_id or b"").decode("ascii", "replace")),
                "unread": b"\\Seen" not in data[b"FLAGS"], "bytes": data[b"RFC822.SIZE"],
                "snippet": visible(" ".join(snippet.decode("utf-8", "replace").split())[:200]),
            })
        return out

    @staticmethod
    def fetch_raw(client: IMAPClient, folder: str, uid: int) -> bytes:
        client.select_folder(folder, readonly=True)
        data = client.fetch([uid], ["RFC822.SIZE", "BODY.PEEK[]"]).get(uid)
        if data is None:
            raise ToolFailed(f"no message with uid {uid} in {folder}.", code="not_found")
        raw: bytes = data[b"BODY[]"]
        return raw  # attachments are listed by name and size, never opened

    @staticmethod
    def references_of(client: IMAPClient, folder: str, message_id: str) -> str | None:
        """The References of the message with this Message-ID, for a reply's thread (None: not found)."""
        client.select_folder(folder, readonly=True)
        uids = client.search(["HEADER", "Message-ID", message_id])
        if not uids:
            return None
        data = client.fetch(uids[:1], ["BODY.PEEK[HEADER.FIELDS (REFERENCES)]"])[uids[0]]
        raw = next((v for k, v in data.items() if k.startswith(b"BODY[HEADER")), b"") or b""
        value = raw.decode("ascii", "replace").partition(":")[2]
        return " ".join(value.split()) or ""

    @staticmethod
    def append(client: IMAPClient, folder: str, message: bytes, flags: tuple[bytes, ...]) -> None:
        if not client.folder_exists(folder):
            client.create_folder(folder)
        client.append(folder, message, flags=flags)
