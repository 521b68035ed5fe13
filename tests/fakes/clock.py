"""A clock the test moves by hand."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta


class FakeClock:
    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
        self._mono = 1000.0
        self.sleeps: list[float] = []  # every backoff asked for, in order
        self.on_sleep: list[object] = []  # callables run (once each) at the next sleep

    def now(self) -> datetime:
        return self._now

    def monotonic(self) -> float:
        return self._mono

    def advance(self, **delta: float) -> None:
        step = timedelta(**delta)
        self._now += step
        self._mono += step.total_seconds()

    def set(self, moment: datetime) -> None:
        self._now = moment

    async def sleep(self, seconds: float) -> None:
        """Record the wait and move time on instead of waiting."""
        self.sleeps.append(seconds)
        hooks, self.on_sleep = self.on_sleep, []
        for hook in hooks:
            hook()  # type: ignore[operator]
        self.advance(seconds=seconds)
        await asyncio.sleep(0)
