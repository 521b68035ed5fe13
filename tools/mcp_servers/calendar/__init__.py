"""A calendar as a standalone MCP server (stdio): a local SQLite file, or your own calendar on a
CalDAV server (Fastmail, iCloud, Nextcloud, Radicale...).

Run it with ``python -m tools.mcp_servers.calendar [--db PATH | --caldav URL] [--timezone ZONE]``
(a CalDAV login comes from ``$CALDAV_USERNAME`` and ``$CALDAV_PASSWORD``). Tools:

- ``calendar.free_busy``: busy events and free 30-minute ranges per local day;
- ``calendar.list_upcoming``: events that have not ended yet, soonest first (repeating ones expanded);
- ``calendar.propose_events``: validates events, reports conflicts, keeps them as a proposal; writes nothing;
- ``calendar.create_events``: writes a proposal, by its id; repeating it returns the existing events;
- ``calendar.update_event`` and ``calendar.delete_event``: change or remove one event by id;
- ``calendar.show_proposal``, ``calendar.show_change``, ``calendar.show_event``: write nothing;
  the previews (Bruce's dry run) of create_events, update_event and delete_event.

``store`` holds the SQLite table, ``caldav_store`` the CalDAV collection (both as ``backend``
describes), ``times`` the shared argument and time handling, ``server`` the reading tools and
``writes`` the writing ones; ``__main__`` reads the options and runs it.
"""
