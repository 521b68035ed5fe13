"""The records the store hands out: plain values that type the strings a database gives back,
and read a JSON column back whatever it holds."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from bruce.records import (
    ConfirmationRecord,
    Fact,
    JobRunRecord,
    MemorySummary,
    PairingRequestRecord,
    StoredMessage,
    StoredTurn,
    from_json,
)
from bruce.values import (
    ConfirmationState,
    Direction,
    FactType,
    JobRunStatus,
    MessageKind,
    MessageStatus,
    PairingState,
    TurnSource,
    TurnStatus,
)


def test_from_json_reads_json_and_leaves_other_text_as_it_is():
    assert from_json('{"a": [1, "ç"]}') == {"a": [1, "ç"]}
    assert from_json("42") == 42 and from_json('"quoted"') == "quoted"
    assert from_json("plain text") == "plain text"
    assert from_json(None) is None


def test_strings_from_the_database_become_their_types():
    message = StoredMessage(id=1, conversation_id="t:1", direction="in", role="user", kind="chat",  # type: ignore[arg-type]
                            sender_id="u", text="hi", platform_message_id=None, status="pending", created_at="now")  # type: ignore[arg-type]
    assert (message.direction, message.kind, message.status) == (Direction.IN, MessageKind.CHAT, MessageStatus.PENDING)
    turn = StoredTurn(id="t", conversation_id="t:1", inbound_message_id=None, source="chat", status="ok",  # type: ignore[arg-type]
                      started_at="now", hit_ceiling=1, stopped_repeat=0)  # type: ignore[arg-type]
    assert (turn.source, turn.status, turn.hit_ceiling, turn.stopped_repeat) == (
        TurnSource.CHAT, TurnStatus.OK, True, False)
    confirmation = ConfirmationRecord(id="c", conversation_id="t:1", user_id=None, turn_id=None, call_id=None,
                                      tool_name="x", arguments="{}", preview=None, step_up=1, status="pending",  # type: ignore[arg-type]
                                      created_at="a", expires_at="b", decided_at=None, decided_via=None, result=None)
    assert confirmation.status is ConfirmationState.PENDING and confirmation.step_up is True
    run = JobRunRecord(id=1, job_id="j", scheduled_for="s", started_at="s", finished_at=None, status="running",  # type: ignore[arg-type]
                       turn_id=None, message_id=None, delivered_text=None, error=None, lateness_ms=None)
    assert run.status is JobRunStatus.RUNNING
    pairing = PairingRequestRecord(code="C", channel="telegram", sender_id="s", chat_id="s", display_name=None,
                                   status="pending", created_at="a", expires_at="b")  # type: ignore[arg-type]
    assert pairing.status is PairingState.PENDING


def test_a_status_the_types_do_not_know_is_refused():
    with pytest.raises(ValueError):
        StoredTurn(id="t", conversation_id="t:1", inbound_message_id=None, source="chat", status="kinda",  # type: ignore[arg-type]
                   started_at="now")


def test_records_are_frozen_and_facts_and_summaries_read_as_dicts():
    fact = Fact(id=1, type=FactType.PREFERENCE, content="Tea, no sugar.", confidence=0.9, status="active",
                origin="owner", conversation_id=None, source_turn_id=None, created_at="a", last_seen_at="b",
                summarized_in=None)
    assert fact.as_dict() == {"id": 1, "type": "preference", "content": "Tea, no sugar.", "confidence": 0.9,
                              "status": "active", "origin": "owner", "conversation_id": None,
                              "source_turn_id": None, "created_at": "a", "last_seen_at": "b", "summarized_in": None,
                              "person": "owner"}
    summary = MemorySummary(id=2, content="Likes tea.", period_start="a", period_end="b", created_at="c")
    assert summary.as_dict() == {"id": 2, "content": "Likes tea.", "period_start": "a", "period_end": "b",
                                 "created_at": "c", "person": "owner"}
    with pytest.raises(dataclasses.FrozenInstanceError):
        fact.content = "Coffee."  # type: ignore[misc]


def test_the_records_import_no_store_and_no_database_driver():
    code = ("import sys, bruce.records; "
            "print(sorted(m for m in sys.modules if m.startswith(('bruce.store', 'aiosqlite', 'sqlite3'))))")
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert found.stdout.strip() == "[]"
