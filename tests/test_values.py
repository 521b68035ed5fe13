"""bruce.values: the conversation id is parsed and formatted in one place, and travels typed
(an incoming message, a turn's scope); the stored statuses, modes and choices read back as the
same members."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bruce.channel import IncomingMessage
from bruce.records import Fact, JobRecord
from bruce.turns.scope import TurnScope
from bruce.values import (
    ConversationId,
    ExecutionMode,
    FactStatus,
    FactType,
    JobRunStatus,
    MessageStatus,
    Notify,
    ToolStatus,
)


def test_a_conversation_id_round_trips_through_its_text() -> None:
    cid = ConversationId.parse("telegram:123456")
    assert (cid.channel, cid.chat_id) == ("telegram", "123456")
    assert str(cid) == "telegram:123456"
    assert ConversationId.parse(str(cid)) == cid


def test_the_chat_id_may_contain_colons() -> None:
    cid = ConversationId.parse("discord:guild:42:channel:7")
    assert cid == ConversationId("discord", "guild:42:channel:7")
    assert str(cid) == "discord:guild:42:channel:7"


@pytest.mark.parametrize("text", ["telegram", "telegram:", ":123", "", ":"])
def test_text_without_both_parts_is_not_a_conversation_id(text: str) -> None:
    with pytest.raises(ValueError, match="not a conversation id"):
        ConversationId.parse(text)


def test_conversation_ids_are_values() -> None:
    assert ConversationId("web", "a") == ConversationId.parse("web:a")
    assert len({ConversationId("web", "a"), ConversationId.parse("web:a")}) == 1
    with pytest.raises(AttributeError):
        ConversationId("web", "a").chat_id = "b"  # type: ignore[misc]


def test_statuses_are_stored_as_their_text_and_read_back() -> None:
    assert f"{MessageStatus.RATE_LIMITED}" == "rate_limited"
    assert MessageStatus("unsent") is MessageStatus.UNSENT
    assert JobRunStatus("over_budget") is JobRunStatus.OVER_BUDGET
    assert ToolStatus.AWAITING_CONFIRMATION == "awaiting_confirmation"
    with pytest.raises(ValueError):
        ToolStatus("exploded")


@pytest.mark.parametrize(("kind", "stored"), [
    (ExecutionMode, ["message", "agent"]),
    (Notify, ["always", "if_actionable"]),
    (FactStatus, ["active", "archived"]),
])
def test_modes_notify_choices_and_fact_statuses_keep_their_stored_text(kind: type, stored: list[str]) -> None:
    assert [str(member) for member in kind] == stored
    assert [f"{member}" for member in kind] == stored
    assert all(kind(text) == text for text in stored)
    with pytest.raises(ValueError):
        kind("sometimes")


def test_records_read_their_text_columns_as_members() -> None:
    job = JobRecord(id="j1", conversation_id="test:c1", execution_mode="agent", content="brief me",  # type: ignore[arg-type]
                    schedule_kind="every", schedule_value="3600", timezone="UTC", notify="if_actionable",  # type: ignore[arg-type]
                    description="every hour", status="active", next_run_at=None,  # type: ignore[arg-type]
                    anchor_at="2026-12-02T12:00:00+00:00", failures=0, flagged=None, dedup_key="k",
                    created_at="2026-12-02T12:00:00+00:00", updated_at="2026-12-02T12:00:00+00:00")
    assert job.execution_mode is ExecutionMode.AGENT and job.notify is Notify.IF_ACTIONABLE
    fact = Fact(id=1, type="fact", content="lives in Recife", confidence=0.9, status="archived",  # type: ignore[arg-type]
                origin="extraction", conversation_id=None, source_turn_id=None, created_at="2026-12-01",
                last_seen_at="2026-12-01", summarized_in=None)
    assert fact.status is FactStatus.ARCHIVED and fact.type is FactType.FACT
    assert fact.as_dict()["status"] == "archived" and type(fact.as_dict()["status"]) is str


def test_an_incoming_message_carries_its_conversation_id_typed() -> None:
    message = IncomingMessage(channel="discord", chat_id="guild:42", sender_id="7", text="hi",
                              platform_message_id=None, timestamp=datetime(2026, 12, 2, tzinfo=UTC))
    assert message.conversation_id == ConversationId("discord", "guild:42")
    assert str(message.conversation_id) == "discord:guild:42"


def test_a_turn_scope_without_a_conversation_says_so_when_asked_for_one() -> None:
    assert TurnScope("t1", ConversationId("test", "c1"), None).conversation == ConversationId("test", "c1")
    with pytest.raises(ValueError, match="in no conversation"):
        _ = TurnScope("", None, None).conversation  # an MCP client's call
