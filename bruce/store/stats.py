"""Totals across the tables, for ``GET /metrics``: turns, model calls, tokens and cost, tool
executions, unsent replies, jobs, and latency histograms. Each is counted over every row at
the moment of asking (so every process, and every restart, reports the same totals)."""

from __future__ import annotations

from collections.abc import Sequence

from bruce.records import Count, KindTotals, LatencyHistogram, ModelTotals
from bruce.store.database import Database

__all__ = ["StatsStore"]


class StatsStore:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def turns_by_source_status(self) -> list[Count]:
        return await self._counts("SELECT source, status, COUNT(*) AS n FROM turns GROUP BY source, status")

    async def llm_calls_by_model_status(self) -> list[Count]:
        return await self._counts("SELECT model, status, COUNT(*) AS n FROM llm_calls GROUP BY model, status")

    async def llm_totals_by_model(self) -> list[ModelTotals]:
        rows = await self._db.rows(
            "SELECT model, COALESCE(SUM(prompt_tokens), 0) AS p, COALESCE(SUM(completion_tokens), 0) AS c,"
            " COALESCE(SUM(cost_usd), 0) AS usd FROM llm_calls GROUP BY model")
        return [ModelTotals(str(r["model"]), int(r["p"]), int(r["c"]), float(r["usd"])) for r in rows]

    async def llm_totals_by_kind(self, *, since: str | None = None, until: str | None = None) -> list[KindTotals]:
        """Per kind (chat, transcription): calls, failed ones, mean latency and cost, in
        ``[since, until)`` on created_at (None: unbounded); kinds with no call are left out."""
        rows = await self._db.rows(
            "SELECT kind, COUNT(*) AS n, SUM(CASE WHEN status = 'ok' THEN 0 ELSE 1 END) AS failed,"
            " AVG(latency_ms) AS latency, COALESCE(SUM(cost_usd), 0) AS usd FROM llm_calls"
            " WHERE (? IS NULL OR created_at >= ?) AND (? IS NULL OR created_at < ?) GROUP BY kind ORDER BY kind",
            (since, since, until, until))
        return [KindTotals(str(r["kind"]), int(r["n"]), int(r["failed"]), float(r["latency"] or 0.0),
                           float(r["usd"])) for r in rows]

    async def tool_executions_by_tool_status(self) -> list[Count]:
        return await self._counts(
            "SELECT tool_name, status, COUNT(*) AS n FROM tool_executions GROUP BY tool_name, status")

    async def unsent_replies(self) -> int:
        """Replies stored and not (completely) sent yet."""
        row = await self._db.row(
            "SELECT COUNT(*) AS n FROM messages WHERE direction = 'out' AND status IN ('pending', 'unsent')")
        return int(row["n"]) if row else 0

    async def jobs_by_status(self) -> list[Count]:
        return await self._counts("SELECT status, COUNT(*) AS n FROM proactive_jobs GROUP BY status")

    async def llm_call_latency(self, bounds_ms: Sequence[float]) -> LatencyHistogram:
        return await self._histogram("llm_calls", bounds_ms)

    async def tool_latency(self, bounds_ms: Sequence[float]) -> LatencyHistogram:
        return await self._histogram("tool_executions", bounds_ms)

    async def _counts(self, sql: str) -> list[Count]:
        """``sql`` groups by some columns and counts as ``n`` (a statement of this module)."""
        return [Count(tuple(str(v) for v in tuple(r)[:-1]), int(r["n"])) for r in await self._db.rows(sql)]

    async def _histogram(self, table: str, bounds_ms: Sequence[float]) -> LatencyHistogram:
        """``table``: a name from this module, never from a request."""
        cases = ", ".join(f"SUM(CASE WHEN latency_ms <= ? THEN 1 ELSE 0 END) AS b{i}" for i in range(len(bounds_ms)))
        row = await self._db.row(
            f"SELECT COUNT(*) AS n, COALESCE(SUM(latency_ms), 0) AS total{', ' if cases else ''}{cases} FROM {table}",
            tuple(bounds_ms))
        assert row is not None
        return LatencyHistogram(int(row["n"]), float(row["total"]),
                                tuple(int(row[f"b{i}"] or 0) for i in range(len(bounds_ms))))
