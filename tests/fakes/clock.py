"""A clock the test moves by hand."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta


class FakeClock:
    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
        self._mono = 1000.0

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
