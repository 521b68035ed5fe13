"""A scripted model for ``bruce eval`` tests: the FakeLLMServer's ``responder`` for many cases
played at once.

Scripts are YAML, one file per case file (``tests/eval_scripts/<stem>.yml``): case name -> one
list of steps per user turn; a step is ``{say: TEXT}`` or ``{call: WIRE_NAME, args: {...}}``.
A request is matched to its case by its first user message (every shipped case starts with a
different one), to the turn by how many user messages it holds, and to the step by how many
assistant messages follow the last one: no state, so cases may run in any order, side by side.

Placeholders, filled from the request the way a real model reads its context: ``{web}`` (the
case's page server, from the user's messages), ``{url}`` (the ``url`` the last tool result
returned), ``{job_id:REGEX}`` (the id of the job whose content matches, from a tool result).
A judge call (``judge_model``) gets ``judge(body)``; a memory extraction call gets ``extraction``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import yaml

from bruce.eval.cases import Case
from bruce.memory.long_term import EXTRACTION_INSTRUCTIONS
from tests.fakes.llm_server import Step

_LOCAL = re.compile(r"http://127\.0\.0\.1:\d+")
_JOB = re.compile(r"\{job_id:([^}]*)\}")

FULL_MARKS = {name: {"score": 5, "reason": "fine"} for name in (
    "naturalness", "continuity", "grounded_actions", "no_premature_advice", "tone_concision", "follows_user")}


def load_scripts(folder: Path) -> dict[str, list[list[dict[str, Any]]]]:
    scripts: dict[str, list[list[dict[str, Any]]]] = {}
    for file in sorted(folder.glob("*.yml")):
        scripts.update(yaml.safe_load(file.read_text(encoding="utf-8")))
    return scripts


def _results(messages: list[dict[str, Any]]) -> list[Any]:
    """The tool results in the request, newest first (what ``for_model`` gave the model)."""
    found = []
    for message in reversed(messages):
        if message.get("role") == "tool":
            try:
                found.append(json.loads(message.get("content") or "null"))
            except ValueError:
                continue
    return found


def _find(value: Any, key: str) -> list[Any]:
    if isinstance(value, dict):
        return [v for k, v in value.items() if k == key] + [x for v in value.values() for x in _find(v, key)]
    if isinstance(value, list):
        return [x for v in value for x in _find(v, key)]
    return []


class ScriptedModel:
    def __init__(self, cases: Sequence[Case], scripts: dict[str, list[list[dict[str, Any]]]], *,
                 judge_model: str | None = None, judge: Callable[[dict[str, Any]], Step] | None = None,
                 extraction: str = "[]") -> None:
        self.scripts = scripts
        self.extraction = extraction
        self.by_first = {case.spec.turns[0].user: case.name for case in cases}
        self.judge_model = judge_model
        self.judge = judge or (lambda body: Step.text(json.dumps(FULL_MARKS)))
        self.unmatched: list[str] = []

    def respond(self, body: dict[str, Any]) -> Step:
        messages: list[dict[str, Any]] = body["messages"]
        if self.judge_model is not None and body.get("model") == self.judge_model:
            return self.judge(body)
        if messages and messages[0].get("content") == EXTRACTION_INSTRUCTIONS:
            return Step.text(self.extraction)
        users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
        first = _LOCAL.sub("{web}", messages[users[0]]["content"]) if users else ""
        name = self.by_first.get(first)
        turn = len(users) - 1
        step = sum(m.get("role") == "assistant" for m in messages[users[-1] + 1:]) if users else 0
        steps = self.scripts.get(name or "", [])
        if name is None or turn >= len(steps) or step >= len(steps[turn]):
            self.unmatched.append(f"{name or first[:40]!r} turn {turn + 1} step {step + 1}")
            return Step.text(f"NO SCRIPT for {name or first[:40]!r} turn {turn + 1} step {step + 1}")
        return self._step(steps[turn][step], messages)

    def _fill(self, text: str, messages: list[dict[str, Any]]) -> str:
        web = next((m.group(0) for msg in messages if msg.get("role") == "user"
                    for m in [_LOCAL.search(str(msg.get("content")))] if m), "{web}")
        text = text.replace("{web}", web)
        results = _results(messages)
        if "{url}" in text:
            urls = [u for r in results for u in _find(r, "url") if isinstance(u, str)]
            text = text.replace("{url}", urls[0] if urls else "{url}")

        def job(match: re.Match[str]) -> str:
            for result in results:
                for item in _find(result, "jobs"):
                    for entry in item if isinstance(item, list) else []:
                        if re.search(match.group(1), str(entry.get("content")), re.I):
                            return str(entry["job_id"])
            return match.group(0)

        return _JOB.sub(job, text)

    def _step(self, spec: dict[str, Any], messages: list[dict[str, Any]]) -> Step:
        if "say" in spec:
            return Step.text(self._fill(spec["say"], messages))
        args = {k: self._fill(v, messages) if isinstance(v, str) else v for k, v in spec.get("args", {}).items()}
        return Step.tool_calls((spec["call"], args))
