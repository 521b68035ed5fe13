"""What went wrong with TLS, in words the owner can act on: a certificate that could not be verified
(and how to trust a private CA with ``ca_file``), or a server that does not offer STARTTLS (Bruce
never falls back to clear text). Certificates are always verified: there is no switch to stop it.
"""

from __future__ import annotations

import ssl

from bruce.errors import causes

__all__ = ["certificate_problem", "tls_problem", "no_starttls"]


def certificate_problem(exc: BaseException) -> str | None:
    """Why the server's certificate was refused ("unable to get local issuer certificate",
    "Hostname mismatch, ..."), when that is what ``exc`` (or its cause) is; else None."""
    for found in causes(exc):
        if isinstance(found, ssl.SSLCertVerificationError):
            return str(found.verify_message or found.reason or found)
    return None


def tls_problem(exc: BaseException, where: str, section: str) -> str | None:
    """The message for a TLS failure talking to ``where`` (configured under ``tools.email.<section>``),
    or None when ``exc`` is not one."""
    reason = certificate_problem(exc)
    if reason is not None:
        return (f"the certificate of {where} could not be verified ({reason}). If the server uses a certificate "
                f"from your own CA, set tools.email.{section}.ca_file to that CA's certificate (PEM); Bruce never "
                "talks to a server it cannot verify.")
    for found in causes(exc):
        if isinstance(found, ssl.SSLError):
            return (f"the TLS handshake with {where} failed ({found.reason or found}); check that tools.email."
                    f"{section}.port and security match the server (465 and 993 speak ssl, 587 and 143 starttls).")
    return None


def no_starttls(where: str, section: str) -> str:
    return (f"{where} does not offer STARTTLS, and tools.email.{section}.security is starttls: Bruce does not "
            "go on in clear, so nothing was sent, not even your password. Check the port (465 and 993 "
            "speak ssl, 587 and 143 starttls); a server that used to offer STARTTLS and stops may be tampered with.")
