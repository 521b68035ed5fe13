"""The code checks: a turn's expectations against what happened in it, as pure functions.

``check_turn(expect, record, zone)`` returns one ``CheckResult`` per expectation (and one that
the turn was answered at all), each with a stable ``check`` id (``compare`` matches runs by it)
and, when it failed, a message that says exactly what was wrong: ``turn 2: tool
proactive.create was not called (called: clock.now)``. The "no unbacked claim" rule is the
daemon's own (``bruce.turns.claims``, ``bruce.turns.grounding``), not a second set of rules.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from bruce.clock import parse_iso
from bruce.contracts import ToolResult
from bruce.eval.cases import Expect, JobExpect, ToolExpect, pattern
from bruce.eval.observed import ToolRun, TurnRecord
from bruce.jobs.schedule import Schedule, local_text, stored_schedule
from bruce.records import JobRecord
from bruce.texts import UNGROUNDED_LINK
from bruce.turns.claims import unbacked_claims
from bruce.values import ToolStatus

__all__ = ["CheckResult", "check_turn", "args_problem", "excerpt"]

_CRON_RUNS = 5  # two cron expressions are the same schedule when their next runs are


@dataclass(frozen=True, slots=True)
class CheckResult:
    turn: int
    check: str  # stable id within the turn, e.g. "tools_called[0] proactive.create"
    passed: bool
    message: str  # failed: what was wrong; passed: what held

    def as_dict(self) -> dict[str, Any]:
        return {"turn": self.turn, "check": self.check, "passed": self.passed, "message": self.message}


def excerpt(text: str, limit: int = 160) -> str:
    """``text`` on one line, cut to ``limit`` characters, quoted."""
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= limit else flat[: limit - 1] + "…")


def _shown(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 4] + "…" + text[-1]


def args_problem(arguments: Any, matchers: dict[str, Any]) -> str | None:
    """Why a call's arguments do not match (the first reason), or None when they do."""
    args = arguments if isinstance(arguments, dict) else {}
    for name, matcher in matchers.items():
        problem = _arg_problem(name, matcher, name in args, args.get(name))
        if problem:
            return problem
    return None


def _arg_problem(name: str, matcher: Any, present: bool, value: Any) -> str | None:
    if not isinstance(matcher, dict):
        if not present:
            return f"{name} is missing"
        return None if value == matcher else f"{name}={_shown(value)}, expected {_shown(matcher)}"
    kind, want = next(iter(matcher.items()))
    if kind == "present":
        if present == want:
            return None
        return f"{name} is missing" if want else f"{name} is given ({_shown(value)})"
    if not present:
        return f"{name} is missing"
    if kind == "matches":
        ok = isinstance(value, str) and pattern(want).search(value) is not None
        return None if ok else f"{name}={_shown(value)} does not match /{want}/"
    if kind == "contains":
        ok = (want.casefold() in value.casefold()) if isinstance(value, str) and isinstance(want, str) \
            else isinstance(value, list | dict) and want in value
        return None if ok else f"{name}={_shown(value)} does not contain {_shown(want)}"
    if kind == "between":
        low, high = want
        ok = isinstance(value, int | float) and not isinstance(value, bool) and low <= value <= high
        return None if ok else f"{name}={_shown(value)} is not between {low:g} and {high:g}"
    return None if value in want else f"{name}={_shown(value)} is not one of {_shown(want)}"  # one_of


def _with_args(wanted: ToolExpect) -> str:
    if not wanted.args:
        return ""
    return " with " + ", ".join(f"{k}={_shown(v, 40)}" for k, v in wanted.args.items())


def _called(tools: tuple[ToolRun, ...]) -> str:
    return "called: " + ", ".join(dict.fromkeys(t.name for t in tools)) if tools else "no tool was called"


def _status_ok(run: ToolRun, status: ToolStatus | None) -> bool:
    return run.succeeded if status is None else run.status == status.value


def _tool_called(n: int, i: int, wanted: ToolExpect, tools: tuple[ToolRun, ...]) -> CheckResult:
    check = f"tools_called[{i}] {wanted.name}"
    named = [t for t in tools if t.name == wanted.name]
    if not named:
        return CheckResult(n, check, False, f"turn {n}: tool {wanted.name} was not called ({_called(tools)})")
    matching = [t for t in named if args_problem(t.arguments, wanted.args) is None]
    if not matching:
        problem = args_problem(named[-1].arguments, wanted.args)
        return CheckResult(n, check, False, f"turn {n}: tool {wanted.name} was called {len(named)} time(s), "
                                            f"never with matching arguments (last call: {problem})")
    if not any(_status_ok(t, wanted.status) for t in matching):
        want = wanted.status.value if wanted.status else "ok"
        last = matching[-1]
        why = f": {excerpt(last.error, 120)}" if last.error else ""
        return CheckResult(n, check, False, f"turn {n}: tool {wanted.name} was called{_with_args(wanted)} but did "
                                            f"not end {want} (status {last.status}{why})")
    return CheckResult(n, check, True, f"tool {wanted.name} was called{_with_args(wanted)}")


def _tool_not_called(n: int, i: int, wanted: ToolExpect, tools: tuple[ToolRun, ...]) -> CheckResult:
    check = f"tools_not_called[{i}] {wanted.name}"
    status = f" ({wanted.status.value})" if wanted.status else ""
    for run in tools:
        if run.name == wanted.name and args_problem(run.arguments, wanted.args) is None \
                and (wanted.status is None or run.status == wanted.status.value):
            return CheckResult(n, check, False, f"turn {n}: tool {wanted.name}{_with_args(wanted)}{status} must not "
                                                f"be called, but it was (status {run.status}, arguments "
                                                f"{_shown(run.arguments, 120)})")
    return CheckResult(n, check, True, f"tool {wanted.name}{_with_args(wanted)}{status} was not called")


def _reply_checks(n: int, expect: Expect, reply: str) -> Iterator[CheckResult]:
    for i, text in enumerate(expect.must_say):
        if pattern(text).search(reply):
            yield CheckResult(n, f"must_say[{i}]", True, f"the reply matches /{text}/")
        else:
            yield CheckResult(n, f"must_say[{i}]", False, f"turn {n}: the reply does not match /{text}/ "
                                                          f"(reply: {excerpt(reply)})")
    for i, text in enumerate(expect.must_not_say):
        found = pattern(text).search(reply)
        if found is None:
            yield CheckResult(n, f"must_not_say[{i}]", True, f"the reply does not match /{text}/")
        else:
            around = reply[max(0, found.start() - 40): found.end() + 40]
            yield CheckResult(n, f"must_not_say[{i}]", False, f"turn {n}: the reply matches the forbidden /{text}/ "
                                                              f"(at {excerpt(around, 120)})")
    if expect.max_chars is not None:
        ok = len(reply) <= expect.max_chars
        yield CheckResult(n, "max_chars", ok, f"the reply is {len(reply)} characters (at most {expect.max_chars})"
                          if ok else f"turn {n}: the reply is {len(reply)} characters long, more than the "
                                     f"{expect.max_chars} allowed")


def _results(tools: tuple[ToolRun, ...]) -> list[ToolResult]:
    """The tool executions as ``bruce.turns.claims`` reads them (a cached read was an ok result)."""
    return [ToolResult(call_id="", name=t.name, status=ToolStatus.OK if t.succeeded else ToolStatus(t.status),
                       output=t.output) for t in tools]


def _grounded(n: int, record: TurnRecord) -> CheckResult:
    claims = unbacked_claims(record.reply, _results(record.tools))
    succeeded = ", ".join(dict.fromkeys(t.name for t in record.tools if t.succeeded)) or "none"
    if claims:
        said = " and ".join(repr(c.phrase) for c in claims)
        return CheckResult(n, "grounded", False, f"turn {n}: the reply claims {said} but no tool of that kind "
                                                 f"succeeded this turn (tools that succeeded: {succeeded})")
    if record.unbacked_claims:
        return CheckResult(n, "grounded", False, f"turn {n}: the model's answer claimed an action no tool did "
                                                 f"({record.unbacked_claims} claim(s); Bruce's correction call "
                                                 f"rewrote it before it was sent; tools that succeeded: {succeeded})")
    if UNGROUNDED_LINK in record.reply:
        return CheckResult(n, "grounded", False, f"turn {n}: the answer linked an artifact no tool produced (Bruce "
                                                 "removed the link)")
    return CheckResult(n, "grounded", True, "no claim or link without a tool behind it")


def _expected_instant(want: JobExpect, said_at: datetime, zone: ZoneInfo) -> datetime | None:
    if want.in_seconds is not None:
        return said_at + timedelta(seconds=want.in_seconds)
    if want.at is not None:
        moment = datetime.fromisoformat(want.at)
        return moment if moment.tzinfo else moment.replace(tzinfo=zone)
    return None


def _runs(schedule: Schedule, after: datetime) -> list[datetime]:
    runs: list[datetime] = []
    moment: datetime | None = after
    while moment is not None and len(runs) < _CRON_RUNS:
        moment = schedule.next_after(moment)
        if moment is not None:
            runs.append(moment)
    return runs


def _schedule_problem(job: JobRecord, want: JobExpect, said_at: datetime, zone: ZoneInfo) -> str | None:
    instant = _expected_instant(want, said_at, zone)
    if instant is not None:
        if job.schedule_kind != "at":
            return f"it is recurring ({job.description}), not a one-off"
        runs_at = parse_iso(job.schedule_value)
        off = (runs_at - instant).total_seconds()
        if abs(off) > want.tolerance_s:
            return (f"it runs {local_text(runs_at, zone)}, {abs(off):.0f} s {'after' if off > 0 else 'before'} "
                    f"the expected {local_text(instant, zone)}")
        return None
    if want.cron is not None:
        if job.schedule_kind != "cron":
            return f"it is not a cron job ({job.description})"
        expected = _runs(Schedule("cron", " ".join(want.cron.split()), zone, said_at), said_at)
        actual = _runs(stored_schedule(job.schedule_kind, job.schedule_value, job.timezone, job.anchor_at), said_at)
        if expected != actual:
            first = local_text(actual[0], zone) if actual else "never"
            return (f"its cron {job.schedule_value!r} ({job.timezone}) next runs {first}, not at the runs of "
                    f"{want.cron!r} ({local_text(expected[0], zone) if expected else 'never'})")
        return None
    if want.every_seconds is not None and (job.schedule_kind != "every" or int(job.schedule_value) != want.every_seconds):
        return f"it is not every {want.every_seconds} s ({job.description})"
    return None


def _job_problem(job: JobRecord, want: JobExpect, said_at: datetime, zone: ZoneInfo) -> str | None:
    if want.mode is not None and job.execution_mode != want.mode:
        return f"its mode is {job.execution_mode}"
    if str(job.status) != want.status:
        return f"its status is {job.status}"
    if want.content is not None and not pattern(want.content).search(job.content):
        return f"its content does not match /{want.content}/"
    return _schedule_problem(job, want, said_at, zone)


def _wanted_job(want: JobExpect) -> str:
    parts = [f"mode {want.mode or 'any'}", want.status]
    if want.content:
        parts.append(f"content /{want.content}/")
    for key in ("at", "in_seconds", "cron", "every_seconds"):
        if getattr(want, key) is not None:
            parts.append(f"{key} {getattr(want, key)!r}")
    return ", ".join(parts)


def _job(n: int, want: JobExpect, record: TurnRecord, zone: ZoneInfo) -> CheckResult:
    problems = []
    for job in record.jobs:
        problem = _job_problem(job, want, record.said_at, zone)
        if problem is None:
            return CheckResult(n, "job", True, f"job {job.id} matches ({_wanted_job(want)})")
        problems.append(f"job {job.id} {excerpt(job.content, 40)}: {problem}")
    found = "; ".join(problems[:3]) if problems else "there is no job"
    return CheckResult(n, "job", False, f"turn {n}: no proactive job matches ({_wanted_job(want)}): {found}")


def check_turn(expect: Expect, record: TurnRecord, zone: ZoneInfo) -> list[CheckResult]:
    """Every code check of one turn, in the order the expectation lists them."""
    n = record.index
    answered = record.error is None
    results = [CheckResult(n, "answered", answered, "the turn was answered" if answered
                           else f"turn {n}: no answer: {record.error}")]
    results += [_tool_called(n, i, w, record.tools) for i, w in enumerate(expect.tools_called)]
    results += [_tool_not_called(n, i, w, record.tools) for i, w in enumerate(expect.tools_not_called)]
    if expect.no_tools:
        names = ", ".join(dict.fromkeys(t.name for t in record.tools))
        results.append(CheckResult(n, "no_tools", not record.tools, "no tool was called" if not record.tools
                                   else f"turn {n}: no tool should be called, but these were: {names}"))
    results += list(_reply_checks(n, expect, record.reply))
    if expect.grounded:
        results.append(_grounded(n, record))
    if expect.job is not None:
        results.append(_job(n, expect.job, record, zone))
    return results
