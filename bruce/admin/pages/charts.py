"""The charts' data, drawn in the browser by ``static/charts.js`` with the vendored uPlot
(``static/uplot/``): ``GET /api/charts/latency`` (model latency per hour, p50 and p95 per
model), ``/api/charts/usage`` (tokens and cost per local day), ``/api/charts/tool-runs`` (tool
runs per local day by status). Each takes ``days`` (1 to 90, 7 by default). Times on the x axis
are Unix seconds; the page labels them in ``assistant.timezone`` (named in ``zone``)."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable
from typing import Any
from zoneinfo import ZoneInfo

from aiohttp import web

from bruce.admin.pages.overview import local_days
from bruce.clock import Clock, parse_iso, utc_iso
from bruce.store.overview import OverviewStore

__all__ = ["ChartData", "percentile"]

DAYS = 7
MAX_DAYS = 90
HOUR_S = 3600


def percentile(values: list[float], fraction: float) -> float:
    """The nearest-rank percentile of ``values`` (not empty)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


def _days(request: web.Request) -> int:
    raw = request.query.get("days", str(DAYS))
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_DAYS:
        raise web.HTTPBadRequest(text=f"days: a whole number from 1 to {MAX_DAYS}")
    return int(raw)


class ChartData:
    def __init__(self, store: OverviewStore, clock: Clock, zone: ZoneInfo) -> None:
        self._store = store
        self._clock = clock
        self._zone = zone
        self._past: dict[tuple[str, str], dict[int, dict[str, list[float]]]] = {}  # latencies before today

    def routes(self) -> list[web.RouteDef]:
        return [web.get("/api/charts/latency", self._wrap(self.latency)),
                web.get("/api/charts/usage", self._wrap(self.usage)),
                web.get("/api/charts/tool-runs", self._wrap(self.tool_runs))]

    def _wrap(self, make: Callable[[int], Any]) -> Callable[[web.Request], Any]:
        async def handler(request: web.Request) -> web.Response:
            try:
                days = _days(request)
            except web.HTTPBadRequest as exc:
                return web.json_response({"error": exc.text}, status=400)
            return web.json_response({"zone": self._zone.key, **await make(days)})
        return handler

    def _bounds(self, days: int) -> tuple[list[str], list[int], str]:
        starts, until = local_days(self._clock.now(), self._zone, days)
        return [utc_iso(s) for s in starts], [int(s.timestamp()) for s in starts], utc_iso(until)

    async def _hours(self, since: str, until: str) -> dict[int, dict[str, list[float]]]:
        """Each hour's (Unix seconds) latencies per model, of the calls in ``[since, until)``."""
        hours: dict[int, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        for row in await self._store.latencies(since, until):
            hour = int(parse_iso(str(row["created_at"])).timestamp()) // HOUR_S * HOUR_S
            hours[hour][str(row["model"])].append(float(row["latency_ms"]))
        return hours

    async def latency(self, days: int) -> dict[str, Any]:
        """Per hour with calls: each model's p50 and p95 latency in ms (null: none that hour).
        The days before today are read once a day: their calls no longer change."""
        starts, _, until = self._bounds(days)
        key = (starts[0], starts[-1])
        if key not in self._past:
            self._past = {key: await self._hours(starts[0], starts[-1])}
        hours: dict[int, dict[str, list[float]]] = defaultdict(dict)
        for part in (self._past[key], await self._hours(starts[-1], until)):
            for hour, per_model in part.items():
                for model, values in per_model.items():
                    hours[hour][model] = hours[hour].get(model, []) + values
        models = sorted({m for per_model in hours.values() for m in per_model})
        x = sorted(hours)
        series = []
        for model in models:
            for label, fraction in (("p50", 0.5), ("p95", 0.95)):
                series.append({"label": f"{model} {label}", "unit": "ms", "values": [
                    round(percentile(hours[h][model], fraction), 1) if hours[h].get(model) else None for h in x]})
        return {"x": x, "series": series}

    async def usage(self, days: int) -> dict[str, Any]:
        """Per local day: prompt and completion tokens, and cost in USD."""
        starts, x, until = self._bounds(days)
        prompt, completion, usd = [0] * days, [0] * days, [0.0] * days
        for row in await self._store.usage_per_day(starts, until):
            day = int(row["day"])
            prompt[day], completion[day], usd[day] = int(row["prompt"]), int(row["completion"]), float(row["usd"])
        return {"x": x, "series": [{"label": "prompt tokens", "unit": "tokens", "values": prompt},
                                   {"label": "completion tokens", "unit": "tokens", "values": completion},
                                   {"label": "cost", "unit": "USD", "values": [round(v, 6) for v in usd]}]}

    async def tool_runs(self, days: int) -> dict[str, Any]:
        """Per local day: tool runs by status (the statuses seen in the range)."""
        starts, x, until = self._bounds(days)
        counts: dict[str, list[int]] = {}
        for row in await self._store.tool_runs_per_day(starts, until):
            counts.setdefault(str(row["status"]), [0] * days)[int(row["day"])] = int(row["n"])
        return {"x": x, "series": [{"label": status, "unit": "runs", "values": values}
                                   for status, values in sorted(counts.items())]}
