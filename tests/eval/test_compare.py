"""``compare`` between two runs: the code checks that regressed or improved, how each judge
criterion moved, a case only one run has or could not play, and what changed between them."""

from __future__ import annotations

from bruce.eval.compare import compare_runs, render
from tests.eval.test_report import GOOD, WORSE, play


async def test_compare_shows_a_regression_per_check_and_criterion_and_the_improvements(tmp_path, make_config,
                                                                                        fake_llm):
    good = await play(tmp_path, make_config, fake_llm, GOOD)
    worse = await play(tmp_path, make_config, fake_llm, WORSE, scores={"tone_concision": {"score": 2, "reason": "x"}},
                       prompt="Be thorough.")
    good["id"], worse["id"] = "A", "B"
    result = compare_runs(good, worse)
    assert len(result.notes) == 1 and result.notes[0].startswith("the system prompt changed (")
    assert good["system_prompt"] == "Be brief." and len(good["system_prompt_sha256"]) == 64
    assert [(c.case, c.what, c.before, c.after) for c in result.code_regressions] == [
        ("hello", "turn 1 max_chars", "passed", "failed"),
        ("tip", "turn 1 tools_called[0] math.calculate", "passed", "failed")]
    assert result.code_regressions[1].detail == "turn 1: tool math.calculate was not called (no tool was called)"
    judged = [(c.case, c.what, c.before, c.after) for c in result.regressions if not c.code]
    assert judged == [("hello", "tone_concision", "5.00", "2.00"), ("tip", "tone_concision", "5.00", "2.00")]
    assert ("tone_concision", 5.0, 2.0) in result.criteria and result.improvements == []
    lines = render(result)
    assert lines[-1] == "2 regression(s) in code checks, 0 improvement(s)"
    assert "  tip  turn 1 tools_called[0] math.calculate: passed → failed  turn 1: tool math.calculate was not " \
           "called (no tool was called)" in lines
    assert "  tone_concision: 5.00 → 2.00 (-3.00)" in lines

    back = compare_runs(worse, good)  # the other way: improvements, nothing that exits non-zero
    assert back.code_regressions == [] and len([c for c in back.improvements if c.code]) == 2


def test_compare_counts_a_case_that_could_not_be_played_and_notes_what_changed():
    def run(model, *, passed, error=None, version=1):
        check = {"turn": 1, "check": "answered", "passed": passed, "message": "turn 1: no answer: x"}
        attempt = {"number": 1, "passed": passed, "error": error, "checks": [] if error else [check], "verdicts": []}
        return {"id": model, "model": model, "judge": {"model": "j", "rubric_version": version},
                "cases": [{"name": "a", "attempts": [attempt]}, {"name": model, "attempts": []}]}

    result = compare_runs(run("m1", passed=True), run("m2", passed=False, error="RuntimeError: boom", version=2))
    (change,) = result.code_regressions
    assert (change.what, change.after, change.detail) == ("turn 1 answered", "no result", "case error: RuntimeError: boom")
    assert result.only_a == ["m1"] and result.only_b == ["m2"]
    assert "the rubric changed (v1 → v2): scores are not comparable as is" in result.notes
    assert "model: m1 → m2" in result.notes and "judge: j (rubric v1) → j (rubric v2)" in result.notes
