"""The shape of ``run.json`` as its readers rely on it: ``compare``, the Markdown report and the
admin page read a run only after ``run_problem`` found every field they use, of its type. A run
edited by hand, cut by another program or written by a later version is then a clear error
(``cases[0].attempts[0].checks: must be a list``), never a traceback or a page that fails.

Fields the readers do not use are not checked, and unknown ones are allowed.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

__all__ = ["FORMAT", "run_problem"]

FORMAT = "bruce-eval-run/1"  # _Run.format says the same


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)


class _Stats(_Open):
    calls: int
    failed: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None
    latency_ms: float


class _Check(_Open):
    turn: int
    check: str
    passed: bool
    message: str


class _Tool(_Open):
    name: str
    status: str


class _Turn(_Open):
    index: int
    user: str
    reply: str
    tools: list[_Tool]
    llm: _Stats
    duration_ms: float


class _Score(_Open):
    score: int
    reason: str


class _Verdict(_Open):
    turn: int
    scores: dict[str, _Score]
    error: str | None


class _Attempt(_Open):
    number: int
    passed: bool
    error: str | None
    checks: list[_Check]
    turns: list[_Turn]
    verdicts: list[_Verdict]


class _Case(_Open):
    name: str
    passed: bool
    pass_rate: str
    description: str = ""
    llm: _Stats
    attempts: list[_Attempt]


class _Mean(_Open):
    mean: float
    count: int


class _Totals(_Open):
    cases: int
    passed: int
    failed: int
    checks: int
    checks_failed: int
    llm: _Stats
    judge_llm: _Stats
    judge_errors: int
    criteria: dict[str, _Mean]


class _Judge(_Open):
    model: str
    rubric_version: int


class _Run(_Open):
    format: Literal["bruce-eval-run/1"]
    id: str
    started_at: str
    duration_s: float
    model: str
    cases_path: str
    tags: list[str]
    repeat: int
    judge: _Judge | None
    totals: _Totals
    cases: list[_Case]


def _where(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "<run>"


_MESSAGES = {"missing": "missing", "model_type": "must be a mapping", "dict_type": "must be a mapping",
             "list_type": "must be a list", "string_type": "must be text", "bool_type": "must be true or false",
             "int_type": "must be a whole number", "float_type": "must be a number"}


def run_problem(data: Any) -> str | None:
    """Where ``data`` (a parsed run.json) is not a run as this version writes it, or None."""
    try:
        _Run.model_validate(data)
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        return f"{_where(error['loc'])}: {_MESSAGES.get(error['type'], error['msg'])}"
    return None
