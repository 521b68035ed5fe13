"""A local calendar as a standalone MCP server (stdio), backed by one SQLite file.

Run it with ``python -m tools.mcp_servers.calendar [--db PATH] [--timezone ZONE]``. Tools:

- ``calendar.free_busy``: busy events and free 30-minute ranges per local day;
- ``calendar.list_upcoming``: events that have not ended yet, soonest first;
- ``calendar.propose_events``: validates events and reports conflicts; writes nothing;
- ``calendar.create_events``: writes events, all or none; repeating one returns the existing event.

``store`` holds the SQLite table, ``server`` the tools; ``__main__`` reads the options and runs it.
"""
