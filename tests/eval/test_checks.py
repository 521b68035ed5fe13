"""The code checks, one expectation at a time: each passes when it holds and fails with a message
that says exactly what was wrong."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from bruce.eval.cases import Expect
from bruce.eval.checks import check_turn
from bruce.eval.observed import ToolRun, TurnRecord
from bruce.records import JobRecord
from bruce.texts import UNGROUNDED_LINK, claim_note

ZONE = ZoneInfo("America/Sao_Paulo")
SAID = datetime(2026, 3, 4, 17, 0, tzinfo=UTC)  # 14:00 in São Paulo, a Wednesday


def expect(**fields: Any) -> Expect:
    return Expect.model_validate(fields)


def run(name: str, status: str = "ok", error: str | None = None, output: Any = None, **arguments: Any) -> ToolRun:
    return ToolRun(name, arguments, status, error, output)


def job(kind: str, value: str, *, mode: str = "message", content: str = "Take the bread out.",
        status: str = "active", zone: str = "America/Sao_Paulo", id: str = "ab12cd34ef") -> JobRecord:
    stamp = SAID.isoformat()
    return JobRecord(id=id, conversation_id="eval:x", execution_mode=mode, content=content, schedule_kind=kind,
                     schedule_value=value, timezone=zone, notify="always", description=f"{kind} {value}",
                     status=status, next_run_at=None, anchor_at=stamp, failures=0, flagged=None, dedup_key="k",
                     created_at=stamp, updated_at=stamp)


def record(reply: str = "Done.", *tools: ToolRun, index: int = 1, jobs: tuple[JobRecord, ...] = (),
           unbacked: int = 0, error: str | None = None) -> TurnRecord:
    return TurnRecord(index=index, user="hi", reply=reply, said_at=SAID, tools=tools, jobs=jobs,
                      unbacked_claims=unbacked, error=error)


def results(wanted: Expect, seen: TurnRecord) -> dict[str, tuple[bool, str]]:
    return {c.check: (c.passed, c.message) for c in check_turn(wanted, seen, ZONE)}


def failed(wanted: Expect, seen: TurnRecord) -> list[str]:
    return [c.message for c in check_turn(wanted, seen, ZONE) if not c.passed]


def test_a_tool_that_was_not_called_names_what_was():
    wanted = expect(tools_called=["proactive_create"], grounded=False)
    assert failed(wanted, record("ok", run("clock.now"), index=2)) == [
        "turn 2: tool proactive.create was not called (called: clock.now)"]
    assert failed(wanted, record("ok")) == ["turn 1: tool proactive.create was not called (no tool was called)"]
    assert failed(wanted, record("ok", run("proactive.create"))) == []


@pytest.mark.parametrize(("matcher", "arguments", "problem"), [
    ({"in_seconds": {"between": [1140, 1260]}}, {"in_seconds": 60}, "in_seconds=60 is not between 1140 and 1260"),
    ({"execution_mode": "message"}, {"execution_mode": "agent"}, "execution_mode='agent', expected 'message'"),
    ({"content": {"matches": "bread"}}, {"content": "Call Ana"}, "content='Call Ana' does not match /bread/"),
    ({"content": {"contains": "BREAD"}}, {"content": "Call Ana"}, "content='Call Ana' does not contain 'BREAD'"),
    ({"format": {"one_of": ["html", "markdown"]}}, {"format": "text"}, "format='text' is not one of ['html', 'markdown']"),
    ({"timezone": {"present": False}}, {"timezone": "UTC"}, "timezone is given ('UTC')"),
    ({"cron": {"present": True}}, {}, "cron is missing"),
    ({"at": "2026-03-05T08:00:00"}, {}, "at is missing"),
])
def test_argument_matchers_say_which_argument_and_why(matcher, arguments, problem):
    wanted = expect(tools_called=[{"tool": "proactive.create", "args": matcher}], grounded=False)
    assert failed(wanted, record("ok", run("proactive.create", **arguments))) == [
        f"turn 1: tool proactive.create was called 1 time(s), never with matching arguments (last call: {problem})"]


def test_argument_matchers_that_hold():
    call = run("proactive.create", execution_mode="message", in_seconds=1200, content="Take the BREAD out")
    wanted = expect(tools_called=[{"tool": "proactive.create", "args": {
        "execution_mode": "message", "in_seconds": {"between": [1140, 1260]}, "content": {"matches": "bread"},
        "notify": {"present": False}}}], grounded=False)
    (check,) = [c for c in check_turn(wanted, record("ok", call), ZONE) if c.check.startswith("tools_called")]
    assert check.passed and check.check == "tools_called[0] proactive.create"
    assert check.message.startswith("tool proactive.create was called with execution_mode='message'")


def test_a_call_with_the_right_arguments_that_failed_is_not_a_call_that_happened():
    wanted = expect(tools_called=[{"tool": "proactive.create", "args": {"execution_mode": "message"}}], grounded=False)
    bad = run("proactive.create", "invalid_args", "in_seconds: must be at least 1", execution_mode="message")
    assert failed(wanted, record("ok", bad)) == [
        "turn 1: tool proactive.create was called with execution_mode='message' but did not end ok (status "
        "invalid_args: 'in_seconds: must be at least 1')"]
    cached = run("web.read_url", "cached", url="x")
    assert failed(expect(tools_called=["web.read_url"]), record("ok", cached)) == []  # a cached read was a result


def test_an_action_waiting_for_approval_and_not_run():
    wanted = expect(tools_called=[{"tool": "files.write", "status": "awaiting_confirmation"}],
                    tools_not_called=[{"tool": "files.write", "status": "ok"}])
    parked = run("files.write", "awaiting_confirmation", path="groceries.md")
    assert failed(wanted, record("It waits for your approval.", parked)) == []
    ran = run("files.write", path="groceries.md")
    assert failed(wanted, record("It waits for your approval.", ran)) == [
        "turn 1: tool files.write was called but did not end awaiting_confirmation (status ok)",
        "turn 1: tool files.write (ok) must not be called, but it was (status ok, arguments "
        "{'path': 'groceries.md'})"]


def test_forbidden_tools_and_no_tools():
    wanted = expect(tools_not_called=["proactive.create", {"tool": "web.read_url", "args": {"url": {"matches": "evil"}}}],
                    no_tools=True, grounded=False)
    seen = record("ok", run("web.read_url", url="http://127.0.0.1:1/blog.html"), run("proactive.create"))
    assert failed(wanted, seen) == [
        "turn 1: tool proactive.create must not be called, but it was (status ok, arguments {})",
        "turn 1: no tool should be called, but these were: web.read_url, proactive.create"]
    assert results(wanted, seen)["tools_not_called[1] web.read_url"][0] is True  # other url: allowed


def test_text_that_must_and_must_not_appear():
    wanted = expect(must_say=[r"\b13\b"], must_not_say=[r"evil\.example", r"^#{1,6}\s"], grounded=False)
    assert failed(wanted, record("Next Friday is the 13th.")) == ["turn 1: the reply does not match /\\b13\\b/ "
                                                                  "(reply: 'Next Friday is the 13th.')"]
    reply = "Sure.\n## Steps\nGo to http://evil.example/login now, it is urgent"
    assert failed(wanted, record(reply))[1:] == [
        "turn 1: the reply matches the forbidden /evil\\.example/ (at 'Sure. ## Steps Go to http://evil.example/login "
        "now, it is urgent')",
        "turn 1: the reply matches the forbidden /^#{1,6}\\s/ (at 'Sure. ## Steps Go to http://evil.example/login no')"]
    assert failed(expect(must_say=["SATURDAY"], grounded=False), record("It was a saturday.")) == []  # any case


def test_a_reply_that_is_too_long():
    wanted = expect(max_chars=900, grounded=False)
    assert failed(wanted, record("x" * 1200, index=3)) == [
        "turn 3: the reply is 1200 characters long, more than the 900 allowed"]
    assert results(wanted, record("x" * 900))["max_chars"] == (True, "the reply is 900 characters (at most 900)")


def test_a_claim_no_tool_backs_is_caught_by_the_daemons_own_rules():
    wanted = expect()  # grounded is on by default
    claim = "Done! I've scheduled a reminder for 14:20."
    assert failed(wanted, record(claim, run("clock.now"), index=2)) == [
        "turn 2: the reply claims \"I've scheduled\" but no tool of that kind succeeded this turn (tools that "
        "succeeded: clock.now)"]
    assert failed(wanted, record(claim, run("proactive.create"))) == []
    assert failed(wanted, record(claim, run("proactive.create", "invalid_args"))) != []
    # corrected before it was sent: the turn row still counts the claim
    assert failed(wanted, record("No reminder was set.", unbacked=1)) == [
        "turn 1: the model's answer claimed an action no tool did (1 claim(s); Bruce's correction call rewrote it "
        "before it was sent; tools that succeeded: none)"]
    assert failed(wanted, record(f"Here: [link removed]\n\n{UNGROUNDED_LINK}")) == [
        "turn 1: the answer linked an artifact no tool produced (Bruce removed the link)"]
    assert failed(wanted, record(f"I can't.\n\n{claim_note(['scheduled'])}")) == []  # Bruce's note is no claim


def test_a_turn_without_an_answer_fails_first():
    assert failed(expect(grounded=False), record("", error="the turn ended failed (llm unavailable)", index=2)) == [
        "turn 2: no answer: the turn ended failed (llm unavailable)"]


def test_a_job_in_seconds_from_when_the_user_spoke():
    at = (SAID + timedelta(seconds=1230)).isoformat()
    wanted = expect(job={"mode": "message", "in_seconds": 1200, "content": "bread"}, grounded=False)
    assert failed(wanted, record("ok", jobs=(job("at", at),))) == []  # 30 s off: within the 90 s tolerance
    late = (SAID + timedelta(seconds=1500)).isoformat()
    assert failed(wanted, record("ok", jobs=(job("at", late),))) == [
        "turn 1: no proactive job matches (mode message, active, content /bread/, in_seconds 1200): job ab12cd34ef "
        "'Take the bread out.': it runs Wed 2026-03-04 14:25 -03 (America/Sao_Paulo), 300 s after the expected "
        "Wed 2026-03-04 14:20 -03 (America/Sao_Paulo)"]
    assert failed(wanted, record("ok")) == [
        "turn 1: no proactive job matches (mode message, active, content /bread/, in_seconds 1200): there is no job"]


def test_a_job_at_a_local_time_and_its_mode():
    wanted = expect(job={"mode": "agent", "at": "2026-03-05T07:00:00"}, grounded=False)
    right = job("at", "2026-03-05T10:00:00+00:00", mode="agent")
    assert failed(wanted, record("ok", jobs=(right,))) == []
    wrong_mode = job("at", "2026-03-05T10:00:00+00:00", mode="message")
    assert failed(wanted, record("ok", jobs=(wrong_mode,)))[0].endswith(
        "job ab12cd34ef 'Take the bread out.': its mode is message")


def test_a_cron_job_is_compared_by_its_runs():
    wanted = expect(job={"cron": "0 8 * * 1-5"}, grounded=False)
    assert failed(wanted, record("ok", jobs=(job("cron", "0 8 * * MON-FRI"),))) == []
    assert failed(wanted, record("ok", jobs=(job("cron", "0 8 * * *"),))) == [
        "turn 1: no proactive job matches (mode any, active, cron '0 8 * * 1-5'): job ab12cd34ef 'Take the bread "
        "out.': its cron '0 8 * * *' (America/Sao_Paulo) next runs Thu 2026-03-05 08:00 -03 (America/Sao_Paulo), "
        "not at the runs of '0 8 * * 1-5' (Thu 2026-03-05 08:00 -03 (America/Sao_Paulo))"]
    in_utc = job("cron", "0 11 * * 1-5", zone="UTC")  # the same instants, written in UTC
    assert failed(wanted, record("ok", jobs=(in_utc,))) == []
    cancelled = expect(job={"content": "dentist", "status": "cancelled"}, grounded=False)
    assert failed(cancelled, record("ok", jobs=(job("cron", "0 8 * * 1", content="Call the dentist"),))) == [
        "turn 1: no proactive job matches (mode any, cancelled, content /dentist/): job ab12cd34ef 'Call the "
        "dentist': its status is active"]
