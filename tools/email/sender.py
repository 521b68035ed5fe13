"""Sending over SMTP with aiosmtplib (asyncio-native, maintained, STARTTLS and implicit TLS).

One connection per message and no automatic retry: a connection that drops after DATA may have
delivered the message, so it is reported (``smtp_unavailable``) rather than sent a second time.
Before the message goes out, the connection is over TLS (``ssl`` or a required ``starttls``) with
the server's certificate verified (``bruce.config.email.tls_context``); a failure there sends nothing.
SMTP answers map onto ``emails.send_external``'s failure modes.
"""

from __future__ import annotations

import aiosmtplib

from bruce.config.email import MailServerConfig, tls_context
from bruce.errors import ToolFailed
from tools.email.tls import no_starttls, tls_problem

__all__ = ["send"]


def _failed(exc: aiosmtplib.SMTPResponseException, where: str) -> ToolFailed:
    code = exc.code
    text = f"{where} answered {code}: {exc.message[:300]}"
    if code == 552 or code == 523:
        return ToolFailed(f"the message is too large for the server: {text}", code="too_large")
    if code in (421, 450, 451, 452) or "rate" in exc.message.lower():
        return ToolFailed(f"the server asks to try later (rate limited): {text}", code="rate_limited")
    if code in (530, 534, 535):
        return ToolFailed(f"the login was refused: {text}", code="auth_failed")
    return ToolFailed(f"the server refused the message: {text}", code="rejected_by_server")


async def _connected(server: MailServerConfig, where: str) -> aiosmtplib.SMTP:
    """A connection, over TLS unless ``security: none``, logged in; nothing of the message has left.
    ``starttls`` requires the server to offer it: aiosmtplib raises rather than going on in clear."""
    client = aiosmtplib.SMTP(
        hostname=server.host, port=server.port, timeout=server.timeout_s,
        use_tls=server.security == "ssl", start_tls=server.security == "starttls",
        tls_context=tls_context(server),
    )
    try:
        await client.connect()
        await client.login(server.user, server.password.get_secret_value())
    except aiosmtplib.SMTPAuthenticationError:
        client.close()
        raise ToolFailed(f"{where} refused the login for {server.user}: check tools.email.smtp's user and password "
                         "(Gmail and Fastmail need an app password).", code="auth_failed") from None
    except aiosmtplib.SMTPResponseException as exc:
        client.close()
        raise _failed(exc, where) from None
    except (aiosmtplib.SMTPException, OSError) as exc:
        client.close()
        if server.security == "starttls" and "STARTTLS extension not supported" in str(exc):
            raise ToolFailed(no_starttls(where, "smtp"), code="smtp_unavailable") from None
        problem = tls_problem(exc, where, "smtp")
        raise ToolFailed(f"{problem or f'{where} could not be reached ({exc.__class__.__name__}).'} "
                         "The message was not sent.", code="smtp_unavailable") from None
    return client


async def send(server: MailServerConfig, sender: str, recipients: list[str], message: bytes) -> None:
    where = f"the SMTP server {server.host}:{server.port}"
    client = await _connected(server, where)
    try:
        refused, _ = await client.sendmail(sender, recipients, message)
        if refused:
            raise ToolFailed(f"{where} refused some recipients: " + ", ".join(
                f"{addr} ({resp.code} {resp.message[:100]})" for addr, resp in refused.items()), code="rejected_by_server")
    except aiosmtplib.SMTPRecipientsRefused as exc:
        first = exc.recipients[0] if exc.recipients else None
        raise ToolFailed(f"{where} refused the recipients"
                         + (f": {first.recipient} ({first.code} {first.message[:200]})" if first else "."),
                         code="rejected_by_server") from None
    except aiosmtplib.SMTPResponseException as exc:
        raise _failed(exc, where) from None
    except (aiosmtplib.SMTPException, OSError) as exc:
        raise ToolFailed(f"{where} dropped the connection while sending ({exc.__class__.__name__}); "
                         "the message was not sent again, check Sent before asking once more.",
                         code="smtp_unavailable") from None
    finally:
        if client.is_connected:
            try:
                await client.quit()
            except (aiosmtplib.SMTPException, OSError):
                client.close()
