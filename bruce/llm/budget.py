"""The daily LLM budget (``llm.budget``): what the owner's key may spend in one local day.

Spending is summed from ``llm_calls`` (tokens as the provider reported them; cost from
litellm's cost map, where a local model costs 0) since the owner's local midnight
(``assistant.timezone``), every model call counted: chat turns, scheduled runs, summaries.
The limits are ``daily_usd`` and ``daily_tokens`` (either, both or none), plus what the owner
allowed for the day (``bruce budget allow``). Where the spend is measured against them:

* 80 %: one notice a day, in the conversation whose turn crossed it;
* 90 %: background calls (summaries) stop (``LLMService`` refuses them);
* 100 %: no model call is made, whatever asks for it (``LLMService`` checks before every
  call). A new chat turn gets a notice with the reset time; a turn that reaches it between two
  calls ends with that notice, naming what its tools already did; an agent-mode job is skipped
  (its run recorded ``over_budget``); message-mode reminders, which need no model, still fire;
  an approved action still runs and its code-written report is sent, without the model's
  comment on it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo

from bruce.clock import Clock, utc_iso
from bruce.store import Store

__all__ = ["Budget", "Spend", "WARN_AT", "BACKGROUND_STOP_AT"]

WARN_AT = 0.8
BACKGROUND_STOP_AT = 0.9


@dataclass(frozen=True, slots=True)
class Spend:
    day: str  # the owner's local day, YYYY-MM-DD
    tokens: int
    usd: float
    calls: int
    limit_tokens: int | None
    limit_usd: float | None
    resets_at: datetime  # the next local midnight

    @property
    def fraction(self) -> float:
        """The larger of tokens and cost against their limits (0 with no limits)."""
        parts = []
        if self.limit_tokens is not None:
            parts.append(self.tokens / self.limit_tokens if self.limit_tokens > 0 else float("inf"))
        if self.limit_usd is not None:
            parts.append(self.usd / self.limit_usd if self.limit_usd > 0 else float("inf"))
        return max(parts, default=0.0)


class Budget:
    def __init__(self, *, store: Store, clock: Clock, zone: ZoneInfo, daily_usd: float | None,
                 daily_tokens: int | None) -> None:
        self._usage = store.usage
        self._clock = clock
        self._zone = zone
        self._daily_usd = daily_usd
        self._daily_tokens = daily_tokens

    @property
    def enabled(self) -> bool:
        return self._daily_usd is not None or self._daily_tokens is not None

    @property
    def zone(self) -> ZoneInfo:
        return self._zone

    def day_bounds(self, moment: datetime | None = None) -> tuple[str, datetime, datetime]:
        """The local day of ``moment`` (default now): its name, and its start and end as instants."""
        local = (moment or self._clock.now()).astimezone(self._zone)
        start = datetime.combine(local.date(), time(0), tzinfo=self._zone)
        end = datetime.combine(local.date() + timedelta(days=1), time(0), tzinfo=self._zone)
        return local.date().isoformat(), start, end

    async def spend(self) -> Spend:
        day, start, end = self.day_bounds()
        spent = await self._usage.spent_between(utc_iso(start), utc_iso(end))
        extra_usd, extra_tokens = await self._usage.allowance(day)
        limit_usd = None if self._daily_usd is None else self._daily_usd + extra_usd
        limit_tokens = None if self._daily_tokens is None else self._daily_tokens + extra_tokens
        return Spend(day, spent.tokens, spent.usd, spent.calls, limit_tokens, limit_usd, end)

    async def reached(self, fraction: float = 1.0) -> Spend | None:
        """Today's spend when it is at or past ``fraction`` of the budget; None under it (or no budget)."""
        if not self.enabled:
            return None
        spend = await self.spend()
        return spend if spend.fraction >= fraction else None

    async def warning_due(self, conversation_id: str) -> Spend | None:
        """At 80 % or more but under 100 %, and not told yet today: the spend (the caller sends the
        notice). At 100 % the user hears that the budget is used up instead."""
        spend = await self.reached(WARN_AT)
        if spend is None or spend.fraction >= 1.0 or \
                not await self._usage.claim_notice(spend.day, "warning", conversation_id):
            return None
        return spend

    async def allow(self, *, usd: float = 0.0, tokens: int = 0) -> bool:
        """Raise today's budget by ``usd`` / ``tokens``, once a day."""
        day, _, _ = self.day_bounds()
        return await self._usage.allow(day, usd=usd, tokens=tokens)
