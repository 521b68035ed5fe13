"""channels.discord.ui: the approval request as Discord shows it, the buttons' custom ids that a
press is handled by (the same after a restart), and the request once decided. (The buttons
pressed through the fake gateway, and the status message: tests/channels/test_discord.py.)"""

from __future__ import annotations

from datetime import UTC, datetime

import discord
import pytest

from bruce.channel import ConfirmationRequest
from channels.discord.format import MESSAGE_LIMIT
from channels.discord.ui import approval_text, approval_view, decided_text, parse_custom_id


def request(**changes: object) -> ConfirmationRequest:
    fields: dict[str, object] = {
        "id": "ab12cd34", "tool_name": "files.write", "risk": "high", "summary": "Write notes/todo.md",
        "side_effects": "creates or replaces a file", "preview": "# To do\n- milk",
        "expires_at": datetime(2026, 12, 2, 13, 0, tzinfo=UTC), "step_up": False} | changes
    return ConfirmationRequest(**fields)  # type: ignore[arg-type]


def buttons(view: discord.ui.View) -> list[tuple[str | None, str | None, bool]]:
    return [(item.label, item.custom_id, item.disabled) for item in view.children
            if isinstance(item, discord.ui.Button)]


def test_a_press_is_read_from_our_custom_ids_only() -> None:
    assert parse_custom_id("bruce:approve:ab12cd34") == (True, "ab12cd34")
    assert parse_custom_id("bruce:deny:ab12cd34") == (False, "ab12cd34")
    for other in ("bruce:approve:", "bruce:delete:ab12cd34", "other:approve:ab12cd34", "bruce:approve:a b",
                  "bruce:approve:" + "x" * 65, "xbruce:deny:ab12cd34"):
        assert parse_custom_id(other) is None, other


def test_the_view_draws_approve_and_deny_with_the_ids_a_press_is_read_from() -> None:
    view = approval_view("ab12cd34", step_up=False)
    assert buttons(view) == [("Approve", "bruce:approve:ab12cd34", False), ("Deny", "bruce:deny:ab12cd34", False)]
    assert view.timeout is None  # the buttons work for as long as the request does
    assert [parse_custom_id(custom_id or "") for _, custom_id, _ in buttons(view)] == [
        (True, "ab12cd34"), (False, "ab12cd34")]


def test_a_step_up_request_has_no_approve_button_and_a_decided_one_is_disabled() -> None:
    assert buttons(approval_view("ab12cd34", step_up=True)) == [("Deny", "bruce:deny:ab12cd34", False)]
    assert [disabled for *_, disabled in buttons(approval_view("ab12cd34", step_up=False, disabled=True))] == [
        True, True]


def test_the_request_text_names_the_tool_its_risk_and_side_effects_and_shows_the_preview() -> None:
    text = approval_text(request())
    assert text.splitlines()[:4] == ["**Approval needed** (request `ab12cd34`)", "Write notes/todo.md",
                                     "Tool: `files.write` (risk high)", "Side effects: creates or replaces a file"]
    assert text.endswith("```\n# To do\n- milk\n```")
    assert "bruce approve" not in text
    assert "Expires at" not in text  # none given: none said
    shown = approval_text(request(expires_shown="10:00 -03 (America/Sao_Paulo)")).splitlines()
    assert shown[4] == "Expires at 10:00 -03 (America/Sao\\_Paulo)."  # Markdown-escaped: Discord shows Sao_Paulo


def test_a_step_up_request_says_where_to_approve_it() -> None:
    text = approval_text(request(step_up=True, preview=None))
    assert "run `bruce approve ab12cd34` there" in text and "```" not in text


def test_markdown_in_the_summary_is_shown_as_text() -> None:
    text = approval_text(request(summary="Post **now** to _everyone_"))
    assert r"Post \*\*now\*\* to \_everyone\_" in text


def test_a_fence_in_the_preview_cannot_close_ours_and_a_long_preview_fits_one_message() -> None:
    text = approval_text(request(preview="before\n```\n@everyone outside\n" + "y" * 5000))
    assert text.count("```") == 2 and text.endswith("\n```")
    assert len(text) <= MESSAGE_LIMIT


@pytest.mark.parametrize("original", ["**Approval needed** (request `ab12cd34`)", "z" * MESSAGE_LIMIT])
def test_a_decided_request_keeps_what_it_asked_and_adds_the_outcome_within_the_limit(original: str) -> None:
    text = decided_text(original, "Denied: files.write will not run (request ab12cd34).")
    assert text.endswith("\n\n**Denied: files.write will not run (request ab12cd34).**")
    assert text.startswith(original[:100]) and len(text) <= MESSAGE_LIMIT
