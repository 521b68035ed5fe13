"""``bruce eval run`` and ``bruce eval compare`` as a user runs them (``bruce.cli.main.main``, and once
as a subprocess for Ctrl-C): the last line and the exit status scripts gate on, the run folder,
and exit 2 with a clear message for what cannot be used."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import sys
from pathlib import Path

import pytest
import yaml

from bruce.cli.main import main
from bruce.eval.cases import load_cases
from tests.eval.test_judge import RUBRIC
from tests.fakes.eval_model import ScriptedModel
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
    tags: [style]
    turns:
      - user: "Hi!"
        expect: {max_chars: 100, no_tools: true}
"""
GOOD = {"tip": [[{"call": "math_calculate", "args": {"expression": "245.50 * 0.18"}}, {"say": "It is 44.19."}]],
        "hello": [[{"say": "Hi there!"}]]}
WORSE = {**GOOD, "tip": [[{"say": "About 44.19."}]]}


@pytest.fixture
def setup(tmp_path, fake_llm):
    """A config next to an evals/ folder, pointing at the fake model; returns (config path, script it)."""
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "cases.yml").write_text(CASES, encoding="utf-8")
    config = tmp_path / "config.yml"
    config.write_text(yaml.safe_dump({
        "assistant": {"timezone": "America/Sao_Paulo"},
        "llm": {"model": "openai/configured", "api_base": fake_llm.base_url, "api_key": "sk-test-123456",
                "retry_backoff_s": 0, "timeout_s": 10},
        "storage": {"path": str(tmp_path / "bruce.db")},
        "admin": {"port": 0},
    }))
    cases = load_cases(tmp_path / "evals")

    def script(scripts):
        fake_llm.responder = ScriptedModel(cases, scripts, judge_model="judge").respond

    return config, script


async def bruce(*argv: str) -> int:
    return await asyncio.to_thread(main, list(argv))


def runs(tmp_path: Path) -> list[Path]:
    folder = tmp_path / "eval-runs"
    return sorted(folder.iterdir()) if folder.exists() else []


async def test_run_prints_each_case_and_last_the_count_and_writes_the_run(setup, tmp_path, capsys, fake_llm):
    config, script = setup
    script(GOOD)
    assert await bruce("--config", str(config), "eval", "run", "--model", "openai/scripted") == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "2 passed, 0 failed"
    (folder,) = runs(tmp_path)  # eval.runs_dir: eval-runs/ next to the config
    assert out[-2] == f"report: {folder / 'report.md'}"
    assert out[0].startswith("PASS  tip  ") and " 2 calls " in out[0]
    run = json.loads((folder / "run.json").read_text())
    assert run["model"] == "openai/scripted" and run["judge"] is None and run["totals"]["passed"] == 2
    assert {r["model"] for r in fake_llm.requests} == {"scripted"}  # --model, not llm.model


async def test_a_terminal_shows_a_progress_bar_on_standard_error(setup, capsys, monkeypatch):
    config, script = setup
    script(GOOD)
    monkeypatch.setenv("TTY_COMPATIBLE", "1")  # rich draws as on a terminal
    assert await bruce("--config", str(config), "eval", "run", "--model", "openai/m", "--jobs", "1") == 0
    captured = capsys.readouterr()
    assert "eval openai/m (0 failed; last: hello)" in captured.err and "2/2" in captured.err
    assert "eval openai/m" not in captured.out  # standard output stays the results, for scripts


async def test_a_failing_case_exits_1_with_its_precise_message(setup, tmp_path, capsys):
    config, script = setup
    script(WORSE)
    assert await bruce("--config", str(config), "eval", "run", str(tmp_path / "evals"), "--model", "openai/m") == 1
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "1 passed, 1 failed"
    assert out[0].startswith("FAIL  tip") and out[1] == "      turn 1: tool math.calculate was not called (no tool " \
                                                        "was called)"


async def test_tags_repeat_and_the_judge(setup, tmp_path, capsys):
    config, script = setup
    script(GOOD)
    shutil.copy(RUBRIC, tmp_path / "evals" / "rubric.yml")
    code = await bruce("--config", str(config), "eval", "run", "--model", "openai/m", "--tag", "style",
                       "--repeat", "2", "--judge", "openai/judge", "--jobs", "2")
    assert code == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "PASS  hello  2/2 plays passed" and out[-1] == "1 passed, 0 failed"
    run = json.loads((runs(tmp_path)[0] / "run.json").read_text())
    assert [c["name"] for c in run["cases"]] == ["hello"] and run["repeat"] == 2
    assert run["judge"]["model"] == "openai/judge" and run["judge"]["rubric_version"] == 1
    assert run["totals"]["criteria"]["follows_user"] == {"mean": 5.0, "count": 2}


async def test_path_may_be_one_case_file_whose_folder_holds_the_rubric_or_a_missing_path_exits_2(setup, tmp_path,
                                                                                                   capsys):
    config, script = setup
    script(GOOD)
    shutil.copy(RUBRIC, tmp_path / "evals" / "rubric.yml")
    file = tmp_path / "evals" / "cases.yml"
    assert await bruce("--config", str(config), "eval", "run", str(file), "--model", "openai/m", "--judge",
                       "openai/judge") == 0
    run = json.loads((runs(tmp_path)[0] / "run.json").read_text())
    assert run["cases_path"] == str(file) and run["judge"]["rubric_path"] == str(tmp_path / "evals" / "rubric.yml")
    capsys.readouterr()
    assert await bruce("--config", str(config), "eval", "run", str(tmp_path / "nowhere"), "--model", "openai/m") == 2
    assert capsys.readouterr().err == f"bruce: {tmp_path / 'nowhere'}: no such file or folder of eval cases\n"
    assert len(runs(tmp_path)) == 1


@pytest.mark.parametrize(("extra", "message"), [
    (["--tag", "nothing"], "no case has the tag(s) nothing"),
    (["--judge", "openai/judge", "--rubric", "missing.yml"], "missing.yml: cannot read the rubric"),
    (["--rubric", "evals/rubric.yml"], "--rubric is the judge's: give --judge MODEL too (without it only the code "
                                       "checks run)"),
])
async def test_what_cannot_be_used_exits_2_and_writes_nothing(setup, tmp_path, capsys, extra, message):
    config, _ = setup
    assert await bruce("--config", str(config), "eval", "run", "--model", "openai/m", *extra) == 2
    assert message in capsys.readouterr().err and runs(tmp_path) == []


async def test_a_bad_case_file_exits_2_naming_the_file_case_and_key(setup, tmp_path, capsys):
    config, _ = setup
    bad = tmp_path / "evals" / "bad.yml"
    bad.write_text("cases:\n  - name: broken\n    turns: [{user: hi, expect: {tools_called: [web.serch]}}]\n")
    assert await bruce("--config", str(config), "eval", "run", "--model", "openai/m") == 2
    err = capsys.readouterr().err
    assert f"bruce: {bad}: case 'broken': turns[0].expect.tools_called[0].tool: no tool named 'web.serch'" in err
    assert runs(tmp_path) == []


async def test_a_model_without_a_key_is_refused_before_anything_runs(tmp_path, capsys, monkeypatch, fake_llm):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "cases.yml").write_text(CASES)
    config = tmp_path / "config.yml"
    config.write_text(yaml.safe_dump({"storage": {"path": str(tmp_path / "bruce.db")}}))
    assert await bruce("--config", str(config), "eval", "run", "--model", "anthropic/claude-3-5-haiku-latest") == 2
    assert "ANTHROPIC_API_KEY" in capsys.readouterr().err and fake_llm.requests == []


async def test_a_judge_answering_garbage_is_said_on_the_terminal_not_only_in_the_report(setup, tmp_path, capsys,
                                                                                       fake_llm):
    config, _ = setup
    cases = load_cases(tmp_path / "evals")
    fake_llm.responder = ScriptedModel(cases, GOOD, judge_model="judge",
                                       judge=lambda body: Step.text("Looks great!")).respond
    shutil.copy(RUBRIC, tmp_path / "evals" / "rubric.yml")
    assert await bruce("--config", str(config), "eval", "run", "--model", "openai/m", "--judge", "openai/judge") == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "2 passed, 0 failed"  # the judge never decides pass or fail
    assert "judge: 2 of 2 replies could not be scored (first: the judge's answer is not JSON (no JSON object in " \
           "the answer))" in out


async def test_a_judge_without_a_key_is_refused_before_anything_runs(setup, tmp_path, capsys, monkeypatch, fake_llm):
    """Not a whole run played with every reply 'could not be scored' and exit 0."""
    config, _ = setup
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    shutil.copy(RUBRIC, tmp_path / "evals" / "rubric.yml")
    code = await bruce("--config", str(config), "eval", "run", "--model", "openai/m",
                       "--judge", "anthropic/claude-3-5-haiku-latest")
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("bruce: --judge anthropic/claude-3-5-haiku-latest: ") and "ANTHROPIC_API_KEY" in err
    assert "eval.judge_api_key" in err and fake_llm.requests == [] and runs(tmp_path) == []


def test_model_is_required():
    with pytest.raises(SystemExit) as exited:
        main(["eval", "run"])
    assert exited.value.code == 2


@pytest.mark.parametrize("argv", [["--model", ""], ["--model", "  "], ["--model", "openai/m", "--judge", ""],
                                  ["--model", "openai/gpt 4o"]])
def test_a_blank_model_name_is_a_usage_error_not_a_traceback(argv, capsys):
    with pytest.raises(SystemExit) as exited:
        main(["eval", "run", *argv])
    assert exited.value.code == 2 and "a model name such as openai/gpt-4o-mini" in capsys.readouterr().err


@pytest.mark.parametrize(("argv", "message"), [(["--repeat", "0"], "argument --repeat: 0 is not between 1 and 1000"),
                                             (["--jobs", "0"], "argument --jobs: 0 is not between 1 and 1000"),
                                             (["--jobs", "two"], "argument --jobs: 'two' is not a whole number")])
def test_repeat_and_jobs_are_whole_numbers_from_1(argv, message, capsys):
    with pytest.raises(SystemExit) as exited:
        main(["eval", "run", "--model", "openai/m", *argv])
    assert exited.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.parametrize("value", ["-1", "nan", "inf", "x"])
def test_a_compare_threshold_that_is_not_a_positive_number_is_refused(value, capsys):
    """A negative threshold would report every unchanged criterion as a regression; nan, none."""
    with pytest.raises(SystemExit) as exited:
        main(["eval", "compare", "a", "b", "--threshold", value])
    assert exited.value.code == 2 and "argument --threshold" in capsys.readouterr().err


async def test_compare_exits_1_on_a_regression_0_the_other_way_and_2_for_a_missing_run(setup, tmp_path, capsys):
    config, script = setup
    script(GOOD)
    await bruce("--config", str(config), "eval", "run", "--model", "openai/m")
    script(WORSE)
    await bruce("--config", str(config), "eval", "run", "--model", "openai/m", "--out", str(tmp_path / "other"))
    good = runs(tmp_path)[0]
    (worse,) = (tmp_path / "other").iterdir()
    capsys.readouterr()
    assert await bruce("--config", str(config), "eval", "compare", good.name, str(worse)) == 1  # a name in eval-runs/
    out = capsys.readouterr().out.splitlines()
    assert "  tip  turn 1 tools_called[0] math.calculate: passed → failed  turn 1: tool math.calculate was not " \
           "called (no tool was called)" in out
    assert out[-1] == "1 regression(s) in code checks, 0 improvement(s)"
    assert await bruce("--config", str(config), "eval", "compare", str(worse), str(good)) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "0 regression(s) in code checks, 1 improvement(s)"
    assert await bruce("--config", str(config), "eval", "compare", str(good), good.name) == 0  # a run with itself
    assert capsys.readouterr().out.splitlines()[-1] == "0 regression(s) in code checks, 0 improvement(s)"
    assert await bruce("--config", str(config), "eval", "compare", str(good), "no-such-run") == 2
    assert f"bruce: {tmp_path / 'eval-runs' / 'no-such-run'}: no eval run here (no run.json)" in capsys.readouterr().err
    run = json.loads((good / "run.json").read_text())
    run["cases"][0]["attempts"][0]["checks"] = [None]  # valid JSON, not a run's shape: no traceback either
    (good / "run.json").write_text(json.dumps(run))
    assert await bruce("--config", str(config), "eval", "compare", str(good), str(worse)) == 2
    assert "not a run file of this version (bruce-eval-run/1): cases[0].attempts[0].checks[0]: " in \
        capsys.readouterr().err
    (good / "run.json").write_text("garbled{")
    assert await bruce("--config", str(config), "eval", "compare", str(good), str(worse)) == 2
    assert "not a run file (it is not valid JSON)" in capsys.readouterr().err


async def test_ctrl_c_mid_run_stops_cleans_up_and_writes_no_run(setup, tmp_path, fake_llm):
    config, _ = setup
    fake_llm.responder = lambda body: Step.delay(60, Step.text("late"))
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {**{k: v for k, v in os.environ.items() if k != "BRUCE_CONFIG"}, "TMPDIR": str(scratch),
           "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bruce.cli.main", "--config", str(config), "eval", "run", "--model", "openai/m",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env, cwd=tmp_path)
    for _ in range(600):  # both cases are waiting on the model
        if len(fake_llm.requests) >= 2:
            break
        await asyncio.sleep(0.05)
    assert len([p for p in scratch.iterdir() if p.name.startswith("bruce-eval-")]) == 2
    proc.send_signal(signal.SIGINT)
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 130, err.decode()
    assert "eval interrupted; no run was written" in err.decode() and out.decode() == ""
    assert [p for p in scratch.iterdir() if p.name.startswith("bruce-eval-")] == [] and runs(tmp_path) == []


@pytest.mark.parametrize("failure", [KeyboardInterrupt, OSError(28, "No space left on device")])
async def test_ctrl_c_or_a_full_disk_while_the_run_is_written_leaves_no_half_written_folder(setup, tmp_path, capsys,
                                                                                            monkeypatch, failure):
    from bruce.eval import report

    config, script = setup
    script(GOOD)
    real = report.write_run

    def cut(folder, record):  # run.json is written, then the interruption comes
        real(folder, record)
        (folder / "report.md").unlink()
        raise failure

    monkeypatch.setattr(report, "write_run", cut)
    code = await bruce("--config", str(config), "eval", "run", "--model", "openai/m")
    err = capsys.readouterr().err
    if failure is KeyboardInterrupt:
        assert code == 130 and "eval interrupted; no run was written" in err
    else:
        assert code == 1 and "the run could not be written" in err and "No space left on device" in err
    assert runs(tmp_path) == []  # no folder that the Evals tab would list as garbled


async def test_a_model_that_fails_every_call_ends_the_run_with_exit_1(setup, tmp_path, capsys, fake_llm):
    config, _ = setup
    fake_llm.responder = lambda body: Step.error(500, "internal error")
    assert await asyncio.wait_for(bruce("--config", str(config), "eval", "run", "--model", "openai/broken"), 60) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "0 passed, 2 failed"
    assert any(line.strip().startswith("turn 1: no answer: the turn ended failed") for line in out)
    assert len(runs(tmp_path)) == 1  # the run is written all the same


async def test_a_runs_folder_that_cannot_be_written_is_refused_before_playing(setup, tmp_path, capsys, fake_llm):
    config, _ = setup
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    assert await bruce("--config", str(config), "eval", "run", "--model", "openai/m", "--out", str(blocker)) == 2
    assert f"bruce: cannot write runs in {blocker}" in capsys.readouterr().err and fake_llm.requests == []
