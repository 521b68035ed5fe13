"""How fast is the admin overview with a big database?

A database migrated by the real store is seeded (sqlite3, one transaction) with ``--tools``
tool executions (100 000 by default), spread evenly over the last ``--days`` days (30; with
``--days 8`` every row falls in the overview's window: the worst case), and beside them one
turn per two tool runs, two model calls per turn, two messages per turn, 1 % failures, 50
active jobs and 5 pending approvals. The real ``AdminServer`` then listens on a loopback port
and an aiohttp client asks ``GET /`` (the whole page rendered: every panel's query, the budget,
the template) ``--requests`` times, one after another, with the admin token, after five
unmeasured ones (the first, reported apart, reads the 7 days before today, which the page then
keeps for the day, and compiles the templates); the same for ``GET /api/overview`` and each
chart's data. Reported: p50, p95 and max in ms (goal for ``GET /``: <= 50 ms).

Usage (from the repo root)::

    .venv/bin/python benchmarks/overview_page.py [--tools 100000] [--days 30] [--requests 200] [--json]
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
import sqlite3  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from datetime import UTC, datetime, timedelta  # noqa: E402
from zoneinfo import ZoneInfo  # noqa: E402

import aiohttp  # noqa: E402

from bruce.admin import AdminServer  # noqa: E402
from bruce.clock import SystemClock, utc_iso  # noqa: E402
from bruce.llm.budget import Budget  # noqa: E402
from bruce.store import Store  # noqa: E402

TOKEN = "bench-admin-token-0123456789abcdef"
PATHS = ("/", "/api/overview", "/api/charts/tool-runs", "/api/charts/usage", "/api/charts/latency")
TOOL_STATUSES = ("ok",) * 90 + ("cached",) * 6 + ("invalid_args",) * 3 + ("error",)


def _seed(db: Path, tools: int, days: int, now: datetime) -> None:
    con = sqlite3.connect(db)
    span = timedelta(days=days).total_seconds()
    step = span / tools
    with con:
        con.executemany("INSERT INTO conversations (id, channel, chat_id, created_at) VALUES (?, ?, ?, ?)",
                        [(f"telegram:{c}", "telegram", str(c), utc_iso(now - timedelta(days=days))) for c in range(20)])
        turns, calls, messages, runs = [], [], [], []
        for i in range(tools):
            at = now - timedelta(seconds=span - i * step)
            turn, conversation = f"t{i // 2:08d}", f"telegram:{i % 20}"
            runs.append((turn, conversation, f"c{i}", "clock.now", "read", "{}", "{}", TOOL_STATUSES[i % 100],
                         "boom" if TOOL_STATUSES[i % 100] == "error" else None, 3.0, "chat", utc_iso(at)))
            if i % 2 == 0:
                failed = i % 200 == 0
                turns.append((turn, conversation, "chat", "failed" if failed else "ok", "boom" if failed else None,
                               utc_iso(at - timedelta(seconds=2)), utc_iso(at + timedelta(seconds=1))))
                for seq in (1, 2):
                    calls.append((turn, seq, "openai/gpt-4o-mini", "error" if failed and seq == 2 else "ok",
                                  400.0 + (i % 37) * 20, 900, 120, 0.0002, utc_iso(at + timedelta(seconds=seq - 2))))
                messages += [(conversation, "in", "user", "hi", "done", utc_iso(at - timedelta(seconds=2))),
                             (conversation, "out", "assistant", "hello", "sent", utc_iso(at + timedelta(seconds=1)))]
        con.executemany("INSERT INTO turns (id, conversation_id, source, status, error, started_at, finished_at)"
                        " VALUES (?, ?, ?, ?, ?, ?, ?)", turns)
        con.executemany("INSERT INTO llm_calls (turn_id, seq, model, status, latency_ms, prompt_tokens,"
                        " completion_tokens, cost_usd, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", calls)
        con.executemany("INSERT INTO messages (conversation_id, direction, role, text, status, created_at, updated_at)"
                        " VALUES (?, ?, ?, ?, ?, ?, ?6)", messages)
        con.executemany("INSERT INTO tool_executions (turn_id, conversation_id, call_id, tool_name, risk, input,"
                        " output, status, error, latency_ms, source, created_at)"
                        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", runs)
        con.executemany("INSERT INTO proactive_jobs (id, conversation_id, execution_mode, content, schedule_kind,"
                        " schedule_value, timezone, description, status, next_run_at, anchor_at, dedup_key,"
                        " created_at, updated_at) VALUES (?, 'telegram:0', 'message', 'Water the plants', 'cron',"
                        " '0 8 * * *', 'UTC', 'At 08:00', 'active', ?, ?, ?, ?, ?)",
                        [(f"j{j}", utc_iso(now + timedelta(hours=j)), utc_iso(now), f"d{j}", utc_iso(now),
                          utc_iso(now)) for j in range(50)])
        con.executemany("INSERT INTO pending_confirmations (id, conversation_id, tool_name, arguments, status,"
                        " created_at, expires_at) VALUES (?, 'telegram:0', 'files.write', '{}', 'pending', ?, ?)",
                        [(f"p{j}", utc_iso(now), utc_iso(now + timedelta(minutes=10 + j))) for j in range(5)])
    con.execute("ANALYZE")
    con.close()


def _stats(times: list[float]) -> dict[str, float]:
    ordered = sorted(times)
    return {"p50_ms": round(ordered[len(ordered) // 2], 2), "p95_ms": round(ordered[int(len(ordered) * 0.95)], 2),
            "max_ms": round(ordered[-1], 2)}


async def run(tools: int, days: int, requests: int) -> dict[str, object]:
    clock = SystemClock()
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "bruce.db"
        store = await Store.open(db, clock)
        await store.migrate()
        await store.close()
        started = time.perf_counter()
        _seed(db, tools, days, clock.now().astimezone(UTC))
        seeded_s = time.perf_counter() - started
        store = await Store.open(db, clock)
        zone = ZoneInfo("Europe/Berlin")
        budget = Budget(store=store, clock=clock, zone=zone, daily_usd=1.0, daily_tokens=None)
        server = AdminServer(store=store, clock=clock, token=TOKEN, host="127.0.0.1", port=0, budget=budget,
                             zone=zone)
        base = await server.start()
        found: dict[str, object] = {"tools": tools, "days": days, "requests": requests, "seed_s": round(seeded_s, 1),
                                    "db_mb": round(db.stat().st_size / 2**20, 1)}
        try:
            async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {TOKEN}"}) as http:
                for path in PATHS:
                    first = 0.0
                    for n in range(5):  # warm: the first reads the days before today, and compiles the templates
                        t0 = time.perf_counter()
                        async with http.get(base + path) as response:
                            assert response.status == 200, (path, response.status)
                            await response.read()
                        first = first if n else (time.perf_counter() - t0) * 1000
                    times = []
                    for _ in range(requests):
                        t0 = time.perf_counter()
                        async with http.get(base + path) as response:
                            await response.read()
                        times.append((time.perf_counter() - t0) * 1000)
                    found[path] = {**_stats(times), "first_ms": round(first, 2)}
        finally:
            await server.stop()
            await store.close()
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tools", type=int, default=100_000)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    found = asyncio.run(run(args.tools, args.days, args.requests))
    if args.json:
        print(json.dumps(found, indent=2))
        return
    print(f"{found['tools']:,} tool runs over {found['days']} days (seeded in {found['seed_s']} s, "
          f"{found['db_mb']} MiB); {found['requests']} requests each, one after another")
    for path in PATHS:
        s = found[path]
        assert isinstance(s, dict)
        print(f"  GET {path:<24} p50 {s['p50_ms']:7.2f} ms  p95 {s['p95_ms']:7.2f} ms  max {s['max_ms']:7.2f} ms"
              f"  (first {s['first_ms']:.1f} ms)")


if __name__ == "__main__":
    main()
