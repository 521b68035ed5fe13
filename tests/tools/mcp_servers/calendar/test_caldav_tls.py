"""The calendar over https: Radicale on 127.0.0.1 with a certificate from a throwaway CA. The
calendar server trusts that CA only when CALDAV_CA_FILE (in its ``env``) names it; a certificate it
cannot verify makes the tools answer ``unavailable`` with the reason, and a CALDAV_CA_FILE that
cannot be used stops the server at start with a clear message."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from mcp import Client

from tests.fakes.llm_server import Step
from tests.fakes.tls import TestCA, ca_file_case, make_ca
from tests.helpers import say
from tests.tools.mcp_servers.calendar.radicale import PASSWORD, USER, Radicale, radicale
from tests.tools.mcp_servers.calendar.test_caldav_store import SAO_PAULO, call, error
from tests.tools.mcp_servers.calendar.test_caldav_turns import caldav_calendar, tool_feedback
from tools.mcp_servers.calendar.caldav_store import CalDavStore
from tools.mcp_servers.calendar.server import build_server

REPO = Path(__file__).resolve().parents[4]


@pytest.fixture
def ca(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> TestCA:
    """A private CA, trusted only where a test says so (never through the machine's SSL_CERT_FILE)."""
    for name in ("SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        monkeypatch.delenv(name, raising=False)
    return make_ca(tmp_path / "ca")


@pytest.fixture
def davs(tmp_path: Path, ca: TestCA) -> Iterator[Radicale]:
    with radicale(tmp_path, ca) as server:
        yield server


def event(uid: str, title: str, start: datetime) -> str:
    stamp = "%Y%m%dT%H%M%SZ"
    return (f"BEGIN:VCALENDAR\nVERSION:2.0\nPRODID:-//test//test//EN\nBEGIN:VEVENT\nUID:{uid}\n"
            f"DTSTAMP:20270101T000000Z\nSUMMARY:{title}\nDTSTART:{start.strftime(stamp)}\n"
            f"DTEND:{(start + timedelta(hours=1)).strftime(stamp)}\nEND:VEVENT\nEND:VCALENDAR\n")


async def test_the_calendar_over_https_lists_events_with_the_ca_it_was_given(davs: Radicale) -> None:
    now = datetime(2027, 3, 1, 11, 0, tzinfo=UTC)
    davs.add(event("review@example.org", "Design review", now + timedelta(hours=3)))
    store = CalDavStore(davs.url, SAO_PAULO, USER, PASSWORD, timeout_s=5, ca_file=davs.ca_file)
    async with Client(build_server(store, SAO_PAULO, clock=lambda: now)) as client:
        listed = await call(client, "calendar.list_upcoming", {"days": 1})
    assert [(e["title"], e["start"]) for e in listed["events"]] == [("Design review", "2027-03-01T11:00-03:00")]


async def test_a_certificate_the_calendar_server_does_not_trust_is_unavailable_and_named(davs: Radicale) -> None:
    now = datetime(2027, 3, 1, 11, 0, tzinfo=UTC)
    store = CalDavStore(davs.url, SAO_PAULO, USER, PASSWORD, timeout_s=5)  # no CA: the system's store
    async with Client(build_server(store, SAO_PAULO, clock=lambda: now)) as client:
        refused = await error(client, "calendar.list_upcoming", {})
    assert refused.startswith("unavailable: the certificate of the CalDAV server 127.0.0.1:")
    assert "(unable to get local issuer certificate)" in refused and "CALDAV_CA_FILE" in refused
    assert "nothing was read or written" in refused and PASSWORD not in refused


async def test_the_calendar_as_bruce_runs_it_over_https(app_factory, fake_llm, davs: Radicale) -> None:
    soon = (datetime.now(UTC) + timedelta(hours=2)).replace(second=0, microsecond=0)
    davs.add(event("standup@example.org", "Standup", soon))
    app = await app_factory(mcp_servers={"calendar": caldav_calendar(davs)})  # CALDAV_CA_FILE in its env
    fake_llm.add(Step.tool_calls(("mcp_calendar_list_upcoming", {"days": 1})), Step.text("You have the standup."))
    await say(app, "what's next today?")
    (listed,) = tool_feedback(fake_llm.requests[1])
    assert listed["ok"] is True
    assert [e["title"] for e in listed["result"]["structured"]["events"]] == ["Standup"]


@pytest.mark.parametrize(("ca_file", "url", "problem"), [
    ("/nowhere/ca.pem", "https://dav.example.org/ana/work/", "CALDAV_CA_FILE '/nowhere/ca.pem': no such file"),
    ("NOT-PEM", "https://dav.example.org/ana/work/", "holds no PEM certificate"),
    ("CA", "http://127.0.0.1:5232/ana/work/", "the calendar's URL is not https"),
])
def test_a_ca_file_that_cannot_be_used_stops_the_server_at_start(tmp_path: Path, ca: TestCA, ca_file: str, url: str,
                                                                 problem: str) -> None:
    ca_file = ca_file_case(ca_file, tmp_path, ca)
    run = subprocess.run([sys.executable, "-m", "tools.mcp_servers.calendar", "--caldav", url], cwd=REPO,
                         capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL,
                         env={"PATH": "/usr/bin:/bin", "CALDAV_CA_FILE": ca_file})
    assert run.returncode == 2 and problem in run.stderr and run.stdout == ""
