"""``bruce doctor``'s check of the mailbox (``tools.email``): it logs in to the IMAP server
(connect as ``security`` says, LOGIN, LIST, LOGOUT) and to the SMTP server (connect, EHLO,
STARTTLS when configured, AUTH, QUIT), each within the doctor's ``--timeout``. It never says
MAIL FROM, so no mail is sent. The libraries are the email tools' own (imapclient in a worker
thread, aiosmtplib), loaded only when email is on.

Each failure says which server, what went wrong (no password, unreachable, a time-out, TLS, the
login refused) and what to do; the password is named by its ``$VARIABLE``, never shown.
``why_unreachable`` and ``app_password`` serve the calendar's check too.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from typing import Any

from bruce.cli.checks.findings import Finding, Mark, fill, variable
from bruce.config.email import EmailConfig, MailServerConfig, tls_context
from bruce.errors import causes

__all__ = ["app_password", "check_email", "why_unreachable"]

_APP_PASSWORDS = (
    (("gmail.com", "googlemail.com", "google.com"),
     "Gmail needs an app password (Google account, Security, 2-Step Verification on, App passwords)"),
    (("fastmail.com", "fastmail.fm", "messagingengine.com"),
     "Fastmail needs an app password (Settings, Privacy & Security, App passwords)"),
    (("icloud.com", "me.com", "mac.com"),
     "iCloud needs an app-specific password (account.apple.com, Sign-In and Security)"),
)
_TLS_PORTS = {"IMAP": "ssl is port 993, starttls port 143", "SMTP": "ssl is port 465, starttls port 587"}


def app_password(*names: str) -> str:
    """The app-password advice for the provider a host or an address names, else for all three."""
    for domains, advice in _APP_PASSWORDS:
        if any(name.lower().rstrip(".").endswith(domain) for name in names for domain in domains):
            return advice
    return "Gmail, Fastmail and iCloud need an app password, not the account's own"


def why_unreachable(exc: BaseException, timeout_s: float, where: str, ca_setting: str | None = None
                    ) -> tuple[str, str] | None:
    """(what happened, the fix) for a failure to reach a server or to set up TLS with it, else None.
    ``exc``'s causes are looked at too: the libraries wrap the socket's own errors. ``ca_setting``
    names where a private CA is given for this server (``tools.email.imap.ca_file``...)."""
    chain = causes(exc)
    for cause in chain:
        if isinstance(cause, ssl.SSLCertVerificationError):
            own_ca = f"; if it comes from your own CA, set {ca_setting} to that CA's certificate (PEM)" \
                if ca_setting else ""
            return (f"its TLS certificate is not accepted ({cause.verify_message or cause.reason})",
                    f"use the host name the certificate of {where} is made for, or renew the certificate{own_ca}")
    for cause in chain:
        if isinstance(cause, ssl.SSLError):
            return (f"the TLS handshake failed ({cause.reason or type(cause).__name__})",
                    "check security and port: the server may not speak TLS on this port")
    for cause in chain:
        if isinstance(cause, ConnectionRefusedError):
            return f"refused the connection (nothing listens at {where})", "check host and port, and that the server runs"
        if isinstance(cause, socket.gaierror):
            return f"is not a known host ({where})", "check the host name"
        if isinstance(cause, TimeoutError) or "Timeout" in type(cause).__name__:
            return f"did not answer within {timeout_s:g} s", "check host and port, and that a firewall lets it through"
    for cause in chain:
        if isinstance(cause, OSError):
            return (f"could not be reached ({cause.strerror or type(cause).__name__})",
                    "check host and port, and the network")
    return None


def _where(server: MailServerConfig) -> str:
    return f"{server.host}:{server.port}"


def _scrubbed(text: str, server: MailServerConfig) -> str:
    secret = server.password.get_secret_value()
    return text.replace(secret, "****") if secret else text


# ---- IMAP ----

def _imap_session(server: MailServerConfig, timeout_s: float) -> list[tuple[tuple[bytes, ...], str]]:
    """Connect, log in, list the folders (name and flags), log out: in a worker thread."""
    from imapclient import IMAPClient

    context = tls_context(server)  # ca_file when set, else the system's store; always verified
    client = IMAPClient(server.host, port=server.port, ssl=server.security == "ssl", ssl_context=context,
                        timeout=timeout_s)
    try:
        if server.security == "starttls":
            client.starttls(context)
        client.login(server.user, server.password.get_secret_value())
        return [(tuple(flags), name) for flags, _, name in client.list_folders()]
    finally:
        try:
            client.logout()
        except Exception:  # noqa: BLE001 - the answer (or the failure) is already in hand
            client.shutdown()


def _folder(email: EmailConfig, key: str, kind: bytes, folders: list[tuple[tuple[bytes, ...], str]]) -> Finding | None:
    wanted: str = getattr(email, key)
    names = [name for _, name in folders]
    if wanted in names:
        return None
    marked = [name for flags, name in folders if kind in flags]
    if marked:
        return Finding(Mark.WARN, f"email IMAP: no folder {wanted!r}; the server marks {marked[0]!r} as its "
                                  f"{kind.decode().lstrip(chr(92))} folder", f"set tools.email.{key}: {marked[0]!r}")
    return Finding(Mark.WARN, f"email IMAP: no folder {wanted!r} yet; Bruce makes it at first use",
                   f"if your mail app keeps them elsewhere, set tools.email.{key} to that folder "
                   f"(the server has: {', '.join(names[:8])})")


def _imap_refused(exc: BaseException, server: MailServerConfig, raw: Any, timeout_s: float) -> Finding:
    from imapclient.exceptions import LoginError

    where = _where(server)
    if isinstance(exc, LoginError):
        var = variable(raw, "tools", "email", "imap", "password")
        return Finding(Mark.FAIL, f"email IMAP {where}: login refused for {server.user}",
                       f"check tools.email.imap.user and the password in {f'${var}' if var else 'tools.email.imap.password'}"
                       f"; {app_password(server.host, server.user)}")
    if server.security == "starttls" and "STARTTLS" in str(exc).upper():
        return Finding(Mark.FAIL, f"email IMAP {where}: does not offer STARTTLS",
                       f"set tools.email.imap.security: ssl and its port ({_TLS_PORTS['IMAP']})")
    unreachable = _unreachable(exc, timeout_s, where, "IMAP")
    if unreachable is not None:
        return unreachable
    said = _scrubbed(str(exc), server)[:120]
    return Finding(Mark.FAIL, f"email IMAP {where}: the session failed ({type(exc).__name__}: {said})",
                   "check tools.email.imap's host, port and security")


def _unreachable(exc: BaseException, timeout_s: float, where: str, protocol: str) -> Finding | None:
    """The ✗ line when ``protocol``'s server (IMAP or SMTP) could not be reached or TLS failed, else None."""
    section = f"tools.email.{protocol.lower()}"
    unreachable = why_unreachable(exc, timeout_s, where, f"{section}.ca_file")
    if unreachable is None:
        return None
    text, fix = unreachable
    if "TLS handshake" in text:
        fix += f" ({_TLS_PORTS[protocol]})"
    return Finding(Mark.FAIL, f"email {protocol} {where}: {text}", f"{fix} ({section})")


async def _imap(email: EmailConfig, server: MailServerConfig, raw: Any, timeout_s: float) -> list[Finding]:
    try:
        folders = await asyncio.wait_for(asyncio.to_thread(_imap_session, server, timeout_s), timeout_s)
    except Exception as exc:  # noqa: BLE001 - every failure becomes a line with its fix
        return [_imap_refused(exc, server, raw, timeout_s)]
    found = [Finding(Mark.OK, f"email IMAP {server.user} at {_where(server)} ({server.security}): login accepted")]
    for key, kind in (("drafts_folder", b"\\Drafts"), ("sent_folder", b"\\Sent")):
        problem = _folder(email, key, kind, folders)
        if problem is not None:
            found.append(problem)
    return found


# ---- SMTP ----

async def _smtp_session(server: MailServerConfig, timeout_s: float) -> None:
    """Connect (EHLO, then STARTTLS when configured), log in, QUIT: never MAIL FROM."""
    import aiosmtplib

    client = aiosmtplib.SMTP(
        hostname=server.host, port=server.port, timeout=timeout_s,
        use_tls=server.security == "ssl", start_tls=server.security == "starttls",
        tls_context=tls_context(server),
    )
    try:
        await client.connect()
        await client.login(server.user, server.password.get_secret_value())
    finally:
        if client.is_connected:
            try:
                await client.quit()
            except (aiosmtplib.SMTPException, OSError):
                client.close()


def _smtp_refused(exc: BaseException, server: MailServerConfig, raw: Any, timeout_s: float) -> Finding:
    import aiosmtplib

    where = _where(server)
    if isinstance(exc, aiosmtplib.SMTPAuthenticationError):
        var = variable(raw, "tools", "email", "smtp", "password")
        said = _scrubbed(f"{exc.code} {exc.message}", server)[:120]
        return Finding(Mark.FAIL, f"email SMTP {where}: login refused for {server.user} ({said})",
                       f"check tools.email.smtp.user and the password in {f'${var}' if var else 'tools.email.smtp.password'}"
                       f"; {app_password(server.host, server.user)}")
    message = str(exc)
    if "STARTTLS extension not supported" in message:
        return Finding(Mark.FAIL, f"email SMTP {where}: does not offer STARTTLS",
                       f"set tools.email.smtp.security: ssl and its port ({_TLS_PORTS['SMTP']})")
    if "AUTH extension not supported" in message:
        return Finding(Mark.FAIL, f"email SMTP {where}: offers no login (AUTH)",
                       f"use the server's submission port with TLS ({_TLS_PORTS['SMTP']})")
    unreachable = _unreachable(exc, timeout_s, where, "SMTP")
    if unreachable is not None:
        return unreachable
    said = _scrubbed(message, server)[:120]
    return Finding(Mark.FAIL, f"email SMTP {where}: the session failed ({type(exc).__name__}: {said})",
                   "check tools.email.smtp's host, port and security")


async def _smtp(server: MailServerConfig, raw: Any, timeout_s: float) -> list[Finding]:
    try:
        await asyncio.wait_for(_smtp_session(server, timeout_s), timeout_s)
    except Exception as exc:  # noqa: BLE001 - every failure becomes a line with its fix
        return [_smtp_refused(exc, server, raw, timeout_s)]
    return [Finding(Mark.OK, f"email SMTP {server.user} at {_where(server)} ({server.security}): "
                             "login accepted (no mail sent)")]


# ---- both ----

def _no_password(kind: str, server: MailServerConfig, raw: Any) -> Finding | None:
    if server.password.get_secret_value():
        return None
    var = variable(raw, "tools", "email", kind.lower(), "password")
    return Finding(Mark.FAIL, f"email {kind}: no password" + (f" (${var} is empty)" if var else ""),
                   fill(var, f"the mailbox's password ({app_password(server.host, server.user)})",
                        f"tools.email.{kind.lower()}.password"))


async def _login(kind: str, email: EmailConfig, server: MailServerConfig, raw: Any, timeout_s: float) -> list[Finding]:
    missing = _no_password(kind, server, raw)
    if missing is not None:
        return [missing]
    return await (_imap(email, server, raw, timeout_s) if kind == "IMAP" else _smtp(server, raw, timeout_s))


async def check_email(email: EmailConfig, raw: Any, timeout_s: float) -> list[Finding]:
    """The IMAP and the SMTP login, side by side; one ``–`` line when email is off."""
    if not email.enabled or email.imap is None or email.smtp is None:
        return [Finding(Mark.SKIP, "email: off")]
    imap, smtp = await asyncio.gather(_login("IMAP", email, email.imap, raw, timeout_s),
                                      _login("SMTP", email, email.smtp, raw, timeout_s))
    return [*imap, *smtp]
