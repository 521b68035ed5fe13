"""``scheduler.briefing`` in the config: off by default; when on, it needs the chat it goes to; a
bad cron or a "known sender" that is neither an address nor an @domain is refused naming the key;
and ``bruce config check`` warns about what would make the briefing say less (no email, no known
senders, no calendar, no scheduler)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from bruce.cli.main import main

CALENDAR = {"command": "python", "args": ["-m", "tools.mcp_servers.calendar"], "risk": "high",
            "tool_risk": {"calendar.free_busy": "low", "calendar.list_upcoming": "low"}}
EMAIL = {"enabled": True, "address": "me@example.org", "allowed_recipients": ["ana@example.net"],
         "imap": {"host": "imap.example.org", "port": 993, "user": "me", "password": "x"},
         "smtp": {"host": "smtp.example.org", "port": 465, "user": "me", "password": "x"}}


def check(tmp_path: Path, capsys: Any, briefing: dict[str, Any], **sections: Any) -> tuple[int, list[str], str]:
    path = tmp_path / "config.yml"
    path.write_text(yaml.safe_dump({"storage": {"path": "data/bruce.db"}, "scheduler": {"briefing": briefing},
                                    **sections}))
    code = main(["--config", str(path), "config", "check"])
    captured = capsys.readouterr()
    return code, captured.out.splitlines()[1:], captured.err


def test_the_briefing_is_off_by_default_and_on_with_a_conversation(make_config):
    assert make_config().scheduler.briefing.enabled is False
    on = make_config(scheduler={"briefing": {"enabled": True, "conversation": "telegram:123",
                                             "known_senders": ["Ana@Example.NET", "@family.example"]}})
    briefing = on.scheduler.briefing
    assert (briefing.cron, briefing.conversation) == ("30 7 * * 1-5", "telegram:123")
    assert briefing.known_senders == ["ana@example.net", "@family.example"]


@pytest.mark.parametrize(("briefing", "problem"), [
    ({"enabled": True}, "scheduler.briefing: enabled, but conversation is not set"),
    ({"cron": "30 7 * *"}, "scheduler.briefing.cron: '30 7 * *' is not a valid 5-field cron expression"),
    ({"cron": "30 25 * * *"}, "scheduler.briefing.cron: '30 25 * * *' is not a valid 5-field cron expression"),
    ({"known_senders": ["ana"]}, "scheduler.briefing.known_senders: 'ana' is neither an email address"),
    ({"conversation": "telegram"}, "scheduler.briefing.conversation: String should match pattern"),
    ({"enabled": True, "conversation": "test:1", "when": "7:30"}, "scheduler.briefing.when: unknown key"),
])
def test_a_bad_briefing_block_is_refused_naming_the_key(tmp_path, capsys, briefing, problem):
    code, _, err = check(tmp_path, capsys, briefing)
    assert code == 2 and problem in err


def test_a_complete_briefing_passes_without_warnings(tmp_path, capsys):
    code, warnings, _ = check(tmp_path, capsys, {"enabled": True, "conversation": "test:c1"},
                              tools={"email": EMAIL}, mcp_servers={"calendar": CALENDAR})
    assert (code, warnings) == (0, [])


def test_what_would_make_the_briefing_say_less_is_a_warning(tmp_path, capsys):
    code, warnings, _ = check(tmp_path, capsys, {"enabled": True, "conversation": "telegram:123"},
                              scheduler={"enabled": False, "briefing": {"enabled": True, "conversation": "telegram:123"}},
                              mcp_servers={"calendar": {**CALENDAR, "tool_risk": {}}})
    assert code == 0
    assert warnings == [
        "warning: scheduler.briefing is enabled but scheduler.enabled is false: the briefing is never sent",
        "warning: scheduler.briefing.conversation is a telegram chat, but channels.telegram.enabled is false: the "
        "briefing cannot be delivered there until it is",
        "warning: scheduler.briefing: tools.email is not enabled, so the briefing says mail is not set up",
        "warning: scheduler.briefing: no enabled mcp_servers entry has calendar.free_busy or calendar.list_upcoming "
        "at risk low (tool_risk), so the briefing says the calendar is not available",
    ]
    code, warnings, _ = check(tmp_path, capsys, {"enabled": True, "conversation": "test:c1"},
                              tools={"email": {**EMAIL, "allowed_recipients": []}}, mcp_servers={"calendar": CALENDAR})
    assert warnings == ["warning: scheduler.briefing: no known senders (scheduler.briefing.known_senders, or "
                        "tools.email.allowed_recipients), so the briefing lists no mail"]


def test_more_allowed_recipients_than_one_search_takes_are_cut_with_a_warning(tmp_path, capsys, make_config):
    many = [f"person{i}@example.net" for i in range(60)]
    code, warnings, _ = check(tmp_path, capsys, {"enabled": True, "conversation": "test:c1"},
                              tools={"email": {**EMAIL, "allowed_recipients": many}}, mcp_servers={"calendar": CALENDAR})
    assert (code, warnings) == (0, [
        "warning: scheduler.briefing: tools.email.allowed_recipients has 60 entries and the briefing reads mail "
        "from the first 50 only: list the people it should look for in scheduler.briefing.known_senders "
        "(addresses or @domains)"])
    from bruce.jobs.briefing import BriefingPlan

    plan = BriefingPlan.of(make_config(scheduler={"briefing": {"enabled": True, "conversation": "test:c1"}},
                                       tools={"email": {**EMAIL, "allowed_recipients": many}}))
    assert plan is not None and plan.senders == tuple(many[:50])  # what one emails.search accepts (maxItems 50)
