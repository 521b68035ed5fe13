"""The doctor's logins over TLS, as the tools make them: a server whose certificate comes from a
private CA is a tick when ``ca_file`` (email) or ``CALDAV_CA_FILE`` (calendar) names that CA, and
a cross naming the certificate problem and that setting when nothing does. Nothing is sent."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bruce.cli.checks.calendar import check_calendars
from bruce.cli.checks.mail import check_email
from bruce.config.email import EmailConfig
from bruce.config.schema import MCPServerConfig
from tests.fakes.tls import TestCA
from tests.tools.email.conftest import PASSWORD, USER, ImapServer, TlsSmtpServer
from tests.tools.mcp_servers.calendar import radicale as dav_server


def email(imap_port: int, smtp_port: int, ca: TestCA | None) -> EmailConfig:
    trust = {"ca_file": str(ca.ca_file)} if ca else {}
    imap = {"host": "127.0.0.1", "port": imap_port, "security": "ssl", "user": USER, "password": PASSWORD, **trust}
    smtp = {**imap, "port": smtp_port, "host": "localhost", "security": "starttls"}
    return EmailConfig.model_validate({"enabled": True, "address": USER, "imap": imap, "smtp": smtp})


async def lines(config: EmailConfig) -> list[str]:
    found = [f.line() for f in await check_email(config, {}, 5)]
    assert PASSWORD not in "\n".join(found)
    return found


async def test_logins_over_tls_with_the_private_ca_are_ticks_and_send_nothing(
        imaps: tuple[ImapServer, int], smtp_starttls: TlsSmtpServer, ca: TestCA) -> None:
    imap, port = imaps
    with imap.client() as client:
        client.create_folder("Drafts")
        client.create_folder("Sent")
    assert await lines(email(port, smtp_starttls.port, ca)) == [
        f"✓ email IMAP {USER} at 127.0.0.1:{port} (ssl): login accepted",
        f"✓ email SMTP {USER} at localhost:{smtp_starttls.port} (starttls): login accepted (no mail sent)"]
    assert smtp_starttls.logins == 1 and smtp_starttls.attempts == 0


async def test_a_certificate_from_a_ca_nobody_named_is_a_cross_with_the_ca_file_fix(
        imaps: tuple[ImapServer, int], smtp_starttls: TlsSmtpServer) -> None:
    _, port = imaps
    imap_line, smtp_line = await lines(email(port, smtp_starttls.port, None))
    assert imap_line.startswith(f"✗ email IMAP 127.0.0.1:{port}: its TLS certificate is not accepted "
                                "(unable to get local issuer certificate)")
    assert "set tools.email.imap.ca_file to that CA's certificate (PEM)" in imap_line
    assert smtp_line.startswith(f"✗ email SMTP localhost:{smtp_starttls.port}: its TLS certificate is not accepted")
    assert "tools.email.smtp.ca_file" in smtp_line
    assert smtp_starttls.logins == 0  # the password never left


@pytest.fixture
def davs(tmp_path: Path, ca: TestCA) -> Iterator[dav_server.Radicale]:
    with dav_server.radicale(tmp_path, ca) as server:
        yield server


async def calendar_lines(url: str, **env: str) -> list[str]:
    server: dict[str, Any] = {"command": "python", "args": ["-m", "tools.mcp_servers.calendar", "--caldav", url],
                              "env": {"CALDAV_USERNAME": dav_server.USER, "CALDAV_PASSWORD": dav_server.PASSWORD, **env}}
    found = [f.line() for f in await check_calendars({"work": MCPServerConfig.model_validate(server)}, {}, 5)]
    assert dav_server.PASSWORD not in "\n".join(found)
    return found


async def test_a_calendar_over_https_is_found_with_its_caldav_ca_file(davs: dav_server.Radicale) -> None:
    assert davs.ca_file is not None
    assert await calendar_lines(davs.url, CALDAV_CA_FILE=davs.ca_file) == [
        f"✓ calendar work (CalDAV): login as {dav_server.USER} accepted, calendar 'Work' found at {davs.url}"]
    [refused] = await calendar_lines(davs.url)
    host = davs.base.split("/")[2]
    assert refused.startswith(f"✗ calendar work (CalDAV): {host} its TLS certificate is not accepted")
    assert "set CALDAV_CA_FILE in mcp_servers.work.env to that CA's certificate (PEM)" in refused


async def test_a_caldav_ca_file_the_calendar_server_would_refuse_is_a_cross(tmp_path: Path) -> None:
    [missing] = await calendar_lines("https://dav.example.org/ana/work/", CALDAV_CA_FILE=str(tmp_path / "no.pem"))
    assert missing.startswith(f"✗ calendar work (CalDAV): CALDAV_CA_FILE '{tmp_path / 'no.pem'}' names no file")
