"""bruce.eval.run_file: where a parsed run.json is not a run as this version writes it, named by
its path in the file, so its readers never meet a field of the wrong type. (The same through
load_run, list_runs and the report: tests/eval/test_report.py.)"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bruce.eval.run_file import FORMAT, run_problem
from tests.eval.test_report import offline_record


@pytest.fixture
def record(tmp_path: Path) -> dict[str, Any]:
    return offline_record(tmp_path)


def changed(record: dict[str, Any], change: Callable[[dict[str, Any]], object]) -> dict[str, Any]:
    copied = copy.deepcopy(record)
    change(copied)
    return copied


def test_a_run_as_written_has_no_problem_and_may_carry_fields_nobody_reads(record: dict[str, Any]) -> None:
    assert record["format"] == FORMAT
    assert run_problem(record) is None
    assert run_problem(changed(record, lambda r: r.update(written_by="a later version", judge=None))) is None


@pytest.mark.parametrize("data", [[1, 2], "run", None, 3])
def test_anything_but_a_mapping_is_named_as_the_run_itself(data: Any) -> None:
    assert run_problem(data) == "<run>: must be a mapping"


@pytest.mark.parametrize(("change", "problem"), [
    (lambda r: r.pop("totals"), "totals: missing"),
    (lambda r: r["cases"][0]["attempts"][0].update(checks=None), "cases[0].attempts[0].checks: must be a list"),
    (lambda r: r["cases"][0]["attempts"][0]["checks"][0].update(passed="yes"),
     "cases[0].attempts[0].checks[0].passed: must be true or false"),
    (lambda r: r.update(repeat="2"), "repeat: must be a whole number"),  # strict: text is not a number
    (lambda r: r["totals"]["llm"].update(cost_usd="cheap"), "totals.llm.cost_usd: must be a number"),
    (lambda r: r["cases"][0].update(name=5), "cases[0].name: must be text"),
    (lambda r: r.update(judge="openai/j"), "judge: must be a mapping"),
])
def test_a_wrong_field_is_named_by_its_path(record: dict[str, Any], change: Callable[[dict[str, Any]], object],
                                            problem: str) -> None:
    assert run_problem(changed(record, change)) == problem


def test_a_run_of_another_format_is_refused(record: dict[str, Any]) -> None:
    problem = run_problem(changed(record, lambda r: r.update(format="bruce-eval-run/2")))
    assert problem is not None and problem.startswith("format: ") and FORMAT in problem
