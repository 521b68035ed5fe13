"""What the admin overview (``/``) and its charts read: one statement per panel, each on an
index (``v17_overview_indexes.sql``), so the page stays fast with many rows. Times in and out
are the stored form (ISO 8601, UTC); the local days are the caller's, given as their UTC starts.
Rows come back as plain dicts (column name to value)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bruce.store.database import Database

__all__ = ["OverviewStore"]

Row = dict[str, Any]

_ACTIVITY = """
SELECT 'messages' AS what, '' AS key, SUM(created_at >= ?) AS today, COUNT(*) AS n, 0 AS tokens_today,
       0 AS tokens, 0 AS usd_today, 0 AS usd FROM messages
 WHERE created_at >= ? AND created_at < ? AND direction = 'in'
UNION ALL
SELECT 'turns', status, SUM(started_at >= ?), COUNT(*), 0, 0, 0, 0 FROM turns
 WHERE started_at >= ? AND started_at < ? GROUP BY status
UNION ALL
SELECT 'tools', status, SUM(created_at >= ?), COUNT(*), 0, 0, 0, 0 FROM tool_executions
 WHERE created_at >= ? AND created_at < ? GROUP BY status
UNION ALL
SELECT 'llm', '', SUM(created_at >= ?), COUNT(*),
       SUM(CASE WHEN created_at >= ? THEN COALESCE(prompt_tokens, 0) + COALESCE(completion_tokens, 0) END),
       SUM(COALESCE(prompt_tokens, 0) + COALESCE(completion_tokens, 0)),
       SUM(CASE WHEN created_at >= ? THEN COALESCE(cost_usd, 0) END), SUM(COALESCE(cost_usd, 0)) FROM llm_calls
 WHERE created_at >= ? AND created_at < ?"""

_FAILURES = """
SELECT * FROM (SELECT 'turn' AS kind, id AS turn_id, started_at AS at, status || COALESCE(': ' || error, '') AS what
                 FROM turns WHERE status IN ('failed', 'interrupted') ORDER BY started_at DESC LIMIT ?)
UNION ALL
SELECT * FROM (SELECT 'tool', turn_id, created_at, tool_name || ' ' || status || COALESCE(': ' || error, '')
                 FROM tool_executions WHERE status IN ('error', 'timeout') ORDER BY created_at DESC LIMIT ?)
UNION ALL
SELECT * FROM (SELECT 'provider', turn_id, created_at, model || ' ' || status || COALESCE(': ' || error, '')
                 FROM llm_calls WHERE status <> 'ok' ORDER BY created_at DESC LIMIT ?)
ORDER BY at DESC LIMIT ?"""


def _day_case(column: str, starts: Sequence[str]) -> tuple[str, list[str]]:
    """A CASE giving a row's day number (0 the first of ``starts``) from the days' UTC starts."""
    arms = " ".join(f"WHEN {column} >= ? THEN {i}" for i in reversed(range(len(starts))))
    return f"CASE {arms} END", list(reversed(starts))


class OverviewStore:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def _dicts(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        return [dict(r) for r in await self._db.rows(sql, params)]

    async def activity(self, since: str, today: str, until: str) -> list[Row]:
        """Counts in ``[since, until)`` and of them from ``today`` on: inbound messages, turns and
        tool runs by status, model calls with tokens and cost (``what``, ``key``, ``today``, ``n``...)."""
        llm = [today, today, today, since, until]
        return await self._dicts(_ACTIVITY, [today, since, until] * 3 + llm)

    async def upcoming_jobs(self, limit: int) -> list[Row]:
        """The active jobs due next, soonest first."""
        return await self._dicts(
            "SELECT id, execution_mode, substr(content, 1, 120) AS content, description, next_run_at, schedule_kind, conversation_id FROM proactive_jobs"
            " WHERE status = 'active' AND next_run_at IS NOT NULL ORDER BY next_run_at LIMIT ?", (limit,))

    async def pending_approvals(self, limit: int) -> list[Row]:
        """Approvals waiting for the owner, the first to expire first."""
        return await self._dicts(
            "SELECT id, tool_name, conversation_id, turn_id, created_at, expires_at FROM pending_confirmations"
            " WHERE status = 'pending' ORDER BY expires_at LIMIT ?", (limit,))

    async def channel_traffic(self) -> list[Row]:
        """Per channel, the last message received and the last reply sent (``last_in``,
        ``last_out``): each conversation's newest of each, by its index."""
        return await self._dicts(
            "SELECT c.channel AS channel,"
            " MAX((SELECT m.created_at FROM messages m WHERE m.conversation_id = c.id AND m.direction = 'in'"
            " ORDER BY m.id DESC LIMIT 1)) AS last_in,"
            " MAX((SELECT m.created_at FROM messages m WHERE m.conversation_id = c.id AND m.direction = 'out'"
            " AND m.status = 'sent' ORDER BY m.id DESC LIMIT 1)) AS last_out FROM conversations c GROUP BY c.channel")

    async def failures(self, limit: int) -> list[Row]:
        """The newest failed turns, tool errors and provider faults, newest first (``kind``,
        ``turn_id``, ``at``, ``what``)."""
        return await self._dicts(_FAILURES, (limit, limit, limit, limit))

    async def tool_runs_per_day(self, starts: Sequence[str], until: str) -> list[Row]:
        """Tool runs per day (``day``: index into ``starts``) and status."""
        case, params = _day_case("created_at", starts)
        return await self._dicts(
            f"SELECT {case} AS day, status, COUNT(*) AS n FROM tool_executions"
            " WHERE created_at >= ? AND created_at < ? GROUP BY day, status", [*params, starts[0], until])

    async def usage_per_day(self, starts: Sequence[str], until: str) -> list[Row]:
        """Model calls' prompt and completion tokens and cost per day (``day``: index into ``starts``)."""
        case, params = _day_case("created_at", starts)
        return await self._dicts(
            f"SELECT {case} AS day, COALESCE(SUM(prompt_tokens), 0) AS prompt,"
            " COALESCE(SUM(completion_tokens), 0) AS completion, COALESCE(SUM(cost_usd), 0) AS usd FROM llm_calls"
            " WHERE created_at >= ? AND created_at < ? GROUP BY day", [*params, starts[0], until])

    async def latencies(self, since: str, until: str) -> list[Row]:
        """Each successful model call's time, model and latency in ``[since, until)``, oldest first."""
        return await self._dicts(
            "SELECT created_at, model, latency_ms FROM llm_calls WHERE created_at >= ? AND created_at < ?"
            " AND status = 'ok' ORDER BY created_at", (since, until))
