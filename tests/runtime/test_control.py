"""The owner's control of the running daemon (``bruce.runtime.control.Control``), over small
fakes of the parts it answers for: the worker's doors, the scheduler and the MCP bridge."""

from __future__ import annotations

from datetime import UTC, datetime

from structlog.testing import capture_logs

from bruce.channel import LocalDecision
from bruce.clock import utc_iso
from bruce.runtime.control import Control
from bruce.values import ConversationId, DecisionOutcome


class FakeDoors:
    def __init__(self) -> None:
        self.calls: list[tuple[object, ...]] = []

    async def decide_locally(self, confirmation_id: str, approve: bool) -> LocalDecision:
        self.calls.append(("decide_locally", confirmation_id, approve))
        return LocalDecision(DecisionOutcome.QUEUED, "files.write", "telegram:1", None, True)

    async def resend(self, conversation_id: str) -> None:
        self.calls.append(("resend", conversation_id))


class FakeScheduler:
    def __init__(self, error: Exception | None = None) -> None:
        self.syncs = 0
        self._error = error

    async def sync(self) -> None:
        self.syncs += 1
        if self._error is not None:
            raise self._error


class FakeBridge:
    def status(self) -> list[dict[str, object]]:
        return [{"server": "files", "state": "connected", "tools": ["read"]}]


class Platform:
    def __init__(self, last_receive: datetime | None) -> None:
        self.last_receive = last_receive


def test_health_names_each_channel_that_keeps_a_last_receive():
    seen = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
    control = Control(doors=FakeDoors(), channels={"telegram": Platform(seen), "discord": Platform(None),
                                                   "console": object()})
    assert control.health() == {"telegram": utc_iso(seen), "discord": None}


async def test_jobs_changed_has_the_scheduler_read_the_jobs_again():
    scheduler = FakeScheduler()
    control = Control(doors=FakeDoors(), channels={}, scheduler=scheduler)
    await control.jobs_changed()
    assert scheduler.syncs == 1


async def test_a_failing_read_is_logged_and_the_terminal_still_gets_its_answer():
    scheduler = FakeScheduler(RuntimeError("database is locked"))
    control = Control(doors=FakeDoors(), channels={}, scheduler=scheduler)
    with capture_logs() as logs:
        await control.jobs_changed()  # does not raise: the scheduler's own sync picks the change up later
    assert scheduler.syncs == 1
    assert [entry["event"] for entry in logs] == ["scheduler.sync_failed"]


async def test_without_a_scheduler_a_change_waits_in_the_database():
    await Control(doors=FakeDoors(), channels={}).jobs_changed()


def test_mcp_status_is_the_bridges_or_empty_when_no_server_is_configured():
    assert Control(doors=FakeDoors(), channels={}, mcp=FakeBridge()).mcp_status()[0]["state"] == "connected"
    assert Control(doors=FakeDoors(), channels={}).mcp_status() == []


async def test_local_decisions_and_resends_go_through_the_workers_doors():
    doors = FakeDoors()
    control = Control(doors=doors, channels={})
    decision = await control.decide_locally("ab12cd34", True)
    await control.resend(ConversationId("console", "local"))
    assert decision.runs_here and decision.outcome is DecisionOutcome.QUEUED
    assert doors.calls == [("decide_locally", "ab12cd34", True), ("resend", ConversationId("console", "local"))]
