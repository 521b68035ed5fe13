"""bruce.values: the conversation id is parsed and formatted in one place; the stored statuses
read back as the same members."""

from __future__ import annotations

import pytest

from bruce.values import ConversationId, JobRunStatus, MessageStatus, ToolStatus


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
