"""The runner: cases played through the real worker, agent loop and tools against the fake model,
each in its own folder and database (nothing leaks between cases running side by side), with
``--model`` replacing only the model, telemetry from ``llm_calls``, and no folder left behind
whatever happens (a model that always fails, a cancelled run)."""

from __future__ import annotations

import asyncio
import json
import tempfile

import pytest

from bruce.eval.cases import load_cases
from bruce.eval.runner import RunSettings, case_config, play_case, run_cases
from tests.fakes.eval_model import ScriptedModel
from tests.fakes.llm_server import Step

CASES = """
cases:
  - name: keeps-a-fact
    setup:
      clock: "2026-03-04T14:00:00-03:00"
      timezone: America/Sao_Paulo
      memory: ["The owner's cat is called Miso."]
    turns:
      - user: "Remind me in 20 minutes to feed Miso."
        expect:
          tools_called: [proactive.create]
          job: {mode: message, in_seconds: 1200}
  - name: knows-nothing
    turns:
      - user: "What reminders do I have, and what is my cat called?"
        expect:
          tools_called: [proactive.list]
          must_say: ["no reminders"]
"""

SCRIPTS = {
    "keeps-a-fact": [[{"call": "proactive_create",
                       "args": {"execution_mode": "message", "content": "Feed Miso.", "in_seconds": 1200}},
                      {"say": "Done: at 14:20 I'll remind you to feed Miso."}]],
    "knows-nothing": [[{"call": "proactive_list", "args": {}},
                       {"say": "You have no reminders, and I don't know your cat's name."}]],
}


@pytest.fixture
def cases(tmp_path):
    path = tmp_path / "cases.yml"
    path.write_text(CASES, encoding="utf-8")
    return load_cases(path)


@pytest.fixture
def scratch(tmp_path, monkeypatch):
    """Where the cases' temporary folders go, to see that none is left behind."""
    folder = tmp_path / "scratch"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


async def test_cases_side_by_side_never_see_each_others_memory_or_jobs(cases, make_config, fake_llm, scratch):
    model = ScriptedModel(cases, SCRIPTS)
    fake_llm.responder = model.respond
    fake_llm.latency_s = 0.2  # both cases wait on the model at the same time
    outcomes = await run_cases(cases, make_config(), RunSettings(model="openai/scripted", jobs=2, environ={}))
    assert [o.passed for o in outcomes] == [True, True], [a.failures() for o in outcomes for a in o.attempts]
    keeps, knows = (o.attempts[0] for o in outcomes)
    assert [j.content for j in keeps.turns[0].jobs] == ["Feed Miso."]
    assert knows.turns[0].jobs == ()
    listed = [t for t in knows.turns[0].tools if t.name == "proactive.list"][0]
    assert listed.output == {"jobs": []}  # the other case's job does not exist here
    prompts = {r["messages"][-1]["content"]: r["messages"][0]["content"] for r in fake_llm.requests
               if r["messages"][-1]["role"] == "user"}
    assert "Miso" in prompts["Remind me in 20 minutes to feed Miso."]  # the seeded fact is in its own prompt
    assert "Miso" not in prompts["What reminders do I have, and what is my cat called?"]
    assert list(scratch.iterdir()) == []  # each case's folder is gone


async def test_model_replaces_llm_model_and_keeps_the_rest_of_llm(cases, make_config, fake_llm, tmp_path):
    base = make_config(llm={"fallbacks": ["openai/backup"], "timeout_s": 7, "num_retries": 1})
    config = case_config(base, tmp_path, model="openai/candidate", web_host="127.0.0.1:1")
    assert config.llm.model == "openai/candidate" and config.llm.fallbacks == []  # every answer is the candidate's
    assert (config.llm.api_base, config.llm.api_key, config.llm.timeout_s, config.llm.num_retries) == (
        base.llm.api_base, base.llm.api_key, 7, 1)
    assert config.storage.path == tmp_path / "bruce.db" and config.tools.files.notes_dir == tmp_path / "notes"
    assert config.tools.web.searxng_url == "http://127.0.0.1:1" and config.tools.web.allowed_hosts == ["127.0.0.1:1"]
    assert config.mcp_servers == {} and not config.channels.telegram.enabled and not config.admin.enabled
    assert config.limits.messages_per_minute >= 10_000  # a case's turns come faster than a person types

    fake_llm.responder = ScriptedModel(cases, SCRIPTS).respond
    attempt = await play_case(cases[0], base, RunSettings(model="openai/candidate", environ={}))
    assert attempt.passed, attempt.failures()
    assert {r["model"] for r in fake_llm.requests} == {"candidate"}
    # telemetry from llm_calls: two calls of 10 + 5 tokens each (the fake's usage)
    assert (attempt.llm.calls, attempt.llm.prompt_tokens, attempt.llm.completion_tokens) == (2, 20, 10)
    assert attempt.llm.models == ("openai/candidate",) and attempt.llm.latency_ms > 0
    assert attempt.turns[0].llm.calls == 2


async def test_a_model_that_fails_every_call_fails_each_case_and_the_run_ends(cases, make_config, fake_llm, scratch):
    fake_llm.responder = lambda body: Step.error(503, "overloaded")
    config = make_config(llm={"num_retries": 1, "retry_backoff_s": 0})
    outcomes = await asyncio.wait_for(run_cases(cases, config, RunSettings(model="openai/down", environ={})), 60)
    assert [o.passed for o in outcomes] == [False, False]
    failures = outcomes[0].attempts[0].failures()
    assert failures[0].startswith("turn 1: no answer: the turn ended failed (")
    assert "turn 1: tool proactive.create was not called (no tool was called)" in failures
    assert outcomes[0].attempts[0].llm.failed == outcomes[0].attempts[0].llm.calls == 2  # each attempt recorded
    assert list(scratch.iterdir()) == []


async def test_a_cancelled_run_removes_the_folders_of_the_cases_in_flight(cases, make_config, fake_llm, scratch):
    fake_llm.responder = lambda body: Step.delay(30, Step.text("too late"))
    run = asyncio.create_task(run_cases(cases, make_config(), RunSettings(model="openai/slow", environ={})))
    while len(fake_llm.requests) < 2:  # both cases are waiting on the model
        await asyncio.sleep(0.05)
    assert len(list(scratch.iterdir())) == 2
    run.cancel()  # what Ctrl-C does to `bruce eval run`
    with pytest.raises(asyncio.CancelledError):
        await run
    assert list(scratch.iterdir()) == []


async def test_a_bad_seeded_job_is_the_cases_error_not_a_crash(tmp_path, make_config, fake_llm, scratch):
    path = tmp_path / "bad.yml"
    path.write_text("cases:\n  - name: bad-seed\n    setup:\n      jobs: [{execution_mode: message, content: x, "
                    "in_seconds: 0}]\n    turns: [{user: hi}]\n", encoding="utf-8")
    (case,) = load_cases(path)
    attempt = await play_case(case, make_config(), RunSettings(model="openai/x", environ={}))
    assert not attempt.passed and attempt.error == "ValueError: setup.jobs[0]: in_seconds: must be at least 1 (got 0)"
    assert attempt.failures() == [f"case error: {attempt.error}"]
    assert fake_llm.requests == [] and list(scratch.iterdir()) == []


async def test_seeded_files_and_pages_are_the_cases_own(tmp_path, make_config, fake_llm):
    path = tmp_path / "files.yml"
    path.write_text("""
cases:
  - name: reads-its-page
    setup:
      files: {todo.md: "- buy milk"}
      web: {/menu.html: "<html><head><title>Menu</title></head><body><p>Soup of the day: pumpkin. Link: {web}/x</p></body></html>"}
    turns:
      - user: "Read {web}/menu.html and https://example.com/ please."
        expect:
          tools_called: [{tool: web.read_url, args: {url: {matches: 'menu'}}}]
          must_say: [pumpkin]
""", encoding="utf-8")
    (case,) = load_cases(path)
    add = {"path": "todo.md", "content": "- eggs\n", "mode": "append"}
    scripts = {"reads-its-page": [[{"call": "web_read_url", "args": {"url": "{web}/menu.html"}},
                                   {"call": "web_read_url", "args": {"url": "https://example.com/"}},
                                   {"call": "files_write", "args": {**add, "dry_run": True}},
                                   {"call": "files_write", "args": add},
                                   {"say": "Soup of the day: pumpkin. Adding eggs to your list waits for your approval."}]]}
    fake_llm.responder = ScriptedModel([case], scripts).respond
    attempt = await play_case(case, make_config(), RunSettings(model="openai/x", environ={}))
    assert attempt.passed, attempt.failures()
    page, public, preview, parked = attempt.turns[0].tools
    assert page.status == "ok" and "pumpkin" in page.output["text"] and "http://127.0.0.1:" in page.output["text"]
    assert public.status == "error" and public.error.startswith("blocked_address")  # never the internet
    assert "- buy milk" in json.dumps(preview.output)  # the seeded note is in the case's notes folder
    assert parked.status == "awaiting_confirmation" and attempt.turns[0].confirmations == ("files.write",)


def test_the_case_clock_starts_at_the_setup_moment():
    from datetime import datetime

    from bruce.eval.clock import CaseClock

    start = datetime.fromisoformat("2026-03-06T09:00:00-03:00")
    clock = CaseClock(start)
    assert 0 <= (clock.now() - start).total_seconds() < 1 and clock.now().utcoffset().total_seconds() == 0


async def test_a_case_can_ask_for_memory_extraction_between_its_turns(tmp_path, make_config, fake_llm):
    path = tmp_path / "memory.yml"
    path.write_text("""
cases:
  - name: learns
    setup: {extract_memory: true}
    turns:
      - user: "My sister is called Rita."
      - user: "What's my sister's name?"
        expect: {must_say: [Rita]}
""", encoding="utf-8")
    (case,) = load_cases(path)
    scripts = {"learns": [[{"say": "Nice!"}], [{"say": "Your sister is Rita."}]]}
    fact = json.dumps([{"type": "fact", "content": "The owner's sister is called Rita.", "confidence": 0.9}])
    fake_llm.responder = ScriptedModel([case], scripts, extraction=fact).respond
    attempt = await play_case(case, make_config(), RunSettings(model="openai/x", environ={}))
    assert attempt.passed, attempt.failures()
    second = [r for r in fake_llm.requests if r["messages"][-1]["content"] == "What's my sister's name?"][0]
    assert "The owner's sister is called Rita." in second["messages"][0]["content"]  # learnt after turn 1
    assert attempt.llm.calls == 4 and attempt.turns[0].llm.calls == 1  # extractions count for the case only


async def test_a_claim_no_tool_backs_fails_the_case_even_once_bruce_corrected_it(tmp_path, make_config, fake_llm):
    """The real flow: the model says it scheduled a reminder without calling the tool; Bruce's
    grounding makes one correction call; the case still fails, saying what the model claimed."""
    path = tmp_path / "claim.yml"
    path.write_text("cases:\n  - name: claims\n    turns:\n      - user: Remind me at 5 to call Ana.\n"
                    "        expect: {max_chars: 40}\n", encoding="utf-8")
    (case,) = load_cases(path)
    fake_llm.add(Step.text("Done! I've scheduled a reminder for 17:00 to call Ana."),
                 Step.text("I could not set that reminder: no tool ran. Shall I try again?"))
    attempt = await play_case(case, make_config(), RunSettings(model="openai/x", environ={}))
    assert attempt.turns[0].reply == "I could not set that reminder: no tool ran. Shall I try again?"
    assert attempt.failures() == [
        "turn 1: the reply is 62 characters long, more than the 40 allowed",
        "turn 1: the model's answer claimed an action no tool did (1 claim(s); Bruce's correction call rewrote it "
        "before it was sent; tools that succeeded: none)"]
    assert attempt.llm.calls == 2  # the answer and the correction, both in the case's telemetry


async def test_plays_run_side_by_side_but_never_more_than_jobs_at_a_time(cases, make_config, monkeypatch):
    from bruce.eval import runner
    from bruce.eval.runner import Attempt

    playing, most = 0, 0

    async def play(case, base, settings, *, number=1, judge=None):
        nonlocal playing, most
        playing += 1
        most = max(most, playing)
        await asyncio.sleep(0.02)
        playing -= 1
        return Attempt(case.name, number)

    monkeypatch.setattr(runner, "play_case", play)
    done = []
    outcomes = await run_cases(cases, make_config(), RunSettings(model="openai/x", jobs=3, repeat=4, environ={}),
                               on_done=done.append)
    assert most == 3 and len(done) == 8  # 2 cases x 4 plays, 3 at a time
    assert [[a.number for a in o.attempts] for o in outcomes] == [[1, 2, 3, 4], [1, 2, 3, 4]]


async def test_a_priced_model_has_its_cost_per_turn_and_case_from_llm_calls(cases, make_config, fake_llm):
    """litellm's local price table prices gpt-4o-mini: each call's cost_usd row is summed per case."""
    fake_llm.responder = ScriptedModel(cases, SCRIPTS).respond
    attempt = await play_case(cases[0], make_config(), RunSettings(model="openai/gpt-4o-mini", environ={}))
    assert attempt.passed, attempt.failures()
    assert attempt.llm.cost_usd is not None and attempt.llm.cost_usd > 0
    assert attempt.turns[0].llm.cost_usd == pytest.approx(attempt.llm.cost_usd)  # one turn: all of the case's calls
