"""Playing cases: each one through the real worker, agent loop and tools, in a folder of its own.

A case gets a temporary folder (its database, notes and artifacts), a config derived from the
loaded one (``llm.model`` replaced, no fallbacks, no chat platforms, no admin page, no MCP
servers, no scheduler firing, the web tools on the case's local page server only), a clock set
to ``setup.clock``, and the ``eval`` capture channel. Its setup is seeded through the same
doors Bruce uses (``MemoryStore.remember``, ``JobBook.create``, files in the notes folder); each
user turn goes in through ``Worker.deliver`` and is awaited; what happened is read back from
the case's database. Cases run side by side, at most ``jobs`` at a time; the folder is removed
whatever happens (a failure, a time-out, Ctrl-C).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from bruce.app import build_app, stop_tool_workers
from bruce.channel import IncomingMessage
from bruce.config.schema import ChannelsConfig, Config, LimitsConfig
from bruce.eval.cases import Case
from bruce.eval.channel import CHANNEL, CaptureChannel
from bruce.eval.checks import CheckResult, check_turn
from bruce.eval.clock import CaseClock
from bruce.eval.judge import Judge, Verdict
from bruce.eval.observed import CallStats, ToolRun, TurnRecord, call_stats
from bruce.eval.pages import PageServer
from bruce.runtime.daemon import App
from bruce.values import ConversationId, TurnStatus

__all__ = ["RunSettings", "Attempt", "CaseOutcome", "case_config", "play_case", "run_cases", "TURN_GRACE_S"]

log = structlog.get_logger(__name__)

TURN_GRACE_S = 120.0  # a turn may take llm.turn_deadline_s on models plus this on tools, then it is cut
_SENDER = "owner"


@dataclass(frozen=True, slots=True)
class RunSettings:
    model: str
    jobs: int = 4
    repeat: int = 1
    environ: Mapping[str, str] | None = None  # for the model's key (None: os.environ)


@dataclass(frozen=True, slots=True)
class Attempt:
    """One play of a case."""

    case: str
    number: int
    turns: tuple[TurnRecord, ...] = ()
    checks: tuple[CheckResult, ...] = ()
    llm: CallStats = field(default_factory=CallStats)
    verdicts: tuple[Verdict, ...] = ()
    error: str | None = None  # the case could not be played to its end (setup, a crash)
    duration_ms: float = 0.0

    @property
    def passed(self) -> bool:
        return self.error is None and bool(self.checks) and all(c.passed for c in self.checks)

    def failures(self) -> list[str]:
        found = [f"case error: {self.error}"] if self.error else []
        return found + [c.message for c in self.checks if not c.passed]


@dataclass(frozen=True, slots=True)
class CaseOutcome:
    case: Case
    attempts: tuple[Attempt, ...]

    @property
    def passed(self) -> bool:
        """Every play of the case passed its code checks."""
        return all(a.passed for a in self.attempts)


def case_config(base: Config, folder: Path, *, model: str, web_host: str, timezone: str | None = None) -> Config:
    """The loaded config for one case: its own files, ``llm.model`` replaced (fallbacks off, so
    every answer is the model's under test), nothing that reaches outside the machine. Memory is
    on (its tools work); its background extraction runs only in cases that ask for it, at once."""
    tools = base.tools
    web_base = f"http://{web_host}"
    assistant = base.assistant.model_copy(update={"shutdown_timeout_s": 5.0, **({"timezone": timezone} if timezone
                                                                                   else {})})
    return base.model_copy(update={
        "assistant": assistant,
        "llm": base.llm.model_copy(update={"model": model, "fallbacks": []}),
        "storage": base.storage.model_copy(update={"path": folder / "bruce.db"}),
        "channels": ChannelsConfig(),  # no chat platform
        "admin": base.admin.model_copy(update={"enabled": False}),
        "console": base.console.model_copy(update={"socket_path": folder / "bruce.sock"}),
        "memory": base.memory.model_copy(update={"enabled": True, "extract_after_s": 0.0}),
        "mcp_servers": {},
        "limits": LimitsConfig(messages_per_minute=10_000, messages_per_hour=100_000),  # a case's turns come fast
        "tools": tools.model_copy(update={
            "web": tools.web.model_copy(update={"search_backend": "searxng", "searxng_url": web_base,
                                                "brave_api_key": None, "allow_private": True,
                                                "allowed_hosts": [web_host]}),
            "artifacts": tools.artifacts.model_copy(update={"dir": folder / "artifacts"}),
            "files": tools.files.model_copy(update={"notes_dir": folder / "notes"}),
            "http_post": tools.http_post.model_copy(update={"allowed_urls": []}),
        }),
    })


async def _seed(app: App, case: Case, conversation_id: ConversationId) -> None:
    setup = case.spec.setup
    for fact in setup.memory:
        await app.store.memory.remember(fact.type, fact.content, confidence=1.0, origin="owner",
                                        conversation_id=None, source_turn_id=None)
    for index, args in enumerate(setup.jobs):
        try:
            await app.jobs.create(conversation_id, dict(args))
        except ValueError as exc:  # JobError, ScheduleError: the case's setup is wrong
            raise ValueError(f"setup.jobs[{index}]: {exc}") from None
    notes = app.config.tools.files.notes_dir
    for relative, content in setup.files.items():
        path = notes / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")


async def _observe(app: App, conversation: ConversationId, platform_id: str) -> dict[str, Any]:
    """The turn's rows: tool executions, model calls, the reply, the jobs, how it ended."""
    messages = app.store.messages
    conversation_id = str(conversation)  # the store's form
    inbound = await messages.inbound_by_platform_id(conversation_id, platform_id)
    if inbound is None:
        return {"error": "the message was not stored"}
    turns = await messages.turns_for_message(inbound.id)
    ids = [t.id for t in turns]
    tools = await app.store.audit.tool_executions_of(ids)
    replies = await messages.replies_of_turns(ids)
    if not replies:  # a command's notice, a refusal: stored without a turn, after the message
        replies = await messages.outbound_after(conversation_id, inbound.id)
    last = turns[-1] if turns else None
    error = None
    if last is None and not replies:
        error = "no turn ran for this message"
    elif last is not None and last.status is not TurnStatus.OK:
        error = f"the turn ended {last.status}" + (f" ({last.error})" if last.error else "")
    return {
        "reply": "\n\n".join(r.text for r in replies),
        "tools": tuple(ToolRun(t.tool_name, t.input, str(t.status), t.error, t.output) for t in tools),
        "unbacked_claims": sum(t.unbacked_claims for t in turns),
        "llm": await call_stats(app.store, ids),
        "jobs": tuple(await app.store.jobs.for_conversation(conversation_id, live_only=False)),
        "error": error,
    }


async def _play_turn(app: App, channel: CaptureChannel, conversation_id: ConversationId, index: int, text: str,
                     timeout_s: float) -> TurnRecord:
    clock = app.clock
    said_at = clock.now()
    started = clock.monotonic()
    shown = len(channel.confirmations)
    platform_id = f"turn-{index}"
    message = IncomingMessage(channel=CHANNEL, chat_id=conversation_id.chat_id, sender_id=_SENDER,
                              text=text, platform_message_id=platform_id, timestamp=said_at)
    handle = await app.worker.deliver(message)
    late = None
    if handle is not None:
        try:
            await asyncio.wait_for(handle, timeout_s)
        except TimeoutError:
            late = f"no answer within {timeout_s:g} s (the turn was cut)"
    seen = await _observe(app, conversation_id, platform_id)
    return TurnRecord(
        index=index, user=text, reply=seen.get("reply", ""), said_at=said_at, tools=seen.get("tools", ()),
        jobs=seen.get("jobs", ()), unbacked_claims=seen.get("unbacked_claims", 0),
        confirmations=tuple(r.tool_name for r in channel.confirmations[shown:]), llm=seen.get("llm", CallStats()),
        duration_ms=(clock.monotonic() - started) * 1000,
        error=late or (seen["error"] if handle is not None else "the message was refused (too long, or rate-limited)"),
    )


async def _converse(app: App, channel: CaptureChannel, case: Case, pages: PageServer,
                    timeout_s: float) -> tuple[list[TurnRecord], list[CheckResult]]:
    conversation_id = ConversationId(CHANNEL, case.name)
    await _seed(app, case, conversation_id)
    zone = app.config.assistant.zone
    turns: list[TurnRecord] = []
    checks: list[CheckResult] = []
    for index, turn in enumerate(case.spec.turns, start=1):
        record = await _play_turn(app, channel, conversation_id, index, pages.expand(turn.user), timeout_s)
        if case.spec.setup.extract_memory and app.memory is not None:
            await app.memory.wait_idle()  # what the turn taught is remembered before the next one
        turns.append(record)
        checks += check_turn(turn.expect, record, zone)
    return turns, checks


async def play_case(case: Case, base: Config, settings: RunSettings, *, number: int = 1,
                    judge: Judge | None = None) -> Attempt:
    """One play of ``case``; never raises (but for cancellation): a failure is the attempt's error."""
    clock = CaseClock(case.spec.setup.start)
    started = clock.monotonic()
    folder = Path(tempfile.mkdtemp(prefix=f"bruce-eval-{case.name[:40]}-"))
    turns: list[TurnRecord] = []
    checks: list[CheckResult] = []
    calls = CallStats()
    try:
        async with PageServer(case) as pages:
            config = case_config(base, folder, model=settings.model, web_host=pages.host,
                                 timezone=case.spec.setup.timezone)
            channel = CaptureChannel()
            app = await build_app(config, clock=clock, environ=os.environ if settings.environ is None
                                  else settings.environ, extra_channels=[channel], fire_jobs=False,
                                  extract_memory=case.spec.setup.extract_memory,  # off: no background model call
                                  shares_tool_workers=True)
            try:
                await app.start()
                turns, checks = await _converse(app, channel, case, pages, config.llm.turn_deadline_s + TURN_GRACE_S)
                calls = await call_stats(app.store, None)
            finally:
                await app.stop()
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        log.warning("eval.case_failed", case=case.name, error=type(exc).__name__, detail=str(exc)[:300])
        return Attempt(case.name, number, tuple(turns), tuple(checks), calls, error=_reason(exc),
                       duration_ms=(clock.monotonic() - started) * 1000)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    verdicts = tuple(await judge.score(turns)) if judge is not None else ()
    log.info("eval.case_played", case=case.name, attempt=number, checks=len(checks),
             failed=sum(not c.passed for c in checks))
    return Attempt(case.name, number, tuple(turns), tuple(checks), calls, verdicts,
                   duration_ms=(clock.monotonic() - started) * 1000)


def _reason(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text[:500]}" if text else type(exc).__name__


async def run_cases(cases: Sequence[Case], base: Config, settings: RunSettings, *, judge: Judge | None = None,
                    on_done: Callable[[Attempt], None] | None = None) -> list[CaseOutcome]:
    """Every case ``settings.repeat`` times, at most ``settings.jobs`` plays at a time."""
    bound = asyncio.Semaphore(settings.jobs)

    async def one(case: Case, number: int) -> Attempt:
        async with bound:
            attempt = await play_case(case, base, settings, number=number, judge=judge)
        if on_done is not None:
            on_done(attempt)
        return attempt

    try:
        async with asyncio.TaskGroup() as group:  # cancelled (Ctrl-C): every play cleans up before this returns
            plays = [group.create_task(one(case, n), name=f"eval:{case.name}:{n}")
                     for case in cases for n in range(1, settings.repeat + 1)]
    finally:
        stop_tool_workers()  # the apps shared them; none is running any more
    attempts = [play.result() for play in plays]
    by_case: dict[str, list[Attempt]] = {}
    for attempt in attempts:
        by_case.setdefault(attempt.case, []).append(attempt)
    return [CaseOutcome(case, tuple(by_case.get(case.name, []))) for case in cases]
