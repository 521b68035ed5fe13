"""Real mail servers on 127.0.0.1 for the email tools: aiosmtpd (SMTP, with a login) and pymap's
in-memory backend (IMAP), each started by the test and stopped after it."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from email import message_from_bytes, policy
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword
from imapclient import IMAPClient

USER, PASSWORD = "me@example.org", "app-password-1"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class SmtpServer:
    """What arrived, and how the next DATA is answered: "ok", a reply line ("554 ..."), or "drop"."""

    port: int = 0
    arrived: list[dict[str, Any]] = field(default_factory=list)
    attempts: int = 0
    answer: str = "ok"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.attempts += 1
        if self.answer == "drop":
            server.transport.close()  # the line drops after the whole message was received
            return "250 OK"
        if self.answer != "ok":
            return self.answer
        self.arrived.append({"from": envelope.mail_from, "rcpt": list(envelope.rcpt_tos),
                             "message": message_from_bytes(envelope.content.replace(b"\r\n", b"\n"), policy=policy.default)})
        return "250 OK"

    def messages(self) -> list[EmailMessage]:
        return [a["message"] for a in self.arrived]


def _login(server: Any, session: Any, envelope: Any, mechanism: str, auth_data: Any) -> AuthResult:
    ok = isinstance(auth_data, LoginPassword) and auth_data.login == USER.encode() and \
        auth_data.password == PASSWORD.encode()
    return AuthResult(success=ok, handled=False)


@pytest.fixture
def smtp() -> Iterator[SmtpServer]:
    server = SmtpServer(port=free_port())
    controller = Controller(server, hostname="127.0.0.1", port=server.port, authenticator=_login,
                            auth_require_tls=False, auth_exclude_mechanism=["CRAM-MD5"])
    controller.start()
    yield server
    controller.stop()


@dataclass
class ImapServer:
    port: int

    def client(self) -> IMAPClient:
        client = IMAPClient("127.0.0.1", port=self.port, ssl=False, timeout=10)
        client.login(USER, PASSWORD)
        return client

    def seed(self, folder: str, raw: bytes) -> None:
        with self.client() as client:
            if not client.folder_exists(folder):
                client.create_folder(folder)
            client.append(folder, raw)

    def messages(self, folder: str) -> list[EmailMessage]:
        with self.client() as client:
            if not client.folder_exists(folder):
                return []
            client.select_folder(folder, readonly=True)
            uids = client.search(["ALL"])
            fetched = client.fetch(uids, ["BODY.PEEK[]"]) if uids else {}
            return [message_from_bytes(fetched[u][b"BODY[]"].replace(b"\r\n", b"\n"), policy=policy.default)
                    for u in uids]


@pytest.fixture
def imap(tmp_path: Path) -> Iterator[ImapServer]:
    port = free_port()
    pymap = Path(sys.executable).with_name("pymap")
    log = (tmp_path / "pymap.log").open("wb")
    proc = subprocess.Popen([str(pymap), "--host", "127.0.0.1", "--port", str(port), "--no-tls",
                             "--no-service", "admin", "dict", "--demo-user", USER, "--demo-password", PASSWORD],
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("pymap did not start: " + (tmp_path / "pymap.log").read_text()) from None
                time.sleep(0.05)
        yield ImapServer(port)
    finally:
        proc.terminate()
        proc.wait(10)
        log.close()


def email_section(smtp_port: int, imap_port: int, **extra: Any) -> dict[str, Any]:
    server = {"host": "127.0.0.1", "security": "none", "user": USER, "password": PASSWORD, "timeout_s": 5}
    return {"enabled": True, "address": USER, "imap": {**server, "port": imap_port},
            "smtp": {**server, "port": smtp_port}, **extra}


async def until(check: Any, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        await asyncio.sleep(0.05)
