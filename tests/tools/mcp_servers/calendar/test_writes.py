"""Proposals (tools.mcp_servers.calendar.writes): what create_events may write is what was proposed,
under stable UIDs, for a limited time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from mcp.server.mcpserver.exceptions import ToolError

from tools.mcp_servers.calendar import writes
from tools.mcp_servers.calendar.store import NewEvent

T = datetime(2030, 1, 10, 13, 0, tzinfo=UTC)


def test_a_proposal_keeps_its_events_under_stable_uids_until_it_expires() -> None:
    proposals = writes.Proposals()
    proposal_id = proposals.add([NewEvent("Gym", T, T + timedelta(hours=1))], T)
    (held,) = proposals.get(proposal_id, T + writes.PROPOSAL_TTL)
    assert (held.title, held.uid) == ("Gym", f"{proposal_id}.0@bruce")
    with pytest.raises(ToolError, match="unknown or expired"):
        proposals.get(proposal_id, T + writes.PROPOSAL_TTL + timedelta(seconds=1))


def test_the_oldest_proposals_are_dropped_past_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(writes, "MAX_PROPOSALS", 2)
    proposals = writes.Proposals()
    ids = [proposals.add([NewEvent(f"E{i}", T, T + timedelta(hours=1))], T) for i in range(3)]
    with pytest.raises(ToolError):
        proposals.get(ids[0], T)
    assert [e.title for i in ids[1:] for e in proposals.get(i, T)] == ["E1", "E2"]
