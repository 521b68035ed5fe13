"""How late do reminders arrive, and how long does start-up take with many stored jobs?

Runs the real app (``build_app``: store, scheduler on APScheduler, worker, outbox) with the
system clock and a recording channel that notes when each text reaches it:

1. lateness: ``--jobs`` message-mode jobs (1,000 by default), spread over ``--window-s`` seconds
   (60) starting a few seconds from now, in 100 conversations, created through ``JobBook`` as the
   ``proactive.create`` tool does. For each: delivery lateness (the channel received the text
   minus the scheduled instant) and firing lateness (``job_runs.lateness_ms``: the scheduler
   started the run minus the scheduled instant). p50, p99 and max.
2. start-up: a database holding ``--stored`` jobs (10,000) with their next runs spread over the
   coming week (daily crons, intervals and one-offs), written straight into ``proactive_jobs``;
   then ``build_app`` + ``App.start`` timed with the scheduler on, and again with it off (the
   difference is the scheduler's own start-up: lock, settling, catch-up, arming every job).

Usage (from the repo root)::

    .venv/bin/python benchmarks/scheduler_load.py [--jobs 1000] [--window-s 60] [--stored 10000] [--json]
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
import random  # noqa: E402
import resource  # noqa: E402
import sqlite3  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from datetime import UTC, datetime, timedelta  # noqa: E402
from typing import Any  # noqa: E402

import structlog  # noqa: E402

from benchmarks.turn_overhead import describe as _describe  # noqa: E402  (the same percentiles)

CONVERSATIONS = 100


def describe(values: list[float]) -> dict[str, float]:
    return {k: round(v, 1) for k, v in _describe(values).items()}


def config_for(db: Path, *, scheduler: bool = True) -> Any:
    from bruce.config.loader import parse_config

    return parse_config({
        "assistant": {"timezone": "UTC"},
        "llm": {"model": "openai/unused", "api_base": "http://127.0.0.1:9", "api_key": "sk-bench-000000"},
        "storage": {"path": str(db)},
        "console": {"socket_path": str(db.parent / "console.sock")},
        "scheduler": {"enabled": scheduler},
    }, environ={})


class TimedChannel:
    """A recording channel that notes the wall time each text arrived."""

    def __init__(self) -> None:
        from tests.fakes.channel import RecordingChannel

        self.inner = RecordingChannel("bench")
        self.received: dict[str, float] = {}
        self.name = "bench"
        self.max_message_length = 4096

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def send_text(self, chat_id: str, text: str) -> None:
        self.received[text] = time.time()


async def lateness(jobs: int, window_s: float, work: Path) -> dict[str, Any]:
    from bruce.app import build_app
    from bruce.values import ConversationId

    channel = TimedChannel()
    app = await build_app(config_for(work / "lateness.db"), extra_channels=[channel])  # type: ignore[list-item]
    await app.start()
    try:
        start = datetime.now(UTC) + timedelta(seconds=5)
        rng = random.Random(7)
        due: dict[str, datetime] = {}
        made = time.perf_counter()
        for i in range(jobs):
            at = start + timedelta(seconds=rng.uniform(0, window_s))
            text = f"reminder {i}"
            await app.jobs.create(ConversationId("bench", f"c{i % CONVERSATIONS}"),
                                  {"execution_mode": "message", "content": text, "at": at.isoformat()})
            due[text] = at
        created_s = time.perf_counter() - made
        deadline = time.time() + window_s + 60
        while len(channel.received) < jobs and time.time() < deadline:
            await asyncio.sleep(0.2)
        assert app.scheduler is not None
        await app.scheduler.wait_idle()
        delivered = [(channel.received[t] - due[t].timestamp()) * 1000 for t in due if t in channel.received]
        con = sqlite3.connect(work / "lateness.db")
        fired = [float(r[0]) for r in con.execute("SELECT lateness_ms FROM job_runs")]
        doubled = con.execute("SELECT count(*) FROM messages WHERE direction = 'out'").fetchone()[0] - len(delivered)
        con.close()
    finally:
        await app.stop()
    return {"jobs": jobs, "window_s": window_s, "delivered": len(delivered), "extra_messages": doubled,
            "create_ms_per_job": round(created_s * 1000 / jobs, 2),
            "delivery_lateness_ms": describe(delivered), "firing_lateness_ms": describe(fired)}


def store_jobs(db: Path, count: int) -> None:
    """``count`` jobs with their next runs over the coming week, written in one transaction."""
    now = datetime.now(UTC)
    rng = random.Random(11)
    con = sqlite3.connect(db)
    rows = []
    stamp = now.isoformat(timespec="microseconds")
    for i in range(count):
        cid = f"bench:c{i % CONVERSATIONS}"
        kind = ("cron", "every", "at")[i % 3]
        nxt = now + timedelta(seconds=rng.uniform(60, 7 * 86400))
        value = {"cron": f"{nxt.minute} {nxt.hour} * * *", "every": "86400",
                 "at": nxt.isoformat(timespec="microseconds")}[kind]
        rows.append((f"{i:010x}", cid, "message", f"stored reminder {i}", kind, value, "UTC", "always",
                     "bench", "active", nxt.isoformat(timespec="microseconds"), nxt.isoformat(timespec="microseconds"),
                     0, None, f"k{i}", stamp, stamp))
    with con:
        con.executemany("INSERT OR IGNORE INTO conversations (id, channel, chat_id, created_at) VALUES (?, 'bench', ?, ?)",
                        [(f"bench:c{c}", f"c{c}", stamp) for c in range(CONVERSATIONS)])
        # the columns named: one a later migration adds (trust, person) takes its default
        con.executemany("INSERT INTO proactive_jobs (id, conversation_id, execution_mode, content, schedule_kind,"
                        " schedule_value, timezone, notify, description, status, next_run_at, anchor_at, failures,"
                        " flagged, dedup_key, created_at, updated_at)"
                        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
    con.close()


async def start_up(stored: int, work: Path) -> dict[str, Any]:
    from bruce.app import build_app

    db = work / "startup.db"
    app = await build_app(config_for(db))  # creates the schema
    await app.store.close()
    store_jobs(db, stored)
    timings: dict[str, list[float]] = {"with_scheduler_ms": [], "without_scheduler_ms": []}
    armed = 0
    for _ in range(3):
        for key, on in (("with_scheduler_ms", True), ("without_scheduler_ms", False)):
            began = time.perf_counter()
            app = await build_app(config_for(db, scheduler=on), extra_channels=[TimedChannel()])  # type: ignore[list-item]
            await app.start()
            timings[key].append((time.perf_counter() - began) * 1000)
            if on and app.scheduler is not None:
                armed = len(app.scheduler._armed)
            await app.stop()
    best = {k: round(min(v), 1) for k, v in timings.items()}
    return {"stored_jobs": stored, "armed": armed, **best,
            "scheduler_ms": round(best["with_scheduler_ms"] - best["without_scheduler_ms"], 1)}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--window-s", type=float, default=60.0)
    parser.add_argument("--stored", type=int, default=10000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(40))  # errors only
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        results = {
            "meta": {"when": datetime.now(UTC).isoformat(timespec="seconds"), "python": platform.python_version(),
                     "cpus": os.cpu_count(), "machine": platform.machine()},
            "start_up": await start_up(args.stored, work),
            "lateness": await lateness(args.jobs, args.window_s, work),
        }
    results["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    if args.json:
        print(json.dumps(results, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title="Scheduler load")
    table.add_column("measure")
    table.add_column("value", justify="right")
    late = results["lateness"]
    for name in ("delivery_lateness_ms", "firing_lateness_ms"):
        for stat in ("p50", "p99", "max"):
            table.add_row(f"{name} {stat} ({late['jobs']} jobs in {late['window_s']:.0f} s)", str(late[name][stat]))
    table.add_row("delivered / extra messages", f"{late['delivered']} / {late['extra_messages']}")
    table.add_row("create, ms per job", str(late["create_ms_per_job"]))
    s = results["start_up"]
    table.add_row(f"start-up with {s['stored_jobs']} stored jobs, ms", str(s["with_scheduler_ms"]))
    table.add_row("start-up without the scheduler, ms", str(s["without_scheduler_ms"]))
    table.add_row("scheduler's share, ms", str(s["scheduler_ms"]))
    table.add_row("peak RSS, MB", str(results["peak_rss_mb"]))
    Console().print(table)


if __name__ == "__main__":
    asyncio.run(main())
