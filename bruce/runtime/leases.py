"""One process per role and database: a lease kept in the database itself.

The scheduler (``scheduler``) and each chat channel's polling (``channel:<name>``) must run in
one process per database, however its path is spelled: a symlink, a bind mount or ``..`` all
reach the same file, and so the same ``leases`` row (``bruce/store/leases.py``). A lock file
beside the configured path could not promise that: two spellings, two lock files.

A process is one owner id, ``<host>:<pid>:<start>:<random>``. It takes a lease for ``ttl_s`` and renews
it every ``ttl_s / 4`` while it runs; on a clean stop it releases it. Another process takes a
lease over only when its holder is gone:

- its expiry has passed (a holder stopped renewing: killed, hung, or on a machine we cannot see);
- or it is on this machine and its process no longer exists (``kill -9``): taken at once, so a
  restart after a crash does not wait for the expiry.

A process that finds its lease taken over (it stalled past the expiry) stops using it: the
scheduler stops firing (and its claims need the lease, ``JobStore.claim_run``), and listeners
(``subscribe``) hear of it, e.g. the app stops that channel.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import socket
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import structlog

from bruce.clock import Clock, utc_iso
from bruce.store.leases import LeaseStore

__all__ = ["Leases", "SCHEDULER", "channel_lease", "new_owner", "owner_alive", "process_gone"]

log = structlog.get_logger(__name__)

SCHEDULER = "scheduler"


def channel_lease(name: str) -> str:
    return f"channel:{name}"


def new_owner() -> str:
    """This process's owner id, ``<host>:<pid>:<start>:<random>``: the machine, the process and
    when it started (so a pid reused later is not taken for it), and a random part (two apps in
    one process are two owners)."""
    return f"{socket.gethostname()}:{os.getpid()}:{_started(os.getpid())}:{secrets.token_hex(6)}"


def _started(pid: int) -> str:
    """The process's start time in clock ticks since boot (Linux ``/proc``), or "-" elsewhere."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "-"
    return stat.rpartition(")")[2].split()[19]  # field 22, counted after the command name


def process_gone(owner: str) -> bool:
    """True only when ``owner`` ran on this machine and that process has ended (its pid is free,
    or used by a process started since). Another machine, or an id we cannot read: False (we
    cannot tell; the lease's expiry decides)."""
    parts = owner.split(":")
    if len(parts) != 4 or parts[0] != socket.gethostname() or not parts[1].isdigit():
        return False
    pid = int(parts[1])
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # it exists, and is not ours to signal
        pass
    return parts[2] != "-" and _started(pid) not in ("-", parts[2])


def _on_this_machine(owner: str) -> bool:
    return owner.split(":")[0] == socket.gethostname()


async def owner_alive(store: LeaseStore, owner: str | None, *, now: str) -> bool:
    """Whether the process that claimed something may still be working on it. Nobody recorded:
    no. On this machine: exactly while its process runs. Elsewhere: while it holds a lease that
    has not expired."""
    if owner is None or process_gone(owner):
        return False
    if _on_this_machine(owner):
        return True
    return await store.holds_any(owner, now=now)


class Leases:
    def __init__(self, *, store: LeaseStore, clock: Clock, owner: str | None = None, ttl_s: float = 60.0) -> None:
        self._store = store
        self._clock = clock
        self.owner = owner or new_owner()
        self.ttl_s = ttl_s
        self._held: set[str] = set()
        self._listeners: list[Callable[[str], None]] = []
        self._renewing: asyncio.Task[None] | None = None

    def holds(self, name: str) -> bool:
        return name in self._held

    async def take(self, name: str) -> str | None:
        """Hold ``name``: None once it is ours, else the owner id of the live process holding it."""
        now = self._clock.now()
        seen = await self._store.holder(name)
        if seen is not None and seen[0] != self.owner and seen[1] > utc_iso(now) and not process_gone(seen[0]):
            return seen[0]
        taken = await self._store.take(name, self.owner, now=utc_iso(now), expires_at=self._expiry(),
                                       replacing=seen[0] if seen is not None else None)
        if not taken:  # another process took it between our look and our write
            found = await self._store.holder(name)
            return found[0] if found is not None else "another process"
        if seen is not None and seen[0] != self.owner:
            log.warning("lease.taken_over", lease=name, previous=seen[0], expired_at=seen[1])
        self._held.add(name)
        if self._renewing is None or self._renewing.done():
            self._renewing = asyncio.create_task(self._renew_loop(), name="leases.renew")
        return None

    async def release(self, name: str) -> None:
        if name in self._held:
            self._held.discard(name)
            await self._store.release(name, self.owner)

    def subscribe(self, listener: Callable[[str], None]) -> Callable[[], None]:
        """``listener(name)`` hears of each lease this process lost; returns the unsubscribe."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    async def renew(self) -> list[str]:
        """Move every held lease's heartbeat on; the names found taken over (now dropped)."""
        lost = []
        for name in sorted(self._held):
            if not await self._store.renew(name, self.owner, now=utc_iso(self._clock.now()), expires_at=self._expiry()):
                lost.append(name)
        for name in lost:
            self._held.discard(name)
            log.error("lease.lost", lease=name, hint="another process took it over after this one stopped renewing")
            for listener in list(self._listeners):
                listener(name)
        return lost

    async def close(self) -> None:
        """Stop renewing and release every lease (before the store closes)."""
        if self._renewing is not None:
            self._renewing.cancel()
            await asyncio.gather(self._renewing, return_exceptions=True)
            self._renewing = None
        for name in sorted(self._held):
            try:
                await self.release(name)
            except Exception:  # the expiry frees it anyway
                log.exception("lease.release_failed", lease=name)

    async def _renew_loop(self) -> None:
        while self._held:
            await asyncio.sleep(self.ttl_s / 4)
            try:
                await self.renew()
            except Exception:  # a locked database: the next beat tries again, well within the expiry
                log.exception("lease.renew_failed")

    def _expiry(self) -> str:
        return utc_iso(self._clock.now() + timedelta(seconds=self.ttl_s))
