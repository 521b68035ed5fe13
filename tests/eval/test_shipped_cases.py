"""The shipped eval cases (``evals/``) as a smoke test of the harness: every case, played through
the real runner, worker, agent loop and tools against the fake model, with its scripted answers
(``tests/eval_scripts/``: what a good model would do), passes every code check."""

from __future__ import annotations

from pathlib import Path

from bruce.eval.cases import load_cases
from bruce.eval.judge import load_rubric
from bruce.eval.runner import RunSettings, run_cases
from tests.fakes.eval_model import ScriptedModel, load_scripts

ROOT = Path(__file__).resolve().parents[2]
EVALS = ROOT / "evals"
SCRIPTS = Path(__file__).resolve().parents[1] / "eval_scripts"


def test_every_shipped_case_has_a_script_and_every_script_a_case():
    cases = load_cases(EVALS)
    scripts = load_scripts(SCRIPTS)
    assert sorted(c.name for c in cases) == sorted(scripts)
    for case in cases:
        assert len(scripts[case.name]) == len(case.spec.turns), case.name
    firsts = [c.spec.turns[0].user for c in cases]
    assert len(set(firsts)) == len(firsts), "the scripted model tells cases apart by their first message"
    assert {path.stem for path in EVALS.glob("*.yml")} - {"rubric"} == {path.stem for path in SCRIPTS.glob("*.yml")}


def test_the_shipped_rubric_loads():
    rubric = load_rubric(EVALS / "rubric.yml")
    assert rubric.version >= 1 and "follows_user" in rubric.system_prompt()


async def test_every_shipped_case_passes_against_its_scripted_answers(make_config, fake_llm):
    cases = load_cases(EVALS)
    model = ScriptedModel(cases, load_scripts(SCRIPTS))
    fake_llm.responder = model.respond
    outcomes = await run_cases(cases, make_config(), RunSettings(model="openai/scripted", jobs=8, environ={}))
    failures = [f"{o.case.name}: {message}" for o in outcomes for a in o.attempts for message in a.failures()]
    assert failures == [] and model.unmatched == []
    assert len(outcomes) == len(cases) >= 25
    tools = {t.name for o in outcomes for a in o.attempts for turn in a.turns for t in turn.tools if t.succeeded}
    assert {"math.calculate", "clock.now", "proactive.create", "artifact.save", "web.read_url", "web.search",
            "memory.remember", "proactive.cancel"} <= tools  # the real tools ran
