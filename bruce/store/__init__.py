"""The one database, by concern: ``Store.open(path, clock)`` gives one connection and one write
lock shared by ``messages`` (conversations, messages, summaries, turns), ``outbound`` (the
outbox's rows: outbound messages to send, and how far each got), ``audit`` (llm_calls,
tool_executions, idempotency keys), ``confirmations``, ``artifacts`` and ``pairing``
(pairing_requests, paired_users), ``jobs`` (proactive_jobs, job_runs), ``leases`` (which process
holds the scheduler and each channel), ``media`` (what was made of a message's attachments), ``usage`` (sums over llm_calls; budget_allowances,
budget_notices), ``memory`` (facts, summaries, their search index) and ``stats`` (totals across
tables, for the metrics) and ``overview`` (the admin overview's panels and charts). A new concern gets a module here and an attribute on ``Store``. The
records these hand out are values in ``bruce.records``."""

from __future__ import annotations

from pathlib import Path

from bruce.clock import Clock
from bruce.store.artifacts import ArtifactStore
from bruce.store.audit import AuditStore
from bruce.store.confirmations import ConfirmationStore
from bruce.store.database import Database
from bruce.store.jobs import JobStore
from bruce.store.leases import LeaseStore
from bruce.store.media import MediaStore
from bruce.store.memory import MemoryStore
from bruce.store.messages import MessageStore
from bruce.store.outbound import OutboundStore
from bruce.store.overview import OverviewStore
from bruce.store.pairing import PairingStore
from bruce.store.stats import StatsStore
from bruce.store.usage import UsageStore

__all__ = ["Store"]


class Store:
    def __init__(self, database: Database) -> None:
        self.database = database
        self.messages = MessageStore(database)
        self.outbound = OutboundStore(database)
        self.audit = AuditStore(database)
        self.confirmations = ConfirmationStore(database)
        self.artifacts = ArtifactStore(database)
        self.pairing = PairingStore(database)
        self.jobs = JobStore(database)
        self.leases = LeaseStore(database)
        self.media = MediaStore(database)
        self.usage = UsageStore(database)
        self.memory = MemoryStore(database)
        self.stats = StatsStore(database)
        self.overview = OverviewStore(database)

    @classmethod
    async def open(cls, path: Path | str, clock: Clock, *, busy_timeout_ms: int = 5000, create: bool = True) -> Store:
        """``create=False``: StoreError when there is no database file yet (nothing is made)."""
        return cls(await Database.open(path, clock, busy_timeout_ms=busy_timeout_ms, create=create))

    async def migrate(self) -> int:
        return await self.database.migrate()

    async def close(self) -> None:
        await self.database.close()
