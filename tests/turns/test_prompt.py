"""Each layer of the system prompt on its own, then the assembly."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from bruce.config.loader import parse_config
from bruce.turns.prompt import (
    base_layer,
    build_system_prompt,
    conversation_context,
    describe_gap,
    temporal_context,
    tool_execution_guidelines,
)
from tools.builtin import builtin_tools

SAO_PAULO = ZoneInfo("America/Sao_Paulo")
NOW = datetime(2026, 12, 2, 12, 34, tzinfo=UTC)  # Wednesday 09:34 in São Paulo (UTC-3)
BUILTIN = [contract for contract, _ in builtin_tools(parse_config({}, environ={}), store=None)]


def test_base_layer_fills_in_the_name():
    assert base_layer("  You are {name}.  ", name="Bruce") == "You are Bruce."


def test_conversation_context_with_and_without_summary():
    assert conversation_context("User is Ana; prefers mornings.") == (
        "<conversation_context>\nSummary of the earlier part of this conversation:\n"
        "User is Ana; prefers mornings.\n</conversation_context>"
    )
    assert "No earlier conversation" in conversation_context(None)
    assert "No earlier conversation" in conversation_context("   ")


def test_temporal_context_for_a_fixed_instant_in_sao_paulo():
    block = temporal_context(NOW, SAO_PAULO, NOW - timedelta(hours=2, minutes=5))
    assert block == (
        "<temporal_context>\n"
        "Today is Wednesday, 2026-12-02.\n"
        "Local time: 09:34 (UTC-03:00, timezone America/Sao_Paulo).\n"
        "Time since the previous message: 2 hours 5 minutes.\n"
        "Resolve relative dates ('tomorrow', 'next Friday') from this date and timezone.\n"
        "</temporal_context>"
    )


def test_temporal_context_crosses_midnight_in_local_time():
    late = datetime(2026, 12, 3, 2, 30, tzinfo=UTC)  # still Wednesday 23:30 in São Paulo
    assert "Wednesday, 2026-12-02" in temporal_context(late, SAO_PAULO, None)
    assert "first message of the conversation" in temporal_context(late, SAO_PAULO, None)
    assert "UTC+05:30" in temporal_context(late, ZoneInfo("Asia/Kolkata"), None)


@pytest.mark.parametrize(
    ("gap", "text"),
    [
        (timedelta(seconds=30), "less than a minute"),
        (timedelta(minutes=1), "1 minute"),
        (timedelta(hours=1), "1 hour"),
        (timedelta(days=3, hours=4, minutes=10), "3 days 4 hours"),
    ],
)
def test_describe_gap(gap, text):
    assert describe_gap(gap) == text


def test_tool_guidelines_cover_the_rules():
    text = tool_execution_guidelines(BUILTIN)
    assert text.startswith("<tool_execution_guidelines>") and text.endswith("</tool_execution_guidelines>")
    for must in ("artifact_save", "Never say you saved", "Never write a URL", "NOT happened"):
        assert must in text
    # scheduling modes come with the scheduling tools (tests/turns/test_prompt_guidelines.py), built in now
    assert '"message"' in text and '"agent"' in text
    without = tool_execution_guidelines([c for c in BUILTIN if not c.name.startswith("proactive.")])
    assert '"message"' not in without and '"agent"' not in without


def test_build_system_prompt_orders_the_four_layers():
    prompt = build_system_prompt(
        system_prompt="You are {name}.", name="Bruce", summary="likes tea", now=NOW, zone=SAO_PAULO,
        previous_message_at=None, tools=BUILTIN,
    )
    positions = [prompt.index(m) for m in ("You are Bruce.", "<conversation_context>", "<temporal_context>",
                                            "<tool_execution_guidelines>")]
    assert positions == sorted(positions)
