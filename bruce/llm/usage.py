"""What the model cost, day by day: ``/usage`` in chat, ``bruce usage`` (``bruce.cli.usage``).

Days are the owner's local days (``assistant.timezone``). Tokens are prompt plus completion as
the provider reported them; cost is litellm's cost map (a local model, or one litellm does not
price, costs 0); calls count every model call, failed ones too; cache hits are read-tool calls
answered from the cache (``tools.web.cache_ttl_s``), which cost nothing.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo

from bruce.clock import Clock, parse_iso, utc_iso
from bruce.store import Store

__all__ = ["DayUsage", "usage_by_day", "usage_text"]


@dataclass
class DayUsage:
    day: str
    model: str
    calls: int = 0
    failed: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0


async def usage_by_day(store: Store, clock: Clock, zone: ZoneInfo, days: int) -> tuple[list[DayUsage], dict[str, int]]:
    """Per local day and model, the last ``days`` days (today included); and cache hits per day."""
    today = clock.now().astimezone(zone).date()
    start = datetime.combine(today - timedelta(days=days - 1), time(0), tzinfo=zone)
    end = datetime.combine(today + timedelta(days=1), time(0), tzinfo=zone)
    rows: dict[tuple[str, str], DayUsage] = {}
    for created, model, ok, prompt, completion, cost in await store.usage.calls_between(utc_iso(start), utc_iso(end)):
        day = parse_iso(created).astimezone(zone).date().isoformat()
        entry = rows.setdefault((day, model), DayUsage(day, model))
        entry.calls += 1
        entry.failed += 1 - ok
        entry.prompt_tokens += prompt
        entry.completion_tokens += completion
        entry.cost_usd += cost or 0.0
    hits: dict[str, int] = defaultdict(int)
    for created in await store.usage.cache_hits_between(utc_iso(start), utc_iso(end)):
        hits[parse_iso(created).astimezone(zone).date().isoformat()] += 1
    return sorted(rows.values(), key=lambda u: (u.day, u.model)), dict(hits)


def usage_text(rows: list[DayUsage], hits: dict[str, int], days: int) -> str:
    """The chat's ``/usage``: totals per day, most recent first."""
    if not rows and not hits:
        return f"No model calls in the last {days} days."
    per_day: dict[str, list[DayUsage]] = defaultdict(list)
    for row in rows:
        per_day[row.day].append(row)
    lines = [f"Model usage, last {days} days:"]
    for day in sorted(set(per_day) | set(hits), reverse=True):
        items = per_day.get(day, [])
        tokens = sum(r.prompt_tokens + r.completion_tokens for r in items)
        cost = sum(r.cost_usd for r in items)
        calls = sum(r.calls for r in items)
        lines.append(f"- {day}: {calls} calls, {tokens:,} tokens, ${cost:.4f}, {hits.get(day, 0)} cache hits")
    return "\n".join(lines)
