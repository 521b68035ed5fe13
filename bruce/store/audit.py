"""The audit trail: one row per model call (``llm_calls``) and per tool execution
(``tool_executions``), the starts of calls with side effects (``tool_starts``, written before
the handler runs), plus the idempotency keys that let a repeated call replay its result, and
what the turns of a session did (``answered_turns``: the taint a session carries)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Collection, Sequence
from dataclasses import replace
from typing import Any

from bruce.records import (
    AnsweredTurn,
    LLMCallRecord,
    StoredLLMCall,
    StoredToolExecution,
    StoredTurn,
    ToolExecutionRecord,
    ToolStart,
    TracedMessage,
    TracedReply,
    TurnTrace,
    UnfinishedTool,
    from_json,
)
from bruce.store.database import Database
from bruce.store.message_rows import in_conversation, session_start
from bruce.store.rows import from_row, to_json
from bruce.values import LLMCallStatus, ToolStatus, TurnSource

__all__ = ["AuditStore"]


# The turns of a conversation that may carry text from outside (a tool call with an output, a run of
# an untrusted job, a message with attachments), kept when their answer is in the session. Each part
# reads one index of v18, so a long conversation costs no more than a short one with as many tool calls.
_ANSWERED_TURNS = (
    "WITH candidates(id) AS ("
    " SELECT te.turn_id FROM tool_executions te WHERE te.conversation_id = :conversation AND te.output IS NOT NULL"
    "  AND te.tool_name NOT IN (SELECT value FROM json_each(:ours))"
    " UNION SELECT t.id FROM proactive_jobs j CROSS JOIN turns t INDEXED BY turns_by_job"
    "  WHERE j.untrusted = 1 AND t.job_id = j.id AND t.conversation_id = :conversation"
    " UNION SELECT t.id FROM messages im INDEXED BY messages_with_attachments CROSS JOIN turns t"
    "  WHERE im.conversation_id = :conversation AND im.attachments IS NOT NULL AND t.inbound_message_id = im.id)"
    " SELECT t.id, COALESCE(j.untrusted, 0) AS untrusted_run, te.tool_name,"
    " EXISTS (SELECT 1 FROM messages im, json_each(im.attachments) a WHERE im.id = t.inbound_message_id"
    "  AND json_valid(im.attachments) AND json_extract(a.value, '$.kind') = 'document'"
    "  AND json_extract(a.value, '$.chars') IS NOT NULL) AS read_document"
    " FROM candidates c CROSS JOIN turns t"
    " LEFT JOIN proactive_jobs j ON j.id = t.job_id"
    " LEFT JOIN tool_executions te INDEXED BY tool_executions_by_turn ON te.turn_id = t.id AND te.output IS NOT NULL"
    " WHERE t.id = c.id AND EXISTS (SELECT 1 FROM messages m WHERE m.turn_id = t.id AND m.direction = 'out'"
    f"  AND m.conversation_id = :conversation AND m.id > :start AND {in_conversation('m.')})"
    " ORDER BY t.started_at, te.id"
)


class AuditStore:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def record_llm_call(self, call: LLMCallRecord) -> None:
        await self._db.execute(
            "INSERT INTO llm_calls (turn_id, seq, model, status, latency_ms, prompt_tokens,"
            " completion_tokens, cost_usd, error, created_at, kind) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (call.turn_id, call.seq, call.model, str(call.status), round(call.latency_ms, 3), call.prompt_tokens,
             call.completion_tokens, call.cost_usd, call.error, self._db.now(), str(call.kind)),
        )

    async def record_start(self, start: ToolStart) -> int:
        """A call of a tool with side effects, before its handler runs: its own committed write."""
        row_id, _ = await self._db.execute(
            "INSERT INTO tool_starts (turn_id, conversation_id, call_id, tool_name, summary, source, idempotent,"
            " idempotency_key, started_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (start.turn_id, start.conversation_id, start.call_id, start.tool_name, start.summary, str(start.source),
             int(start.idempotent), start.idempotency_key, self._db.now()),
        )
        return row_id

    async def record_tool_execution(self, rec: ToolExecutionRecord, *, start_id: int | None = None) -> int:
        """The execution's audit row; with ``start_id``, its start is marked finished in the same
        transaction (a crash leaves both or neither)."""
        now = self._db.now()

        def work(conn: sqlite3.Connection) -> int:
            cur = conn.execute(
                "INSERT INTO tool_executions (turn_id, conversation_id, call_id, tool_name, risk, input,"
                " output, status, error, latency_ms, source, idempotency_key, created_at, server)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (rec.turn_id, rec.conversation_id, rec.call_id, rec.tool_name, rec.risk, to_json(rec.input),
                 None if rec.output is None else to_json(rec.output), str(rec.status), rec.error,
                 round(rec.latency_ms, 3), str(rec.source), rec.idempotency_key, now, rec.server),
            )
            row_id = int(cur.lastrowid or 0)
            if start_id is not None:
                conn.execute("UPDATE tool_starts SET status = 'finished', execution_id = ?, settled_at = ?"
                             " WHERE id = ?", (row_id, now, start_id))
            return row_id

        return await self._db.write(work)

    async def unfinished_for_message(self, message_id: int) -> list[UnfinishedTool]:
        """Calls started, in turns that handled this message, that never got a result (an approved
        run's excepted: ``Confirmations.interrupted`` reports those)."""
        rows = await self._db.rows(
            f"SELECT {_STARTS} FROM tool_starts ts JOIN turns t ON ts.turn_id = t.id"
            " WHERE t.inbound_message_id = ? AND ts.status = 'started' AND ts.source != 'confirmation'"
            " ORDER BY ts.id", (message_id,))
        return [_unfinished(r) for r in rows]

    async def unfinished_elsewhere(self) -> list[UnfinishedTool]:
        """Calls started and never finished outside any pending message's turn (a scheduled
        turn's, an approved run's, an MCP client's)."""
        rows = await self._db.rows(
            f"SELECT {_STARTS} FROM tool_starts ts LEFT JOIN turns t ON ts.turn_id = t.id"
            " LEFT JOIN messages m ON t.inbound_message_id = m.id"
            " WHERE ts.status = 'started' AND (ts.source = 'confirmation' OR m.id IS NULL OR m.status != 'pending')"
            " ORDER BY ts.id")
        return [_unfinished(r) for r in rows]

    async def settle_starts(self, start_ids: Sequence[int]) -> None:
        """Started calls whose outcome stays unknown, dealt with (reported, or run again to replay)."""
        if start_ids:
            await self._db.execute(f"UPDATE tool_starts SET status = 'interrupted', settled_at = ? WHERE id IN"
                                   f" ({_marks(start_ids)}) AND status = 'started'", (self._db.now(), *start_ids))

    async def idempotent_result(self, key: str, *, now: str) -> Any | None:
        row = await self._db.row("SELECT output FROM idempotency_keys WHERE key = ? AND expires_at > ?", (key, now))
        return json.loads(row["output"]) if row else None

    async def remember_result(self, key: str, tool_name: str, output: Any, *, expires_at: str) -> None:
        await self._db.execute(
            "INSERT OR REPLACE INTO idempotency_keys (key, tool_name, output, created_at, expires_at)"
            " VALUES (?, ?, ?, ?, ?)",
            (key, tool_name, json.dumps(output, default=str), self._db.now(), expires_at),
        )

    # what the turns did ------------------------------------------------------------------

    async def tool_executions_of(self, turn_ids: Sequence[str]) -> list[ToolExecutionRecord]:
        """The tool executions these turns recorded, in order; input and output read back from JSON."""
        if not turn_ids:
            return []
        rows = await self._db.rows(f"SELECT * FROM tool_executions WHERE turn_id IN ({_marks(turn_ids)}) ORDER BY id",
                                   tuple(turn_ids))
        return [_tool_execution(r) for r in rows]

    async def answered_turns(self, conversation_id: str, *, ours: Collection[str] = ()) -> list[AnsweredTurn]:
        """The turns whose answers are in the current session (since ``/new``: in the history a turn
        sees, or folded into the summary made during the session) and that may have brought text
        from outside into it: those that called a tool that returned an output (with the tools),
        the runs of an untrusted job, and those whose message carried a document that was read
        (``bruce.media``). A turn with none of these carries nothing and is not listed; nor is one whose
        only tools with an output are named in ``ours`` (tools whose output is not from outside).

        Read from those turns outward, each found by an index (v18): the work grows with the
        conversation's tool calls, documents and job runs, never with its messages."""
        def work(db: sqlite3.Connection) -> list[AnsweredTurn]:
            rows = db.execute(_ANSWERED_TURNS, {"conversation": conversation_id, "ours": json.dumps(sorted(ours)),
                                                "start": session_start(db, conversation_id)}).fetchall()
            turns: dict[str, AnsweredTurn] = {}
            for row in rows:
                turn = turns.get(row["id"]) or AnsweredTurn(str(row["id"]), bool(row["untrusted_run"]), (),
                                                            bool(row["read_document"]))
                tools = (*turn.tools, str(row["tool_name"])) if row["tool_name"] is not None else turn.tools
                turns[turn.id] = replace(turn, tools=tools)
            return list(turns.values())

        return await self._db.read(work)

    async def llm_calls_of(self, turn_ids: Sequence[str] | None) -> list[LLMCallRecord]:
        """The model calls of these turns (None: every call in the database), in order."""
        if turn_ids is None:
            rows = await self._db.rows("SELECT * FROM llm_calls ORDER BY id")
        elif not turn_ids:
            return []
        else:
            rows = await self._db.rows(f"SELECT * FROM llm_calls WHERE turn_id IN ({_marks(turn_ids)}) ORDER BY id",
                                       tuple(turn_ids))
        return [_llm_call(r) for r in rows]

    # the admin page's view ---------------------------------------------------------------

    async def tool_executions(self, *, filters: dict[str, str], before_id: int | None, limit: int,
                              after_id: int | None = None) -> list[StoredToolExecution]:
        """Newest first; ``filters`` by column (tool_name, status, conversation_id, source) and
        ``since`` / ``until`` on created_at; ``before_id``: the cursor (the last id of the page before)."""
        rows = await self._page("tool_executions", ("tool_name", "status", "conversation_id", "source"), filters,
                                before_id=before_id, after_id=after_id, limit=limit)
        return [from_row(StoredToolExecution, r) for r in rows]

    async def _page(self, table: str, columns: tuple[str, ...], filters: dict[str, str], *, before_id: int | None,
                    after_id: int | None, limit: int) -> list[sqlite3.Row]:
        """Rows of ``table`` (a name from this module, never from a request), newest first."""
        where: list[str] = []
        params: list[Any] = []
        for column in columns:
            if column in filters:
                where.append(f"{column} = ?")
                params.append(filters[column])
        for clause, value in (("created_at >= ?", filters.get("since")), ("created_at < ?", filters.get("until")),
                              ("id < ?", before_id), ("id > ?", after_id)):
            if value is not None:
                where.append(clause)
                params.append(value)
        sql = f"SELECT * FROM {table}" + (" WHERE " + " AND ".join(where) if where else "")
        return await self._db.rows(sql + " ORDER BY id DESC LIMIT ?", (*params, limit))

    async def tool_execution(self, execution_id: int) -> StoredToolExecution | None:
        row = await self._db.row("SELECT * FROM tool_executions WHERE id = ?", (execution_id,))
        return from_row(StoredToolExecution, row) if row else None

    async def turn_trace(self, turn_id: str) -> TurnTrace | None:
        """One turn, its message, its model calls and tool executions (in order) and its replies."""
        turn = await self._db.row("SELECT * FROM turns WHERE id = ?", (turn_id,))
        if turn is None:
            return None
        message = None
        if turn["inbound_message_id"] is not None:
            message = await self._db.row("SELECT id, text, sender_id, created_at, attachments FROM messages WHERE id = ?",
                                         (turn["inbound_message_id"],))
        calls = await self._db.rows("SELECT * FROM llm_calls WHERE turn_id = ? ORDER BY seq, id", (turn_id,))
        executions = await self._db.rows("SELECT * FROM tool_executions WHERE turn_id = ? ORDER BY id", (turn_id,))
        replies = await self._db.rows(
            "SELECT id, kind, text, status, created_at FROM messages WHERE turn_id = ? AND direction = 'out'"
            " ORDER BY id", (turn_id,))
        return TurnTrace(turn=from_row(StoredTurn, turn),
                         message=from_row(TracedMessage, message) if message else None,
                         llm_calls=[from_row(StoredLLMCall, r) for r in calls],
                         tool_executions=[from_row(StoredToolExecution, r) for r in executions],
                         replies=[from_row(TracedReply, r) for r in replies])

    async def llm_calls(self, *, filters: dict[str, str], before_id: int | None, limit: int) -> list[StoredLLMCall]:
        """Newest first; ``filters`` on model, status, kind, ``since`` / ``until``; ``before_id``: the cursor."""
        rows = await self._page("llm_calls", ("model", "status", "kind"), filters, before_id=before_id, after_id=None,
                                limit=limit)
        return [from_row(StoredLLMCall, r) for r in rows]

    async def last_ok_llm_call(self) -> str | None:
        """When the latest model call that succeeded was recorded (None: never); for ``/healthz``."""
        row = await self._db.row("SELECT max(created_at) AS at FROM llm_calls WHERE status = 'ok'")
        return row["at"] if row else None


def _marks(values: Sequence[object]) -> str:
    return ", ".join("?" * len(values))


def _tool_execution(row: sqlite3.Row) -> ToolExecutionRecord:
    """A ``tool_executions`` row as its record: statuses typed, input and output decoded."""
    record = from_row(ToolExecutionRecord, row)
    return replace(record, input=from_json(record.input), output=from_json(record.output),
                   status=ToolStatus(record.status), source=TurnSource(record.source))


_STARTS = "ts.id, ts.tool_name, ts.summary, ts.idempotent, ts.conversation_id, ts.source"


def _unfinished(row: sqlite3.Row) -> UnfinishedTool:
    return UnfinishedTool(int(row["id"]), str(row["tool_name"]), str(row["summary"]), bool(row["idempotent"]),
                          row["conversation_id"], TurnSource(row["source"]))


def _llm_call(row: sqlite3.Row) -> LLMCallRecord:
    record = from_row(LLMCallRecord, row)
    return replace(record, status=LLMCallStatus(record.status))
