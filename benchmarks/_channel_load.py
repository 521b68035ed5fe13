"""Shared machinery of the channel load benchmarks (``telegram_load.py``, ``discord_load.py``).

A channel benchmark subclasses ``FakeChannel`` (how to build its fake platform, push user
messages into it and which of its calls count as a reply, a typing indicator and so on) and
calls ``main``. Everything else is here: the fakes in child processes (JSON lines over
stdin/stdout), the fake model, the daemon's start-up as ``bruce run`` does it, the sequential
and burst scenarios, the goals and the table. See the Telegram/Discord sections of
docs/benchmarks.md.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"

import argparse  # noqa: E402
import asyncio  # noqa: E402
import itertools  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import resource  # noqa: E402
import sqlite3  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from dataclasses import asdict, dataclass, field  # noqa: E402
from datetime import UTC, datetime  # noqa: E402
from typing import Any, ClassVar  # noqa: E402

from benchmarks.turn_overhead import MODEL, describe, responder  # noqa: E402

WARM_USER = 1000
SEQ_USER = 1001
BURST_BASE = 2000  # round r, chat i: BURST_BASE + 100 * r + i
GOAL_MAX = {  # from the issue; the start-up goal is named by each channel (startup_to_{ready_key}_s)
    "overhead_p50_ms": 10.0,
    "overhead_p99_ms": 50.0,
    "burst_all_answered_s": 1.5,
    "cpu_ms_per_message": 20.0,
    "startup": 0.8,
}

OnCall = Callable[[str, Any, float], None]


def cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def status_mb(key: str) -> float:
    """A size from /proc/self/status (VmRSS, VmHWM) in MB."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return float("nan")


def maxrss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


# ---- the fakes (also run in the child processes) -----------------------------------------

def _fake_llm(latency_ms: float) -> Any:
    from tests.fakes.llm_server import FakeLLMServer

    server = FakeLLMServer()
    server.latency_s = latency_ms / 1000
    server.responder = responder
    return server


async def serve_child(kind: str, latency_ms: float, channel: type[FakeChannel]) -> None:
    """Child-process mode: JSON lines. First {"ready": endpoints}; then a reply {"id", "result"}
    to each {"id", "op", "args"} on stdin; the fake platform also sends {"event": name, "chat",
    "at"} for every watched call. End of stdin: stop, print {"final": ...}."""
    handlers: dict[str, Callable[..., Any]] = {"cpu": cpu_s}
    if kind == "llm":
        server = _fake_llm(latency_ms)
        await server.start()
        handlers["latency"] = lambda ms: setattr(server, "latency_s", ms / 1000)
        _emit({"ready": server.base_url})
        stop: Callable[[], Any] = server.stop

        def final() -> dict[str, Any]:
            return {"requests": len(server.requests)}
    else:
        api = channel.make_fake(lambda name, chat, at: _emit({"event": name, "chat": chat, "at": at}))
        await api.start()
        handlers["push"] = lambda messages: channel.push_to(api, messages)
        _emit({"ready": channel.urls_of(api)})
        stop = api.close

        def final() -> dict[str, Any]:
            return {"calls": len(api.calls)}
    loop = asyncio.get_running_loop()
    while line := await loop.run_in_executor(None, sys.stdin.readline):
        request = json.loads(line)
        _emit({"id": request["id"], "result": handlers[request["op"]](**request.get("args", {}))})
    await stop()
    _emit({"final": final(), "cpu_s": cpu_s()})


class Child:
    """A fake in a child process (``script --serve-child kind``), spoken to in JSON lines
    (see ``serve_child``)."""

    def __init__(self, script: str, kind: str, latency_ms: float = 0.0,
                 on_event: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.script, self.kind, self.latency_ms, self.on_event = script, kind, latency_ms, on_event
        self.endpoints: Any = None
        self.final: dict[str, Any] = {}
        self._proc: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None
        self._ready: asyncio.Future[Any] | None = None
        self._waiting: dict[int, asyncio.Future[Any]] = {}
        self._ids = itertools.count(1)

    async def start(self) -> None:
        self._ready = asyncio.get_running_loop().create_future()
        self._proc = await asyncio.create_subprocess_exec(
            sys.executable, self.script, "--serve-child", self.kind, "--latency-ms", str(self.latency_ms),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, cwd=str(ROOT))
        self._reader = asyncio.create_task(self._read(self._proc), name=f"bench.{self.kind}.reader")
        self.endpoints = await asyncio.wait_for(self._ready, timeout=30)

    async def _read(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stdout is not None and self._ready is not None
        try:
            while line := await proc.stdout.readline():
                msg = json.loads(line)
                if "event" in msg:
                    if self.on_event is not None:
                        self.on_event(msg)
                elif "ready" in msg:
                    self._ready.set_result(msg["ready"])
                elif "id" in msg:
                    self._waiting.pop(msg["id"]).set_result(msg["result"])
                elif "final" in msg:
                    self.final = {**msg["final"], "cpu_s": msg["cpu_s"]}
        finally:
            gone = RuntimeError(f"the fake {self.kind} process ended")
            if not self._ready.done():
                self._ready.set_exception(gone)
            for future in self._waiting.values():
                if not future.done():
                    future.set_exception(gone)

    async def request(self, op: str, **args: Any) -> Any:
        assert self._proc is not None and self._proc.stdin is not None
        rid = next(self._ids)
        future = self._waiting[rid] = asyncio.get_running_loop().create_future()
        self._proc.stdin.write((json.dumps({"id": rid, "op": op, "args": args}) + "\n").encode())
        await self._proc.stdin.drain()
        return await asyncio.wait_for(future, timeout=30)

    async def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            assert proc.stdin is not None
            proc.stdin.close()
            await asyncio.wait_for(proc.wait(), timeout=10)
            if self._reader is not None:
                await asyncio.wait_for(self._reader, timeout=5)
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
            if self._reader is not None and not self._reader.done():
                self._reader.cancel()


class LLMHandle:
    """The fake model, in a child process or in this event loop; its latency can be changed."""

    def __init__(self, latency_ms: float, mode: str, script: str) -> None:
        self.mode, self.script = mode, script
        self.latency_ms = latency_ms
        self.base_url = ""
        self.requests = 0
        self.child_cpu_s: float | None = None
        self._child: Child | None = None
        self._server: Any = None

    async def start(self) -> None:
        if self.mode == "inproc":
            self._server = _fake_llm(self.latency_ms)
            await self._server.start()
            self.base_url = self._server.base_url
        else:
            self._child = Child(self.script, "llm", self.latency_ms)
            await self._child.start()
            self.base_url = self._child.endpoints

    async def set_latency(self, ms: float) -> None:
        self.latency_ms = ms
        if self._server is not None:
            self._server.latency_s = ms / 1000
        elif self._child is not None:
            await self._child.request("latency", ms=ms)

    async def stop(self) -> None:
        if self._server is not None:
            self.requests = len(self._server.requests)
            await self._server.stop()
            self._server = None
        if self._child is not None:
            await self._child.stop()
            self.requests = self._child.final.get("requests", 0)
            self.child_cpu_s = self._child.final.get("cpu_s")
            self._child = None


class FakeChannel:
    """The fake platform, in a child process or in this event loop. ``events`` holds every
    watched call as (name, chat id, monotonic time at the fake). A subclass says how to build
    the fake and push messages into it, and names its events."""

    kind: ClassVar[str]  # channel name ("telegram"): config section, conversation id prefix, child kind
    fake_name: ClassVar[str]  # "fake Bot API"
    # events: a reply message; the one that ends start-up; the bot's "who am I" request at start-up
    reply, ready_event, get_me_event = "", "", ""
    ready_key: ClassVar[str]  # the start-up event in the results: startup[f"{ready_key}_ms"]
    counted: ClassVar[dict[str, str]] = {}  # sequential results key -> event counted

    def __init__(self, mode: str, script: str) -> None:
        self.mode, self.script = mode, script
        self.endpoints: dict[str, str] = {}
        self.events: list[tuple[str, Any, float]] = []
        self._times: dict[tuple[str, Any], list[float]] = {}  # (call, chat) and (call, None): when, in order
        self.chats: dict[int, int] = {}  # user -> chat id, from the pushes
        self._changed = asyncio.Event()
        self._child: Child | None = None
        self._api: Any = None

    # -- what a channel provides ---------------------------------------------------------
    @staticmethod
    def make_fake(on_call: OnCall) -> Any:
        """The fake platform (start(), close(), calls), reporting watched calls to on_call."""
        raise NotImplementedError

    @staticmethod
    def push_to(api: Any, messages: list[list[Any]]) -> list[dict[str, Any]]:
        """Each (user, text) as a private message: {"chat", "user", "message_id", "at"}."""
        raise NotImplementedError

    @staticmethod
    def urls_of(api: Any) -> dict[str, str]:
        """Where the fake listens (whatever ``section`` needs)."""
        raise NotImplementedError

    @staticmethod
    def platform_id(pushed: dict[str, Any]) -> str:
        """The inbound message's ``platform_message_id``."""
        raise NotImplementedError

    def section(self, users: list[int], args: argparse.Namespace) -> dict[str, Any]:
        """The ``channels.<kind>`` config section."""
        raise NotImplementedError

    def meta(self, args: argparse.Namespace) -> dict[str, Any]:
        return {}

    def before_start(self, args: argparse.Namespace) -> None:
        """Called between build_app and App.start."""

    @staticmethod
    def conversation_of(user: int) -> str | None:
        """The conversation id of ``user``'s private chat before any push, if the platform fixes it
        (``--history`` fills it beforehand); None: only known once the fake has made the chat."""
        return None

    @staticmethod
    def table_note(meta: dict[str, Any]) -> str:
        """Channel settings for the table's title line (", key=value...")."""
        return ""

    # -- the handle ----------------------------------------------------------------------
    def _on_call(self, name: str, chat: Any, at: float) -> None:
        self.events.append((name, chat, at))
        self._times.setdefault((name, chat), []).append(at)
        if chat is not None:
            self._times.setdefault((name, None), []).append(at)
        self._changed.set()

    async def start(self) -> None:
        if self.mode == "inproc":
            self._api = self.make_fake(self._on_call)
            await self._api.start()
            self.endpoints = self.urls_of(self._api)
        else:
            self._child = Child(self.script, self.kind, on_event=lambda m: self._on_call(m["event"], m["chat"], m["at"]))
            await self._child.start()
            self.endpoints = self._child.endpoints

    async def push(self, messages: list[tuple[int, str]]) -> list[dict[str, Any]]:
        if self._api is not None:
            result = self.push_to(self._api, [list(m) for m in messages])
        else:
            assert self._child is not None
            result = await self._child.request("push", messages=[list(m) for m in messages])
        self.chats.update((p["user"], p["chat"]) for p in result)
        return list(result)

    def times(self, name: str, chat: Any = None) -> list[float]:
        return self._times.get((name, chat), [])  # (indexed: the harness's own CPU is counted as Bruce's)

    def replies(self, user: int) -> list[float]:
        """When the replies in the user's private chat reached the fake."""
        chat = self.chats.get(user)
        return [] if chat is None else self.times(self.reply, chat)

    def count(self, name: str) -> int:
        return len(self._times.get((name, None), []))

    async def wait(self, done: Callable[[], bool], timeout: float = 60.0, what: str = "") -> None:
        deadline = time.monotonic() + timeout
        while not done():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise RuntimeError(f"timed out after {timeout}s waiting for {what or 'the ' + self.fake_name}")
            self._changed.clear()
            if done():
                return
            try:
                await asyncio.wait_for(self._changed.wait(), remaining)
            except TimeoutError:
                continue

    async def child_cpu_s(self) -> float | None:
        if self._child is None:
            return None
        result: float = await self._child.request("cpu")
        return result

    async def stop(self) -> None:
        if self._api is not None:
            await self._api.close()
            self._api = None
        if self._child is not None:
            await self._child.stop()
            self._child = None


# ---- measurement ------------------------------------------------------------------------

@dataclass
class Results:
    meta: dict[str, Any] = field(default_factory=dict)
    startup: dict[str, Any] = field(default_factory=dict)
    memory: dict[str, Any] = field(default_factory=dict)
    sequential: dict[str, Any] = field(default_factory=dict)
    burst: dict[str, Any] = field(default_factory=dict)
    goals: list[dict[str, Any]] = field(default_factory=list)


def _turn_rows(db: Path, conversations: list[str]) -> dict[str, dict[str, Any]]:
    """Per inbound message (its platform_message_id): its turn's status, LLM calls and their latency."""
    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    try:
        marks = ",".join("?" * len(conversations))
        rows = con.execute(
            "SELECT m.platform_message_id AS pid, t.status AS status, COUNT(c.id) AS calls,"
            " COALESCE(SUM(c.latency_ms), 0) AS llm_ms"
            " FROM messages m JOIN turns t ON t.inbound_message_id = m.id"
            " LEFT JOIN llm_calls c ON c.turn_id = t.id"
            f" WHERE m.conversation_id IN ({marks}) GROUP BY m.id", conversations).fetchall()
        return {r["pid"]: dict(r) for r in rows}
    finally:
        con.close()


def _conversations(ch: FakeChannel, users: list[int]) -> list[str]:
    return [f"{ch.kind}:{ch.chats[u]}" for u in users]


def _count(db: Path, sql: str, *params: Any) -> int:
    con = sqlite3.connect(db)
    try:
        return int(con.execute(sql, params).fetchone()[0])
    finally:
        con.close()


async def _exchange(ch: FakeChannel, user: int, text: str) -> tuple[dict[str, Any], float]:
    """One message and its reply: (the push, reply time in ms on the fake's clock)."""
    before = len(ch.replies(user))
    (pushed,) = await ch.push([(user, text)])
    await ch.wait(lambda: len(ch.replies(user)) > before, what=f"the reply to user {user}")
    return pushed, (ch.replies(user)[before] - pushed["at"]) * 1000


async def prefill(path: Path, conversation: str, exchanges: int, sender: str) -> None:
    """``--history N``: the sequential chat already holds N answered messages, as after months without
    ``/new``, written through the store as the daemon writes them: every tenth turn asked the clock (a
    tool of ours, with an output), and a summary covers all but the last 20 messages."""
    from bruce.clock import SystemClock
    from bruce.records import ToolExecutionRecord
    from bruce.store import Store
    from bruce.values import MessageStatus, ToolStatus, TurnSource

    store = await Store.open(path, SystemClock())
    try:
        channel, _, chat = conversation.partition(":")
        await store.messages.ensure_conversation(conversation, channel, chat)
        last = 0
        for n in range(exchanges):
            turn = f"history-{n}"
            last, _ = await store.messages.add_inbound(conversation, sender_id=sender, text=f"earlier question {n}",
                                                       platform_message_id=turn)
            await store.messages.start_turn(turn, conversation, source=TurnSource.CHAT, inbound_message_id=last)
            if n % 10 == 0:
                await store.audit.record_tool_execution(ToolExecutionRecord(
                    turn_id=turn, conversation_id=conversation, call_id=f"call-{n}", tool_name="clock.now", risk="low",
                    input={}, output="12:00", status=ToolStatus.OK, error=None, latency_ms=1.0, source=TurnSource.CHAT))
            reply = await store.messages.complete_turn(turn, conversation_id=conversation, reply=f"earlier answer {n}",
                                                       llm_calls=1, tool_calls=int(n % 10 == 0), inbound_id=last)
            await store.outbound.record_send(reply, status=MessageStatus.SENT, parts_sent=1, attempts=1, error=None)
        if exchanges:
            await store.messages.add_summary(conversation, "Earlier questions, all answered.",
                                             up_to_message_id=last - 20)
    finally:
        await store.close()


async def sequential(app: Any, ch: FakeChannel, args: argparse.Namespace) -> dict[str, Any]:
    db = app.config.storage.path
    samples: list[tuple[str, float]] = []
    counts0 = {key: ch.count(name) for key, name in ch.counted.items()}
    child0 = await ch.child_cpu_s()
    profiler = None
    if args.profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    cpu0, t0 = cpu_s(), time.perf_counter()
    for i in range(args.messages):
        pushed, reply_ms = await _exchange(ch, SEQ_USER, f"question number {i}: what is on my calendar today?")
        samples.append((ch.platform_id(pushed), reply_ms))
        if args.gap_ms:
            await asyncio.sleep(args.gap_ms / 1000)
    await app.worker.wait_idle()  # the background summaries these messages started
    cpu, wall = cpu_s() - cpu0, time.perf_counter() - t0
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(args.profile)
    # long-term memory reads each message once the chat has paused (memory.extract_after_s):
    # its model calls come after the window above, and are measured here on their own
    memory_cpu0 = cpu_s()
    await _quiet(app)
    memory_cpu = cpu_s() - memory_cpu0
    child1 = await ch.child_cpu_s()
    (conversation,) = _conversations(ch, [SEQ_USER])
    rows = _turn_rows(db, [conversation])
    reply, llm_ms, vs_llm, vs_server = [], [], [], []
    for pid, ms in samples:
        row = rows.get(pid)
        if row is None or row["status"] != "ok" or row["calls"] != 1:
            raise RuntimeError(f"message {pid}: turn {row!r} (expected ok with one LLM call)")
        reply.append(ms)
        llm_ms.append(float(row["llm_ms"]))
        vs_llm.append(ms - float(row["llm_ms"]))
        vs_server.append(ms - args.latency_ms * row["calls"])
    summaries = _count(db, "SELECT COUNT(*) FROM turns WHERE conversation_id = ? AND source = 'summary'",
                       conversation)
    return {
        "messages": args.messages,
        "latency_ms": args.latency_ms,
        "gap_ms": args.gap_ms,
        "reply_ms": describe(reply),
        "llm_calls_ms": describe(llm_ms),
        "overhead_ms": describe(vs_llm),
        "overhead_vs_server_ms": describe(vs_server),
        "cpu_ms_per_message": round(cpu * 1000 / args.messages, 2),
        "wall_s": round(wall, 3),
        f"fake_{ch.kind}_cpu_ms_per_message": (round((child1 - child0) * 1000 / args.messages, 2)
                                               if child0 is not None and child1 is not None else None),
        "background_summary_turns": summaries,
        "memory_turns": _count(db, "SELECT COUNT(*) FROM turns WHERE conversation_id = ? AND source = 'memory'",
                               conversation),
        "memory_cpu_ms_per_message": round(memory_cpu * 1000 / args.messages, 2),
        **{key: ch.count(name) - counts0[key] for key, name in ch.counted.items()},
    }


async def _quiet(app: Any) -> None:
    """Wait until nothing runs in the background: turns, summaries, and memory's extractions
    (which start once a chat has paused), so that no phase is charged with an earlier one's work."""
    await app.worker.wait_idle()
    if app.memory is not None:
        await app.memory.wait_idle()


async def burst(app: Any, ch: FakeChannel, *, round_no: int, chats: int, latency_ms: float) -> dict[str, Any]:
    await _quiet(app)
    users = [BURST_BASE + 100 * round_no + i for i in range(chats)]
    cpu0 = cpu_s()
    pushed = await ch.push([(u, "hello, what is on my calendar today?") for u in users])
    await ch.wait(lambda: all(ch.replies(u) for u in users), timeout=120, what=f"{chats} replies")
    cpu = cpu_s() - cpu0
    start = min(p["at"] for p in pushed)
    replies = {u: ch.replies(u)[0] for u in users}
    per_chat = [(replies[p["user"]] - p["at"]) * 1000 for p in pushed]
    all_answered = max(replies.values()) - start
    await app.worker.wait_idle()
    rows = _turn_rows(app.config.storage.path, _conversations(ch, users))
    bad = [p for p in pushed if (rows.get(ch.platform_id(p)) or {}).get("status") != "ok"]
    if bad:
        raise RuntimeError(f"{len(bad)} burst turns did not end ok")
    return {"all_answered_s": round(all_answered, 4),
            "over_latency_ms": round(all_answered * 1000 - latency_ms, 1),
            "first_reply_ms": round(min(per_chat), 1),
            "reply_ms": describe(per_chat),
            "pushed_in_ms": round((max(p["at"] for p in pushed) - start) * 1000, 2),
            "cpu_ms_per_message": round(cpu * 1000 / chats, 2)}


def _config(tmp: Path, ch: FakeChannel, llm: LLMHandle, args: argparse.Namespace) -> dict[str, Any]:
    users = [WARM_USER, SEQ_USER] + [BURST_BASE + 100 * r + i for r in range(args.rounds) for i in range(args.chats)]
    return {
        "llm": {"model": MODEL, "api_base": llm.base_url, "api_key": "sk-bench-key-123456", "num_retries": 0,
                "timeout_s": 30},
        "storage": {"path": str(tmp / "bruce.db")},
        "console": {"socket_path": str(tmp / "bruce.sock")},
        "assistant": {"shutdown_timeout_s": 10},
        "limits": {"messages_per_minute": 10000, "messages_per_hour": 100000},  # a load test, not a flood
        "tools": {"files": {"notes_dir": str(tmp / "notes")}, "artifacts": {"dir": str(tmp / "artifacts")}},
        "channels": {ch.kind: ch.section(users, args)},
    }


async def run(args: argparse.Namespace, channel: type[FakeChannel], script: str) -> Results:
    res = Results()
    preloaded = sorted(m for m in ("litellm", "aiogram", "discord", "openai") if m in sys.modules)
    t_import = time.perf_counter()
    from bruce.app import build_app, socket_console
    from bruce.clock import SystemClock
    from bruce.config.loader import parse_config
    from bruce.log import configure_logging
    import_ms = (time.perf_counter() - t_import) * 1000

    devnull = open(os.devnull, "w")  # noqa: SIM115 - closed below
    # as the daemon does (JSON lines, redaction), rendered but written nowhere
    configure_logging(level="critical" if args.log_level == "off" else args.log_level, fmt="json", stream=devnull)
    llm = LLMHandle(args.latency_ms, args.server, script)
    ch = channel(getattr(args, channel.kind), script)
    tmp = tempfile.TemporaryDirectory(prefix=f"bruce-{channel.kind}bench-")
    app = None
    try:
        await llm.start()
        await ch.start()
        config = parse_config(_config(Path(tmp.name), ch, llm, args), environ={})
        clock = SystemClock()
        if args.history:
            conversation = ch.conversation_of(SEQ_USER)
            if conversation is None:
                raise SystemExit(f"--history: {ch.kind}'s private chats are made by the fake; not supported")
            await prefill(config.storage.path, conversation, args.history, str(SEQ_USER))

        # -- start-up: build_app, start, warm_up (`bruce run` now warms up before start: footprint.py) --
        t0 = time.monotonic()
        app = await build_app(config, clock=clock, environ={}, extra_channels=[socket_console(config, clock)])
        t_built = time.monotonic()
        litellm_after_build = "litellm" in sys.modules
        rss_built = status_mb("VmRSS")
        ch.before_start(args)
        await app.start()
        t_started = time.monotonic()
        litellm_after_start = "litellm" in sys.modules
        await app.llm.warm_up()
        t_warm = time.monotonic()
        await ch.wait(lambda: bool(ch.times(ch.ready_event)), timeout=60, what=f"the first {ch.ready_event}")
        ready = ch.times(ch.ready_event)[0]
        get_me = ch.times(ch.get_me_event)[0]
        res.startup = {
            f"{ch.ready_key}_ms": round((ready - t0) * 1000, 1),
            "build_app_ms": round((t_built - t0) * 1000, 1),
            "app_start_ms": round((t_started - t_built) * 1000, 1),
            "app_started_ms": round((t_started - t0) * 1000, 1),
            "get_me_ms": round((get_me - t0) * 1000, 1),
            "litellm_warm_up_done_ms": round((t_warm - t0) * 1000, 1),
            "litellm_imported_by_build_app": litellm_after_build,
            "litellm_imported_by_app_start": litellm_after_start,
            f"{ch.ready_key}_before_litellm_loaded": ready < t_warm,
            "import_bruce_app_ms": round(import_ms, 1),
            "preloaded_before_import": preloaded,
        }

        # -- idle memory ------------------------------------------------------------------
        idle_cpu0 = cpu_s()
        await asyncio.sleep(args.idle_s)
        res.memory = {"idle_vmrss_mb": status_mb("VmRSS"), "idle_maxrss_mb": maxrss_mb(),
                      "vmrss_after_build_app_mb": rss_built}
        res.startup["idle_cpu_ms_per_s"] = round((cpu_s() - idle_cpu0) * 1000 / args.idle_s, 2)

        import bruce.runtime.event_loop as bruce_loop

        res.meta = {
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "nproc": os.cpu_count(),
            ch.kind: ch.mode,
            "server": args.server,
            "model": MODEL,
            "log_level": args.log_level,
            "event_loop": bruce_loop.running_loop_name(),
            "history_limit": config.assistant.history_limit,
            "summary_batch": config.assistant.summary_batch,
            "history": args.history,
            **ch.meta(args),
        }

        # -- warm-up: first HTTP connections, first streamed call; not measured ---------------
        cold = [(await _exchange(ch, WARM_USER, "hi" if i == 0 else f"warm-up {i}"))[1] for i in range(args.warmup)]
        await _quiet(app)
        res.meta["first_reply_ms"] = round(cold[0], 1) if cold else None
        res.meta["warmup_messages"] = args.warmup

        res.sequential = await sequential(app, ch, args)

        await llm.set_latency(args.burst_latency_ms)
        rounds = []
        for r in range(args.rounds):
            rounds.append(await burst(app, ch, round_no=r, chats=args.chats, latency_ms=args.burst_latency_ms))
        res.burst = {
            "chats": args.chats,
            "latency_ms": args.burst_latency_ms,
            "rounds": rounds,
            "median_all_answered_s": round(statistics.median(r["all_answered_s"] for r in rounds), 4),
            "median_cpu_ms_per_message": round(statistics.median(r["cpu_ms_per_message"] for r in rounds), 2),
        }
        res.memory.update({"end_vmrss_mb": status_mb("VmRSS"), "peak_vmhwm_mb": status_mb("VmHWM"),
                           "peak_maxrss_mb": maxrss_mb()})
    finally:
        if app is not None:
            await app.stop()
        await ch.stop()
        await llm.stop()
        tmp.cleanup()
        devnull.close()
    res.meta["fake_llm_requests"] = llm.requests
    res.goals = _goals(res, ch)
    return res


def _goals(res: Results, ch: FakeChannel) -> list[dict[str, Any]]:
    measured = {
        "overhead_p50_ms": res.sequential["overhead_ms"]["p50"],
        "overhead_p99_ms": res.sequential["overhead_ms"]["p99"],
        "burst_all_answered_s": res.burst["median_all_answered_s"],
        "cpu_ms_per_message": res.sequential["cpu_ms_per_message"],
        "startup": round(res.startup[f"{ch.ready_key}_ms"] / 1000, 3),
    }
    return [{"goal": f"startup_to_{ch.ready_key}_s" if k == "startup" else k, "max": GOAL_MAX[k], "measured": v,
             "met": v <= GOAL_MAX[k]} for k, v in measured.items()]


# ---- output -----------------------------------------------------------------------------

def table(res: Results, ch: type[FakeChannel]) -> str:
    m, s, b, st, mem = res.meta, res.sequential, res.burst, res.startup, res.memory
    lines = [
        f"Bruce on {ch.kind.capitalize()}  ({m['date']}, Python {m['python']}, nproc={m['nproc']}, {ch.fake_name}={m[ch.kind]}, "
        f"fake LLM={m['server']}, log={m['log_level']}, loop={m['event_loop']}{ch.table_note(m)})",
        "",
        f"sequential: {s['messages']} messages in one private chat"
        f"{' holding ' + str(m['history']) + ' earlier exchanges' if m.get('history') else ''}, LLM latency {s['latency_ms']:g} ms, "
        f"next message {s['gap_ms']:g} ms after each reply",
        f"  {'metric (ms)':<40} {'p50':>8} {'p99':>8} {'mean':>8} {'max':>8}",
    ]
    for key, label in [("reply_ms", f"reply (push -> {ch.reply} at the fake)"),
                       ("llm_calls_ms", "llm_calls.latency_ms"),
                       ("overhead_ms", "overhead = reply - llm_calls"),
                       ("overhead_vs_server_ms", "reply - server time (latency x calls)")]:
        d = s[key]
        lines.append(f"  {label:<40} {d['p50']:>8.2f} {d['p99']:>8.2f} {d['mean']:>8.2f} {d['max']:>8.2f}")
    fake_cpu = s[f"fake_{ch.kind}_cpu_ms_per_message"]
    lines += [
        f"  process CPU {s['cpu_ms_per_message']:.1f} ms/message (user+sys, incl. "
        f"{s['background_summary_turns']} background summaries)"
        + (f"; {ch.fake_name} process {fake_cpu:.1f} ms/message" if fake_cpu is not None else ""),
        f"  then long-term memory's extraction: {s['memory_turns']} model calls, "
        f"{s['memory_cpu_ms_per_message']:.1f} ms of CPU per message (once the chat paused; not in the figure above)",
        "  " + ", ".join(f"{s[key]} {name}" for key, name in ch.counted.items()) + f"; wall {s['wall_s']:.2f} s",
        "",
        f"burst: {b['chats']} private chats x 1 message at once, LLM latency {b['latency_ms']:g} ms, "
        f"{len(b['rounds'])} round(s)",
        "  all answered (s): " + ", ".join(f"{r['all_answered_s']:.3f}" for r in b["rounds"])
        + f"   median {b['median_all_answered_s']:.3f}",
        "  per-chat reply p50/p99 (ms): " + ", ".join(f"{r['reply_ms']['p50']:.0f}/{r['reply_ms']['p99']:.0f}"
                                                     for r in b["rounds"]),
        "  process CPU per message (ms): " + ", ".join(f"{r['cpu_ms_per_message']:.1f}" for r in b["rounds"]),
        "",
        f"start-up: first {ch.ready_event} {st[ch.ready_key + '_ms']:.0f} ms after build_app "
        f"(build_app {st['build_app_ms']:.0f}, App.start {st['app_start_ms']:.0f}, {ch.get_me_event} at "
        f"{st['get_me_ms']:.0f}); litellm warm-up done at {st['litellm_warm_up_done_ms']:.0f} ms",
        f"  litellm imported by build_app: {st['litellm_imported_by_build_app']}, by App.start: "
        f"{st['litellm_imported_by_app_start']}; first {ch.ready_event} before litellm was loaded: "
        f"{st[ch.ready_key + '_before_litellm_loaded']}   (import bruce.app: {st['import_bruce_app_ms']:.0f} ms)",
        f"memory: VmRSS after build_app {mem['vmrss_after_build_app_mb']} MB (before litellm); idle VmRSS "
        f"{mem['idle_vmrss_mb']} MB (ru_maxrss {mem['idle_maxrss_mb']} MB); peak ru_maxrss "
        f"{mem['peak_maxrss_mb']} MB, VmHWM {mem['peak_vmhwm_mb']} MB; VmRSS at the end {mem['end_vmrss_mb']} MB",
        f"first reply after start: {m['first_reply_ms']} ms   idle CPU {st['idle_cpu_ms_per_s']} ms/s   "
        f"fake LLM requests: {m['fake_llm_requests']}",
        "",
        "goals:",
    ]
    for g in res.goals:
        lines.append(f"  {g['goal']:<34} <= {g['max']:<6g} measured {g['measured']:<8g} "
                     f"{'met' if g['met'] else 'MISSED'}")
    return "\n".join(lines)


def parser(description: str, channel: type[FakeChannel]) -> argparse.ArgumentParser:
    """The options every channel benchmark has; a channel adds its own before ``main``."""
    p = argparse.ArgumentParser(description=description)
    for flag, kind, default, what in [
        ("messages", int, 30, "sequential messages"), ("latency-ms", float, 50.0, "fake LLM latency, sequential run"),
        ("gap-ms", float, 100.0, "pause between a reply and the next sequential message"),
        ("chats", int, 50, "private chats in a burst"), ("rounds", int, 3, "bursts; the median is reported"),
        ("burst-latency-ms", float, 1000.0, "fake LLM latency, bursts"),
        ("warmup", int, 3, "unmeasured warm-up messages"),
        ("history", int, 0, "answered messages already in the sequential chat, as after months without /new"),
        ("idle-s", float, 2.0, "idle time after start before reading RSS; its CPU is reported too")]:
        p.add_argument(f"--{flag}", type=kind, default=default, help=f"{what} (default {default:g})")
    for flag, fake in [(channel.kind, channel.fake_name), ("server", "fake LLM server")]:
        p.add_argument(f"--{flag}", choices=["subprocess", "inproc"], default="subprocess",
                       help=f"run the {fake} in a child process (default) or in Bruce's event loop")
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error", "off"],
                   help="Bruce's log level; JSON lines rendered and written to /dev/null (default info)")
    p.add_argument("--event-loop", choices=["auto", "uvloop", "asyncio"], default="auto",
                   help="Bruce's loop, as runtime.event_loop (default auto: uvloop where installed, like bruce run)")
    p.add_argument("--profile", metavar="FILE", help="cProfile the sequential run into FILE (pstats)")
    p.add_argument("--json", action="store_true", help="print the results as JSON on stdout (table on stderr)")
    p.add_argument("--serve-child", choices=["llm", channel.kind], help=argparse.SUPPRESS)
    return p


def main(p: argparse.ArgumentParser, channel: type[FakeChannel], script: str, argv: list[str] | None = None) -> int:
    args = p.parse_args(argv)
    if args.serve_child:
        asyncio.run(serve_child(args.serve_child, args.latency_ms, channel))
        return 0
    from bruce.runtime.event_loop import run as run_loop  # here: the start-up figure times bruce's imports itself

    res = run_loop(run(args, channel, str(Path(script).resolve())), args.event_loop)
    if args.json:
        print(table(res, channel), file=sys.stderr)
        print(json.dumps(asdict(res), indent=2))
    else:
        print(table(res, channel))
    return 0
