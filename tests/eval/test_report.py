"""A run on disk: run.json with everything, report.md for a person, folders that never collide,
and a clear error for a run folder that is missing or garbled. (``compare`` between two runs:
tests/eval/test_compare.py.)"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from bruce.eval.cases import load_cases
from bruce.eval.judge import Judge, judge_endpoint, load_rubric
from bruce.eval.report import RunError, list_runs, load_run, new_run_folder, run_record, write_run
from bruce.eval.runner import RunSettings, run_cases
from tests.eval.test_judge import RUBRIC
from tests.fakes.eval_model import FULL_MARKS, ScriptedModel
from tests.fakes.llm_server import Step

CASES = """
cases:
  - name: tip
    tags: [arithmetic]
    turns:
      - user: "What is 18% of 245.50?"
        expect:
          tools_called: [math.calculate]
          must_say: ['44[.,]19']
  - name: hello
    turns:
      - user: "Hi!"
        expect: {max_chars: 100}
"""
GOOD = {"tip": [[{"call": "math_calculate", "args": {"expression": "245.50 * 0.18"}}, {"say": "It is 44.19."}]],
        "hello": [[{"say": "Hi there!"}]]}
WORSE = {"tip": [[{"say": "About 44.19."}]], "hello": [[{"say": "Hello! " * 30}]]}
T0 = datetime(2026, 3, 6, 12, 0, tzinfo=UTC)


async def play(tmp_path, make_config, fake_llm, scripts, *, scores=None, prompt="Be brief.") -> dict:
    path = tmp_path / "cases.yml"
    path.write_text(CASES, encoding="utf-8")
    cases = load_cases(path)
    judge_answer = json.dumps({**FULL_MARKS, **(scores or {})})
    fake_llm.responder = ScriptedModel(cases, scripts, judge_model="judge",
                                       judge=lambda body: Step.text(judge_answer)).respond
    config = make_config()
    judge = await Judge.open(load_rubric(RUBRIC), judge_endpoint("openai/judge", config, "openai/m"), config)
    try:
        outcomes = await run_cases(cases, config, RunSettings(model="openai/m", environ={}), judge=judge)
    finally:
        await judge.close()
    return run_record(run_id="r", started_at=T0, finished_at=T0, model="openai/m", api_base=None,
                      cases_path=str(path), tags=[], repeat=1, jobs=4, judge=judge.record(), outcomes=outcomes,
                      system_prompt=prompt)


def test_run_folders_never_collide(tmp_path):
    first = new_run_folder(tmp_path / "runs", T0)
    second = new_run_folder(tmp_path / "runs", T0)  # the same second
    assert (first.name, second.name) == ("2026-03-06T12-00-00Z", "2026-03-06T12-00-00Z-2")
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == [first.name, second.name]


async def test_a_run_writes_everything_as_json_and_a_readable_report(tmp_path, make_config, fake_llm):
    record = await play(tmp_path, make_config, fake_llm, WORSE, scores={"tone_concision": {"score": 2,
                                                                                          "reason": "Rambles."}})
    folder = new_run_folder(tmp_path / "runs", T0)
    record["id"] = folder.name
    write_run(folder, record)
    run = load_run(folder)
    assert run["totals"]["cases"] == 2 and run["totals"]["failed"] == 2
    assert run["judge"]["rubric_version"] == 1 and run["judge"]["prompt"].startswith("You grade one reply")
    assert run["totals"]["criteria"]["tone_concision"] == {"mean": 2.0, "count": 2}
    tip = run["cases"][0]
    assert tip["name"] == "tip" and tip["pass_rate"] == "0/1" and tip["llm"]["calls"] == 1
    turn = tip["attempts"][0]["turns"][0]
    assert turn["reply"] == "About 44.19." and turn["tools"] == [] and turn["llm"]["prompt_tokens"] == 10
    assert {c["check"]: c["passed"] for c in tip["attempts"][0]["checks"]} == {
        "answered": True, "tools_called[0] math.calculate": False, "must_say[0]": True, "grounded": True}
    assert tip["attempts"][0]["verdicts"][0]["scores"]["tone_concision"] == {"score": 2, "reason": "Rambles."}

    report = (folder / "report.md").read_text()
    assert report.startswith(f"# Eval run {folder.name}\n")
    assert "- result: **0 passed, 2 failed** (5/7 code checks passed)" in report
    assert "| tone_concision | 2.00 | 2 |" in report  # totals per criterion
    assert "| tip | FAIL | 3/4 | 1 | 10 / 5 | - |" in report  # per case: checks, calls, tokens, cost, latency
    assert "  - turn 1: tool math.calculate was not called (no tool was called)" in report
    assert "- tone_concision **2**: Rambles." in report  # the judge's reasons
    assert "> About 44.19." in report
    assert [r["id"] for r in list_runs(tmp_path / "runs")] == [folder.name]


@pytest.mark.parametrize(("content", "error"), [
    (None, "no eval run here (no run.json)"),
    ("{not json", "not a run file (it is not valid JSON)"),
    (json.dumps({"format": "something else", "cases": []}), "not a run file of this version (bruce-eval-run/1)"),
    (json.dumps({"format": "bruce-eval-run/1", "cases": [{"name": 3}]}), "not a run file of this version"),
])
def test_a_missing_or_garbled_run_is_a_clear_error(tmp_path, content, error):
    folder = tmp_path / "run"
    folder.mkdir()
    if content is not None:
        (folder / "run.json").write_text(content)
    with pytest.raises(RunError, match=error.replace("(", r"\(").replace(")", r"\)")):
        load_run(folder)
    assert error in list_runs(tmp_path)[0]["error"]


def offline_record(tmp_path) -> dict:
    """A run as ``run_record`` makes it, from a played case built by hand (no model): one case,
    one attempt, one turn with a tool, a check and a verdict."""
    from bruce.eval.checks import CheckResult
    from bruce.eval.judge import Score, Verdict
    from bruce.eval.observed import ToolRun, TurnRecord
    from bruce.eval.runner import Attempt, CaseOutcome

    path = tmp_path / "cases.yml"
    path.write_text(CASES, encoding="utf-8")
    case = load_cases(path)[0]
    turn = TurnRecord(index=1, user="What is 18% of 245.50?", reply="44.19", said_at=T0,
                      tools=(ToolRun("math.calculate", {"expression": "245.50*0.18"}, "ok"),))
    verdict = Verdict(1, tuple(Score(name, 4, "ok") for name in FULL_MARKS))
    attempt = Attempt(case.name, 1, (turn,), (CheckResult(1, "answered", True, "the turn was answered"),),
                      verdicts=(verdict,))
    return run_record(run_id="r", started_at=T0, finished_at=T0, model="openai/m", api_base=None,
                      cases_path=str(path), tags=[], repeat=1, jobs=4, judge={"model": "openai/j", "rubric_version": 1},
                      outcomes=[CaseOutcome(case, (attempt,))])


def _garble(run: dict, where: str, value) -> dict:
    """``run`` with the value at ``where`` (keys and indexes joined by '/') replaced, or removed (...)."""
    *path, last = [int(p) if p.isdigit() else p for p in where.split("/")]
    target = run
    for part in path:
        target = target[part]
    if value is ...:
        del target[last]
    else:
        target[last] = value
    return run


@pytest.mark.parametrize(("where", "value", "problem"), [
    ("totals", ..., "totals: missing"),
    ("totals/llm/calls", "many", "totals.llm.calls: "),
    ("repeat", "2", "repeat: "),
    ("judge", "openai/j", "judge: "),
    ("cases/0/attempts/0", "x", "cases[0].attempts[0]: "),
    ("cases/0/attempts/0/checks", None, "cases[0].attempts[0].checks: "),
    ("cases/0/attempts/0/checks/0", "x", "cases[0].attempts[0].checks[0]: "),
    ("cases/0/attempts/0/checks/0/passed", ..., "cases[0].attempts[0].checks[0].passed: missing"),
    ("cases/0/attempts/0/turns", "abc", "cases[0].attempts[0].turns: "),
    ("cases/0/attempts/0/turns/0/tools/0", [], "cases[0].attempts[0].turns[0].tools[0]: "),
    ("cases/0/attempts/0/verdicts/0/scores", "x", "cases[0].attempts[0].verdicts[0].scores: "),
    ("cases/0/attempts/0/verdicts/0/scores/naturalness/score", None,
     "cases[0].attempts[0].verdicts[0].scores.naturalness.score: "),
])
def test_a_run_file_of_the_right_format_but_the_wrong_shape_is_a_clear_error(tmp_path, where, value, problem):
    """A run.json edited by hand or cut by another program: compare, the report and the admin page
    read it only once load_run has seen every field they use, so none of them crashes."""
    folder = tmp_path / "runs" / "r"
    folder.mkdir(parents=True)
    record = offline_record(tmp_path)
    write_run(folder, record)
    assert load_run(folder)["cases"][0]["name"] == "tip"  # as written, it loads
    (folder / "run.json").write_text(json.dumps(_garble(record, where, value)))
    with pytest.raises(RunError) as caught:
        load_run(folder)
    assert str(caught.value).startswith(f"{folder / 'run.json'}: not a run file of this version (bruce-eval-run/1): ")
    assert problem in str(caught.value)
    (listed,) = list_runs(tmp_path / "runs")
    assert listed["id"] == "r" and problem in listed["error"]


def test_listing_reads_only_the_newest_runs_and_orders_same_second_runs_by_number(tmp_path, monkeypatch):
    """A year of nightly runs: the Evals tab parses the newest few run.json files, not every one;
    the tenth run of a second is newer than the ninth."""
    from bruce.eval import report

    record = offline_record(tmp_path)
    folders = [new_run_folder(tmp_path / "runs", T0) for _ in range(11)]  # ...Z, ...Z-2, ..., ...Z-11
    for folder in folders:
        write_run(folder, {**record, "id": folder.name})
    read = []
    real = report.load_run
    monkeypatch.setattr(report, "load_run", lambda path: read.append(path.name) or real(path))
    listed = list_runs(tmp_path / "runs", limit=3)
    assert [r["id"] for r in listed] == ["2026-03-06T12-00-00Z-11", "2026-03-06T12-00-00Z-10",
                                         "2026-03-06T12-00-00Z-9"]
    assert read == [r["id"] for r in listed]
    assert [r["id"] for r in list_runs(tmp_path / "runs")][-2:] == ["2026-03-06T12-00-00Z-2", "2026-03-06T12-00-00Z"]
