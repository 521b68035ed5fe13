"""Rate limits at admission: how many messages a sender, and a conversation, may send per
minute and per hour before Bruce stops reading them for a while (``limits`` in the config).

Sliding windows kept in memory (a restart forgets them): a message is admitted when, for each
of its keys (the sender on that channel, and the conversation), fewer than the limit were
admitted in the last minute and in the last hour. An admitted message is counted at once
(``take``), before anything awaits, so a burst arriving together cannot slip through; one that
turns out to be a platform redelivery is given back. Over the limit, the result says when the
sender may continue, and whether they were already told in this episode (one notice each).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable
from dataclasses import dataclass
from datetime import datetime, timedelta

__all__ = ["RateLimiter", "Admission", "Quiet"]

MINUTE = timedelta(minutes=1)
HOUR = timedelta(hours=1)


@dataclass(frozen=True, slots=True)
class Admission:
    admitted: bool
    keys: tuple[str, ...]
    at: datetime
    retry_at: datetime | None = None  # over the limit: the first moment a message is admitted again
    notify: bool = False  # over the limit, and not told yet in this episode


class RateLimiter:
    def __init__(self, *, per_minute: int, per_hour: int) -> None:
        self._per_minute = per_minute
        self._per_hour = per_hour
        self._admitted: dict[str, deque[datetime]] = {}
        self._told_until: dict[str, datetime] = {}

    def take(self, keys: tuple[str, ...], now: datetime) -> Admission:
        """Admit (and count) a message under every key, or say until when it is refused."""
        retry: datetime | None = None
        for key in keys:
            times = self._window(key, now)
            in_minute = [t for t in times if t > now - MINUTE]
            if len(in_minute) >= self._per_minute:
                retry = max(retry or now, in_minute[-self._per_minute] + MINUTE)
            if len(times) >= self._per_hour:
                retry = max(retry or now, times[-self._per_hour] + HOUR)
        if retry is None:
            for key in keys:
                self._admitted.setdefault(key, deque()).append(now)
            return Admission(True, keys, now)
        told = any(self._told_until.get(key, now) > now for key in keys)
        for key in keys:
            self._told_until[key] = max(self._told_until.get(key, retry), retry)
        return Admission(False, keys, now, retry, notify=not told)

    def give_back(self, admission: Admission) -> None:
        """The admitted message was a redelivery, already counted once: uncount it."""
        if not admission.admitted:
            return
        for key in admission.keys:
            times = self._admitted.get(key)
            if times and admission.at in times:
                times.remove(admission.at)

    def _window(self, key: str, now: datetime) -> deque[datetime]:
        times = self._admitted.get(key)
        if times is None:
            return deque()
        while times and times[0] <= now - HOUR:
            times.popleft()
        if not times:
            del self._admitted[key]
        return times


class Quiet:
    """Say something to the same key (a stranger) at most once per ``quiet_s``: a refusal, an
    ``/id`` answer. Memory only (a restart forgets it), and bounded: past ``keep`` keys, the
    ones whose quiet time is over are dropped."""

    def __init__(self, quiet_s: float, *, keep: int = 1000) -> None:
        self._quiet_s = quiet_s
        self._keep = keep
        self._said: dict[Hashable, float] = {}  # key -> monotonic time it was last said to

    def first_in_a_while(self, key: Hashable, now: float) -> bool:
        """True (and remembered) unless ``key`` was told less than ``quiet_s`` ago (``now``:
        monotonic seconds)."""
        last = self._said.get(key)
        if last is not None and now - last < self._quiet_s:
            return False
        if len(self._said) >= self._keep:
            self._said = {k: t for k, t in self._said.items() if now - t < self._quiet_s}
        self._said[key] = now
        return True
