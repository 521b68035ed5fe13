"""Eval cases as data: YAML files of ``cases:``, each a name, tags, an optional setup and a list
of user turns with what must hold after each (docs/eval.md has the format).

``load_cases(path)`` reads one file or every ``*.yml`` / ``*.yaml`` of a folder (``rubric.yml``
aside: the judge's rubric lives next to the cases). Every problem is a ``CaseError`` naming
the file, the case and the key path, e.g. ``evals/dates.yml: case 'next-friday' (cases[2]):
turns[0].expect.must_say[0]: not a valid regular expression (unterminated character set)``.
The YAML loader is the config's (no duplicate keys, no alias bombs); a file larger than
``MAX_FILE_BYTES`` is refused before it is parsed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from bruce.config.reader import parse_yaml
from bruce.errors import BruceError, ConfigError
from bruce.jobs.schedule import SCHEDULE_FIELDS, ScheduleError, parse_schedule, zone_named
from bruce.values import FactType, ToolStatus

__all__ = ["Case", "CaseSpec", "TurnSpec", "Expect", "ToolExpect", "JobExpect", "Setup", "WebPage", "CaseError",
           "load_cases", "unknown_tools", "select", "tool_name", "pattern", "MAX_FILE_BYTES", "RUBRIC_FILE"]

MAX_FILE_BYTES = 1_000_000
MAX_CASES_PER_FILE = 200
MAX_TURNS = 20
RUBRIC_FILE = "rubric.yml"
_NAME = r"^[a-z0-9][a-z0-9_-]{0,62}$"
MATCHER_KEYS = ("matches", "contains", "between", "one_of", "present")


class CaseError(BruceError):
    """A case file that cannot be used; the text names the file, the case and the key path."""


def pattern(text: str) -> re.Pattern[str]:
    """A case's regular expression as it is matched: case-insensitive, ``^`` and ``$`` per line."""
    return re.compile(text, re.IGNORECASE | re.MULTILINE)


def _regex(value: str) -> str:
    try:
        compiled = pattern(value)
    except re.error as exc:
        raise ValueError(f"not a valid regular expression ({exc})") from None
    if compiled.search("") is not None:  # '', 'x*', 'yes|': a typo that would always hold, or always fail
        raise ValueError("matches an empty text, so it matches every reply (or value): check for a stray '|' or '*'")
    return value


Regex = Annotated[str, AfterValidator(_regex)]


def tool_name(name: str) -> str:
    """A tool's contract name from either spelling: ``clock.now`` or the wire name ``clock_now``."""
    name = name.strip()
    return name if "." in name else name.replace("_", ".", 1)


def _matcher(value: Any) -> Any:
    """An argument matcher: a plain value (equal), or one of ``{matches: REGEX}``, ``{contains: X}``,
    ``{between: [LOW, HIGH]}``, ``{one_of: [...]}``, ``{present: true|false}``."""
    if not isinstance(value, dict):
        return value
    if len(value) != 1 or next(iter(value)) not in MATCHER_KEYS:
        raise ValueError("a matcher is a plain value or one of {matches: REGEX}, {contains: X}, "
                         "{between: [LOW, HIGH]}, {one_of: [...]}, {present: true|false}")
    (kind, arg), = value.items()
    if kind == "matches":
        if not isinstance(arg, str):
            raise ValueError("matches: give a regular expression")
        _regex(arg)
    elif kind == "between" and not (isinstance(arg, list) and len(arg) == 2
                                    and all(isinstance(x, int | float) and not isinstance(x, bool) for x in arg)
                                    and arg[0] <= arg[1]):
        raise ValueError("between: give [LOW, HIGH], two numbers with LOW <= HIGH")
    elif kind == "one_of" and not isinstance(arg, list):
        raise ValueError("one_of: give a list of values")
    elif kind == "present" and not isinstance(arg, bool):
        raise ValueError("present: give true or false")
    return value


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ToolExpect(_Strict):
    """A tool call: its name, argument matchers, and (optionally) the status it ended with."""

    tool: str = Field(min_length=3, max_length=120)
    args: dict[str, Annotated[Any, AfterValidator(_matcher)]] = Field(default_factory=dict)
    status: ToolStatus | None = None  # tools_called: default ok (or cached); tools_not_called: any

    @model_validator(mode="before")
    @classmethod
    def _from_name(cls, value: Any) -> Any:
        return {"tool": value} if isinstance(value, str) else value

    @property
    def name(self) -> str:
        return tool_name(self.tool)


class JobExpect(_Strict):
    """A proactive job that must exist after the turn: its mode, content, status and schedule
    (at most one of ``at``, ``in_seconds``, ``cron``, ``every_seconds``, as proactive.create takes)."""

    mode: Literal["message", "agent"] | None = None
    content: Regex | None = None
    status: Literal["active", "paused", "done", "missed", "cancelled"] = "active"
    at: str | None = None  # ISO 8601; without an offset it is local time in the case's timezone
    in_seconds: int | None = Field(None, ge=1)  # from the moment the user spoke
    cron: str | None = None  # compared by its next five runs, so '0 8 * * 1-5' equals '0 8 * * MON-FRI'
    every_seconds: int | None = Field(None, ge=60)
    tolerance_s: int = Field(90, ge=0, le=86400)  # for at and in_seconds

    @model_validator(mode="after")
    def _one_schedule(self) -> JobExpect:
        given = [name for name in SCHEDULE_FIELDS if getattr(self, name) is not None]
        if len(given) > 1:
            raise ValueError(f"give at most one of {', '.join(SCHEDULE_FIELDS)} (got {', '.join(given)})")
        if self.at is not None:
            try:
                datetime.fromisoformat(self.at)
            except ValueError:
                raise ValueError(f"at: {self.at[:40]!r} is not an ISO 8601 date-time") from None
        if self.cron is not None:
            try:
                parse_schedule({"cron": self.cron}, now=datetime.fromisoformat("2026-01-01T00:00:00+00:00"),
                               default_zone=ZoneInfo("UTC"))
            except ScheduleError as exc:
                raise ValueError(str(exc)) from None
        return self


class Expect(_Strict):
    tools_called: list[ToolExpect] = Field(default_factory=list)
    tools_not_called: list[ToolExpect] = Field(default_factory=list)
    no_tools: bool = False
    must_say: list[Regex] = Field(default_factory=list)
    must_not_say: list[Regex] = Field(default_factory=list)
    max_chars: int | None = Field(None, ge=1)
    grounded: bool = True  # no claim of an action no tool did, no artifact link no tool made
    job: JobExpect | None = None


class TurnSpec(_Strict):
    user: str = Field(min_length=1, max_length=16000)
    expect: Expect = Field(default_factory=Expect)

    @field_validator("user")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():  # the worker ignores a blank message: the turn would never run
            raise ValueError("must not be blank")
        return value


class MemorySeed(_Strict):
    type: FactType = FactType.FACT
    content: str = Field(min_length=1, max_length=500)

    @model_validator(mode="before")
    @classmethod
    def _from_text(cls, value: Any) -> Any:
        return {"content": value} if isinstance(value, str) else value


class WebPage(_Strict):
    """A page the case's local web server serves: ``body`` (text), or ``file`` (relative to the
    case file's folder); ``{web}`` in it becomes the server's address."""

    body: str | None = None
    file: str | None = None
    content_type: str = "text/html"
    status: int = Field(200, ge=100, le=599)

    @model_validator(mode="before")
    @classmethod
    def _from_text(cls, value: Any) -> Any:
        return {"body": value} if isinstance(value, str) else value

    @model_validator(mode="after")
    def _one_source(self) -> WebPage:
        if (self.body is None) == (self.file is None):
            raise ValueError("give either body or file")
        return self


class SearchResult(_Strict):
    title: str
    url: str
    snippet: str = ""


def _page_path(value: str) -> str:
    if not value.startswith("/") or any(c.isspace() for c in value) or "?" in value:
        raise ValueError("a page path starts with / and has no spaces or query, e.g. /news/today.html")
    return value


def _notes_path(value: str) -> str:
    if value.startswith("/") or ".." in value.replace("\\", "/").split("/") or not value.strip():
        raise ValueError("a file path is relative to the notes folder, without '..'")
    return value


class Setup(_Strict):
    clock: str | None = None  # ISO 8601 with an offset; none: the real time
    timezone: str | None = None  # none: assistant.timezone
    memory: list[MemorySeed] = Field(default_factory=list)
    jobs: list[dict[str, Any]] = Field(default_factory=list)  # proactive.create's arguments
    files: dict[Annotated[str, AfterValidator(_notes_path)], str] = Field(default_factory=dict)
    web: dict[Annotated[str, AfterValidator(_page_path)], WebPage] = Field(default_factory=dict)
    search: list[SearchResult] | None = None  # what web.search answers; none: every page of ``web``
    extract_memory: bool = False  # run the background memory extraction after each turn (a model call)

    @field_validator("clock")
    @classmethod
    def _aware(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            raise ValueError(f"{value[:40]!r} is not an ISO 8601 date-time") from None
        if moment.tzinfo is None:
            raise ValueError("give a UTC offset, e.g. 2026-03-06T09:00:00-03:00")
        if not 1971 <= moment.year <= 9000:  # days and years around it must stay within datetime's range
            raise ValueError("give a moment between the years 1971 and 9000")
        return value

    @field_validator("timezone")
    @classmethod
    def _zone(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                zone_named(value)
            except ScheduleError as exc:
                raise ValueError(str(exc).removeprefix("timezone: ")) from None
        return value

    @property
    def start(self) -> datetime | None:
        return datetime.fromisoformat(self.clock) if self.clock else None


class CaseSpec(_Strict):
    name: str = Field(pattern=_NAME)
    description: str = ""
    tags: list[Annotated[str, Field(pattern=_NAME)]] = Field(default_factory=list)
    setup: Setup = Field(default_factory=Setup)
    turns: list[TurnSpec] = Field(min_length=1, max_length=MAX_TURNS)


@dataclass(frozen=True, slots=True)
class Case:
    """A validated case and the file it came from (page files are read relative to it)."""

    spec: CaseSpec
    file: Path

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def tags(self) -> list[str]:
        return self.spec.tags


# loading ----------------------------------------------------------------------------------------

_MESSAGES = {
    "extra_forbidden": "unknown key",
    "missing": "required key is missing",
    "string_too_short": "must not be empty",
    "string_too_long": "is too long (at most {max_length} characters)",
    "too_short": "needs at least {min_length} item(s)",
    "too_long": "has more than {max_length} items",
    "string_pattern_mismatch": "must be lower-case letters, digits, '-' or '_' (at most 63)",
    "literal_error": "must be one of {expected}",
    "model_type": "must be a mapping of keys",
    "dict_type": "must be a mapping of keys",
    "list_type": "must be a list",
    "string_type": "must be text",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
    "int_type": "must be a whole number",
    "int_parsing": "must be a whole number",
    "greater_than_equal": "must be at least {ge}",
    "less_than_equal": "must be at most {le}",
    "enum": "must be one of {expected}",
}


def _key_path(loc: Iterable[Any]) -> str:
    """``('turns', 0, 'expect', 'must_say', 1)`` -> ``turns[0].expect.must_say[1]``; a key that is
    no identifier (a page path, a file name) in brackets: ``setup.web["/a.html"]``."""
    out = ""
    for part in loc:
        if part == "[key]":
            continue
        if isinstance(part, int):
            out += f"[{part}]"
        elif not str(part).isidentifier():
            out += f"[{json.dumps(str(part))}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "<case>"


def _describe(error: Any) -> str:
    template = _MESSAGES.get(error["type"])
    message = (template.format(**(error.get("ctx") or {})) if template
               else str(error["msg"]).removeprefix("Value error, "))
    return f"{_key_path(error['loc'])}: {message}"


def _read(path: Path) -> Any:
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise CaseError(f"{path}: {size / 1e6:.1f} MB is larger than the {MAX_FILE_BYTES / 1e6:g} MB a case file "
                            "may be; split it into several files")
        raw = path.read_bytes()[: MAX_FILE_BYTES + 1]
    except OSError as exc:
        raise CaseError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    try:
        return parse_yaml(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise CaseError(f"{path}: not UTF-8 text") from None
    except ConfigError as exc:
        raise CaseError(f"{path}: {'; '.join(exc.problems)}") from None


def _label(raw: Any, index: int) -> str:
    name = raw.get("name") if isinstance(raw, dict) else None
    return f"case {name!r} (cases[{index}])" if isinstance(name, str) else f"cases[{index}]"


def _file_cases(path: Path) -> list[Case]:
    data = _read(path)
    if isinstance(data, dict) and {"version", "instructions", "criteria"} <= set(data):
        raise CaseError(f"{path}: this is the judge's rubric, not a case file: give a case file or the folder of "
                        f"them ({path.parent})")
    if not isinstance(data, dict) or set(data) != {"cases"}:
        raise CaseError(f"{path}: a case file is a mapping with one key, cases: a list of cases")
    raws = data["cases"]
    if not isinstance(raws, list) or not raws:
        raise CaseError(f"{path}: cases: must be a list of at least one case")
    if len(raws) > MAX_CASES_PER_FILE:
        raise CaseError(f"{path}: cases: more than {MAX_CASES_PER_FILE} cases in one file; split it")
    cases, problems = [], []
    for index, raw in enumerate(raws):
        try:
            cases.append(Case(CaseSpec.model_validate(raw), path))
        except ValidationError as exc:
            where = _label(raw, index)
            problems += [f"{path}: {where}: {_describe(e)}" for e in exc.errors()]
    for case in cases:
        for page_path, page in case.spec.setup.web.items():
            if page.file is not None and not (path.parent / page.file).is_file():
                problems.append(f"{path}: case {case.name!r}: setup.web[{json.dumps(page_path)}].file: no file "
                                f"{path.parent / page.file}")
    if problems:
        raise CaseError("\n".join(problems))
    return cases


def _case_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise CaseError(f"{path}: no such file or folder of eval cases")
    files = sorted(p for p in path.iterdir() if p.suffix in (".yml", ".yaml") and p.name != RUBRIC_FILE and p.is_file())
    if not files:
        raise CaseError(f"{path}: no *.yml case files in this folder")
    return files


def load_cases(path: Path) -> list[Case]:
    """Every case of a file or folder, validated, names unique across the set."""
    cases: list[Case] = []
    problems: list[str] = []
    for file in _case_files(path):
        try:
            cases += _file_cases(file)
        except CaseError as exc:
            problems.append(str(exc))
    seen: dict[str, Path] = {}
    for case in cases:
        if case.name in seen:
            problems.append(f"{case.file}: case {case.name!r}: the name is already used in {seen[case.name]}")
        seen.setdefault(case.name, case.file)
    if problems:
        raise CaseError("\n".join(problems))
    return cases


def _tool_problem(key: str, wanted: ToolExpect, names: set[str]) -> str | None:
    if wanted.name.startswith("mcp."):  # MCP servers are off in a case: never callable, never called
        return None if key == "tools_not_called" else (f"{wanted.tool!r} is an MCP tool, and MCP servers are not "
                                                       "started in an eval run")
    return None if wanted.name in names else f"no tool named {wanted.tool!r}"


def unknown_tools(cases: Sequence[Case], known: Iterable[str]) -> list[str]:
    """One problem per expectation naming a tool that does not exist (a typo would pass forever),
    or that must be called but never can be (an MCP tool: a case would fail forever)."""
    names = set(known)
    problems = []
    for case in cases:
        for t, turn in enumerate(case.spec.turns):
            for key in ("tools_called", "tools_not_called"):
                for i, wanted in enumerate(getattr(turn.expect, key)):
                    problem = _tool_problem(key, wanted, names)
                    if problem:
                        where = f"turns[{t}].expect.{key}[{i}].tool"
                        problems.append(f"{case.file}: case {case.name!r}: {where}: {problem}")
    return problems


def select(cases: Sequence[Case], tags: Sequence[str]) -> list[Case]:
    """The cases with any of ``tags`` (all of them when none is given)."""
    if not tags:
        return list(cases)
    wanted = set(tags)
    return [c for c in cases if wanted & set(c.tags)]
