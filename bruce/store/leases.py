"""``leases``: which process holds a role (the scheduler, a channel's polling) for this database.

Each change is one statement, so it is atomic however many processes race: a lease is taken
only from nobody, from its own owner, or from the holder the taker saw and judged gone (a
compare-and-set on that owner); it is renewed and released only by its owner."""

from __future__ import annotations

from bruce.store.database import Database

__all__ = ["LeaseStore"]


class LeaseStore:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def holder(self, name: str) -> tuple[str, str] | None:
        """(owner, expires_at) of the lease, or None when nobody holds it."""
        row = await self._db.row("SELECT owner, expires_at FROM leases WHERE name = ?", (name,))
        return (str(row["owner"]), str(row["expires_at"])) if row else None

    async def take(self, name: str, owner: str, *, now: str, expires_at: str, replacing: str | None) -> bool:
        """Hold ``name`` until ``expires_at``: True when it was free, ours already, or still held
        by ``replacing`` (the holder the caller saw and judged gone); False when someone else has it."""
        _, count = await self._db.execute(
            "INSERT INTO leases (name, owner, taken_at, heartbeat_at, expires_at) VALUES (?, ?, ?, ?, ?)"
            " ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, heartbeat_at = excluded.heartbeat_at,"
            " expires_at = excluded.expires_at,"
            " taken_at = CASE WHEN leases.owner = excluded.owner THEN leases.taken_at ELSE excluded.taken_at END"
            " WHERE leases.owner = excluded.owner OR leases.owner IS ?",
            (name, owner, now, now, expires_at, replacing))
        return count == 1

    async def renew(self, name: str, owner: str, *, now: str, expires_at: str) -> bool:
        """Move the heartbeat on; False when the lease is no longer ``owner``'s (taken over)."""
        _, count = await self._db.execute("UPDATE leases SET heartbeat_at = ?, expires_at = ? WHERE name = ?"
                                          " AND owner = ?", (now, expires_at, name, owner))
        return count == 1

    async def release(self, name: str, owner: str) -> None:
        await self._db.execute("DELETE FROM leases WHERE name = ? AND owner = ?", (name, owner))

    async def holds_any(self, owner: str, *, now: str) -> bool:
        """Whether ``owner`` holds a lease that has not expired (it is alive, as far as we can tell)."""
        row = await self._db.row("SELECT 1 FROM leases WHERE owner = ? AND expires_at > ? LIMIT 1", (owner, now))
        return row is not None
