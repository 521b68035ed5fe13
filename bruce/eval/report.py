"""A run on disk: ``<runs_dir>/<timestamp>/run.json`` (everything: settings, the judge's model,
rubric and prompt, every turn, tool call, check, score and model call) and ``report.md`` (the
same for a person: totals, per-criterion means, per-case results, failures, transcripts with
the judge's reasons). ``load_run`` reads a run back for ``compare`` and the admin page."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bruce.errors import BruceError
from bruce.eval.judge import CRITERIA
from bruce.eval.observed import CallStats
from bruce.eval.run_file import FORMAT, run_problem

if TYPE_CHECKING:  # reading runs (compare, the admin page) needs none of the machinery that plays them
    from bruce.eval.runner import Attempt, CaseOutcome

__all__ = ["RUN_FILE", "REPORT_FILE", "FORMAT", "RunError", "new_run_folder", "run_record", "write_run", "load_run",
           "markdown", "list_runs"]

RUN_FILE = "run.json"
REPORT_FILE = "report.md"
MAX_RUN_BYTES = 200_000_000


class RunError(BruceError):
    """A run folder that is missing or cannot be read; the text says which and why."""


def new_run_folder(runs_dir: Path, now: datetime) -> Path:
    """A new folder named for ``now`` (UTC); a second run in the same second gets ``-2``, ``-3``…"""
    runs_dir.mkdir(parents=True, exist_ok=True)
    stem = now.strftime("%Y-%m-%dT%H-%M-%SZ")
    for n in range(1, 1000):
        folder = runs_dir / (stem if n == 1 else f"{stem}-{n}")
        try:
            folder.mkdir()
        except FileExistsError:
            continue
        return folder
    raise RunError(f"{runs_dir}: more than 999 runs started in the second {stem}")


def _attempt(attempt: Attempt) -> dict[str, Any]:
    return {"number": attempt.number, "passed": attempt.passed, "error": attempt.error,
            "duration_ms": round(attempt.duration_ms, 1), "llm": attempt.llm.as_dict(),
            "checks": [c.as_dict() for c in attempt.checks], "turns": [t.as_dict() for t in attempt.turns],
            "verdicts": [v.as_dict() for v in attempt.verdicts]}


def _means(attempts: Sequence[Attempt]) -> dict[str, float]:
    found: dict[str, list[int]] = {}
    for attempt in attempts:
        for verdict in attempt.verdicts:
            for score in verdict.scores:
                found.setdefault(score.criterion, []).append(score.score)
    return {name: round(sum(v) / len(v), 2) for name, v in found.items() if v}


def _case(outcome: CaseOutcome) -> dict[str, Any]:
    case = outcome.case
    passed = sum(a.passed for a in outcome.attempts)
    return {"name": case.name, "file": str(case.file), "tags": case.tags, "description": case.spec.description,
            "passed": outcome.passed, "pass_rate": f"{passed}/{len(outcome.attempts)}",
            "llm": sum((a.llm for a in outcome.attempts), CallStats()).as_dict(),
            "criteria": _means(outcome.attempts), "attempts": [_attempt(a) for a in outcome.attempts]}


def _totals(outcomes: Sequence[CaseOutcome]) -> dict[str, Any]:
    attempts = [a for o in outcomes for a in o.attempts]
    checks = [c for a in attempts for c in a.checks]
    scores: dict[str, list[int]] = {}
    verdicts = [v for a in attempts for v in a.verdicts]
    for verdict in verdicts:
        for score in verdict.scores:
            scores.setdefault(score.criterion, []).append(score.score)
    return {
        "cases": len(outcomes), "passed": sum(o.passed for o in outcomes),
        "failed": sum(not o.passed for o in outcomes), "attempts": len(attempts),
        "attempts_passed": sum(a.passed for a in attempts), "checks": len(checks),
        "checks_failed": sum(not c.passed for c in checks),
        "llm": sum((a.llm for a in attempts), CallStats()).as_dict(),
        "judge_llm": sum((v.llm for v in verdicts), CallStats()).as_dict(),
        "judge_errors": sum(v.error is not None for v in verdicts),
        "criteria": {name: {"mean": round(sum(scores[name]) / len(scores[name]), 2), "count": len(scores[name])}
                     for name in CRITERIA if scores.get(name)},
    }


def run_record(*, run_id: str, started_at: datetime, finished_at: datetime, model: str, api_base: str | None,
               cases_path: str, tags: Sequence[str], repeat: int, jobs: int, judge: dict[str, Any] | None,
               outcomes: Sequence[CaseOutcome], system_prompt: str = "") -> dict[str, Any]:
    """``system_prompt``: ``assistant.system_prompt`` as the cases ran with it (a prompt change is
    what a run is often compared for)."""
    return {"format": FORMAT, "id": run_id, "started_at": started_at.isoformat(),
            "finished_at": finished_at.isoformat(), "duration_s": round((finished_at - started_at).total_seconds(), 2),
            "model": model, "api_base": api_base, "system_prompt": system_prompt,
            "system_prompt_sha256": hashlib.sha256(system_prompt.encode()).hexdigest(), "cases_path": cases_path,
            "tags": list(tags), "repeat": repeat, "jobs": jobs, "judge": judge, "totals": _totals(outcomes),
            "cases": [_case(o) for o in outcomes]}


def _write(path: Path, text: str) -> None:
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)


def write_run(folder: Path, record: dict[str, Any]) -> None:
    """``run.json`` and ``report.md`` in ``folder`` (each written whole, then renamed into place)."""
    _write(folder / RUN_FILE, json.dumps(record, ensure_ascii=False, indent=1, default=str))
    _write(folder / REPORT_FILE, markdown(record))


def load_run(path: Path) -> dict[str, Any]:
    """A run as ``write_run`` left it, from its folder (or its run.json)."""
    file = path / RUN_FILE if path.is_dir() else path
    try:
        size = file.stat().st_size
        if size > MAX_RUN_BYTES:
            raise RunError(f"{file}: {size / 1e6:.0f} MB is too large for a run file")
        data = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RunError(f"{path}: no eval run here (no {RUN_FILE})") from None
    except OSError as exc:
        raise RunError(f"{file}: cannot be read ({exc.strerror or exc})") from None
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise RunError(f"{file}: not a run file (it is not valid JSON)") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise RunError(f"{file}: not a run file of this version ({FORMAT})")
    problem = run_problem(data)
    if problem:
        raise RunError(f"{file}: not a run file of this version ({FORMAT}): {problem}")
    return data


def _newest_first(name: str) -> tuple[str, int]:
    """A run folder's sort key: its second, then its number in that second (``…Z-10`` after ``…Z-9``)."""
    stem, dash, number = name.rpartition("-")
    return (stem, int(number)) if dash and stem.endswith("Z") and number.isdigit() else (name, 1)


def list_runs(runs_dir: Path, limit: int | None = None) -> list[dict[str, Any]]:
    """The newest ``limit`` runs under ``runs_dir`` (all: None), newest first, with their
    summaries (no cases); only those run files are read. A folder that is not a run is listed
    with its error."""
    if not runs_dir.is_dir():
        return []
    folders = sorted((p for p in runs_dir.iterdir() if p.is_dir()), key=lambda p: _newest_first(p.name), reverse=True)
    found: list[dict[str, Any]] = []
    for folder in folders[:limit]:
        try:
            run = load_run(folder)
        except RunError as exc:
            found.append({"id": folder.name, "error": str(exc)})
            continue
        found.append({key: run.get(key) for key in ("id", "started_at", "duration_s", "model", "repeat", "totals")}
                     | {"id": folder.name, "judge": (run.get("judge") or {}).get("model")})
    return found


# the Markdown report --------------------------------------------------------------------------------

def _cell(value: Any) -> str:
    return " ".join(str(value).split()).replace("|", "\\|")


def _cost(value: Any) -> str:
    return "-" if value is None else f"${value:.4f}"


def _stats_row(llm: dict[str, Any]) -> str:
    return (f"{llm['calls']} | {llm['prompt_tokens']:,} / {llm['completion_tokens']:,} | {_cost(llm['cost_usd'])} | "
            f"{llm['latency_ms'] / 1000:.1f} s")


def _header(run: dict[str, Any]) -> list[str]:
    t = run["totals"]
    judge = run.get("judge")
    judged = f"`{judge['model']}`, rubric v{judge['rubric_version']}" if judge else "none (code checks only)"
    prompt = " ".join(str(run.get("system_prompt") or "").split())
    shown = prompt if len(prompt) <= 100 else prompt[:99] + "…"
    return [f"# Eval run {run['id']}", "",
            f"- model: `{run['model']}`", f"- judge: {judged}",
            f"- system prompt: `{str(run.get('system_prompt_sha256') or '')[:12]}` {_cell(shown)}",
            f"- cases: {t['cases']} × {run['repeat']} ({run['cases_path']}"
            + (f", tags {', '.join(run['tags'])}" if run["tags"] else "") + ")",
            f"- result: **{t['passed']} passed, {t['failed']} failed** ({t['checks'] - t['checks_failed']}/"
            f"{t['checks']} code checks passed), in {run['duration_s']} s", "",
            "| | calls | tokens in / out | cost | latency (sum) |", "|---|---|---|---|---|",
            f"| cases | {_stats_row(t['llm'])} |"] + ([f"| judge | {_stats_row(t['judge_llm'])} |"] if judge else [])


def _criteria(run: dict[str, Any]) -> list[str]:
    t = run["totals"]
    if not run.get("judge"):
        return []
    lines = ["", "## Judge: mean score per criterion (1-5)", "", "| criterion | mean | replies |", "|---|---|---|"]
    lines += [f"| {name} | {v['mean']:.2f} | {v['count']} |" for name, v in t["criteria"].items()]
    if t["judge_errors"]:
        lines += ["", f"{t['judge_errors']} repl(ies) could not be scored (see the transcripts)."]
    return lines


def _cases_table(run: dict[str, Any]) -> list[str]:
    lines = ["", "## Cases", "", "| case | result | checks | calls | tokens in / out | cost | latency |",
             "|---|---|---|---|---|---|---|"]
    for case in run["cases"]:
        checks = [c for a in case["attempts"] for c in a["checks"]]
        ok = sum(c["passed"] for c in checks)
        result = ("PASS" if case["passed"] else "FAIL") + (f" {case['pass_rate']}" if run["repeat"] > 1 else "")
        lines.append(f"| {_cell(case['name'])} | {result} | {ok}/{len(checks)} | {_stats_row(case['llm'])} |")
    failing = [c for c in run["cases"] if not c["passed"]]
    if failing:
        lines += ["", "## Failures", ""]
        for case in failing:
            for attempt in case["attempts"]:
                if attempt["passed"]:
                    continue
                where = f" (attempt {attempt['number']})" if run["repeat"] > 1 else ""
                lines.append(f"- **{_cell(case['name'])}**{where}:")
                if attempt["error"]:
                    lines.append(f"  - case error: {_cell(attempt['error'])}")
                lines += [f"  - {_cell(c['message'])}" for c in attempt["checks"] if not c["passed"]]
    return lines


def _quote(text: str) -> list[str]:
    return [f"> {line}" if line.strip() else ">" for line in (text or "(no reply)").splitlines()]


def _transcripts(run: dict[str, Any]) -> list[str]:
    lines = ["", "## Transcripts"]
    for case in run["cases"]:
        for attempt in case["attempts"]:
            where = f", attempt {attempt['number']}" if run["repeat"] > 1 else ""
            lines += ["", f"### {case['name']} ({'PASS' if attempt['passed'] else 'FAIL'}{where})", ""]
            verdicts = {v["turn"]: v for v in attempt["verdicts"]}
            for turn in attempt["turns"]:
                tools = ", ".join(f"`{t['name']}` ({t['status']})" for t in turn["tools"]) or "none"
                lines += [f"**Turn {turn['index']}**: {_cell(turn['user'])}", "", *_quote(turn["reply"]), "",
                          f"tools: {tools}; {turn['llm']['calls']} model call(s), {turn['duration_ms'] / 1000:.1f} s"]
                verdict = verdicts.get(turn["index"])
                if verdict is not None and verdict["error"]:
                    lines += ["", f"judge error: {_cell(verdict['error'])}"]
                elif verdict is not None:
                    lines += [""] + [f"- {name} **{s['score']}**: {_cell(s['reason'])}"
                                     for name, s in verdict["scores"].items()]
                lines.append("")
    return lines


def markdown(run: dict[str, Any]) -> str:
    return "\n".join(_header(run) + _criteria(run) + _cases_table(run) + _transcripts(run)) + "\n"
