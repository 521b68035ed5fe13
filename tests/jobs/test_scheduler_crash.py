"""kill -9 while reminders fire: the real daemon (``bruce run``) is killed at random moments
while a hundred reminders are going out, started again, killed again, and finally left to
finish. Every reminder is then stored exactly once, and every job has exactly one run."""

from __future__ import annotations

import asyncio
import json
import random
import signal
from pathlib import Path
from zoneinfo import ZoneInfo

from bruce.clock import SystemClock
from bruce.jobs.book import JobBook
from bruce.runtime.console_wire import CHAT_ID
from bruce.store import Store
from bruce.values import ConversationId
from tests.cli.test_main import BRUCE, clean_env, write_config
from tests.fakes.llm_server import closed_base_url
from tests.helpers import db_rows

JOBS = 100
ADMIN = "http://127.0.0.1:8765"  # the admin page, where links to artifacts point


async def start_daemon(config: Path) -> tuple[asyncio.subprocess.Process, asyncio.Task[None]]:
    """``bruce run``, once its scheduler has started; its log is drained so it never blocks."""
    proc = await asyncio.create_subprocess_exec(*BRUCE, "--config", str(config), "run", stdout=asyncio.subprocess.DEVNULL,
                                                stderr=asyncio.subprocess.PIPE, env=clean_env(), cwd=config.parent)
    assert proc.stderr is not None
    while True:
        raw = await asyncio.wait_for(proc.stderr.readline(), 60)
        assert raw, "bruce run exited early"
        if raw.startswith(b"{") and json.loads(raw).get("event") in ("scheduler.started", "scheduler.not_started"):
            assert json.loads(raw)["event"] == "scheduler.started"
            break

    async def drain() -> None:
        assert proc.stderr is not None
        while await proc.stderr.readline():
            pass

    return proc, asyncio.create_task(drain())


async def stop(proc: asyncio.subprocess.Process, drain: asyncio.Task[None], signum: int) -> None:
    if proc.returncode is None:
        proc.send_signal(signum)
    await asyncio.wait_for(proc.wait(), 60)
    await asyncio.wait_for(drain, 10)


def settled(db: Path) -> bool:
    left = db_rows(db, "SELECT count(*) AS n FROM proactive_jobs WHERE status = 'active'")[0]["n"]
    running = db_rows(db, "SELECT count(*) AS n FROM job_runs WHERE status = 'running'")[0]["n"]
    return left == 0 and running == 0


async def test_kill_9_while_reminders_fire_neither_loses_nor_doubles_one(tmp_path):
    config = write_config(tmp_path, {"model": "openai/primary", "api_base": closed_base_url(), "api_key": "sk-test-123456"})
    db = tmp_path / "bruce.db"
    store = await Store.open(db, SystemClock())
    try:
        book = JobBook(store=store, clock=SystemClock(), zone=ZoneInfo("UTC"), admin_base_url=ADMIN,
                       max_live_jobs=JOBS)
        for i in range(JOBS):
            await book.create(ConversationId("console", CHAT_ID), {"execution_mode": "message", "content": f"reminder {i}",
                                                     "in_seconds": 1})
    finally:
        await store.close()
    await asyncio.sleep(1.2)  # all due: each start fires what is left
    rng = random.Random()
    for _ in range(2):
        proc, drain = await start_daemon(config)
        await asyncio.sleep(rng.uniform(0.1, 2.0))  # somewhere in the middle of the firing
        await stop(proc, drain, signal.SIGKILL)
    proc, drain = await start_daemon(config)
    try:
        for _ in range(300):
            if settled(db):
                break
            await asyncio.sleep(0.1)
    finally:
        await stop(proc, drain, signal.SIGTERM)
    assert proc.returncode == 0
    assert settled(db)
    stored = db_rows(db, "SELECT text, count(*) AS n FROM messages WHERE direction = 'out' GROUP BY text")
    assert {r["text"]: r["n"] for r in stored} == {f"reminder {i}": 1 for i in range(JOBS)}
    runs = db_rows(db, "SELECT job_id, count(*) AS n, max(status) AS status FROM job_runs GROUP BY job_id")
    assert len(runs) == JOBS and all(r["n"] == 1 for r in runs)
    # no terminal is attached to the console: each reminder is kept unsent, for the next `bruce chat`
    assert {r["status"] for r in runs} <= {"delivered", "unsent"}
    assert {r["status"] for r in db_rows(db, "SELECT status FROM proactive_jobs")} == {"done"}
