"""The overview: ``/`` (after login), ``GET /api/overview`` (the same, as JSON) and
``GET /api/overview/events`` (server-sent events: the panels again, rendered, each time they
change, so the page follows without a reload). The panels: today against the last 7 days
(messages, turns ok and failed, tool runs by status, model calls, tokens, cost against
``llm.budget``, cache hits), the next reminders and jobs, pending approvals, the health of each
channel, MCP server and the database, and the last failures, each linking to its turn's trace.
Each panel is one query (``bruce.store.overview``); times are shown in ``assistant.timezone``."""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import structlog
from aiohttp import web

from bruce.admin.pages.rendering import Page
from bruce.clock import Clock, local_time, parse_iso, utc_iso
from bruce.errors import StoreError
from bruce.llm.budget import Budget
from bruce.store.overview import OverviewStore

__all__ = ["OverviewPage", "local_days", "local_text"]

log = structlog.get_logger(__name__)

Health = Callable[[], Awaitable[dict[str, Any]]]
Render = Callable[..., str]

LIST = 5  # jobs, failures
APPROVALS = 20
DOWN = (StoreError, ValueError)  # the store's errors, and aiosqlite's closed connection
FAILED_TURNS = ("failed", "interrupted")


def local_days(now: datetime, zone: ZoneInfo, days: int) -> tuple[list[datetime], datetime]:
    """The local midnights of the last ``days`` days (today's last) and the next one."""
    today = now.astimezone(zone).date()
    starts = [datetime.combine(today - timedelta(days=n), datetime.min.time(), tzinfo=zone)
              for n in reversed(range(days))]
    return starts, datetime.combine(today + timedelta(days=1), datetime.min.time(), tzinfo=zone)


def local_text(stamp: str | None, zone: ZoneInfo) -> str:
    """A stored time as the owner reads it, the zone named (``bruce.clock.local_time``, as every
    page): ``2026-12-05 14:03 CET``, ``2026-12-05 08:00 -03 (America/Sao_Paulo)``; "-" for none."""
    return local_time(stamp, zone) if stamp else "-"


def _when(stamp: str | None, zone: ZoneInfo) -> dict[str, str | None]:
    """A time for the page (local text) and the API (ISO 8601 with the zone's offset)."""
    if not stamp:
        return {"at": None, "local": "-"}
    return {"at": parse_iso(stamp).astimezone(zone).isoformat(timespec="seconds"), "local": local_text(stamp, zone)}


def _activity(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Today's counts and the last 7 days' daily mean, from ``OverviewStore.activity``'s rows
    (today's and the week's rows may come in separate lists: they add up)."""
    sums: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0.0])
    for r in rows:
        today, total = float(r["today"] or 0), float(r["n"] or 0)
        key = str(r["what"]), str(r["key"])
        if r["what"] == "turns":
            key = "turns", "ok" if r["key"] == "ok" else "failed" if r["key"] in FAILED_TURNS else "other"
        found = sums[key]
        found[0], found[1] = found[0] + today, found[1] + total - today
        if r["what"] == "llm":
            for name, part_today, part_total in (("tokens", r["tokens_today"], r["tokens"]),
                                                  ("usd", r["usd_today"], r["usd"])):
                found = sums[name, ""]
                found[0] += float(part_today or 0)
                found[1] += float(part_total or 0) - float(part_today or 0)

    def pair(key: tuple[str, str]) -> dict[str, float]:
        today, week = sums.get(key, [0.0, 0.0])
        return {"today": round(today, 6), "week_mean": round(week / 7, 6 if key[0] == "usd" else 2)}

    return {"messages": pair(("messages", "")), "turns_ok": pair(("turns", "ok")),
            "turns_failed": pair(("turns", "failed")), "llm_calls": pair(("llm", "")),
            "tokens": pair(("tokens", "")), "cost_usd": pair(("usd", "")), "cache_hits": pair(("tools", "cached")),
            "tool_runs": {key[1]: pair(key) for key in sorted(sums) if key[0] == "tools"}}


def _database_error(exc: Exception) -> str:
    cause = exc.__cause__ or exc  # (sqlite3's error, inside the store's StoreError)
    return f"error: {type(cause).__name__}: {cause}"[:300]


class OverviewPage:
    def __init__(self, store: OverviewStore, clock: Clock, zone: ZoneInfo, budget: Budget | None,
                 health: Health | None, page: Page, render: Render, *, poll_s: float = 2.0) -> None:
        self._store = store
        self._clock = clock
        self._zone = zone
        self._budget = budget
        self._health = health
        self._page = page
        self._render = render  # a template to text: the panels sent as events
        self.poll_s = poll_s  # how often the live overview looks for changes
        self._week: tuple[str, list[dict[str, Any]]] | None = None  # the 7 days before today: they no longer change

    def routes(self) -> list[web.RouteDef]:
        return [web.get("/", self._overview_page), web.get("/api/overview", self._api_overview),
                web.get("/api/overview/events", self._live)]

    async def overview(self) -> dict[str, Any]:
        """Every panel, as the API gives it."""
        zone = self._zone
        starts, until = local_days(self._clock.now(), zone, 8)
        since, today, end = utc_iso(starts[0]), utc_iso(starts[-1]), utc_iso(until)
        jobs = [{**j, "next_run": _when(j["next_run_at"], zone)} for j in await self._store.upcoming_jobs(LIST)]
        approvals = [{**a, "expires": _when(a["expires_at"], zone)}
                     for a in await self._store.pending_approvals(APPROVALS)]
        failures = [{**f, "when": _when(f["at"], zone)} for f in await self._store.failures(LIST)]
        return {"zone": zone.key, "now": _when(utc_iso(self._clock.now()), zone),
                "activity": _activity([*await self._past_week(since, today),
                                       *await self._store.activity(today, today, end)]),
                "budget": await self._spend(), "jobs": jobs, "approvals": approvals,
                "health": await self._health_panel(), "failures": failures}

    async def keep_warm(self) -> None:
        """Read the 7 days before today now, and again just after each local midnight, so no
        request pays for it (with 100,000 rows that read alone is most of the page's time)."""
        while True:
            starts, until = local_days(self._clock.now(), self._zone, 8)
            try:
                await self._past_week(utc_iso(starts[0]), utc_iso(starts[-1]))
            except Exception as exc:  # the database is away: the page says so; try again at the next day
                log.warning("overview.warm_failed", error=str(exc)[:200])
            # a real wait: the clock only says how long (a test's clock must not be moved by it)
            await asyncio.sleep(max((until - self._clock.now()).total_seconds(), 0.0) + 1.0)

    @property
    def warm_since(self) -> str | None:
        """Which day's "7 days before" is kept (its local midnight, in UTC); None: not read yet."""
        return self._week[0] if self._week is not None else None

    async def _past_week(self, since: str, today: str) -> list[dict[str, Any]]:
        """The counts of the 7 days before today, read once a day (rows are stamped when written,
        so none lands in a day gone by)."""
        if self._week is None or self._week[0] != today:
            self._week = today, await self._store.activity(since, today, today)
        return self._week[1]

    async def _spend(self) -> dict[str, Any] | None:
        if self._budget is None or not self._budget.enabled:
            return None
        spend = await self._budget.spend()
        return {"day": spend.day, "usd": round(spend.usd, 6), "tokens": spend.tokens,
                "limit_usd": spend.limit_usd, "limit_tokens": spend.limit_tokens,
                "fraction": round(spend.fraction, 4)}

    async def _health_panel(self) -> dict[str, Any]:
        """The database (it answered), each channel's last receive and send, each MCP server."""
        live = await self._health() if self._health is not None else {}
        stamps: dict[str, dict[str, str | None]] = {
            name: {"in": (found or {}).get("last_receive"), "out": None}
            for name, found in (live.get("channels") or {}).items()}
        for row in await self._store.channel_traffic():
            entry = stamps.setdefault(str(row["channel"]), {"in": None, "out": None})
            for direction in ("in", "out"):
                known, stored = entry[direction], row[f"last_{direction}"]
                if stored and (known is None or parse_iso(known) < parse_iso(str(stored))):
                    entry[direction] = str(stored)
        channels = [{"name": name, "last_receive": _when(s["in"], self._zone), "last_send": _when(s["out"], self._zone)}
                    for name, s in sorted(stamps.items())]
        mcp = [{"server": name, "state": state} for name, state in sorted((live.get("mcp") or {}).items())]
        return {"database": "ok", "scheduler": live.get("scheduler"),
                "channels": channels, "mcp": mcp}

    async def _api_overview(self, request: web.Request) -> web.Response:
        try:
            return web.json_response(await self.overview())
        except DOWN as exc:
            return web.json_response({"health": {"database": _database_error(exc)}}, status=503)

    async def _overview_page(self, request: web.Request) -> web.Response:
        try:
            return self._page("overview.html", request=request, o=await self.overview())
        except DOWN as exc:
            return self._page("overview.html", request=request, o=None, error=_database_error(exc), status=503)

    async def _live(self, request: web.Request) -> web.StreamResponse:
        """Server-sent events: the panels, rendered, whenever they differ from the last sent."""
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "X-Accel-Buffering": "no"})
        await response.prepare(request)
        await response.write(b": connected\n\n")
        last = ""
        try:
            while True:
                try:
                    found = await self.overview()
                except DOWN as exc:  # said once; the stream goes on and recovers with the database
                    found = {"error": _database_error(exc)}
                found.pop("now", None)
                key = json.dumps(found, sort_keys=True, default=str)
                if key != last:
                    last = key
                    html = self._render("overview_panels.html", o=found) if "error" not in found else \
                        self._render("overview_error.html", error=found["error"])
                    await response.write(f"data: {json.dumps({'html': html})}\n\n".encode())
                else:
                    await response.write(b": waiting\n\n")
                await asyncio.sleep(self.poll_s)
        except ConnectionResetError:  # the page went away
            pass
        return response
