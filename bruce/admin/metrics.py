"""``GET /metrics``: Prometheus text, every metric prefixed ``bruce_``, computed from the database
at each scrape (so every process, and every restart, reports the same totals):

* ``bruce_turns_total{source,status}``, ``bruce_llm_calls_total{model,status}``,
  ``bruce_llm_tokens_total{model,kind}``, ``bruce_llm_cost_usd_total{model}``,
  ``bruce_tool_executions_total{tool,status}``;
* ``bruce_llm_call_latency_seconds`` and ``bruce_tool_latency_seconds`` histograms;
* ``bruce_outbox_unsent`` (replies stored and not sent yet) and ``bruce_jobs{status}``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from bruce.store import Store

__all__ = ["render_metrics", "CONTENT_TYPE"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class _Fixed(Collector):
    def __init__(self, metrics: Iterable[Metric]) -> None:
        self._metrics = list(metrics)

    def collect(self) -> Iterator[Metric]:
        yield from self._metrics


async def _histogram(store: Store, name: str, doc: str, table: str) -> HistogramMetricFamily:
    cases = ", ".join(f"SUM(CASE WHEN latency_ms <= {b * 1000} THEN 1 ELSE 0 END) AS b{i}"
                      for i, b in enumerate(BUCKETS_S))
    row = await store.database.row(f"SELECT COUNT(*) AS n, COALESCE(SUM(latency_ms), 0) AS total, {cases} FROM {table}")
    assert row is not None
    buckets = [(str(b), float(row[f"b{i}"] or 0)) for i, b in enumerate(BUCKETS_S)]
    buckets.append(("+Inf", float(row["n"])))
    return HistogramMetricFamily(name, doc, buckets=buckets, sum_value=float(row["total"]) / 1000)


async def render_metrics(store: Store) -> bytes:
    db = store.database
    turns = CounterMetricFamily("bruce_turns", "Turns by source and status.", labels=["source", "status"])
    for r in await db.rows("SELECT source, status, COUNT(*) AS n FROM turns GROUP BY source, status"):
        turns.add_metric([r["source"], r["status"]], r["n"])
    calls = CounterMetricFamily("bruce_llm_calls", "Model calls by model and status.", labels=["model", "status"])
    tokens = CounterMetricFamily("bruce_llm_tokens", "Tokens by model and kind.", labels=["model", "kind"])
    cost = CounterMetricFamily("bruce_llm_cost_usd", "Cost by model, from litellm's cost map.", labels=["model"])
    for r in await db.rows("SELECT model, status, COUNT(*) AS n, COALESCE(SUM(prompt_tokens), 0) AS p,"
                           " COALESCE(SUM(completion_tokens), 0) AS c, COALESCE(SUM(cost_usd), 0) AS usd"
                           " FROM llm_calls GROUP BY model, status"):
        calls.add_metric([r["model"], r["status"]], r["n"])
    for r in await db.rows("SELECT model, COALESCE(SUM(prompt_tokens), 0) AS p, COALESCE(SUM(completion_tokens), 0)"
                           " AS c, COALESCE(SUM(cost_usd), 0) AS usd FROM llm_calls GROUP BY model"):
        tokens.add_metric([r["model"], "prompt"], r["p"])
        tokens.add_metric([r["model"], "completion"], r["c"])
        cost.add_metric([r["model"]], r["usd"])
    tools = CounterMetricFamily("bruce_tool_executions", "Tool executions by tool and status.",
                                labels=["tool", "status"])
    for r in await db.rows("SELECT tool_name, status, COUNT(*) AS n FROM tool_executions GROUP BY tool_name, status"):
        tools.add_metric([r["tool_name"], r["status"]], r["n"])
    unsent = GaugeMetricFamily("bruce_outbox_unsent", "Replies stored and not sent yet.")
    row = await db.row("SELECT COUNT(*) AS n FROM messages WHERE direction = 'out' AND status IN ('pending', 'unsent')")
    unsent.add_metric([], row["n"] if row else 0)
    jobs = GaugeMetricFamily("bruce_jobs", "Proactive jobs by status.", labels=["status"])
    for r in await db.rows("SELECT status, COUNT(*) AS n FROM proactive_jobs GROUP BY status"):
        jobs.add_metric([r["status"]], r["n"])
    metrics: list[Metric] = [turns, calls, tokens, cost, tools, unsent, jobs,
                             await _histogram(store, "bruce_llm_call_latency_seconds", "Model call latency.", "llm_calls"),
                             await _histogram(store, "bruce_tool_latency_seconds", "Tool execution latency.",
                                              "tool_executions")]
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Fixed(metrics))
    return generate_latest(registry)
