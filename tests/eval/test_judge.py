"""The judge: scores per reply on the fixed rubric, read from whatever the judge model answers (a
malformed answer, or none at all, is that reply's judge error), and recorded with the rubric's
version, the prompt and the model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bruce.config.loader import parse_config
from bruce.eval.cases import load_cases
from bruce.eval.judge import CRITERIA, Judge, RubricError, judge_endpoint, load_rubric, parse_verdict
from bruce.eval.runner import RunSettings, run_cases
from tests.fakes.eval_model import FULL_MARKS, ScriptedModel
from tests.fakes.llm_server import Step

RUBRIC = Path(__file__).resolve().parents[2] / "evals" / "rubric.yml"

CASES = """
cases:
  - name: two-turns
    turns:
      - user: "Hi!"
      - user: "What is 2+2?"
"""
SCRIPTS = {"two-turns": [[{"say": "Hi! What can I do for you?"}], [{"say": "4."}]]}


def marks(**changes):
    return json.dumps({**FULL_MARKS, **changes})


def test_scores_are_read_from_json_even_inside_a_code_fence():
    answer = "```json\n" + marks(continuity={"score": "3", "reason": "Asks again\nfor the city."},
                                 naturalness=4.0) + "\n```"
    verdict = parse_verdict(2, answer)
    assert verdict.error is None and verdict.turn == 2
    scores = {s.criterion: (s.score, s.reason) for s in verdict.scores}
    assert list(scores) == list(CRITERIA)
    assert scores["continuity"] == (3, "Asks again for the city.") and scores["naturalness"] == (4, "")


@pytest.mark.parametrize(("answer", "error"), [
    ("I'd give it a 4 overall.", "the judge's answer is not JSON (no JSON object in the answer)"),
    ("{\"naturalness\": ", "the judge's answer is not JSON (no JSON object in the answer)"),
    ("[1, 2]", "the judge's answer is not JSON (no JSON object in the answer)"),
    ("{\"naturalness\": {\"score\": 5}", "the judge's answer is not JSON (Expecting ',' delimiter: line 1 column 29 "
                                         "(char 28))"),
    (json.dumps({k: v for k, v in FULL_MARKS.items() if k != "follows_user"}), "criterion follows_user is missing"),
    (marks(tone_concision={"score": 7, "reason": "x"}), "criterion tone_concision has no score from 1 to 5 (got '7')"),
    (marks(continuity={"score": True}), "criterion continuity has no score from 1 to 5 (got 'True')"),
    ("", "the judge's answer is not JSON (no JSON object in the answer)"),
])
def test_a_malformed_answer_is_an_error_with_the_raw_text(answer, error):
    verdict = parse_verdict(1, answer)
    assert verdict.scores == () and verdict.error == error and verdict.raw == answer


def test_the_rubric_is_fixed_and_versioned(tmp_path):
    rubric = load_rubric(RUBRIC)
    prompt = rubric.system_prompt()
    assert rubric.version == 1 and len(rubric.sha256) == 64
    assert all(f"- {name}: " in prompt for name in CRITERIA) and prompt.endswith("and nothing else: " + "{" + ", ".join(
        f'"{name}": {{"score": 1-5, "reason": "one line"}}' for name in CRITERIA) + "}")
    bad = tmp_path / "rubric.yml"
    bad.write_text("version: 2\ninstructions: grade\ncriteria: {naturalness: x}\n")
    with pytest.raises(RubricError, match="criteria: one sentence for each of naturalness, continuity"):
        load_rubric(bad)
    bad.write_text("version: zero\ninstructions: grade\ncriteria: {}\n")
    with pytest.raises(RubricError, match="version: a whole number from 1"):
        load_rubric(bad)
    with pytest.raises(RubricError, match="cannot read the rubric"):
        load_rubric(tmp_path / "none.yml")


def test_where_the_judge_is_asked():
    config = parse_config({"llm": {"model": "ollama_chat/llama3.2", "api_base": "http://gpu:11434"}}, environ={})
    assert judge_endpoint("ollama_chat/gemma2", config, "ollama_chat/llama3.2").api_base == "http://gpu:11434"
    hosted = judge_endpoint("openai/gpt-4o", config, "ollama_chat/llama3.2")
    assert hosted.api_base is None and hosted.api_key is None  # litellm's own default and OPENAI_API_KEY
    own = parse_config({"eval": {"judge_api_base": "http://proxy/v1", "judge_api_key": "sk-judge-0123456789"}},
                       environ={})
    chosen = judge_endpoint("openai/gpt-4o", own, "ollama_chat/llama3.2")
    assert chosen.api_base == "http://proxy/v1" and chosen.api_key is not None
    assert "sk-judge-0123456789" in own.secrets()  # redacted from the logs like every key


@pytest.fixture
def cases(tmp_path):
    path = tmp_path / "cases.yml"
    path.write_text(CASES, encoding="utf-8")
    return load_cases(path)


async def test_each_reply_is_scored_and_the_run_keeps_the_judges_model_rubric_and_prompt(cases, make_config,
                                                                                           fake_llm):
    answers = {"Hi! What can I do for you?": marks(tone_concision={"score": 4, "reason": "A bit eager."}),
               "4.": "Sure! " + marks(continuity={"score": 2, "reason": "Ignores the greeting."})}

    def judge(body):
        graded = body["messages"][1]["content"].split("The reply to grade:\n", 1)[1]
        reply = graded.split("\nBRUCE: ", 1)[1].split("\n\nTools that ran", 1)[0]
        return Step.text(answers[reply])

    fake_llm.responder = ScriptedModel(cases, SCRIPTS, judge_model="judge", judge=judge).respond
    config = make_config()
    judge_ = await Judge.open(load_rubric(RUBRIC), judge_endpoint("openai/judge", config, "openai/agent"), config)
    try:
        (outcome,) = await run_cases(cases, config, RunSettings(model="openai/agent", environ={}), judge=judge_)
    finally:
        await judge_.close()
    first, second = outcome.attempts[0].verdicts
    assert {s.criterion: s.score for s in first.scores}["tone_concision"] == 4
    assert {s.criterion: s.reason for s in second.scores}["continuity"] == "Ignores the greeting."
    assert first.llm.calls == 1 and first.llm.prompt_tokens == 10  # the judge's own telemetry
    assert outcome.attempts[0].llm.calls == 2  # ...kept apart from the case's
    second_prompt = [r for r in fake_llm.requests if r["model"] == "judge"][1]["messages"]
    assert second_prompt[0]["content"] == load_rubric(RUBRIC).system_prompt()
    assert "USER: Hi!\nBRUCE: Hi! What can I do for you?" in second_prompt[1]["content"]  # the conversation so far
    record = judge_.record()
    assert record["model"] == "openai/judge" and record["rubric_version"] == 1
    assert record["rubric_sha256"] == load_rubric(RUBRIC).sha256 and record["prompt"] == second_prompt[0]["content"]


async def test_a_judge_that_answers_garbage_or_never_answers_is_recorded_not_fatal(cases, make_config, fake_llm):
    calls = []

    def judge(body):
        calls.append(1)
        return Step.text("Looks good to me!") if len(calls) == 1 else Step.delay(5, Step.text(marks()))

    fake_llm.responder = ScriptedModel(cases, SCRIPTS, judge_model="judge", judge=judge).respond
    config = make_config(llm={"timeout_s": 0.5, "num_retries": 0})
    judge_ = await Judge.open(load_rubric(RUBRIC), judge_endpoint("openai/judge", config, "openai/agent"), config)
    try:
        (outcome,) = await run_cases(cases, config, RunSettings(model="openai/agent", environ={}), judge=judge_)
    finally:
        await judge_.close()
    garbage, silent = outcome.attempts[0].verdicts
    assert garbage.error == "the judge's answer is not JSON (no JSON object in the answer)"
    assert garbage.raw == "Looks good to me!"
    assert silent.error is not None and silent.error.startswith("the judge did not answer (")
    assert "timed out" in silent.error and silent.llm.failed == 1
    assert outcome.passed  # the code checks decide; the judge only scores
