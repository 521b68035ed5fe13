"""``proactive_jobs`` and ``job_runs``: what is scheduled, and each firing of it.

A firing is claimed by inserting its ``job_runs`` row, unique on ``(job_id, scheduled_for)``,
before anything is delivered: whichever process or retry claims a run second gets nothing to
do, so a run is delivered at most once, even across a crash between sending and marking. The
claim records its process (``owner``) and, given a lease, succeeds only while that process holds
the scheduler; a claim is released only while the owner its releaser saw still has it."""

from __future__ import annotations

import sqlite3
from dataclasses import fields
from typing import Any

from bruce.records import JobRecord, JobRunRecord
from bruce.store.database import Database
from bruce.store.rows import from_row
from bruce.values import JobRunStatus, JobStatus

__all__ = ["JobStore"]


_LIVE = ("active", "paused")


class JobStore:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def create(self, job: JobRecord, *, dedup_since: str,
                     max_live: int | None = None) -> tuple[JobRecord | None, bool]:
        """Store ``job``, unless a live job of the same person with the same ``dedup_key`` was
        created since ``dedup_since``: then that one (and False). ``(None, False)`` when its
        conversation has ``max_live`` live jobs (active or paused, anyone's) already. One
        transaction, so two identical requests at once make one job, and two at the limit do not
        pass it together."""
        async with self._db.transaction() as db:
            async with db.execute(
                "SELECT * FROM proactive_jobs WHERE dedup_key = ? AND person = ? AND created_at >= ?"
                " AND status IN (?, ?) ORDER BY created_at LIMIT 1",
                (job.dedup_key, job.person, dedup_since, *_LIVE)) as cur:
                found: sqlite3.Row | None = await cur.fetchone()
            if found is not None:
                return from_row(JobRecord, found), False
            if max_live is not None:
                async with db.execute("SELECT count(*) FROM proactive_jobs WHERE conversation_id = ?"
                                      " AND status IN (?, ?)", (job.conversation_id, *_LIVE)) as cur:
                    counted = await cur.fetchone()
                if counted is not None and int(counted[0]) >= max_live:
                    return None, False
            names = [f.name for f in fields(JobRecord)]
            values = [str(job.status) if n == "status" else getattr(job, n) for n in names]
            await db.execute(f"INSERT INTO proactive_jobs ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})",
                             values)
        return job, True

    async def insert_new(self, job: JobRecord) -> bool:
        """Store ``job`` unless a job with its id exists already (False then): a job with a fixed id
        (the configured briefing) is made once, whichever process makes it first."""
        names = [f.name for f in fields(JobRecord)]
        values = [str(job.status) if n == "status" else getattr(job, n) for n in names]
        _, count = await self._db.execute(
            f"INSERT INTO proactive_jobs ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})"
            " ON CONFLICT (id) DO NOTHING", values)
        return count == 1

    async def get(self, job_id: str) -> JobRecord | None:
        row = await self._db.row("SELECT * FROM proactive_jobs WHERE id = ?", (job_id,))
        return from_row(JobRecord, row) if row else None

    async def for_conversation(self, conversation_id: str, *, live_only: bool = True,
                               person: str | None = None) -> list[JobRecord]:
        """The conversation's jobs; given ``person``, only theirs."""
        sql = "SELECT * FROM proactive_jobs WHERE conversation_id = ?"
        params: list[Any] = [conversation_id]
        if person is not None:
            sql += " AND person = ?"
            params.append(person)
        if live_only:
            sql += " AND status IN (?, ?)"
            params += _LIVE
        rows = await self._db.rows(sql + " ORDER BY next_run_at IS NULL, next_run_at, created_at", params)
        return [from_row(JobRecord, r) for r in rows]

    async def all(self, *, live_only: bool = False) -> list[JobRecord]:
        sql = "SELECT * FROM proactive_jobs"
        if live_only:
            sql += " WHERE status IN ('active', 'paused')"
        rows = await self._db.rows(sql + " ORDER BY created_at, id")
        return [from_row(JobRecord, r) for r in rows]

    async def active(self) -> list[JobRecord]:
        rows = await self._db.rows("SELECT * FROM proactive_jobs WHERE status = 'active' ORDER BY next_run_at")
        return [from_row(JobRecord, r) for r in rows]

    async def update(self, job_id: str, *, expect: tuple[str, ...] = _LIVE, expect_next_run_at: str | None = None,
                     **changes: Any) -> bool:
        """Change a job that is in one of the ``expect`` states (and, given ``expect_next_run_at``,
        still due then); False when it is not (any more)."""
        changes = {k: str(v) if isinstance(v, JobStatus) else v for k, v in changes.items()}
        changes["updated_at"] = self._db.now()
        sets = ", ".join(f"{k} = ?" for k in changes)
        marks = ", ".join("?" * len(expect))
        where, params = f"id = ? AND status IN ({marks})", [job_id, *expect]
        if expect_next_run_at is not None:
            where += " AND next_run_at = ?"
            params.append(expect_next_run_at)
        _, count = await self._db.execute(f"UPDATE proactive_jobs SET {sets} WHERE {where}",
                                          (*changes.values(), *params))
        return count == 1

    async def live_count(self, conversation_id: str) -> int:
        """How many jobs of the conversation are live (active or paused)."""
        row = await self._db.row("SELECT count(*) AS n FROM proactive_jobs WHERE conversation_id = ?"
                                 " AND status IN (?, ?)", (conversation_id, *_LIVE))
        return int(row["n"]) if row else 0

    async def mark_held_told(self, job_id: str) -> bool:
        """Note that the owner is being told a run of the job stopped at a tool needing a yes;
        False when they were told already since the job last changed (so they are told once)."""
        _, count = await self._db.execute("UPDATE proactive_jobs SET held_told_at = ? WHERE id = ?"
                                          " AND held_told_at IS NULL", (self._db.now(), job_id))
        return count == 1

    # runs ---------------------------------------------------------------------------------

    async def claim_run(self, job_id: str, scheduled_for: str, *, lateness_ms: int,
                        status: JobRunStatus = JobRunStatus.RUNNING, error: str | None = None,
                        owner: str | None = None, lease: str | None = None) -> int | None:
        """The run's id, or None when this ``(job_id, scheduled_for)`` was claimed before, or when
        ``owner`` no longer holds the ``lease`` (another process took the scheduler over)."""
        now = self._db.now()
        finished = None if status is JobRunStatus.RUNNING else now
        async with self._db.transaction() as db:
            cur = await db.execute(
                "INSERT INTO job_runs (job_id, scheduled_for, started_at, finished_at, status, error, lateness_ms, owner)"
                " SELECT ?, ?, ?, ?, ?, ?, ?, ?"
                " WHERE ? IS NULL OR EXISTS (SELECT 1 FROM leases WHERE name = ? AND owner = ?)"
                " ON CONFLICT (job_id, scheduled_for) DO NOTHING",
                (job_id, scheduled_for, now, finished, str(status), error, lateness_ms, owner, lease, lease, owner))
            return int(cur.lastrowid) if cur.rowcount == 1 and cur.lastrowid else None

    async def release_run(self, run_id: int, *, owner: str | None) -> bool:
        """Forget a claim that delivered nothing (the daemon was stopping, or its process is gone):
        the run fires again. Only while ``owner`` (the claimer the caller saw) still has it."""
        _, count = await self._db.execute("DELETE FROM job_runs WHERE id = ? AND status = 'running' AND owner IS ?",
                                          (run_id, owner))
        return count == 1

    async def due_index(self) -> dict[str, str]:
        """Every active job's next run (job id -> UTC ISO): what the timer must hold."""
        rows = await self._db.rows("SELECT id, next_run_at FROM proactive_jobs WHERE status = 'active'"
                                   " AND next_run_at IS NOT NULL")
        return {str(r["id"]): str(r["next_run_at"]) for r in rows}

    async def reply_of_turn(self, turn_id: str) -> tuple[int, str, str | None] | None:
        """The (message id, status, send error) of the reply a turn stored, if any."""
        row = await self._db.row("SELECT id, status, send_error FROM messages WHERE turn_id = ? AND direction = 'out'"
                                 " ORDER BY id LIMIT 1", (turn_id,))
        return (int(row["id"]), str(row["status"]), row["send_error"]) if row else None

    async def tools_run_in(self, turn_id: str) -> int:
        """How many tool executions a turn recorded or started (a run that acted, or may have, is
        never run again: a call cut off before its audit row left its ``tool_starts`` row)."""
        row = await self._db.row("SELECT (SELECT count(*) FROM tool_executions WHERE turn_id = ?)"
                                 " + (SELECT count(*) FROM tool_starts WHERE turn_id = ? AND status != 'finished') AS n",
                                 (turn_id, turn_id))
        return int(row["n"]) if row else 0

    async def finish_run(self, run_id: int, *, status: JobRunStatus, turn_id: str | None = None,
                         message_id: int | None = None, text: str | None = None, error: str | None = None) -> None:
        await self._db.execute(
            "UPDATE job_runs SET status = ?, finished_at = ?, turn_id = ?, message_id = ?, delivered_text = ?,"
            " error = ? WHERE id = ?", (str(status), self._db.now(), turn_id, message_id, text, error, run_id))

    async def runs(self, job_id: str, *, limit: int = 20) -> list[JobRunRecord]:
        rows = await self._db.rows("SELECT * FROM job_runs WHERE job_id = ? ORDER BY scheduled_for DESC, id DESC"
                                   " LIMIT ?", (job_id, limit))
        return [from_row(JobRunRecord, r) for r in rows]

    async def recent_runs(self, conversation_id: str, *, person: str | None = None,
                          limit: int = 5) -> list[tuple[JobRunRecord, str]]:
        """The conversation's last finished runs, newest first, each with its job's content;
        given ``person``, only their jobs' runs (``/jobs``)."""
        sql = ("SELECT r.*, j.content AS job_content FROM job_runs r JOIN proactive_jobs j ON j.id = r.job_id"
               " WHERE j.conversation_id = ? AND r.finished_at IS NOT NULL")
        params: list[Any] = [conversation_id]
        if person is not None:
            sql += " AND j.person = ?"
            params.append(person)
        rows = await self._db.rows(sql + " ORDER BY r.finished_at DESC, r.id DESC LIMIT ?", [*params, limit])
        return [(from_row(JobRunRecord, r), r["job_content"]) for r in rows]

    async def mark_sent_runs(self) -> int:
        """Runs recorded ``unsent`` whose message the outbox has sent since: ``delivered``. Each such run's
        message is looked up by its id (not every message ever sent listed, as an ``IN`` list would be)."""
        _, count = await self._db.execute(
            "UPDATE job_runs SET status = 'delivered', error = NULL WHERE status = 'unsent' AND EXISTS"
            " (SELECT 1 FROM messages m WHERE m.id = job_runs.message_id AND m.direction = 'out' AND m.status = 'sent')")
        return count

    async def run_for(self, job_id: str, scheduled_for: str) -> JobRunRecord | None:
        row = await self._db.row("SELECT * FROM job_runs WHERE job_id = ? AND scheduled_for = ?", (job_id, scheduled_for))
        return from_row(JobRunRecord, row) if row else None

    async def unfinished_runs(self) -> list[JobRunRecord]:
        """Runs a stopped process left ``running``."""
        rows = await self._db.rows("SELECT * FROM job_runs WHERE status = 'running' ORDER BY id")
        return [from_row(JobRunRecord, r) for r in rows]

    async def outbound_since(self, conversation_id: str, text: str, since: str) -> int | None:
        """The id of an outbound message with exactly ``text`` stored since ``since``, if any: how a
        run interrupted after its message was stored is recognised as delivered."""
        row = await self._db.row("SELECT id FROM messages WHERE conversation_id = ? AND direction = 'out'"
                                 " AND text = ? AND created_at >= ? ORDER BY id LIMIT 1",
                                 (conversation_id, text, since))
        return int(row["id"]) if row else None

    async def turn_for_job(self, job_id: str, since: str) -> tuple[str, str] | None:
        """The (turn id, status) of the job's turn started since ``since``, if any."""
        row = await self._db.row("SELECT id, status FROM turns WHERE job_id = ? AND started_at >= ?"
                                 " ORDER BY started_at LIMIT 1", (job_id, since))
        return (str(row["id"]), str(row["status"])) if row else None

    async def message_status(self, message_id: int) -> tuple[str, str | None] | None:
        row = await self._db.row("SELECT status, send_error FROM messages WHERE id = ?", (message_id,))
        return (str(row["status"]), row["send_error"]) if row else None

    async def senders(self, conversation_id: str) -> frozenset[str]:
        """Everyone who ever wrote in a job's conversation (its inbound messages' senders)."""
        rows = await self._db.rows("SELECT DISTINCT sender_id FROM messages WHERE conversation_id = ?"
                                   " AND direction = 'in' AND sender_id IS NOT NULL", (conversation_id,))
        return frozenset(str(r["sender_id"]) for r in rows)
