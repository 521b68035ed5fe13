"""How fast does Bruce answer on Telegram, and what does a message cost it?

Runs the daemon's real wiring (``build_app`` from a config with ``channels.telegram`` enabled,
plus the console socket ``bruce run`` adds; store, litellm, tools, worker, outbox, the aiogram
adapter long-polling with ``poll_timeout_s: 1``) against two fakes on 127.0.0.1:

* ``tests.fakes.telegram_api.FakeTelegramAPI``: the Bot API the adapter polls and sends to;
* ``tests.fakes.llm_server.FakeLLMServer``: the model, answering after a fixed latency.

Both run in child processes by default (like the real, remote services they stand for, they do
not compete with Bruce for its event loop); ``--telegram inproc`` / ``--server inproc`` run
them in Bruce's event loop instead. Measured:

1. start-up: from ``build_app`` to the first ``getUpdates`` reaching the fake, with
   ``LLMService.warm_up`` (``import litellm`` in a thread, ``gc.freeze``) started right after
   ``App.start`` as ``bruce run`` does; whether litellm was imported on the way;
2. memory: VmRSS (``/proc/self/status``) and ``ru_maxrss`` at idle after start, peak at the end;
3. sequential: N messages (30) from one user in one private chat, each sent once the previous
   reply has arrived (plus ``--gap-ms``), LLM latency 50 ms. Per message: reply time = from
   ``push_message`` to the fake recording the ``sendMessage`` (both on the fake's monotonic
   clock), LLM time = the turn's ``llm_calls.latency_ms`` from the database (litellm end to
   end), overhead = reply - LLM time; and reply - server time (latency x calls). CPU per
   message = process user+sys (``getrusage``) over the run, background summaries included;
4. burst: 50 private chats each send one message at once, LLM latency 1 s: the time from the
   first push until the last of the 50 replies is recorded (a few rounds, median).

Usage (from the repo root)::

    .venv/bin/python benchmarks/telegram_load.py [--messages 30] [--chats 50] [--rounds 3]
        [--latency-ms 50] [--burst-latency-ms 1000] [--gap-ms 100] [--warmup 3]
        [--telegram subprocess|inproc] [--server subprocess|inproc] [--log-level info]
        [--profile out.pstats] [--hold-aiogram-responses] [--json]

``--hold-aiogram-responses`` is a diagnostic: it keeps strong references to aiogram's
``Response[T]`` models for the methods the adapter calls. pydantic caches parametrized generics
only weakly, so without them aiogram's ``check_response`` rebuilds ``Response[bool]`` /
``Response[list[Update]]`` / ``Response[Message]`` (a pydantic schema build each) whenever the
garbage collector has dropped them.
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
from typing import Any  # noqa: E402

from benchmarks.turn_overhead import MODEL, describe, responder  # noqa: E402

TOKEN = "123456:BENCH-token-abcdefghij"
WARM_USER = 1000
SEQ_USER = 1001
BURST_BASE = 2000  # round r, chat i: BURST_BASE + 100 * r + i
WATCHED = frozenset({"getMe", "setMyCommands", "deleteWebhook", "getUpdates", "sendMessage", "sendMessageDraft",
                     "sendChatAction"})
GOALS = {  # from the issue
    "overhead_p50_ms": 10.0,
    "overhead_p99_ms": 50.0,
    "burst_all_answered_s": 1.5,
    "cpu_ms_per_message": 20.0,
    "startup_to_first_get_updates_s": 0.8,
}


_HELD: list[Any] = []


def _hold_aiogram_responses() -> None:
    """Build and keep aiogram's Response[T] for the methods the adapter calls (see the docstring)."""
    from aiogram.client.session.base import Response
    from aiogram.methods import (
        DeleteWebhook,
        GetMe,
        GetUpdates,
        SendChatAction,
        SendMessage,
        SendMessageDraft,
        SetMyCommands,
    )

    for method in (GetMe, SetMyCommands, DeleteWebhook, GetUpdates, SendMessage, SendMessageDraft, SendChatAction):
        _HELD.append(Response[method.__returning__])  # type: ignore[name-defined]


def _cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _status_mb(key: str) -> float:
    """A size from /proc/self/status (VmRSS, VmHWM) in MB."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return float("nan")


def _maxrss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


# ---- the fakes (also run in the child processes) -----------------------------------------

def _make_api(on_call: Callable[[str, Any, float], None]) -> Any:
    """A FakeTelegramAPI that reports the watched calls (method, chat_id, when) as they arrive."""
    from tests.fakes.telegram_api import FakeTelegramAPI

    class ReportingAPI(FakeTelegramAPI):
        def _record(self, method: str, params: dict[str, Any]) -> None:
            super()._record(method, params)
            if method in WATCHED:
                on_call(method, params.get("chat_id"), self.calls[-1].at)

    return ReportingAPI(TOKEN)


def _push(api: Any, messages: list[list[Any]]) -> list[dict[str, Any]]:
    """Push each (chat, user, text) as a private-chat message; when (monotonic) and its id."""
    pushed = []
    for chat, user, text in messages:
        at = time.monotonic()
        update_id = api.push_message(int(chat), int(user), str(text))
        mid = next(u["message"]["message_id"] for u in reversed(api.pending_updates) if u["update_id"] == update_id)
        pushed.append({"chat": int(chat), "message_id": mid, "at": at})
    return pushed


def _emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


async def _serve_child(kind: str, latency_ms: float) -> None:
    """Child-process mode: JSON lines. First {"ready": base_url}; then a reply {"id", "result"}
    to each {"id", "op", "args"} on stdin; the Bot API also sends {"event": method, "chat",
    "at"} for every watched call. End of stdin: stop, print {"final": ...}."""
    handlers: dict[str, Callable[..., Any]] = {"cpu": _cpu_s}
    if kind == "llm":
        from tests.fakes.llm_server import FakeLLMServer

        server = FakeLLMServer()
        server.latency_s = latency_ms / 1000
        server.responder = responder
        await server.start()
        handlers["latency"] = lambda ms: setattr(server, "latency_s", ms / 1000)
        _emit({"ready": server.base_url})
        stop: Callable[[], Any] = server.stop

        def final() -> dict[str, Any]:
            return {"requests": len(server.requests)}
    else:
        api = _make_api(lambda method, chat, at: _emit({"event": method, "chat": chat, "at": at}))
        await api.start()
        handlers["push"] = lambda messages: _push(api, messages)
        _emit({"ready": api.base_url})
        stop = api.close

        def final() -> dict[str, Any]:
            return {"calls": len(api.calls)}
    loop = asyncio.get_running_loop()
    while line := await loop.run_in_executor(None, sys.stdin.readline):
        request = json.loads(line)
        _emit({"id": request["id"], "result": handlers[request["op"]](**request.get("args", {}))})
    await stop()
    _emit({"final": final(), "cpu_s": _cpu_s()})


class Child:
    """A fake in a child process, spoken to in JSON lines (see ``_serve_child``)."""

    def __init__(self, kind: str, latency_ms: float = 0.0,
                 on_event: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.kind, self.latency_ms, self.on_event = kind, latency_ms, on_event
        self.base_url = ""
        self.final: dict[str, Any] = {}
        self._proc: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None
        self._ready: asyncio.Future[str] | None = None
        self._waiting: dict[int, asyncio.Future[Any]] = {}
        self._ids = itertools.count(1)

    async def start(self) -> None:
        self._ready = asyncio.get_running_loop().create_future()
        self._proc = await asyncio.create_subprocess_exec(
            sys.executable, str(Path(__file__).resolve()), "--serve-child", self.kind,
            "--latency-ms", str(self.latency_ms),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, cwd=str(ROOT))
        self._reader = asyncio.create_task(self._read(self._proc), name=f"bench.{self.kind}.reader")
        self.base_url = await asyncio.wait_for(self._ready, timeout=30)

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

    def __init__(self, latency_ms: float, mode: str) -> None:
        self.mode = mode
        self.latency_ms = latency_ms
        self.base_url = ""
        self.requests = 0
        self.child_cpu_s: float | None = None
        self._child: Child | None = None
        self._server: Any = None

    async def start(self) -> None:
        if self.mode == "inproc":
            from tests.fakes.llm_server import FakeLLMServer

            self._server = FakeLLMServer()
            self._server.latency_s = self.latency_ms / 1000
            self._server.responder = responder
            await self._server.start()
            self.base_url = self._server.base_url
        else:
            self._child = Child("llm", self.latency_ms)
            await self._child.start()
            self.base_url = self._child.base_url

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


class TelegramHandle:
    """The fake Bot API, in a child process or in this event loop. ``events`` holds every
    watched call as (method, chat_id, monotonic time at the fake)."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.base_url = ""
        self.events: list[tuple[str, Any, float]] = []
        self._changed = asyncio.Event()
        self._child: Child | None = None
        self._api: Any = None

    def _on_call(self, method: str, chat: Any, at: float) -> None:
        self.events.append((method, chat, at))
        self._changed.set()

    async def start(self) -> None:
        if self.mode == "inproc":
            self._api = _make_api(self._on_call)
            await self._api.start()
            self.base_url = self._api.base_url
        else:
            self._child = Child("telegram", on_event=lambda m: self._on_call(m["event"], m["chat"], m["at"]))
            await self._child.start()
            self.base_url = self._child.base_url

    async def push(self, messages: list[tuple[int, int, str]]) -> list[dict[str, Any]]:
        if self._api is not None:
            return _push(self._api, [list(m) for m in messages])
        assert self._child is not None
        result: list[dict[str, Any]] = await self._child.request("push", messages=[list(m) for m in messages])
        return result

    def times(self, method: str, chat: int | None = None) -> list[float]:
        return [at for m, c, at in self.events if m == method and (chat is None or c == chat)]

    def count(self, method: str) -> int:
        return sum(1 for m, _, _ in self.events if m == method)

    async def wait(self, done: Callable[[], bool], timeout: float = 60.0, what: str = "") -> None:
        deadline = time.monotonic() + timeout
        while not done():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise RuntimeError(f"timed out after {timeout}s waiting for {what or 'the fake Bot API'}")
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


def _turn_rows(db: Path, chats: list[int]) -> dict[str, dict[str, Any]]:
    """Per inbound message ("chat:message_id"): its turn's status, LLM calls and their latency."""
    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    try:
        marks = ",".join("?" * len(chats))
        rows = con.execute(
            "SELECT m.platform_message_id AS pid, t.status AS status, COUNT(c.id) AS calls,"
            " COALESCE(SUM(c.latency_ms), 0) AS llm_ms"
            " FROM messages m JOIN turns t ON t.inbound_message_id = m.id"
            " LEFT JOIN llm_calls c ON c.turn_id = t.id"
            f" WHERE m.conversation_id IN ({marks}) GROUP BY m.id",
            [f"telegram:{c}" for c in chats]).fetchall()
        return {r["pid"]: dict(r) for r in rows}
    finally:
        con.close()


def _count(db: Path, sql: str, *params: Any) -> int:
    con = sqlite3.connect(db)
    try:
        return int(con.execute(sql, params).fetchone()[0])
    finally:
        con.close()


async def _exchange(tg: TelegramHandle, chat: int, text: str) -> tuple[dict[str, Any], float]:
    """One message and its reply: (the push, reply time in ms on the fake's clock)."""
    before = len(tg.times("sendMessage", chat))
    (pushed,) = await tg.push([(chat, chat, text)])
    await tg.wait(lambda: len(tg.times("sendMessage", chat)) > before, what=f"the reply in chat {chat}")
    return pushed, (tg.times("sendMessage", chat)[before] - pushed["at"]) * 1000


async def sequential(app: Any, tg: TelegramHandle, llm: LLMHandle, args: argparse.Namespace) -> dict[str, Any]:
    db = app.config.storage.path
    samples: list[tuple[str, float]] = []
    drafts0, actions0 = tg.count("sendMessageDraft"), tg.count("sendChatAction")
    child0 = await tg.child_cpu_s()
    profiler = None
    if args.profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    cpu0, t0 = _cpu_s(), time.perf_counter()
    for i in range(args.messages):
        pushed, reply_ms = await _exchange(tg, SEQ_USER, f"question number {i}: what is on my calendar today?")
        samples.append((f"{SEQ_USER}:{pushed['message_id']}", reply_ms))
        if args.gap_ms:
            await asyncio.sleep(args.gap_ms / 1000)
    await app.worker.wait_idle()  # the background summaries these messages started
    cpu, wall = _cpu_s() - cpu0, time.perf_counter() - t0
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(args.profile)
    child1 = await tg.child_cpu_s()
    rows = _turn_rows(db, [SEQ_USER])
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
                       f"telegram:{SEQ_USER}")
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
        "fake_telegram_cpu_ms_per_message": (round((child1 - child0) * 1000 / args.messages, 2)
                                             if child0 is not None and child1 is not None else None),
        "background_summary_turns": summaries,
        "drafts_sent": tg.count("sendMessageDraft") - drafts0,
        "chat_actions_sent": tg.count("sendChatAction") - actions0,
    }


async def burst(app: Any, tg: TelegramHandle, *, round_no: int, chats: int, latency_ms: float) -> dict[str, Any]:
    ids = [BURST_BASE + 100 * round_no + i for i in range(chats)]
    cpu0 = _cpu_s()
    pushed = await tg.push([(c, c, "hello, what is on my calendar today?") for c in ids])
    await tg.wait(lambda: all(tg.times("sendMessage", c) for c in ids), timeout=120, what=f"{chats} replies")
    cpu = _cpu_s() - cpu0
    start = min(p["at"] for p in pushed)
    replies = {c: tg.times("sendMessage", c)[0] for c in ids}
    per_chat = [(replies[p["chat"]] - p["at"]) * 1000 for p in pushed]
    all_answered = max(replies.values()) - start
    await app.worker.wait_idle()
    rows = _turn_rows(app.config.storage.path, ids)
    bad = [p for p in pushed if (rows.get(f"{p['chat']}:{p['message_id']}") or {}).get("status") != "ok"]
    if bad:
        raise RuntimeError(f"{len(bad)} burst turns did not end ok")
    return {"all_answered_s": round(all_answered, 4),
            "over_latency_ms": round(all_answered * 1000 - latency_ms, 1),
            "first_reply_ms": round(min(per_chat), 1),
            "reply_ms": describe(per_chat),
            "pushed_in_ms": round((max(p["at"] for p in pushed) - start) * 1000, 2),
            "cpu_ms_per_message": round(cpu * 1000 / chats, 2)}


def _config(tmp: Path, tg: TelegramHandle, llm: LLMHandle, args: argparse.Namespace) -> dict[str, Any]:
    users = [WARM_USER, SEQ_USER] + [BURST_BASE + 100 * r + i for r in range(args.rounds) for i in range(args.chats)]
    return {
        "llm": {"model": MODEL, "api_base": llm.base_url, "api_key": "sk-bench-key-123456", "num_retries": 0,
                "timeout_s": 30},
        "storage": {"path": str(tmp / "bruce.db")},
        "console": {"socket_path": str(tmp / "bruce.sock")},
        "assistant": {"shutdown_timeout_s": 10},
        "tools": {"files": {"notes_dir": str(tmp / "notes")}, "artifacts": {"dir": str(tmp / "artifacts")}},
        "channels": {"telegram": {"enabled": True, "token": TOKEN, "api_base": tg.base_url,
                                  "allowed_users": users, "poll_timeout_s": args.poll_timeout_s}},
    }


async def run(args: argparse.Namespace) -> Results:
    res = Results()
    preloaded = sorted(m for m in ("litellm", "aiogram", "openai") if m in sys.modules)
    t_import = time.perf_counter()
    from bruce.app import build_app, socket_console
    from bruce.clock import SystemClock
    from bruce.config import parse_config
    from bruce.log import configure_logging
    import_ms = (time.perf_counter() - t_import) * 1000

    devnull = open(os.devnull, "w")  # noqa: SIM115 - closed below
    # as the daemon does (JSON lines, redaction), rendered but written nowhere
    configure_logging(level="critical" if args.log_level == "off" else args.log_level, fmt="json", stream=devnull)
    llm = LLMHandle(args.latency_ms, args.server)
    tg = TelegramHandle(args.telegram)
    tmp = tempfile.TemporaryDirectory(prefix="bruce-tgbench-")
    app = None
    try:
        await llm.start()
        await tg.start()
        config = parse_config(_config(Path(tmp.name), tg, llm, args), environ={})
        clock = SystemClock()

        # -- start-up, as `bruce run` (bruce.cli._serve): build_app, start, warm_up ---------
        t0 = time.monotonic()
        app = await build_app(config, clock=clock, environ={}, extra_channels=[socket_console(config, clock)])
        t_built = time.monotonic()
        litellm_after_build = "litellm" in sys.modules
        rss_built = _status_mb("VmRSS")
        if args.hold_aiogram_responses:
            _hold_aiogram_responses()
        await app.start()
        t_started = time.monotonic()
        litellm_after_start = "litellm" in sys.modules
        await app.llm.warm_up()
        t_warm = time.monotonic()
        await tg.wait(lambda: bool(tg.times("getUpdates")), timeout=60, what="the first getUpdates")
        first_poll = tg.times("getUpdates")[0]
        get_me = tg.times("getMe")[0]
        res.startup = {
            "first_get_updates_ms": round((first_poll - t0) * 1000, 1),
            "build_app_ms": round((t_built - t0) * 1000, 1),
            "app_start_ms": round((t_started - t_built) * 1000, 1),
            "get_me_ms": round((get_me - t0) * 1000, 1),
            "litellm_warm_up_done_ms": round((t_warm - t0) * 1000, 1),
            "litellm_imported_by_build_app": litellm_after_build,
            "litellm_imported_by_app_start": litellm_after_start,
            "first_get_updates_before_litellm_loaded": first_poll < t_warm,
            "import_bruce_app_ms": round(import_ms, 1),
            "preloaded_before_import": preloaded,
        }

        # -- idle memory ------------------------------------------------------------------
        idle_cpu0 = _cpu_s()
        await asyncio.sleep(args.idle_s)
        res.memory = {"idle_vmrss_mb": _status_mb("VmRSS"), "idle_maxrss_mb": _maxrss_mb(),
                      "vmrss_after_build_app_mb": rss_built}
        res.startup["idle_cpu_ms_per_s"] = round((_cpu_s() - idle_cpu0) * 1000 / args.idle_s, 2)

        res.meta = {
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "nproc": os.cpu_count(),
            "telegram": args.telegram,
            "server": args.server,
            "model": MODEL,
            "log_level": args.log_level,
            "poll_timeout_s": args.poll_timeout_s,
            "history_limit": config.assistant.history_limit,
            "summary_batch": config.assistant.summary_batch,
            "hold_aiogram_responses": args.hold_aiogram_responses,
        }

        # -- warm-up: first HTTP connections, first streamed call; not measured ---------------
        cold = [(await _exchange(tg, WARM_USER, "hi" if i == 0 else f"warm-up {i}"))[1] for i in range(args.warmup)]
        await app.worker.wait_idle()
        res.meta["first_reply_ms"] = round(cold[0], 1) if cold else None
        res.meta["warmup_messages"] = args.warmup

        res.sequential = await sequential(app, tg, llm, args)

        await llm.set_latency(args.burst_latency_ms)
        rounds = []
        for r in range(args.rounds):
            rounds.append(await burst(app, tg, round_no=r, chats=args.chats, latency_ms=args.burst_latency_ms))
        res.burst = {
            "chats": args.chats,
            "latency_ms": args.burst_latency_ms,
            "rounds": rounds,
            "median_all_answered_s": round(statistics.median(r["all_answered_s"] for r in rounds), 4),
            "median_cpu_ms_per_message": round(statistics.median(r["cpu_ms_per_message"] for r in rounds), 2),
        }
        res.memory.update({"end_vmrss_mb": _status_mb("VmRSS"), "peak_vmhwm_mb": _status_mb("VmHWM"),
                           "peak_maxrss_mb": _maxrss_mb()})
    finally:
        if app is not None:
            await app.stop()
        await tg.stop()
        await llm.stop()
        tmp.cleanup()
        devnull.close()
    res.meta["fake_llm_requests"] = llm.requests
    res.goals = _goals(res)
    return res


def _goals(res: Results) -> list[dict[str, Any]]:
    measured = {
        "overhead_p50_ms": res.sequential["overhead_ms"]["p50"],
        "overhead_p99_ms": res.sequential["overhead_ms"]["p99"],
        "burst_all_answered_s": res.burst["median_all_answered_s"],
        "cpu_ms_per_message": res.sequential["cpu_ms_per_message"],
        "startup_to_first_get_updates_s": round(res.startup["first_get_updates_ms"] / 1000, 3),
    }
    return [{"goal": k, "max": GOALS[k], "measured": v, "met": v <= GOALS[k]} for k, v in measured.items()]


# ---- output -----------------------------------------------------------------------------

def table(res: Results) -> str:
    m, s, b, st, mem = res.meta, res.sequential, res.burst, res.startup, res.memory
    lines = [
        f"Bruce on Telegram  ({m['date']}, Python {m['python']}, nproc={m['nproc']}, fake Bot API={m['telegram']}, "
        f"fake LLM={m['server']}, log={m['log_level']}, poll_timeout_s={m['poll_timeout_s']}"
        + (", aiogram Response[T] held" if m["hold_aiogram_responses"] else "") + ")",
        "",
        f"sequential: {s['messages']} messages in one private chat, LLM latency {s['latency_ms']:g} ms, "
        f"next message {s['gap_ms']:g} ms after each reply",
        f"  {'metric (ms)':<40} {'p50':>8} {'p99':>8} {'mean':>8} {'max':>8}",
    ]
    for key, label in [("reply_ms", "reply (push -> sendMessage at the fake)"),
                       ("llm_calls_ms", "llm_calls.latency_ms"),
                       ("overhead_ms", "overhead = reply - llm_calls"),
                       ("overhead_vs_server_ms", "reply - server time (latency x calls)")]:
        d = s[key]
        lines.append(f"  {label:<40} {d['p50']:>8.2f} {d['p99']:>8.2f} {d['mean']:>8.2f} {d['max']:>8.2f}")
    tg_cpu = s["fake_telegram_cpu_ms_per_message"]
    lines += [
        f"  process CPU {s['cpu_ms_per_message']:.1f} ms/message (user+sys, incl. "
        f"{s['background_summary_turns']} background summaries)"
        + (f"; fake Bot API process {tg_cpu:.1f} ms/message" if tg_cpu is not None else ""),
        f"  {s['drafts_sent']} sendMessageDraft, {s['chat_actions_sent']} sendChatAction; wall {s['wall_s']:.2f} s",
        "",
        f"burst: {b['chats']} private chats x 1 message at once, LLM latency {b['latency_ms']:g} ms, "
        f"{len(b['rounds'])} round(s)",
        "  all answered (s): " + ", ".join(f"{r['all_answered_s']:.3f}" for r in b["rounds"])
        + f"   median {b['median_all_answered_s']:.3f}",
        "  per-chat reply p50/p99 (ms): " + ", ".join(f"{r['reply_ms']['p50']:.0f}/{r['reply_ms']['p99']:.0f}"
                                                     for r in b["rounds"]),
        "  process CPU per message (ms): " + ", ".join(f"{r['cpu_ms_per_message']:.1f}" for r in b["rounds"]),
        "",
        f"start-up: first getUpdates {st['first_get_updates_ms']:.0f} ms after build_app "
        f"(build_app {st['build_app_ms']:.0f}, App.start {st['app_start_ms']:.0f}, getMe at {st['get_me_ms']:.0f}); "
        f"litellm warm-up done at {st['litellm_warm_up_done_ms']:.0f} ms",
        f"  litellm imported by build_app: {st['litellm_imported_by_build_app']}, by App.start: "
        f"{st['litellm_imported_by_app_start']}; first getUpdates before litellm was loaded: "
        f"{st['first_get_updates_before_litellm_loaded']}   (import bruce.app: {st['import_bruce_app_ms']:.0f} ms)",
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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--messages", type=int, default=30, help="sequential messages (default 30)")
    p.add_argument("--latency-ms", type=float, default=50.0, help="fake LLM latency, sequential run (default 50)")
    p.add_argument("--gap-ms", type=float, default=100.0,
                   help="pause between a reply and the next sequential message (default 100)")
    p.add_argument("--chats", type=int, default=50, help="private chats in a burst (default 50)")
    p.add_argument("--rounds", type=int, default=3, help="bursts; the median is reported (default 3)")
    p.add_argument("--burst-latency-ms", type=float, default=1000.0, help="fake LLM latency, bursts (default 1000)")
    p.add_argument("--warmup", type=int, default=3, help="unmeasured warm-up messages (default 3)")
    p.add_argument("--poll-timeout-s", type=int, default=1, help="channels.telegram.poll_timeout_s (default 1)")
    p.add_argument("--idle-s", type=float, default=2.0,
                   help="idle time after start before reading RSS; its CPU is reported too (default 2)")
    p.add_argument("--telegram", choices=["subprocess", "inproc"], default="subprocess",
                   help="run the fake Bot API in a child process (default) or in Bruce's event loop")
    p.add_argument("--server", choices=["subprocess", "inproc"], default="subprocess",
                   help="run the fake LLM server in a child process (default) or in Bruce's event loop")
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error", "off"],
                   help="Bruce's log level; lines are rendered as JSON and written to /dev/null (default info)")
    p.add_argument("--profile", metavar="FILE", help="cProfile the sequential run into FILE (pstats)")
    p.add_argument("--hold-aiogram-responses", action="store_true",
                   help="diagnostic: keep aiogram's Response[T] models alive (see the module docstring)")
    p.add_argument("--json", action="store_true", help="print the results as JSON on stdout (table on stderr)")
    p.add_argument("--serve-child", choices=["llm", "telegram"], help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.serve_child:
        asyncio.run(_serve_child(args.serve_child, args.latency_ms))
        return 0
    res = asyncio.run(run(args))
    if args.json:
        print(table(res), file=sys.stderr)
        print(json.dumps(asdict(res), indent=2))
    else:
        print(table(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
