"""``artifacts``: documents the assistant saved, each one file plus one row."""

from __future__ import annotations

from bruce.records import ArtifactRecord
from bruce.store.database import Database
from bruce.store.rows import from_row

__all__ = ["ArtifactStore"]


class ArtifactStore:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def add(
        self, *, artifact_id: str, conversation_id: str | None, turn_id: str | None, title: str | None,
        filename: str, fmt: str, path: str, size_bytes: int, sha256: str,
    ) -> None:
        await self._db.execute(
            "INSERT INTO artifacts (id, conversation_id, turn_id, title, filename, format, path, size_bytes,"
            " sha256, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (artifact_id, conversation_id, turn_id, title, filename, fmt, path, size_bytes, sha256, self._db.now()),
        )

    async def get(self, artifact_id: str) -> ArtifactRecord | None:
        row = await self._db.row("SELECT * FROM artifacts WHERE id = ?", (artifact_id,))
        return from_row(ArtifactRecord, row) if row else None

    async def recent(self, *, limit: int = 100) -> list[ArtifactRecord]:
        rows = await self._db.rows("SELECT * FROM artifacts ORDER BY created_at DESC, id LIMIT ?", (limit,))
        return [from_row(ArtifactRecord, r) for r in rows]

    async def existing_paths(self, paths: set[str]) -> set[str]:
        """Which of these ``/artifacts/<id>/<filename>`` paths name a stored artifact."""
        found = set()
        for path in paths:
            parts = path.split("/")
            if len(parts) == 4 and await self._db.row(
                    "SELECT 1 FROM artifacts WHERE id = ? AND filename = ?", (parts[2], parts[3])):
                found.add(path)
        return found
