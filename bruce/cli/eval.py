"""``bruce eval run [PATH] --model M [--judge J] [--repeat N] [--tag T]`` and ``bruce eval compare A B``.

``run`` plays every case of PATH (default ``eval.cases_dir``: ``evals/`` next to the config)
through the real worker, with a progress bar on standard error; it writes
``<eval.runs_dir>/<timestamp>/`` (``run.json``, ``report.md``) and prints one line per case,
then, last, ``N passed, M failed``. Exit status: 0 when every case passed its code checks, 1
when one failed, 2 for a case file, rubric, model or judge key or config that cannot be used
(nothing is played).
``compare`` exits 1 when a code check that passed in A fails in B, 2 when a run cannot be read.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from bruce.config.schema import Config
from bruce.safe_text import visible

if TYPE_CHECKING:  # the rest is imported when a command runs: `bruce --help` stays quick
    from bruce.eval.cases import Case
    from bruce.eval.judge import Rubric
    from bruce.eval.runner import CaseOutcome, RunSettings
    from bruce.llm.service import LLMService
    from bruce.store import Store

__all__ = ["add_arguments", "eval_command"]

USAGE_ERROR = 2


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1 or value > 1000:
        raise argparse.ArgumentTypeError(f"{value} is not between 1 and 1000")
    return value


def _model_name(text: str) -> str:
    """``--model`` / ``--judge``: a litellm model name (the run's config never validates it)."""
    if not text.strip() or any(c.isspace() for c in text):
        raise argparse.ArgumentTypeError(f"{text!r}: give a model name such as openai/gpt-4o-mini or "
                                         "ollama_chat/llama3.2")
    return text


def _threshold(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 < value <= 4:  # scores are 1-5; also refuses nan
        raise argparse.ArgumentTypeError(f"{text} is not a number above 0 and at most 4")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="eval_command", required=True)
    run = sub.add_parser("run", help="play the eval cases against a model, check them, write a run folder")
    run.add_argument("path", nargs="?", type=Path, default=None,
                     help="a case file or a folder of them (default: eval.cases_dir, evals/ next to the config)")
    run.add_argument("--model", required=True, type=_model_name,
                     help="the model under test: replaces llm.model, the rest of llm is kept")
    run.add_argument("--judge", default=None, type=_model_name,
                     help="a model that scores each reply on the rubric (default: no judge)")
    run.add_argument("--rubric", type=Path, default=None, help="the judge's rubric (default: rubric.yml in the "
                                                               "cases' folder)")
    run.add_argument("--repeat", type=_positive, default=1, help="play each case N times (default 1)")
    run.add_argument("--tag", action="append", default=[], help="only cases with this tag (repeat for several)")
    run.add_argument("--jobs", type=_positive, default=4, help="cases played at the same time (default 4)")
    run.add_argument("--out", type=Path, default=None, help="where run folders go (default: eval.runs_dir)")
    compare = sub.add_parser("compare", help="regressions and improvements from run A to run B")
    compare.add_argument("a", help="a run folder, or a run's name in eval.runs_dir")
    compare.add_argument("b", help="a run folder, or a run's name in eval.runs_dir")
    compare.add_argument("--threshold", type=_threshold, default=0.5,
                         help="a judge criterion's mean must move this much to count (default 0.5)")


def eval_command(config: Config, args: argparse.Namespace) -> int:
    from bruce.eval.cases import CaseError
    from bruce.eval.judge import RubricError
    from bruce.eval.report import RunError

    try:
        if args.eval_command == "compare":
            return _compare(config, args)
        return _run(config, args)
    except (CaseError, RubricError, RunError) as exc:
        print(f"bruce: {exc}", file=sys.stderr)
        return USAGE_ERROR


def _cases(config: Config, args: argparse.Namespace) -> tuple[Path, list[Case]]:
    from bruce.app import tool_set
    from bruce.eval.cases import CaseError, load_cases, select, unknown_tools

    path = args.path if args.path is not None else config.eval.cases_dir
    cases = load_cases(path)
    problems = unknown_tools(cases, [contract.name for contract, _ in tool_set(config, None)])
    if problems:
        raise CaseError("\n".join(problems))
    chosen = select(cases, args.tag)
    if not chosen:
        raise CaseError(f"{path}: no case has the tag(s) {', '.join(args.tag)}")
    return path, chosen


def _model(config: Config, model: str) -> LLMService:
    """The model under test, as the cases' apps will reach it; used here only to say what is
    missing (no key, no endpoint) and to load litellm before the first case is timed."""
    from bruce.clock import SystemClock
    from bruce.llm.service import LLMService

    llm = config.llm.model_copy(update={"model": model, "fallbacks": []})
    return LLMService(llm, store=cast("Store", None), clock=SystemClock())  # it never calls the model


def _judge_missing(config: Config, judge: str, model: str) -> str | None:
    """What the judge lacks (a key), said before the cases are played rather than as every
    reply's judge error after them."""
    from bruce.clock import SystemClock
    from bruce.eval.judge import Judge, judge_endpoint
    from bruce.llm.service import LLMService

    llm = Judge.llm_config(judge_endpoint(judge, config, model), config)
    hint = LLMService(llm, store=cast("Store", None), clock=SystemClock()).missing_configuration()
    return f"--judge {judge}: {hint} (or set eval.judge_api_key and eval.judge_api_base)" if hint else None


def _run(config: Config, args: argparse.Namespace) -> int:
    from bruce.clock import SystemClock
    from bruce.eval.cases import RUBRIC_FILE
    from bruce.eval.judge import RubricError, load_rubric
    from bruce.eval.report import REPORT_FILE, new_run_folder, run_record, write_run
    from bruce.eval.runner import RunSettings

    if args.rubric is not None and not args.judge:
        raise RubricError("--rubric is the judge's: give --judge MODEL too (without it only the code checks run)")
    path, cases = _cases(config, args)
    rubric = None
    if args.judge:
        rubric = load_rubric(args.rubric or (path if path.is_dir() else path.parent) / RUBRIC_FILE)
    model = _model(config, args.model)
    hint = model.missing_configuration() or (_judge_missing(config, args.judge, args.model) if args.judge else None)
    if hint:
        print(f"bruce: {hint}", file=sys.stderr)
        return USAGE_ERROR
    runs_dir = args.out if args.out is not None else config.eval.runs_dir
    problem = _unwritable(runs_dir)
    if problem:  # found now, not after the cases have been played
        print(f"bruce: {problem}", file=sys.stderr)
        return USAGE_ERROR
    settings = RunSettings(model=args.model, jobs=args.jobs, repeat=args.repeat)
    clock = SystemClock()
    started = clock.now()
    judge_record, outcomes = asyncio.run(_play(config, cases, settings, args.judge, rubric, warm_up=model.warm_up))
    record = run_record(run_id="", started_at=started, finished_at=clock.now(), model=args.model,
                        api_base=config.llm.api_base, cases_path=str(path), tags=args.tag, repeat=args.repeat,
                        jobs=args.jobs, judge=judge_record, outcomes=outcomes,
                        system_prompt=config.assistant.system_prompt)
    for line in _summary(outcomes):
        print(visible(line))
    written = True
    try:
        folder = new_run_folder(runs_dir, started)
        record["id"] = folder.name
        try:
            write_run(folder, record)
        except BaseException:  # a full disk, Ctrl-C: no half-written run is left to be listed as garbled
            shutil.rmtree(folder, ignore_errors=True)
            raise
        print(f"report: {folder / REPORT_FILE}")
    except OSError as exc:  # a full disk: the results above are all there is
        print(f"bruce: the run could not be written to {runs_dir} ({exc.strerror or exc})", file=sys.stderr)
        written = False
    passed = sum(o.passed for o in outcomes)
    print(f"{passed} passed, {len(outcomes) - passed} failed", flush=True)
    return 0 if passed == len(outcomes) and written else 1


def _unwritable(runs_dir: Path) -> str | None:
    """Why no run folder can be made in ``runs_dir``, or None."""
    try:
        runs_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=runs_dir):
            pass
    except OSError as exc:
        return f"cannot write runs in {runs_dir} ({exc.strerror or exc}); choose another folder with --out"
    return None


async def _play(config: Config, cases: list[Case], settings: RunSettings, judge_model: str | None,
                rubric: Rubric | None, *, warm_up: Callable[[], Awaitable[None]]) -> tuple[dict[str, Any] | None,
                                                                                            list[CaseOutcome]]:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from bruce.eval.judge import Judge, judge_endpoint
    from bruce.eval.runner import Attempt, run_cases

    await warm_up()  # litellm's import (seconds) is not counted in the first case's time
    judge = None
    if judge_model is not None and rubric is not None:
        judge = await Judge.open(rubric, judge_endpoint(judge_model, config, settings.model), config)
    failed = 0
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=Console(stderr=True), transient=True) as progress:
        task = progress.add_task(f"eval {settings.model}", total=len(cases) * settings.repeat)

        def done(attempt: Attempt) -> None:
            nonlocal failed
            failed += not attempt.passed
            progress.update(task, advance=1, description=f"eval {settings.model} ({failed} failed; last: "
                                                         f"{attempt.case})")

        try:
            outcomes = await run_cases(cases, config, settings, judge=judge, on_done=done)
        finally:
            if judge is not None:
                await judge.close()
    return (judge.record() if judge is not None else None), outcomes


def _summary(outcomes: list[CaseOutcome]) -> list[str]:
    width = max((len(o.case.name) for o in outcomes), default=10)
    lines = []
    for outcome in outcomes:
        stats = outcome.attempts[0].llm if len(outcome.attempts) == 1 else None
        head = f"{'PASS' if outcome.passed else 'FAIL'}  {outcome.case.name.ljust(width)}"
        if len(outcome.attempts) > 1:
            head += f"  {sum(a.passed for a in outcome.attempts)}/{len(outcome.attempts)} plays passed"
        elif stats is not None:
            cost = "" if stats.cost_usd is None else f"  ${stats.cost_usd:.4f}"
            head += (f"  {stats.calls} calls  {stats.prompt_tokens + stats.completion_tokens} tokens{cost}  "
                     f"{outcome.attempts[0].duration_ms / 1000:.1f} s")
        lines.append(head)
        for attempt in outcome.attempts:
            lines += [f"      {message}" for message in attempt.failures()]
    verdicts = [v for o in outcomes for a in o.attempts for v in a.verdicts]
    unscored = [v.error for v in verdicts if v.error]
    if unscored:  # the report has each one; a judge that never answers must not pass unnoticed
        lines.append(f"judge: {len(unscored)} of {len(verdicts)} replies could not be scored "
                     f"(first: {unscored[0][:300]})")
    return lines


def _run_path(config: Config, given: str) -> Path:
    path = Path(given)
    if path.exists():
        return path
    return config.eval.runs_dir / given


def _compare(config: Config, args: argparse.Namespace) -> int:
    from bruce.eval.compare import compare_runs, render
    from bruce.eval.report import load_run

    a, b = load_run(_run_path(config, args.a)), load_run(_run_path(config, args.b))
    result = compare_runs(a, b, threshold=args.threshold)
    for line in render(result):
        print(visible(line))
    return 1 if result.code_regressions else 0

