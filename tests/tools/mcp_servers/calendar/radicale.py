"""A real CalDAV server for the tests: Radicale in its own process on 127.0.0.1, with a temporary
storage folder and one user (htpasswd, plain) who owns one calendar, over http or, given a CA
from tests/fakes/tls.py, over https. Events are put in and read back with the ``caldav``
library, as another calendar app would."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from caldav.collection import Calendar
from caldav.davclient import DAVClient

from tests.fakes.tls import TestCA

USER, PASSWORD = "ana", "s3cret-pass"
START_TIMEOUT_S = 20.0


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Radicale:
    process: subprocess.Popen[bytes]
    base: str
    url: str  # the calendar collection
    ca_file: str | None = None  # over https: the CA that signed its certificate

    @property
    def env(self) -> dict[str, str]:
        login = {"CALDAV_USERNAME": USER, "CALDAV_PASSWORD": PASSWORD}
        return {**login, "CALDAV_CA_FILE": self.ca_file} if self.ca_file else login

    def client(self, url: str) -> DAVClient:
        return DAVClient(url=url, username=USER, password=PASSWORD, timeout=10, ssl_verify_cert=self.ca_file or True)

    def calendar(self) -> Calendar:
        return Calendar(client=self.client(self.url), url=self.url)

    def add(self, ics: str) -> None:
        self.calendar().add_event(ics)

    def events(self) -> list[Any]:
        """Every VEVENT stored (a repeating event once), as icalendar components."""
        return [obj.icalendar_component for obj in self.calendar().events()]

    def titles(self) -> list[str]:
        return sorted(str(e["SUMMARY"]) for e in self.events())

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)


@contextmanager
def radicale(tmp_path: Path, ca: TestCA | None = None) -> Iterator[Radicale]:
    """Radicale over http, or over https with a certificate signed by ``ca``."""
    users = tmp_path / "users"
    users.write_text(f"{USER}:{PASSWORD}\n")
    port = _free_port()
    base = f"{'https' if ca else 'http'}://127.0.0.1:{port}/"
    command = [
        sys.executable, "-m", "radicale", "--storage-filesystem-folder", str(tmp_path / "collections"),
        "--server-hosts", f"127.0.0.1:{port}", "--auth-type", "htpasswd", "--auth-htpasswd-filename", str(users),
        "--auth-htpasswd-encryption", "plain", "--auth-delay", "0",
    ]
    if ca is not None:
        command += ["--server-ssl", "--server-certificate", str(ca.cert_file), "--server-key", str(ca.key_file)]
    with (tmp_path / "radicale.log").open("wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=log, stdin=subprocess.DEVNULL)
    server = Radicale(process, base, f"{base}{USER}/work/", str(ca.ca_file) if ca else None)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                assert process.poll() is None, (tmp_path / "radicale.log").read_text()[-2000:]
                assert time.monotonic() < deadline, "Radicale did not start"
                time.sleep(0.1)
        server.client(base).principal().make_calendar(name="Work", cal_id="work")
        yield server
    finally:
        server.stop()
