"""The one database: aiosqlite over SQLite in WAL mode, schema from ``migrations``.

Only this module runs SQL. Every write commits before it returns, so what a caller was told
is stored survives a crash.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiosqlite
import structlog

from bruce.clock import Clock, utc_iso
from bruce.errors import StoreError
from bruce.migrations import MIGRATIONS

__all__ = ["Store", "StoredMessage", "Summary", "LLMCallRecord", "ToolExecutionRecord"]

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class StoredMessage:
    id: int
    conversation_id: str
    direction: str
    role: str
    kind: str
    sender_id: str | None
    text: str
    platform_message_id: str | None
    status: str
    created_at: str


@dataclass(frozen=True, slots=True)
class Summary:
    summary: str
    up_to_message_id: int
    created_at: str


@dataclass(frozen=True, slots=True)
class LLMCallRecord:
    turn_id: str
    seq: int
    model: str
    status: str
    latency_ms: float
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cost_usd: float | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class ToolExecutionRecord:
    turn_id: str | None
    conversation_id: str | None
    call_id: str | None
    tool_name: str
    risk: str | None
    input: Any
    output: Any
    status: str
    error: str | None
    latency_ms: float
    source: str
    idempotency_key: str | None = None


_MESSAGE_COLUMNS = (
    "id, conversation_id, direction, role, kind, sender_id, text, platform_message_id, status, created_at"
)

_IN_CONVERSATION = "kind = 'chat' AND status != 'expired' AND NOT (direction = 'out' AND status = 'failed')"


class Store:
    """Async access to Bruce's SQLite database. Open with ``await Store.open(path, clock)``."""

    def __init__(self, db: aiosqlite.Connection, clock: Clock) -> None:
        self._db = db
        self._clock = clock
        self._known_conversations: set[str] = set()
        self._write_lock = asyncio.Lock()

    @classmethod
    async def open(cls, path: Path | str, clock: Clock) -> Store:
        path = Path(path)
        try:
            if str(path) != ":memory:":
                path.parent.mkdir(parents=True, exist_ok=True)
            db = await aiosqlite.connect(path)
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"cannot open database {path}: {exc}") from exc
        store = cls(db, clock)
        try:
            await store._prepare()
        except BaseException:
            await db.close()
            raise
        return store

    async def _prepare(self) -> None:
        db = self._db
        db.row_factory = sqlite3.Row
        await db.execute("PRAGMA journal_mode=WAL")
        await db.execute("PRAGMA foreign_keys=ON")
        await db.execute("PRAGMA busy_timeout=5000")
        await db.execute("PRAGMA synchronous=NORMAL")
        await self.migrate()

    async def migrate(self) -> int:
        """Apply the migrations this database has not seen; return the schema version."""
        async with self._db.execute("PRAGMA user_version") as cur:
            row = await cur.fetchone()
        version = int(row[0]) if row else 0
        if version > len(MIGRATIONS):
            raise StoreError(
                f"database schema version {version} is newer than this Bruce ({len(MIGRATIONS)})"
            )
        for target, script in enumerate(MIGRATIONS[version:], start=version + 1):
            await self._db.executescript(
                f"BEGIN IMMEDIATE;\n{script}\nPRAGMA user_version = {target};\nCOMMIT;"
            )
            log.info("store.migrated", version=target)
        return len(MIGRATIONS)

    async def close(self) -> None:
        await self._db.close()

    def _now(self) -> str:
        return utc_iso(self._clock.now())

    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[aiosqlite.Connection]:
        """One atomic unit of writes. The connection is shared, so writers take turns: without
        the lock, another coroutine's commit could land in the middle of this transaction."""
        async with self._write_lock:
            try:
                yield self._db
                await self._db.commit()
            except sqlite3.Error as exc:
                await self._db.rollback()
                raise StoreError(f"database write failed: {exc}") from exc
            except BaseException:
                await self._db.rollback()
                raise

    async def _execute(self, sql: str, params: Sequence[Any] = ()) -> tuple[int, int]:
        """Run one write in its own transaction; return (lastrowid, rowcount)."""
        async with self._transaction() as db:
            cur = await db.execute(sql, params)
        return int(cur.lastrowid or 0), cur.rowcount

    async def _write(self, sql: str, params: Sequence[Any] = ()) -> int:
        return (await self._execute(sql, params))[0]

    async def fetch_all(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        return [dict(r) for r in await self._db.execute_fetchall(sql, params)]

    async def _fetch_one(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Row | None:
        rows = list(await self._db.execute_fetchall(sql, params))
        return rows[0] if rows else None

    # conversations and messages ------------------------------------------------------------

    async def ensure_conversation(self, conversation_id: str, channel: str, chat_id: str) -> None:
        if conversation_id in self._known_conversations:
            return
        await self._write(
            "INSERT OR IGNORE INTO conversations (id, channel, chat_id, created_at) VALUES (?, ?, ?, ?)",
            (conversation_id, channel, chat_id, self._now()),
        )
        self._known_conversations.add(conversation_id)

    async def add_inbound(
        self,
        conversation_id: str,
        *,
        sender_id: str,
        text: str,
        platform_message_id: str | None,
        received_at: str | None = None,
    ) -> tuple[int, bool]:
        """Store a user's message as pending. Returns (id, is_new); a redelivered platform
        message id returns the stored row instead of a duplicate."""
        now = self._now()
        new_id, inserted = await self._execute(
            "INSERT OR IGNORE INTO messages (conversation_id, direction, role, sender_id, text,"
            " platform_message_id, status, created_at, updated_at)"
            " VALUES (?, 'in', 'user', ?, ?, ?, 'pending', ?, ?)",
            (conversation_id, sender_id, text, platform_message_id, received_at or now, now),
        )
        if inserted:
            return new_id, True
        row = await self._fetch_one(
            "SELECT id FROM messages WHERE conversation_id = ? AND platform_message_id = ? AND direction = 'in'",
            (conversation_id, platform_message_id),
        )
        assert row is not None
        return int(row["id"]), False

    async def add_outbound(
        self, conversation_id: str, text: str, *, turn_id: str | None, kind: str = "chat",
        inbound_id: int | None = None, inbound_status: str = "done",
    ) -> int:
        """Store a reply as pending (to be sent). With ``inbound_id``, the message it answers is
        closed in the same transaction: a crash can neither lose the reply nor answer twice."""
        now = self._now()
        async with self._transaction() as db:
            cur = await db.execute(
                "INSERT INTO messages (conversation_id, direction, role, kind, text, turn_id, status,"
                " created_at, updated_at) VALUES (?, 'out', 'assistant', ?, ?, ?, 'pending', ?, ?)",
                (conversation_id, kind, text, turn_id, now, now),
            )
            if inbound_id is not None:
                await db.execute(
                    "UPDATE messages SET status = ?, updated_at = ?, turn_id = COALESCE(?, turn_id) WHERE id = ?",
                    (inbound_status, now, turn_id, inbound_id),
                )
        return int(cur.lastrowid or 0)

    async def set_message_status(self, message_id: int, status: str, *, turn_id: str | None = None) -> None:
        await self._write(
            "UPDATE messages SET status = ?, updated_at = ?, turn_id = COALESCE(?, turn_id) WHERE id = ?",
            (status, self._now(), turn_id, message_id),
        )

    async def message(self, message_id: int) -> StoredMessage | None:
        row = await self._fetch_one(f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE id = ?", (message_id,))
        return StoredMessage(**dict(row)) if row else None

    async def history(
        self, conversation_id: str, *, limit: int, up_to_id: int, after_id: int = 0,
    ) -> list[StoredMessage]:
        """The last ``limit`` chat messages with ``after_id < id <= up_to_id``, oldest first.
        Notices (error apologies), replies that failed to send and expired messages are not
        part of the conversation; a user's message stays even if its turn failed."""
        rows = await self.fetch_all(
            f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE conversation_id = ? AND id <= ? AND id > ?"
            f" AND {_IN_CONVERSATION}"
            " ORDER BY id DESC LIMIT ?",
            (conversation_id, up_to_id, after_id, limit),
        )
        return [StoredMessage(**r) for r in reversed(rows)]

    async def last_message_id(self, conversation_id: str) -> int:
        row = await self._fetch_one("SELECT MAX(id) AS id FROM messages WHERE conversation_id = ?", (conversation_id,))
        return int(row["id"]) if row and row["id"] is not None else 0

    async def previous_message_time(self, conversation_id: str, before_id: int) -> str | None:
        row = await self._fetch_one(
            "SELECT created_at FROM messages WHERE conversation_id = ? AND id < ? ORDER BY id DESC LIMIT 1",
            (conversation_id, before_id),
        )
        return str(row["created_at"]) if row else None

    async def messages_to_fold(self, conversation_id: str, *, keep_last: int) -> list[StoredMessage]:
        """Chat messages older than the last ``keep_last`` and not yet in a summary."""
        summary = await self.latest_summary(conversation_id)
        after = summary.up_to_message_id if summary else 0
        rows = await self.fetch_all(
            f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE conversation_id = ? AND id > ?"
            f" AND {_IN_CONVERSATION} AND status != 'pending'"
            " ORDER BY id DESC LIMIT -1 OFFSET ?",
            (conversation_id, after, keep_last),
        )
        return [StoredMessage(**r) for r in reversed(rows)]

    async def messages_with_status(self, direction: str, status: str, *, up_to_id: int) -> list[StoredMessage]:
        """E.g. ("in", "pending"): messages a crash left unanswered; ("out", "pending"): unsent replies."""
        rows = await self.fetch_all(
            f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE direction = ? AND status = ? AND id <= ? ORDER BY id",
            (direction, status, up_to_id),
        )
        return [StoredMessage(**r) for r in rows]

    # summaries -----------------------------------------------------------------------------

    async def latest_summary(self, conversation_id: str) -> Summary | None:
        row = await self._fetch_one(
            "SELECT summary, up_to_message_id, created_at FROM session_summaries"
            " WHERE conversation_id = ? ORDER BY id DESC LIMIT 1",
            (conversation_id,),
        )
        return Summary(**dict(row)) if row else None

    async def add_summary(self, conversation_id: str, summary: str, *, up_to_message_id: int) -> None:
        await self._write(
            "INSERT INTO session_summaries (conversation_id, summary, up_to_message_id, created_at)"
            " VALUES (?, ?, ?, ?)",
            (conversation_id, summary, up_to_message_id, self._now()),
        )

    # turns, llm calls, tool executions ----------------------------------------------------

    async def start_turn(
        self, turn_id: str, conversation_id: str, *, source: str, inbound_message_id: int | None
    ) -> None:
        await self._write(
            "INSERT INTO turns (id, conversation_id, inbound_message_id, source, status, started_at)"
            " VALUES (?, ?, ?, ?, 'running', ?)",
            (turn_id, conversation_id, inbound_message_id, source, self._now()),
        )

    async def finish_turn(
        self,
        turn_id: str,
        *,
        status: str,
        llm_turns: int = 0,
        tool_calls: int = 0,
        hit_ceiling: bool = False,
        stopped_repeat: bool = False,
        error: str | None = None,
    ) -> None:
        await self._write(
            "UPDATE turns SET status = ?, llm_turns = ?, tool_calls = ?, hit_ceiling = ?,"
            " stopped_repeat = ?, error = ?, finished_at = ? WHERE id = ?",
            (status, llm_turns, tool_calls, int(hit_ceiling), int(stopped_repeat), error, self._now(), turn_id),
        )

    async def complete_turn(
        self, turn_id: str, *, inbound_id: int, conversation_id: str, reply: str, llm_turns: int, tool_calls: int,
        hit_ceiling: bool = False, stopped_repeat: bool = False, error: str | None = None,
    ) -> int:
        """Store the reply (pending, to be sent), close the message and the turn: all or nothing,
        so a crash can neither lose the reply nor answer the message twice. With ``error`` the
        turn failed and the reply is a notice (kept out of the model's history)."""
        now = self._now()
        failed = error is not None
        async with self._transaction() as db:
            cur = await db.execute(
                "INSERT INTO messages (conversation_id, direction, role, kind, text, turn_id, status,"
                " created_at, updated_at) VALUES (?, 'out', 'assistant', ?, ?, ?, 'pending', ?, ?)",
                (conversation_id, "notice" if failed else "chat", reply, turn_id, now, now),
            )
            await db.execute("UPDATE messages SET status = ?, updated_at = ?, turn_id = ? WHERE id = ?",
                             ("failed" if failed else "done", now, turn_id, inbound_id))
            await db.execute(
                "UPDATE turns SET status = ?, llm_turns = ?, tool_calls = ?, hit_ceiling = ?, stopped_repeat = ?,"
                " error = ?, finished_at = ? WHERE id = ?",
                ("failed" if failed else "ok", llm_turns, tool_calls, int(hit_ceiling), int(stopped_repeat), error,
                 now, turn_id),
            )
        return int(cur.lastrowid or 0)

    async def actions_for_message(self, message_id: int) -> list[dict[str, Any]]:
        """Tool calls that acted (or asked for approval) in turns that handled this message, dry
        runs excepted: what a crash interrupted, so that the message is not blindly redone."""
        return await self.fetch_all(
            "SELECT te.tool_name, te.status, json_extract(te.output, '$.confirmation_id') AS confirmation_id"
            " FROM tool_executions te JOIN turns t ON te.turn_id = t.id"
            " WHERE t.inbound_message_id = ? AND te.status IN ('ok', 'awaiting_confirmation')"
            " AND COALESCE(json_extract(te.output, '$.dry_run'), 0) = 0 ORDER BY te.id",
            (message_id,),
        )

    async def fail_running_turns(self, message_id: int, *, error: str) -> None:
        await self._write(
            "UPDATE turns SET status = 'failed', error = ?, finished_at = ? WHERE inbound_message_id = ?"
            " AND status = 'running'",
            (error, self._now(), message_id),
        )

    async def max_message_id(self) -> int:
        row = await self._fetch_one("SELECT MAX(id) AS id FROM messages")
        return int(row["id"]) if row and row["id"] is not None else 0

    async def record_llm_call(self, call: LLMCallRecord) -> None:
        await self._write(
            "INSERT INTO llm_calls (turn_id, seq, model, status, latency_ms, prompt_tokens,"
            " completion_tokens, cost_usd, error, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                call.turn_id, call.seq, call.model, call.status, round(call.latency_ms, 3),
                call.prompt_tokens, call.completion_tokens, call.cost_usd, call.error, self._now(),
            ),
        )

    async def record_tool_execution(self, rec: ToolExecutionRecord) -> int:
        return await self._write(
            "INSERT INTO tool_executions (turn_id, conversation_id, call_id, tool_name, risk, input,"
            " output, status, error, latency_ms, source, idempotency_key, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                rec.turn_id, rec.conversation_id, rec.call_id, rec.tool_name, rec.risk,
                _json(rec.input), None if rec.output is None else _json(rec.output), rec.status,
                rec.error, round(rec.latency_ms, 3), rec.source, rec.idempotency_key, self._now(),
            ),
        )

    # confirmations ------------------------------------------------------------------------

    async def add_confirmation(
        self, *, confirmation_id: str, conversation_id: str, user_id: str | None, turn_id: str | None,
        call_id: str | None, tool_name: str, arguments: Any, preview: Any, step_up: bool, expires_at: str,
    ) -> None:
        await self._write(
            "INSERT INTO pending_confirmations (id, conversation_id, user_id, turn_id, call_id, tool_name,"
            " arguments, preview, step_up, status, created_at, expires_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?)",
            (confirmation_id, conversation_id, user_id, turn_id, call_id, tool_name, _json(arguments),
             None if preview is None else _json(preview), int(step_up), self._now(), expires_at),
        )

    async def confirmation(self, confirmation_id: str) -> dict[str, Any] | None:
        found = await self.fetch_all("SELECT * FROM pending_confirmations WHERE id = ?", (confirmation_id,))
        return found[0] if found else None

    async def move_confirmation(
        self, confirmation_id: str, *, from_status: str, to_status: str, via: str | None = None,
        unexpired_at: str | None = None,
    ) -> bool:
        """Atomically move a confirmation between states; False if it was not in ``from_status``
        (or, with ``unexpired_at``, had expired by then). This is what makes a decision single use."""
        sql = (
            "UPDATE pending_confirmations SET status = ?, decided_at = COALESCE(decided_at, ?),"
            " decided_via = COALESCE(?, decided_via) WHERE id = ? AND status = ?"
        )
        params: list[Any] = [to_status, self._now(), via, confirmation_id, from_status]
        if unexpired_at is not None:
            sql += " AND expires_at > ?"
            params.append(unexpired_at)
        return (await self._execute(sql, params))[1] == 1

    async def finish_confirmation(
        self, confirmation_id: str, *, status: str, result: Any, report: str | None = None,
        conversation_id: str | None = None, turn_id: str | None = None, inbound_id: int | None = None,
    ) -> int | None:
        """Record what an approved action did. With ``report``, the user's report of it is stored
        (pending, to be sent) in the same transaction, and the decision message is closed: once
        the action is recorded, its report can no longer be lost to a crash."""
        now = self._now()
        async with self._transaction() as db:
            await db.execute("UPDATE pending_confirmations SET status = ?, result = ? WHERE id = ?",
                             (status, _json(result), confirmation_id))
            if report is None:
                return None
            cur = await db.execute(
                "INSERT INTO messages (conversation_id, direction, role, kind, text, turn_id, status,"
                " created_at, updated_at) VALUES (?, 'out', 'assistant', 'chat', ?, ?, 'pending', ?, ?)",
                (conversation_id, report, turn_id, now, now),
            )
            if inbound_id is not None:
                await db.execute("UPDATE messages SET status = 'done', updated_at = ?, turn_id = ? WHERE id = ?",
                                 (now, turn_id, inbound_id))
        return int(cur.lastrowid or 0)

    async def confirmations_with_status(self, status: str) -> list[dict[str, Any]]:
        return await self.fetch_all(
            "SELECT * FROM pending_confirmations WHERE status = ? ORDER BY created_at", (status,)
        )

    # idempotency ----------------------------------------------------------------------------

    async def idempotent_result(self, key: str, *, now: str) -> Any | None:
        found = await self.fetch_all(
            "SELECT output FROM idempotency_keys WHERE key = ? AND expires_at > ?", (key, now)
        )
        return json.loads(found[0]["output"]) if found else None

    async def remember_result(self, key: str, tool_name: str, output: Any, *, expires_at: str) -> None:
        await self._write(
            "INSERT OR REPLACE INTO idempotency_keys (key, tool_name, output, created_at, expires_at)"
            " VALUES (?, ?, ?, ?, ?)",
            (key, tool_name, json.dumps(output, default=str), self._now(), expires_at),
        )

    # artifacts --------------------------------------------------------------------------

    async def add_artifact(
        self, *, artifact_id: str, conversation_id: str | None, turn_id: str | None, title: str | None,
        filename: str, fmt: str, path: str, size_bytes: int, sha256: str,
    ) -> None:
        await self._write(
            "INSERT INTO artifacts (id, conversation_id, turn_id, title, filename, format, path, size_bytes,"
            " sha256, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (artifact_id, conversation_id, turn_id, title, filename, fmt, path, size_bytes, sha256, self._now()),
        )

    async def existing_artifact_paths(self, paths: set[str]) -> set[str]:
        """Which of these ``/artifacts/<id>/<filename>`` paths name a stored artifact."""
        found = set()
        for path in paths:
            parts = path.split("/")
            if len(parts) == 4 and await self._fetch_one(
                    "SELECT 1 FROM artifacts WHERE id = ? AND filename = ?", (parts[2], parts[3])):
                found.add(path)
        return found

    async def artifact(self, artifact_id: str) -> dict[str, Any] | None:
        found = await self.fetch_all("SELECT * FROM artifacts WHERE id = ?", (artifact_id,))
        return found[0] if found else None


def _json(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
