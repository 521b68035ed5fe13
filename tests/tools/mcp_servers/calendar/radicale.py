"""A real CalDAV server for the tests: Radicale in its own process on 127.0.0.1, with a temporary
storage folder and one user (htpasswd, plain) who owns one calendar. Events are put in and read
back with the ``caldav`` library, as another calendar app would."""

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

    @property
    def env(self) -> dict[str, str]:
        return {"CALDAV_USERNAME": USER, "CALDAV_PASSWORD": PASSWORD}

    def calendar(self) -> Calendar:
        return Calendar(client=DAVClient(url=self.url, username=USER, password=PASSWORD, timeout=10), url=self.url)

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
def radicale(tmp_path: Path) -> Iterator[Radicale]:
    users = tmp_path / "users"
    users.write_text(f"{USER}:{PASSWORD}\n")
    port = _free_port()
    base = f"http://127.0.0.1:{port}/"
    command = [
        sys.executable, "-m", "radicale", "--storage-filesystem-folder", str(tmp_path / "collections"),
        "--server-hosts", f"127.0.0.1:{port}", "--auth-type", "htpasswd", "--auth-htpasswd-filename", str(users),
        "--auth-htpasswd-encryption", "plain", "--auth-delay", "0",
    ]
    with (tmp_path / "radicale.log").open("wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=log, stdin=subprocess.DEVNULL)
    server = Radicale(process, base, f"{base}{USER}/work/")
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
        DAVClient(url=base, username=USER, password=PASSWORD).principal().make_calendar(name="Work", cal_id="work")
        yield server
    finally:
        server.stop()
