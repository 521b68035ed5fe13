"""Real mail servers on 127.0.0.1 for the email tools: aiosmtpd (SMTP, with a login) and pymap's
in-memory backend (IMAP), each started by the test and stopped after it; and the same over TLS
(implicit and STARTTLS) with a certificate from a throwaway CA made by the test."""

from __future__ import annotations

import asyncio
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email import message_from_bytes, policy
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword
from imapclient import IMAPClient

from tests.fakes.tls import TestCA, make_ca

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


@contextmanager
def pymap(tmp_path: Path, port: int, *tls: str) -> Iterator[None]:
    """pymap's in-memory IMAP server on 127.0.0.1:``port``; ``tls`` are its TLS options (default: none)."""
    binary = Path(sys.executable).with_name("pymap")
    log_path = tmp_path / f"pymap-{port}.log"
    log = log_path.open("wb")
    proc = subprocess.Popen([str(binary), "--host", "127.0.0.1", "--port", str(port), *(tls or ("--no-tls",)),
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
                    raise RuntimeError("pymap did not start: " + log_path.read_text()) from None
                time.sleep(0.05)
        yield
    finally:
        proc.terminate()
        proc.wait(10)
        log.close()


@pytest.fixture
def imap(tmp_path: Path) -> Iterator[ImapServer]:
    port = free_port()
    with pymap(tmp_path, port):
        yield ImapServer(port)


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


# ---- the same servers over TLS, with a certificate from a throwaway CA (tests/fakes/tls.py) ----


@pytest.fixture
def ca(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> TestCA:
    """A private CA whose certificate only a ``ca_file`` makes trusted: the system's store is the
    default one, never widened by an SSL_CERT_FILE or SSL_CERT_DIR of the machine running the tests."""
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    return make_ca(tmp_path / "ca")


@dataclass
class TlsSmtpServer(SmtpServer):
    """An SmtpServer that also counts login attempts (a password must never go out in clear)."""

    logins: int = 0

    def login(self, server: Any, session: Any, envelope: Any, mechanism: str, auth_data: Any) -> AuthResult:
        self.logins += 1
        return _login(server, session, envelope, mechanism, auth_data)


@contextmanager
def smtp_server(**tls: Any) -> Iterator[TlsSmtpServer]:
    """aiosmtpd on 127.0.0.1: ``ssl_context=`` for implicit TLS, ``tls_context=`` and
    ``require_starttls=True`` for STARTTLS, nothing for a server that offers no TLS at all."""
    server = TlsSmtpServer(port=free_port())
    options = {"auth_require_tls": False, "auth_exclude_mechanism": ["CRAM-MD5"], **tls}
    controller = Controller(server, hostname="127.0.0.1", port=server.port, authenticator=server.login, **options)
    controller.start()
    try:
        yield server
    finally:
        controller.stop()


@pytest.fixture
def smtps(ca: TestCA) -> Iterator[TlsSmtpServer]:
    """SMTP over implicit TLS (what port 465 speaks)."""
    with smtp_server(ssl_context=ca.server_context()) as server:
        yield server


@pytest.fixture
def smtp_starttls(ca: TestCA) -> Iterator[TlsSmtpServer]:
    """SMTP that requires STARTTLS before anything else (what port 587 speaks)."""
    with smtp_server(tls_context=ca.server_context(), require_starttls=True, auth_require_tls=True) as server:
        yield server


@pytest.fixture
def smtp_clear() -> Iterator[TlsSmtpServer]:
    """SMTP that does not offer STARTTLS (as a downgrading man in the middle would show it)."""
    with smtp_server() as server:
        yield server


class TlsFront:
    """Implicit TLS in front of a plain TCP server, as stunnel or haproxy put it before an IMAP
    server: pymap speaks only STARTTLS, so IMAPS (port 993) is this front on top of it. It runs
    its own event loop in a thread, so blocking clients in the test cannot stall it."""

    def __init__(self, context: ssl.SSLContext, target_port: int) -> None:
        self._context, self._target = context, target_port
        self._loop = asyncio.new_event_loop()
        self._loop.set_exception_handler(lambda loop, ctx: None)  # a refused handshake is the point of some tests
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self.port = 0

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (OSError, ssl.SSLError):
            pass
        finally:
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        back_reader, back_writer = await asyncio.open_connection("127.0.0.1", self._target)
        await asyncio.gather(self._pipe(reader, back_writer), self._pipe(back_reader, writer))

    def __enter__(self) -> TlsFront:
        self._thread.start()
        started = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self._context), self._loop)
        self._server = started.result(10)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self

    def __exit__(self, *exc: object) -> None:
        async def close() -> None:
            self._server.close()
            for task in asyncio.all_tasks() - {asyncio.current_task()}:
                task.cancel()

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()


@pytest.fixture
def imaps(imap: ImapServer, ca: TestCA) -> Iterator[tuple[ImapServer, int]]:
    """IMAP over implicit TLS: the plain server (to seed and check) and the TLS port Bruce uses."""
    with TlsFront(ca.server_context(), imap.port) as front:
        yield imap, front.port


@dataclass
class StartTlsImapServer(ImapServer):
    """pymap offering STARTTLS and refusing a login before it; the test's own client trusts the CA."""

    ca: TestCA | None = None

    def client(self) -> IMAPClient:
        assert self.ca is not None
        client = IMAPClient("127.0.0.1", port=self.port, ssl=False, timeout=10)
        client.starttls(self.ca.client_context())
        client.login(USER, PASSWORD)
        return client


@pytest.fixture
def imap_starttls(tmp_path: Path, ca: TestCA) -> Iterator[StartTlsImapServer]:
    port = free_port()
    with pymap(tmp_path, port, "--cert", str(ca.cert_file), "--key", str(ca.key_file)):
        yield StartTlsImapServer(port, ca)
