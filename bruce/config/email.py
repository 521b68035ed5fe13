"""``tools.email``: the owner's mailbox over IMAP and SMTP (docs/tools.md, "Email").

The key names are a contract (the owner's scripts rely on them)::

    tools:
      email:
        enabled: true
        address: me@example.org
        imap: {host: imap.example.org, port: 993, security: ssl, user: me@example.org, password: "${IMAP_PASSWORD}"}
        smtp: {host: smtp.example.org, port: 465, security: ssl, user: me@example.org, password: "${SMTP_PASSWORD}"}
        allowed_recipients: []

``security: none`` (no TLS at all) is accepted only for a loopback host, so tests can use local servers.

Certificates are always verified, against the system's store (which ``SSL_CERT_FILE`` can point
elsewhere for the whole process), or against ``ca_file`` when a server sets one: an absolute path to
the PEM certificate of a private CA, trusted for that server only, instead of the system's store.
"""

from __future__ import annotations

import ipaddress
import re
import ssl
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

__all__ = ["EmailConfig", "MailServerConfig", "is_loopback", "tls_context"]

_ADDRESS = re.compile(r"[^@\s<>,;\"]+@[^@\s<>,;\"]+\.?[^@\s<>,;\"]*")


def is_loopback(host: str) -> bool:
    if host.lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _address(value: str) -> str:
    if not _ADDRESS.fullmatch(value):
        raise ValueError(f"{value[:80]!r} is not an email address (name@domain)")
    return value


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class MailServerConfig(_Model):
    """One IMAP or SMTP server and its login."""

    host: str = Field(min_length=1)
    port: int = Field(ge=1, le=65535)
    security: Literal["ssl", "starttls", "none"] = "ssl"
    user: str = Field(min_length=1)
    password: SecretStr
    timeout_s: float = Field(30.0, gt=0, le=600)
    ca_file: Path | None = None  # a private CA's certificate (PEM), trusted for this server instead of the system's

    @field_validator("ca_file")
    @classmethod
    def _ca_file(cls, value: Path | None) -> Path | None:
        return None if value is None else _usable_ca_file(value.expanduser())

    @model_validator(mode="after")
    def _tls_beyond_loopback(self) -> MailServerConfig:
        if self.security == "none" and not is_loopback(self.host):
            raise ValueError(f"security: none (no TLS) is allowed only for a loopback host, not {self.host!r}; "
                             "use ssl or starttls")
        if self.security == "none" and self.ca_file is not None:
            raise ValueError("ca_file is used only with security: ssl or starttls; remove it or turn TLS on")
        return self


def _usable_ca_file(path: Path) -> Path:
    if not path.is_absolute():
        raise ValueError(f"must be an absolute path (such as /etc/bruce/mail-ca.pem), not {str(path)!r}")
    if not path.is_file():
        raise ValueError(f"no file at {str(path)!r}: give the PEM certificate of the CA that signed the server's")
    try:
        ssl.create_default_context(cafile=str(path))
    except (ssl.SSLError, OSError) as exc:
        raise ValueError(f"{str(path)!r} holds no PEM certificate that can be trusted "
                         f"({getattr(exc, 'reason', None) or exc})") from None
    return path


def tls_context(server: MailServerConfig) -> ssl.SSLContext | None:
    """How ``server``'s certificate is checked: None for ``security: none``; otherwise always
    verified, with its hostname, against ``ca_file`` when set, else the system's store."""
    if server.security == "none":
        return None
    return ssl.create_default_context(cafile=str(server.ca_file) if server.ca_file else None)


class EmailConfig(_Model):
    enabled: bool = False
    address: str | None = None  # From, and whose mailbox it is
    imap: MailServerConfig | None = None
    smtp: MailServerConfig | None = None
    allowed_recipients: list[str] = Field(default_factory=list)  # not empty: send_external refuses anyone else
    drafts_folder: str = "Drafts"
    sent_folder: str = "Sent"

    _address_ok = field_validator("address")(lambda v: None if v is None else _address(v))

    @field_validator("allowed_recipients")
    @classmethod
    def _recipients(cls, values: list[str]) -> list[str]:
        return [_address(v).lower() for v in values]

    @model_validator(mode="after")
    def _complete(self) -> EmailConfig:
        if self.enabled:
            missing = [k for k in ("address", "imap", "smtp") if getattr(self, k) is None]
            if missing:
                raise ValueError(f"tools.email is enabled but {', '.join(missing)} is not set")
        return self
