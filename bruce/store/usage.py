"""What the model calls cost: sums over ``llm_calls`` (and cache hits in ``tool_executions``)
for the daily budget and ``bruce usage``; the day's allowance and its notices."""

from __future__ import annotations

from bruce.records import Spent
from bruce.store.database import Database

__all__ = ["UsageStore"]


class UsageStore:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def spent_between(self, since: str, until: str) -> Spent:
        """Tokens, cost and calls of every model call (chat, jobs, summaries) in ``[since, until)``."""
        row = await self._db.row(
            "SELECT COALESCE(SUM(COALESCE(prompt_tokens, 0) + COALESCE(completion_tokens, 0)), 0) AS tokens,"
            " COALESCE(SUM(cost_usd), 0) AS usd, COUNT(*) AS calls FROM llm_calls"
            " WHERE created_at >= ? AND created_at < ?", (since, until))
        assert row is not None
        return Spent(int(row["tokens"]), float(row["usd"]), int(row["calls"]))

    async def calls_between(self, since: str, until: str) -> list[tuple[str, str, int, int, int, float | None]]:
        """(created_at, model, status ok?, prompt, completion, cost) of each call: grouped by local day in code."""
        rows = await self._db.rows(
            "SELECT created_at, model, status, COALESCE(prompt_tokens, 0) AS p, COALESCE(completion_tokens, 0) AS c,"
            " cost_usd FROM llm_calls WHERE created_at >= ? AND created_at < ? ORDER BY created_at", (since, until))
        return [(str(r["created_at"]), str(r["model"]), 1 if r["status"] == "ok" else 0, int(r["p"]), int(r["c"]),
                 r["cost_usd"]) for r in rows]

    async def cache_hits_between(self, since: str, until: str) -> list[str]:
        rows = await self._db.rows("SELECT created_at FROM tool_executions WHERE status = 'cached'"
                                   " AND created_at >= ? AND created_at < ?", (since, until))
        return [str(r["created_at"]) for r in rows]

    async def allowance(self, day: str) -> tuple[float, int]:
        row = await self._db.row("SELECT extra_usd, extra_tokens FROM budget_allowances WHERE day = ?", (day,))
        return (float(row["extra_usd"]), int(row["extra_tokens"])) if row else (0.0, 0)

    async def allow(self, day: str, *, usd: float, tokens: int) -> bool:
        """Raise ``day``'s budget, once: False when that day was raised already."""
        _, count = await self._db.execute(
            "INSERT INTO budget_allowances (day, extra_usd, extra_tokens, created_at) VALUES (?, ?, ?, ?)"
            " ON CONFLICT (day) DO NOTHING", (day, usd, tokens, self._db.now()))
        return count == 1

    async def claim_notice(self, day: str, level: str, conversation_id: str | None) -> bool:
        """True once per (day, level): whoever claims it sends the notice."""
        _, count = await self._db.execute(
            "INSERT INTO budget_notices (day, level, conversation_id, created_at) VALUES (?, ?, ?, ?)"
            " ON CONFLICT (day, level) DO NOTHING", (day, level, conversation_id, self._db.now()))
        return count == 1
