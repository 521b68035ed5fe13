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

from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from bruce.records import Count, LatencyHistogram
from bruce.store.stats import StatsStore

__all__ = ["MetricsPage", "render_metrics", "CONTENT_TYPE"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class MetricsPage:
    def __init__(self, stats: StatsStore) -> None:
        self._stats = stats

    def routes(self) -> list[web.RouteDef]:
        return [web.get("/metrics", self._metrics)]

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(body=await render_metrics(self._stats), headers={"Content-Type": CONTENT_TYPE})


class _Fixed(Collector):
    def __init__(self, metrics: Iterable[Metric]) -> None:
        self._metrics = list(metrics)

    def collect(self) -> Iterator[Metric]:
        yield from self._metrics


def _histogram(name: str, doc: str, found: LatencyHistogram) -> HistogramMetricFamily:
    buckets = [(str(b), float(n)) for b, n in zip(BUCKETS_S, found.at_most, strict=True)]
    buckets.append(("+Inf", float(found.count)))
    return HistogramMetricFamily(name, doc, buckets=buckets, sum_value=found.total_ms / 1000)


def _counter(name: str, doc: str, labels: list[str], counts: list[Count]) -> CounterMetricFamily:
    family = CounterMetricFamily(name, doc, labels=labels)
    for count in counts:
        family.add_metric(list(count.labels), count.n)
    return family


async def _llm(stats: StatsStore) -> list[Metric]:
    calls = _counter("bruce_llm_calls", "Model calls by model and status.", ["model", "status"],
                     await stats.llm_calls_by_model_status())
    tokens = CounterMetricFamily("bruce_llm_tokens", "Tokens by model and kind.", labels=["model", "kind"])
    cost = CounterMetricFamily("bruce_llm_cost_usd", "Cost by model, from litellm's cost map.", labels=["model"])
    for totals in await stats.llm_totals_by_model():
        tokens.add_metric([totals.model, "prompt"], totals.prompt_tokens)
        tokens.add_metric([totals.model, "completion"], totals.completion_tokens)
        cost.add_metric([totals.model], totals.usd)
    return [calls, tokens, cost]


async def render_metrics(stats: StatsStore) -> bytes:
    turns = _counter("bruce_turns", "Turns by source and status.", ["source", "status"],
                     await stats.turns_by_source_status())
    tools = _counter("bruce_tool_executions", "Tool executions by tool and status.", ["tool", "status"],
                     await stats.tool_executions_by_tool_status())
    unsent = GaugeMetricFamily("bruce_outbox_unsent", "Replies stored and not sent yet.")
    unsent.add_metric([], await stats.unsent_replies())
    jobs = GaugeMetricFamily("bruce_jobs", "Proactive jobs by status.", labels=["status"])
    for count in await stats.jobs_by_status():
        jobs.add_metric(list(count.labels), count.n)
    bounds_ms = [b * 1000 for b in BUCKETS_S]
    metrics: list[Metric] = [
        turns, *await _llm(stats), tools, unsent, jobs,
        _histogram("bruce_llm_call_latency_seconds", "Model call latency.", await stats.llm_call_latency(bounds_ms)),
        _histogram("bruce_tool_latency_seconds", "Tool execution latency.", await stats.tool_latency(bounds_ms))]
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Fixed(metrics))
    return generate_latest(registry)
