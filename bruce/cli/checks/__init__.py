"""The checks ``bruce doctor`` runs (``bruce/cli/doctor.py``), one module per subject: the
database and the machine (``storage``), the language models (``models``), the chat platforms and
a running daemon (``platforms``), the mailbox's IMAP and SMTP logins (``mail``), the CalDAV
calendars of MCP servers (``calendar``), the admin page (``admin``) and the systemd unit
(``systemd``).
Each check returns ``Finding``s (``findings``); none prints, none writes the real database.
"""
