"""Two runs side by side: which code checks passed in A and fail in B (regressions), which went
the other way (improvements), and how each judge criterion moved, per case and over the run.

Checks are matched by case, turn and check id (``tools_called[0] proactive.create``). With
repeats, a check passed in A when it passed in every play of A, and fails in B when it failed
in any play of B. A regression of a code check is what makes ``bruce eval compare`` exit 1; a
criterion whose mean dropped by ``threshold`` or more is shown as a regression too, but does
not change the exit status (a judge is noisier than code).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Change", "Comparison", "compare_runs", "render"]

CheckKey = tuple[int, str]


@dataclass(frozen=True, slots=True)
class Change:
    case: str
    what: str  # "turn 1 tools_called[0] proactive.create", or a criterion's name
    before: str
    after: str
    detail: str = ""
    code: bool = True  # a code check (False: a judge criterion)


@dataclass
class Comparison:
    a: str
    b: str
    regressions: list[Change] = field(default_factory=list)
    improvements: list[Change] = field(default_factory=list)
    criteria: list[tuple[str, float | None, float | None]] = field(default_factory=list)
    only_a: list[str] = field(default_factory=list)
    only_b: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def code_regressions(self) -> list[Change]:
        return [c for c in self.regressions if c.code]


def _checks(case: dict[str, Any]) -> dict[CheckKey, tuple[bool, bool, str]]:
    """(turn, check) -> (passed in every play, failed in some play, a failure's message)."""
    found: dict[CheckKey, tuple[bool, bool, str]] = {}
    for attempt in case.get("attempts", []):
        for check in attempt.get("checks", []):
            key = (int(check.get("turn", 0)), str(check.get("check", "")))
            every, some, message = found.get(key, (True, False, ""))
            passed = bool(check.get("passed"))
            found[key] = (every and passed, some or not passed, message or ("" if passed else str(check.get("message"))))
    return found


def _errors(case: dict[str, Any]) -> list[str]:
    return [str(a["error"]) for a in case.get("attempts", []) if a.get("error")]


def _code_changes(name: str, a: dict[str, Any], b: dict[str, Any]) -> Iterator[tuple[bool, Change]]:
    """(is a regression, the change) for each check whose outcome moved between A and B."""
    before, after = _checks(a), _checks(b)
    b_error = "; ".join(_errors(b))
    for key in sorted(before.keys() | after.keys()):
        what = f"turn {key[0]} {key[1]}"
        if key not in after:
            if before[key][0] and b_error:
                yield True, Change(name, what, "passed", "no result", f"case error: {b_error}")
            continue
        if key not in before:
            continue
        a_every, a_some, _ = before[key]
        b_every, b_some, message = after[key]
        if a_every and b_some:
            yield True, Change(name, what, "passed", "failed", message)
        elif a_some and b_every:
            yield False, Change(name, what, "failed", "passed")


def _mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 2) if values else None


def _scores(case: dict[str, Any]) -> dict[str, list[float]]:
    found: dict[str, list[float]] = {}
    for attempt in case.get("attempts", []):
        for verdict in attempt.get("verdicts", []):
            for name, item in (verdict.get("scores") or {}).items():
                if isinstance(item, dict) and isinstance(item.get("score"), int | float):
                    found.setdefault(name, []).append(float(item["score"]))
    return found


def compare_runs(a: dict[str, Any], b: dict[str, Any], *, threshold: float = 0.5) -> Comparison:
    result = Comparison(str(a.get("id", "A")), str(b.get("id", "B")))
    cases_a = {c["name"]: c for c in a["cases"]}
    cases_b = {c["name"]: c for c in b["cases"]}
    result.only_a = sorted(cases_a.keys() - cases_b.keys())
    result.only_b = sorted(cases_b.keys() - cases_a.keys())
    totals: dict[str, tuple[list[float], list[float]]] = {}
    for name in sorted(cases_a.keys() & cases_b.keys()):
        for regression, change in _code_changes(name, cases_a[name], cases_b[name]):
            (result.regressions if regression else result.improvements).append(change)
        scores_a, scores_b = _scores(cases_a[name]), _scores(cases_b[name])
        for criterion in sorted(scores_a.keys() & scores_b.keys()):
            before, after = _mean(scores_a[criterion]), _mean(scores_b[criterion])
            assert before is not None and after is not None  # both lists are non-empty
            change = Change(name, criterion, f"{before:.2f}", f"{after:.2f}", f"{after - before:+.2f}", code=False)
            if after - before <= -threshold:
                result.regressions.append(change)
            elif after - before >= threshold:
                result.improvements.append(change)
        for criterion in scores_a.keys() | scores_b.keys():
            pair = totals.setdefault(criterion, ([], []))
            pair[0].extend(scores_a.get(criterion, []))
            pair[1].extend(scores_b.get(criterion, []))
    result.criteria = [(name, _mean(totals[name][0]), _mean(totals[name][1])) for name in sorted(totals)]
    result.notes += _setting_notes(a, b)
    return result


def _judge(run: dict[str, Any]) -> str:
    judge = run.get("judge")
    if not isinstance(judge, dict):
        return "none"
    return f"{judge.get('model')} (rubric v{judge.get('rubric_version')})"


def _setting_notes(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """What differs between the runs besides the cases: the model, the judge, the rubric."""
    notes = []
    if a.get("model") != b.get("model"):
        notes.append(f"model: {a.get('model')} → {b.get('model')}")
    if _judge(a) != _judge(b):
        notes.append(f"judge: {_judge(a)} → {_judge(b)}")
    prompts = [run.get("system_prompt_sha256") for run in (a, b)]
    if None not in prompts and prompts[0] != prompts[1]:
        notes.append(f"the system prompt changed ({str(prompts[0])[:8]} → {str(prompts[1])[:8]})")
    versions = [(run.get("judge") or {}).get("rubric_version") for run in (a, b)]
    if None not in versions and versions[0] != versions[1]:
        notes.append(f"the rubric changed (v{versions[0]} → v{versions[1]}): scores are not comparable as is")
    return notes


def _line(change: Change) -> str:
    detail = f"  {change.detail}" if change.detail else ""
    return f"  {change.case}  {change.what}: {change.before} → {change.after}{detail}"


def render(result: Comparison) -> list[str]:
    """The comparison as lines for a terminal; the last one counts the code regressions."""
    lines = [f"compare {result.a} → {result.b}"] + [f"  note: {n}" for n in result.notes]
    groups = (("Regressions (code checks)", [c for c in result.regressions if c.code]),
              ("Regressions (judge, mean per case)", [c for c in result.regressions if not c.code]),
              ("Improvements (code checks)", [c for c in result.improvements if c.code]),
              ("Improvements (judge, mean per case)", [c for c in result.improvements if not c.code]))
    for title, changes in groups:
        if changes:
            lines += ["", f"{title}:"] + [_line(c) for c in changes]
    if result.criteria:
        lines += ["", "Judge, mean per criterion over the run:"]
        for name, before, after in result.criteria:
            shown = [f"{v:.2f}" if v is not None else "-" for v in (before, after)]
            delta = f" ({after - before:+.2f})" if before is not None and after is not None else ""
            lines.append(f"  {name}: {shown[0]} → {shown[1]}{delta}")
    if result.only_a:
        lines += ["", "Only in A: " + ", ".join(result.only_a)]
    if result.only_b:
        lines += ["", "Only in B: " + ", ".join(result.only_b)]
    code = result.code_regressions
    lines += ["", f"{len(code)} regression(s) in code checks, "
                  f"{len([c for c in result.improvements if c.code])} improvement(s)"]
    return lines
