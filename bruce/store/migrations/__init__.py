"""The database schema, as an ordered list of migrations keyed by ``PRAGMA user_version``.

One module per schema version, ``vNN_<what it adds>.py``, each holding its ``SCRIPT``. To change
the schema, add the next module and append its script to ``MIGRATIONS``; never edit one that has
shipped. ``Database.migrate`` runs them with foreign keys off (so a table can be rebuilt,
SQLite's way to change a CHECK) and checks them with ``PRAGMA foreign_key_check`` before they
commit.
"""

from __future__ import annotations

from bruce.store.migrations import (
    v01_first_schema,
    v02_confirmations,
    v03_turn_counts_and_resends,
    v04_pairing,
    v05_sessions,
    v06_proactive_jobs,
    v07_tool_cache,
    v08_budget,
    v09_mcp,
    v10_long_term_memory,
    v11_outbound_payloads,
)

__all__ = ["MIGRATIONS"]

MIGRATIONS: list[str] = [
    v01_first_schema.SCRIPT,
    v02_confirmations.SCRIPT,
    v03_turn_counts_and_resends.SCRIPT,
    v04_pairing.SCRIPT,
    v05_sessions.SCRIPT,
    v06_proactive_jobs.SCRIPT,
    v07_tool_cache.SCRIPT,
    v08_budget.SCRIPT,
    v09_mcp.SCRIPT,
    v10_long_term_memory.SCRIPT,
    v11_outbound_payloads.SCRIPT,
]
