"""Long-term memory rows: ``memory_facts``, ``memory_summaries`` and their FTS5 index
``memory_fts`` (kept in step in the same transaction, so a forgotten fact is gone from search
too). Separate from the conversation history and its session summaries on purpose.

Every fact and summary belongs to a person (``bruce.values.OWNER`` or a guest's key): the read
path, search, "the same fact again" and summaries each stay within one person's rows. ``None``
as a person (``get``, ``facts``, ``summaries``) is everyone's, for the owner on the machine."""

from __future__ import annotations

import re
import sqlite3
import unicodedata
from typing import Any

from bruce.errors import StoreError
from bruce.records import Fact, MemorySummary
from bruce.store.database import Database
from bruce.values import OWNER, FactStatus, FactType

__all__ = ["MemoryStore", "normalized"]


def normalized(text: str) -> str:
    """What makes two facts "the same": case, accents of spacing and punctuation aside."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(re.findall(r"\w+", folded))


def _fact(row: Any) -> Fact:
    return Fact(id=int(row["id"]), type=FactType(row["type"]), content=str(row["content"]),
                confidence=float(row["confidence"]), status=FactStatus(row["status"]), origin=str(row["origin"]),
                conversation_id=row["conversation_id"], source_turn_id=row["source_turn_id"],
                created_at=str(row["created_at"]), last_seen_at=str(row["last_seen_at"]),
                summarized_in=row["summarized_in"], person=str(row["person"]))


def _summary(row: Any) -> MemorySummary:
    return MemorySummary(id=int(row["id"]), content=str(row["content"]), period_start=str(row["period_start"]),
                         period_end=str(row["period_end"]), created_at=str(row["created_at"]),
                         person=str(row["person"]))


def fts_query(text: str) -> str | None:
    """Words of the user's query as an FTS5 query (each quoted: no operator can be injected);
    None when there is no word in it."""
    words = re.findall(r"\w+", unicodedata.normalize("NFKC", text))[:20]
    return " OR ".join(f'"{w}"' for w in words) if words else None


def _recent(db: sqlite3.Connection, limit: int, since: str, person: str) -> list[Fact]:
    rows = db.execute("SELECT * FROM memory_facts WHERE person = ? AND status = 'active' AND last_seen_at >= ?"
                      " ORDER BY last_seen_at DESC, id DESC LIMIT ?", (person, since, limit)).fetchall()
    return [_fact(r) for r in rows]


def _latest_summary(db: sqlite3.Connection, person: str) -> MemorySummary | None:
    row = db.execute("SELECT * FROM memory_summaries WHERE person = ? ORDER BY id DESC LIMIT 1", (person,)).fetchone()
    return _summary(row) if row else None


def _whose(person: str | None, *, first: bool = True) -> tuple[str, tuple[str, ...]]:
    """A WHERE clause (or an AND to one) keeping ``person``'s rows; nothing for None (everyone's)."""
    if person is None:
        return "", ()
    return (" WHERE person = ?" if first else " AND person = ?"), (person,)


class MemoryStore:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def remember(self, type_: FactType, content: str, *, confidence: float, origin: str,
                       conversation_id: str | None, source_turn_id: str | None,
                       person: str = OWNER) -> tuple[Fact, bool]:
        """Store a fact of ``person``, or refresh their active one that says the same (same type,
        normalized text). (the fact, whether it is new)."""
        args = (type_, content, confidence, origin, conversation_id, source_turn_id, person)
        try:
            return await self._remember(*args)
        except StoreError as exc:  # another process stored the same fact between our look and our write
            if not isinstance(exc.__cause__, sqlite3.IntegrityError):
                raise
            return await self._remember(*args)

    async def _remember(self, type_: FactType, content: str, confidence: float, origin: str,
                        conversation_id: str | None, source_turn_id: str | None, person: str) -> tuple[Fact, bool]:
        now = self._db.now()
        key = normalized(content)
        async with self._db.transaction() as db:
            cur = await db.execute("SELECT id FROM memory_facts WHERE person = ? AND type = ? AND normalized = ?"
                                   " AND status = 'active'", (person, str(type_), key))
            found = await cur.fetchone()
            if found is not None:
                await db.execute("UPDATE memory_facts SET last_seen_at = ?, confidence = MAX(confidence, ?)"
                                 " WHERE id = ?", (now, confidence, found[0]))
                fact_id, new = int(found[0]), False
            else:
                cur = await db.execute(
                    "INSERT INTO memory_facts (type, content, normalized, confidence, origin, conversation_id,"
                    " source_turn_id, created_at, last_seen_at, person) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (str(type_), content, key, confidence, origin, conversation_id, source_turn_id, now, now, person))
                fact_id, new = int(cur.lastrowid or 0), True
                await db.execute("INSERT INTO memory_fts (content, kind, ref) VALUES (?, 'fact', ?)",
                                 (content, fact_id))
        fact = await self.get(fact_id)
        assert fact is not None
        return fact, new

    async def get(self, fact_id: int, *, person: str | None = None) -> Fact | None:
        """The fact, if it is ``person``'s (None: anyone's)."""
        whose, params = _whose(person, first=False)
        row = await self._db.row(f"SELECT * FROM memory_facts WHERE id = ?{whose}", (fact_id, *params))
        return _fact(row) if row else None

    async def context(self, *, limit: int, since: str, person: str = OWNER) -> tuple[list[Fact], MemorySummary | None]:
        """What ``person``'s prompt's ``<memory>`` shows, in one trip: their active facts seen since
        ``since`` (newest first, at most ``limit``) and their latest summary."""
        return await self._db.read(lambda db: (_recent(db, limit, since, person) if limit else [],
                                               _latest_summary(db, person)))

    async def facts(self, *, include_archived: bool = True, person: str | None = None) -> list[Fact]:
        whose, params = _whose(person)
        where = whose if include_archived else (whose + " AND" if whose else " WHERE") + " status = 'active'"
        return [_fact(r) for r in await self._db.rows(f"SELECT * FROM memory_facts{where} ORDER BY id", params)]

    async def summaries(self, *, person: str | None = None) -> list[MemorySummary]:
        whose, params = _whose(person)
        return [_summary(r) for r in await self._db.rows(f"SELECT * FROM memory_summaries{whose} ORDER BY id", params)]

    async def latest_summary(self, *, person: str = OWNER) -> MemorySummary | None:
        return await self._db.read(lambda db: _latest_summary(db, person))

    async def unsummarized(self, *, person: str = OWNER) -> list[Fact]:
        rows = await self._db.rows("SELECT * FROM memory_facts WHERE person = ? AND summarized_in IS NULL"
                                   " AND status = 'active' ORDER BY id", (person,))
        return [_fact(r) for r in rows]

    async def add_summary(self, content: str, *, period_start: str, period_end: str, fact_ids: list[int],
                          turn_id: str | None, person: str = OWNER) -> int | None:
        """Store ``person``'s summary covering ``fact_ids`` (theirs), unless one of them was forgotten
        meanwhile (then None: the summary may speak of it, so it is not kept)."""
        now = self._db.now()
        async with self._db.transaction() as db:
            marks = ", ".join("?" * len(fact_ids))
            cur = await db.execute(f"SELECT COUNT(*) FROM memory_facts WHERE id IN ({marks}) AND summarized_in IS NULL"
                                   " AND person = ?", (*fact_ids, person))
            row = await cur.fetchone()
            if row is None or int(row[0]) != len(fact_ids):
                return None
            cur = await db.execute("INSERT INTO memory_summaries (content, period_start, period_end, turn_id, created_at,"
                                   " person) VALUES (?, ?, ?, ?, ?, ?)",
                                   (content, period_start, period_end, turn_id, now, person))
            summary_id = int(cur.lastrowid or 0)
            await db.execute(f"UPDATE memory_facts SET summarized_in = ? WHERE id IN ({marks})", (summary_id, *fact_ids))
            await db.execute("INSERT INTO memory_fts (content, kind, ref) VALUES (?, 'summary', ?)", (content, summary_id))
        return summary_id

    async def archive(self, *, older_than: str) -> int:
        """Facts a summary covers and last seen before ``older_than`` leave the read path."""
        _, count = await self._db.execute("UPDATE memory_facts SET status = 'archived' WHERE status = 'active'"
                                          " AND summarized_in IS NOT NULL AND last_seen_at < ?", (older_than,))
        return count

    async def search(self, query: str, *, limit: int = 10, person: str = OWNER) -> list[dict[str, Any]]:
        """``person``'s facts (active or archived) and summaries matching the query's words, best first."""
        match = fts_query(query)
        if match is None:
            return []
        rows = await self._db.rows(
            "SELECT kind, ref, content FROM memory_fts WHERE memory_fts MATCH ? AND ("
            "(kind = 'fact' AND ref IN (SELECT id FROM memory_facts WHERE person = ?))"
            " OR (kind = 'summary' AND ref IN (SELECT id FROM memory_summaries WHERE person = ?)))"
            " ORDER BY bm25(memory_fts) LIMIT ?", (match, person, person, limit))
        return [{"kind": r["kind"], "id": int(r["ref"]), "content": r["content"]} for r in rows]

    async def matching_facts(self, query: str, *, limit: int = 20, person: str = OWNER) -> list[Fact]:
        hits = await self.search(query, limit=limit * 2, person=person)
        found = [hit["id"] for hit in hits if hit["kind"] == "fact"][:limit]
        facts = [await self.get(i, person=person) for i in found]
        return [f for f in facts if f is not None]

    async def forget(self, fact_ids: list[int]) -> int:
        """Delete facts for good: their rows, their search entries, and every summary that covered
        one of them (a later summary builds on an earlier one, so those go too); the facts those
        summaries covered come back to the read path, to be summarized again without the
        forgotten ones. The number of facts deleted."""
        if not fact_ids:
            return 0
        marks = ", ".join("?" * len(fact_ids))
        async with self._db.transaction() as db:
            cur = await db.execute(f"SELECT person, MIN(summarized_in) FROM memory_facts WHERE id IN ({marks})"
                                   " GROUP BY person", fact_ids)
            firsts = [(str(r[0]), r[1]) for r in await cur.fetchall()]
            await db.execute(f"DELETE FROM memory_fts WHERE kind = 'fact' AND ref IN ({marks})", fact_ids)
            cur = await db.execute(f"DELETE FROM memory_facts WHERE id IN ({marks})", fact_ids)
            deleted = cur.rowcount
            for person, first in firsts:  # each person's summaries build on that person's earlier ones only
                if first is None:
                    continue
                await db.execute("UPDATE memory_facts SET summarized_in = NULL, status = 'active'"
                                 " WHERE person = ? AND summarized_in >= ?", (person, first))
                await db.execute("DELETE FROM memory_fts WHERE kind = 'summary' AND ref IN (SELECT id FROM"
                                 " memory_summaries WHERE person = ? AND id >= ?)", (person, first))
                await db.execute("DELETE FROM memory_summaries WHERE person = ? AND id >= ?", (person, first))
        return int(deleted)

    async def forget_all(self) -> int:
        async with self._db.transaction() as db:
            cur = await db.execute("DELETE FROM memory_facts")
            await db.execute("DELETE FROM memory_summaries")
            await db.execute("DELETE FROM memory_fts")
        return int(cur.rowcount)
