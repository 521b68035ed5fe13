"""How much time does Bruce itself add to a turn, on top of the language model?

Runs the real app (``build_app``: store, LLM service through litellm, tool registry, worker)
against ``tests.fakes.llm_server.FakeLLMServer`` answering every request after a fixed
latency (50 ms by default), with a recording channel instead of a chat platform:

1. plain turns: sequential turns in one conversation, the model answers with text;
2. one-tool turns: sequential turns in one conversation, the model calls ``math_calculate``
   and then answers;
3. throughput: N conversations each sending one message at once, a few rounds.

For every turn: wall time (``deliver`` + awaiting the turn's handle), LLM time as Bruce saw
it (sum of ``llm_calls.latency_ms`` of the turn, i.e. ``litellm.acompletion`` end to end) and
pure server time (latency x number of LLM calls). Overheads reported:

* ``bruce``       = wall - llm_calls latency  (Bruce's own code: SQLite, prompt, agent loop,
                                               tool, logging, channel)
* ``bruce+client`` = wall - server time        (the above plus litellm + HTTP client + the
                                               fake server's request handling)

Usage (from the repo root)::

    .venv/bin/python benchmarks/turn_overhead.py [--turns 200] [--conversations 50]
        [--latency-ms 50] [--rounds 4] [--json] [--server subprocess|inproc]
        [--profile out.pstats]

By default the fake server runs in a child process (like a real, remote model, it does not
compete with Bruce for the event loop); ``--server inproc`` runs it in Bruce's event loop.
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
import json  # noqa: E402
import platform  # noqa: E402
import re  # noqa: E402
import resource  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from dataclasses import asdict, dataclass, field  # noqa: E402
from datetime import UTC, datetime  # noqa: E402
from typing import Any  # noqa: E402

MODEL = "openai/gpt-4o-mini"  # a priced model, so litellm's cost lookup runs as in production
PLAIN_REPLY = (
    "Sure. Here is a short answer to your question, written the way a concise assistant would: "
    "the meeting is on Thursday at 10:00, and nothing else needs doing today."
)
SUMMARY_REPLY = "The user asked a series of short questions; all were answered. No open tasks."
_CALC = re.compile(r"calculate\s+(.+)$")


# ---- the fake model's behaviour (also used in the child process) --------------------------

def responder(body: dict[str, Any]) -> Any:
    """Decide the reply from the request: a user message asking to "calculate ..." with tools
    offered -> a math_calculate call; a tool result -> text; anything else -> text."""
    from tests.fakes.llm_server import Step

    messages = body.get("messages") or []
    last = messages[-1] if messages else {}
    if last.get("role") == "tool":
        try:
            value = json.loads(last.get("content") or "{}")["result"]["result"]
        except (ValueError, KeyError, TypeError):
            value = "?"
        return Step.text(f"The result is {value}.", prompt_tokens=400, completion_tokens=8)
    if not body.get("tools"):
        return Step.text(SUMMARY_REPLY, prompt_tokens=300, completion_tokens=20)
    content = last.get("content") if last.get("role") == "user" else None
    match = _CALC.search(content) if isinstance(content, str) else None
    if match:
        return Step.tool_calls(("math_calculate", {"expression": match.group(1)}))
    return Step.text(PLAIN_REPLY, prompt_tokens=350, completion_tokens=40)


async def _serve_fake(latency_ms: float) -> None:
    """Child-process mode: run the fake server, print its URL, stop when stdin closes."""
    from tests.fakes.llm_server import FakeLLMServer

    server = FakeLLMServer()
    server.latency_s = latency_ms / 1000
    server.responder = responder
    await server.start()
    print(server.base_url, flush=True)
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, sys.stdin.readline)
    await server.stop()
    print(json.dumps({"requests": len(server.requests)}), flush=True)


class FakeServerHandle:
    """The fake model server, either in a child process or in this event loop."""

    def __init__(self, latency_ms: float, mode: str) -> None:
        self.latency_ms = latency_ms
        self.mode = mode
        self.base_url = ""
        self.requests = 0
        self._proc: asyncio.subprocess.Process | None = None
        self._server: Any = None

    async def start(self) -> None:
        if self.mode == "inproc":
            from tests.fakes.llm_server import FakeLLMServer

            self._server = FakeLLMServer()
            self._server.latency_s = self.latency_ms / 1000
            self._server.responder = responder
            await self._server.start()
            self.base_url = self._server.base_url
            return
        self._proc = await asyncio.create_subprocess_exec(
            sys.executable, str(Path(__file__).resolve()), "--serve-fake", "--latency-ms", str(self.latency_ms),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, cwd=str(ROOT),
        )
        assert self._proc.stdout is not None
        line = await asyncio.wait_for(self._proc.stdout.readline(), timeout=30)
        self.base_url = line.decode().strip()
        if not self.base_url.startswith("http://127.0.0.1:"):
            await self.stop()
            raise RuntimeError(f"fake server did not start: {self.base_url!r}")

    async def stop(self) -> None:
        if self._server is not None:
            self.requests = len(self._server.requests)
            await self._server.stop()
            self._server = None
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.close()
            out = await asyncio.wait_for(proc.stdout.read(), timeout=10)
            await asyncio.wait_for(proc.wait(), timeout=10)
            for line in out.decode().splitlines():
                if line.startswith("{"):
                    self.requests = json.loads(line)["requests"]
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()


# ---- measurement ------------------------------------------------------------------------

@dataclass
class TurnSample:
    wall_ms: float
    llm_ms: float
    llm_calls: int
    server_ms: float

    @property
    def bruce_ms(self) -> float:
        return self.wall_ms - self.llm_ms

    @property
    def bruce_client_ms(self) -> float:
        return self.wall_ms - self.server_ms


def pct(values: list[float], p: float) -> float:
    """Percentile with linear interpolation between closest ranks."""
    data = sorted(values)
    if not data:
        return float("nan")
    k = (len(data) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(data) - 1)
    return data[lo] + (data[hi] - data[lo]) * (k - lo)


def describe(values: list[float]) -> dict[str, float]:
    return {
        "p50": round(pct(values, 50), 3),
        "p99": round(pct(values, 99), 3),
        "mean": round(statistics.fmean(values), 3),
        "max": round(max(values), 3),
    }


@dataclass
class Results:
    meta: dict[str, Any] = field(default_factory=dict)
    scenarios: dict[str, dict[str, Any]] = field(default_factory=dict)
    throughput: dict[str, Any] = field(default_factory=dict)
    peak_rss_mb: float = 0.0


async def _idle(app: Any) -> None:
    """Wait for background summary folds so they do not spill into the next scenario."""
    await app.worker.wait_idle()


async def _read(app: Any, sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
    """Read the database file directly, as an operator would (every write has committed)."""
    from tests.helpers import db_rows

    return db_rows(app.config.storage.path, sql, *params)


async def _turn_rows(app: Any, conversation_id: str, prefix: str) -> dict[str, dict[str, Any]]:
    rows = await _read(app,
        "SELECT m.platform_message_id AS pid, t.status AS status, COUNT(c.id) AS calls,"
        " COALESCE(SUM(c.latency_ms), 0) AS llm_ms"
        " FROM messages m JOIN turns t ON t.inbound_message_id = m.id"
        " LEFT JOIN llm_calls c ON c.turn_id = t.id"
        " WHERE m.conversation_id = ? AND m.platform_message_id LIKE ?"
        " GROUP BY m.id",
        (conversation_id, prefix + "%"),
    )
    return {r["pid"]: r for r in rows}


async def sequential(app: Any, channel: Any, *, name: str, turns: int, text: Any, latency_ms: float,
                     expect_calls: int) -> dict[str, Any]:
    from bruce.channel import IncomingMessage

    chat = f"bench-{name}"
    conversation_id = f"{channel.name}:{chat}"
    walls: list[tuple[str, float]] = []
    cpu0 = time.process_time()
    for i in range(turns):
        pid = f"{name}-{i}"
        message = IncomingMessage(channel=channel.name, chat_id=chat, sender_id="u1", text=text(i),
                                  platform_message_id=pid, timestamp=app.clock.now())
        t0 = time.perf_counter()
        handle = await app.worker.deliver(message)
        assert handle is not None, "message refused"
        await handle
        walls.append((pid, (time.perf_counter() - t0) * 1000))
    await _idle(app)
    cpu_ms = (time.process_time() - cpu0) * 1000
    rows = await _turn_rows(app, conversation_id, f"{name}-")
    samples = []
    for pid, wall in walls:
        row = rows[pid]
        if row["status"] != "ok" or row["calls"] != expect_calls:
            raise RuntimeError(f"turn {pid}: status={row['status']} llm calls={row['calls']} "
                               f"(expected ok with {expect_calls})")
        samples.append(TurnSample(wall, float(row["llm_ms"]), int(row["calls"]), latency_ms * row["calls"]))
    summaries = await _read(app,
        "SELECT COUNT(*) AS n FROM turns WHERE conversation_id = ? AND source = 'summary'", (conversation_id,))
    return {
        "turns": turns,
        "conversation": "one conversation (history grows to history_limit; summaries fold in the background)",
        "llm_calls_per_turn": expect_calls,
        "background_summary_calls": summaries[0]["n"],
        "process_cpu_ms_per_turn": round(cpu_ms / turns, 2),
        "wall_ms": describe([s.wall_ms for s in samples]),
        "llm_calls_ms": describe([s.llm_ms for s in samples]),
        "server_ms": latency_ms * expect_calls,
        "overhead_bruce_ms": describe([s.bruce_ms for s in samples]),
        "overhead_bruce_client_ms": describe([s.bruce_client_ms for s in samples]),
        "litellm_client_ms": describe([s.llm_ms - s.server_ms for s in samples]),
    }


async def burst(app: Any, channel: Any, *, round_no: int, conversations: int) -> dict[str, Any]:
    from bruce.channel import IncomingMessage

    sent_before = len(channel.sent)
    messages = [
        IncomingMessage(channel=channel.name, chat_id=f"tp{round_no}-{i}", sender_id="u1",
                        text="hello, what is on my calendar today?", platform_message_id=f"tp{round_no}-{i}",
                        timestamp=app.clock.now())
        for i in range(conversations)
    ]
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    handles = [await app.worker.deliver(m) for m in messages]
    delivered = time.perf_counter()
    assert all(h is not None for h in handles)
    await asyncio.gather(*handles)  # type: ignore[arg-type]
    wall = time.perf_counter() - t0
    cpu = time.process_time() - cpu0
    if len(channel.sent) - sent_before != conversations:
        raise RuntimeError("not every conversation got its reply")
    return {"wall_s": round(wall, 4), "turns_per_s": round(conversations / wall, 2),
            "deliver_all_ms": round((delivered - t0) * 1000, 2),
            "process_cpu_ms_per_turn": round(cpu * 1000 / conversations, 2)}


async def run(args: argparse.Namespace) -> Results:
    from bruce.app import build_app
    from bruce.clock import SystemClock
    from bruce.config.loader import parse_config
    from bruce.log import configure_logging
    from tests.fakes.channel import ProgressRecordingChannel, RecordingChannel

    results = Results()
    devnull = open(os.devnull, "w")  # noqa: SIM115 - closed below
    if args.log_level != "off":
        # as the daemon does (JSON lines, redaction), rendered but written nowhere
        configure_logging(level=args.log_level, fmt="json", stream=devnull)
    else:
        configure_logging(level="critical", fmt="json", stream=devnull)

    server = FakeServerHandle(args.latency_ms, args.server)
    await server.start()
    tmp = tempfile.TemporaryDirectory(prefix="bruce-bench-")
    app = None
    try:
        config = parse_config({
            "llm": {"model": MODEL, "api_base": server.base_url, "api_key": "sk-bench-key-123456",
                    "num_retries": 0, "timeout_s": 30},
            "storage": {"path": str(Path(tmp.name) / "bruce.db")},
            "assistant": {"shutdown_timeout_s": 10},
            "limits": {"messages_per_minute": 10000, "messages_per_hour": 100000},  # a load test, not a flood
        }, environ={})
        channel = RecordingChannel("bench")
        streaming = ProgressRecordingChannel("benchstream")  # shows progress: answers are streamed
        app = await build_app(config, clock=SystemClock(), environ={}, extra_channels=[channel, streaming])
        await app.start()
        t_warm = time.perf_counter()
        await app.llm.warm_up()  # as `bruce run` does: import litellm off the loop, then gc.freeze()
        warm_up_ms = round((time.perf_counter() - t_warm) * 1000, 1)
        a = config.assistant
        results.meta = {
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "nproc": os.cpu_count(),
            "server": args.server,
            "latency_ms": args.latency_ms,
            "model": MODEL,
            "log_level": args.log_level,
            "history_limit": a.history_limit,
            "summary_batch": a.summary_batch,
            "llm_warm_up_ms": warm_up_ms,
        }

        # warm-up (first call imports litellm, opens HTTP connections, fills caches); not measured
        from bruce.channel import IncomingMessage

        cold = []
        for i in range(args.warmup):
            message = IncomingMessage(channel="bench", chat_id="warmup", sender_id="u1",
                                      text="calculate 2+2" if i % 2 else "hi", platform_message_id=f"w{i}",
                                      timestamp=app.clock.now())
            t0 = time.perf_counter()
            handle = await app.worker.deliver(message)
            await handle  # type: ignore[misc]
            cold.append((time.perf_counter() - t0) * 1000)
        await _idle(app)
        results.meta["first_turn_cold_ms"] = round(cold[0], 1) if cold else None
        results.meta["warmup_turns"] = args.warmup

        profiler = None
        if args.profile:
            import cProfile

            profiler = cProfile.Profile()
            profiler.enable()
        results.scenarios["plain"] = await sequential(
            app, channel, name="plain", turns=args.turns, latency_ms=args.latency_ms, expect_calls=1,
            text=lambda i: f"question number {i}: what is on my calendar today?")
        results.scenarios["one_tool"] = await sequential(
            app, channel, name="tool", turns=args.turns, latency_ms=args.latency_ms, expect_calls=2,
            text=lambda i: f"please calculate {1000 + i}*{37 + i % 11}")
        results.scenarios["plain_stream"] = await sequential(
            app, streaming, name="splain", turns=args.turns, latency_ms=args.latency_ms, expect_calls=1,
            text=lambda i: f"question number {i}: what is on my calendar today?")
        results.scenarios["tool_stream"] = await sequential(
            app, streaming, name="stool", turns=args.turns, latency_ms=args.latency_ms, expect_calls=2,
            text=lambda i: f"please calculate {1000 + i}*{37 + i % 11}")
        results.meta["progress_events_shown"] = len(streaming.events)
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(args.profile)

        rounds = []
        for r in range(args.rounds):
            rounds.append(await burst(app, channel, round_no=r, conversations=args.conversations))
            await _idle(app)
        rates = [x["turns_per_s"] for x in rounds]
        walls = [x["wall_s"] for x in rounds]
        results.throughput = {
            "conversations": args.conversations,
            "rounds": rounds,
            "median_wall_s": round(statistics.median(walls), 4),
            "median_turns_per_s": round(statistics.median(rates), 2),
            "ideal_turns_per_s": round(args.conversations / (args.latency_ms / 1000), 1),
        }
    finally:
        if app is not None:
            await app.stop()
        await server.stop()
        tmp.cleanup()
        devnull.close()
    results.meta["fake_server_requests"] = server.requests
    results.peak_rss_mb = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    return results


# ---- output -----------------------------------------------------------------------------

def table(res: Results) -> str:
    m = res.meta
    lines = [
        f"Bruce turn overhead  ({m['date']}, Python {m['python']}, nproc={m['nproc']}, "
        f"fake LLM latency {m['latency_ms']:g} ms, server={m['server']}, log={m['log_level']})",
        "",
        f"{'scenario':<12} {'metric (ms)':<34} {'p50':>8} {'p99':>8} {'mean':>8} {'max':>8}",
        "-" * 80,
    ]
    labels = [
        ("wall_ms", "wall (deliver + await turn)"),
        ("llm_calls_ms", "llm_calls latency (sum)"),
        ("overhead_bruce_ms", "Bruce = wall - llm_calls"),
        ("overhead_bruce_client_ms", "Bruce+litellm/HTTP = wall - server"),
        ("litellm_client_ms", "litellm/HTTP = llm_calls - server"),
    ]
    for name, sc in res.scenarios.items():
        for key, label in labels:
            d = sc[key]
            lines.append(f"{name:<12} {label:<34} {d['p50']:>8.2f} {d['p99']:>8.2f} {d['mean']:>8.2f} {d['max']:>8.2f}")
        lines.append(f"{'':<10} ({sc['turns']} turns, {sc['llm_calls_per_turn']} LLM call(s)/turn = "
                     f"{sc['server_ms']:g} ms server time; {sc['background_summary_calls']} background summary calls;")
        lines.append(f"{'':<10}  process CPU {sc['process_cpu_ms_per_turn']:.1f} ms/turn incl. summaries)")
        lines.append("")
    t = res.throughput
    lines.append(f"throughput: {t['conversations']} conversations x 1 message at once, {len(t['rounds'])} rounds")
    lines.append("  rounds (turns/s): " + ", ".join(f"{r['turns_per_s']:.1f}" for r in t["rounds"])
                 + "   wall (s): " + ", ".join(f"{r['wall_s']:.3f}" for r in t["rounds"]))
    lines.append("  process CPU per turn (ms): " + ", ".join(f"{r['process_cpu_ms_per_turn']:.1f}" for r in t["rounds"]))
    lines.append(f"  median: {t['median_turns_per_s']:.1f} turns/s, {t['median_wall_s']:.3f} s per burst "
                 f"(ideal with zero overhead: {t['conversations'] / (m['latency_ms'] / 1000):.0f} turns/s)")
    lines.append("")
    lines.append(f"llm warm-up at start: {m.get('llm_warm_up_ms')} ms   "
                 f"first turn: {m['first_turn_cold_ms']} ms   peak RSS: {res.peak_rss_mb} MB   "
                 f"fake server requests: {m['fake_server_requests']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--turns", type=int, default=200, help="sequential turns per scenario (default 200)")
    p.add_argument("--conversations", type=int, default=50, help="concurrent conversations per burst (default 50)")
    p.add_argument("--rounds", type=int, default=4, help="throughput bursts; the median is reported (default 4)")
    p.add_argument("--latency-ms", type=float, default=50.0, help="fake LLM latency per call (default 50)")
    p.add_argument("--warmup", type=int, default=10, help="unmeasured warm-up turns (default 10)")
    p.add_argument("--server", choices=["subprocess", "inproc"], default="subprocess",
                   help="run the fake LLM server in a child process (default) or in Bruce's event loop")
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error", "off"],
                   help="Bruce's log level; lines are rendered as JSON and written to /dev/null (default info)")
    p.add_argument("--profile", metavar="FILE", help="cProfile the sequential scenarios into FILE (pstats)")
    p.add_argument("--json", action="store_true", help="print the results as JSON on stdout (table on stderr)")
    p.add_argument("--serve-fake", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.serve_fake:
        asyncio.run(_serve_fake(args.latency_ms))
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
