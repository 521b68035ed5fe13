"""What does long-term memory cost a reply?

1. Reply overhead, memory on versus off (a burst: turns back to back, so each extraction waits
   for the pause after the burst; and paced: a pause after each turn, in which that turn's
   extraction runs, before the next message): the real app (``build_app``) against
   ``tests.fakes.llm_server.FakeLLMServer`` (in this process; every answer after a fixed latency),
   N sequential turns in one conversation; the time from ``deliver`` to the turn's end (its reply
   sent). With memory on, each turn also starts a background extraction on the same fake model
   (answering one fact), and the prompt carries the ``<memory>`` part. Reported: p50 and p90 of
   both, and the p50 difference (goal: <= 2 ms).
2. Context build with 10 000 stored facts: ``Memory.context()`` (the read path: one indexed
   query, the latest summary, the part built), p50 over many calls (goal: <= 5 ms).

Usage (from the repo root)::

    .venv/bin/python benchmarks/memory_overhead.py [--turns 100] [--rounds 4] [--facts 10000]
        [--latency-ms 20] [--paced-turns 30] [--pace-s 0.6] [--json]
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
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

from bruce.app import build_app  # noqa: E402
from bruce.channel import IncomingMessage  # noqa: E402
from bruce.config.loader import parse_config  # noqa: E402
from bruce.values import FactType  # noqa: E402
from tests.fakes.channel import RecordingChannel  # noqa: E402
from tests.fakes.llm_server import FakeLLMServer, Step  # noqa: E402

FACT_ANSWER = json.dumps([{"type": "preference", "content": "Prefers short answers", "confidence": 0.8}])


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _turns(server: FakeLLMServer, folder: Path, *, memory: bool, turns: int, pace_s: float = 0.0,
                 name: str = "burst") -> list[float]:
    config = parse_config({
        "assistant": {"timezone": "UTC"},
        "llm": {"model": "openai/primary", "api_base": server.base_url, "api_key": "sk-bench-123456", "stream": False},
        "storage": {"path": str(folder / f"bench-{name}-{memory}.db")},
        "admin": {"enabled": False}, "scheduler": {"enabled": False},
        "limits": {"messages_per_minute": 10_000, "messages_per_hour": 100_000},
        "memory": {"enabled": memory, "model": "openai/memory", "extract_after_s": min(2.0, pace_s / 3) or 2.0},
    }, environ={})
    channel = RecordingChannel("bench")
    app = await build_app(config, environ={}, extra_channels=[channel])
    await app.start()
    timings = []
    try:
        for i in range(turns):
            message = IncomingMessage(channel="bench", chat_id="c1", sender_id="u1", text=f"question number {i}",
                                      platform_message_id=None, timestamp=app.clock.now())
            started = time.perf_counter()
            handle = await app.worker.deliver(message)
            assert handle is not None
            await handle
            timings.append((time.perf_counter() - started) * 1000)
            if pace_s:
                await asyncio.sleep(pace_s)  # a pause: the extraction of this message runs now
        await app.worker.wait_idle()
        if app.memory is not None:
            await app.memory.wait_idle()
    finally:
        await app.stop()
    return timings[5:]  # the first turns warm litellm up


async def _context(folder: Path, facts: int, calls: int) -> dict[str, float]:
    from bruce.clock import SystemClock
    from bruce.memory.long_term import Memory, MemorySettings
    from bruce.store import Store

    store = await Store.open(folder / "facts.db", SystemClock())
    try:
        for i in range(facts):
            await store.memory.remember(FactType(["preference", "fact", "project", "progress", "insight"][i % 5]),
                                        f"Fact number {i} about the owner's life and work", confidence=0.8,
                                        origin="owner", conversation_id=None, source_turn_id=None)
        memory = Memory(store=store, llm=None, clock=SystemClock(), settings=MemorySettings())  # type: ignore[arg-type]
        timings = []
        for _ in range(calls):
            started = time.perf_counter()
            part = await memory.context()
            timings.append((time.perf_counter() - started) * 1000)
        assert "Fact number" in part
    finally:
        await store.close()
    return {"facts": facts, "p50_ms": round(statistics.median(timings), 3), "p90_ms": round(_quantile(timings, 0.9), 3)}


async def main(args: argparse.Namespace) -> dict[str, Any]:
    server = FakeLLMServer()
    server.latency_s = args.latency_ms / 1000
    await server.start()

    def respond(body: dict[str, Any]) -> Step:
        return Step.text(FACT_ANSWER if body.get("model") == "memory" else "A short answer.")

    server.responder = respond
    try:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            off: list[float] = []
            on: list[float] = []
            paced_off: list[float] = []
            paced_on: list[float] = []
            for r in range(args.rounds):  # alternating, so that drift of the machine hits both alike
                off += await _turns(server, folder, memory=False, turns=args.turns, name=f"burst{r}")
                on += await _turns(server, folder, memory=True, turns=args.turns, name=f"burst{r}")
                paced_off += await _turns(server, folder, memory=False, turns=args.paced_turns, pace_s=args.pace_s,
                                          name=f"paced{r}")
                paced_on += await _turns(server, folder, memory=True, turns=args.paced_turns, pace_s=args.pace_s,
                                         name=f"paced{r}")
            extractions = len(server.requests_for("memory"))
            context = await _context(folder, args.facts, calls=200)
    finally:
        await server.stop()
    p50_off, p50_on = statistics.median(off), statistics.median(on)
    return {
        "turns": len(on), "model_latency_ms": args.latency_ms,
        "memory_off": {"p50_ms": round(p50_off, 2), "p90_ms": round(_quantile(off, 0.9), 2)},
        "memory_on": {"p50_ms": round(p50_on, 2), "p90_ms": round(_quantile(on, 0.9), 2)},
        "p50_difference_ms": round(p50_on - p50_off, 2), "context_build": context,
        "paced": {"turns": len(paced_on), "pause_s": args.pace_s,
                  "memory_off_p50_ms": round(statistics.median(paced_off), 2),
                  "memory_on_p50_ms": round(statistics.median(paced_on), 2),
                  "p50_difference_ms": round(statistics.median(paced_on) - statistics.median(paced_off), 2)},
        "extraction_calls": extractions,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--facts", type=int, default=10_000)
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--paced-turns", type=int, default=30)
    parser.add_argument("--pace-s", type=float, default=0.6)
    parser.add_argument("--json", action="store_true")
    result = asyncio.run(main(parser.parse_args()))
    if parser.parse_args().json:
        print(json.dumps(result, indent=2))
    else:
        print(f"reply, memory off: p50 {result['memory_off']['p50_ms']} ms, p90 {result['memory_off']['p90_ms']} ms")
        print(f"reply, memory on:  p50 {result['memory_on']['p50_ms']} ms, p90 {result['memory_on']['p90_ms']} ms")
        print(f"p50 difference: {result['p50_difference_ms']} ms (goal <= 2 ms)")
        p = result["paced"]
        print(f"paced ({p['turns']} turns, {p['pause_s']} s apart, each extraction between them): off p50 "
              f"{p['memory_off_p50_ms']} ms, on p50 {p['memory_on_p50_ms']} ms, difference {p['p50_difference_ms']} ms")
        print(f"extraction calls made: {result['extraction_calls']}")
        c = result["context_build"]
        print(f"context build with {c['facts']} facts: p50 {c['p50_ms']} ms, p90 {c['p90_ms']} ms (goal <= 5 ms)")
