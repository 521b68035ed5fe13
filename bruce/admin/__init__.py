"""The admin page: what Bruce did, for its owner, served by the daemon on ``admin.host:port``.

aiohttp and Jinja2, server-rendered, no front-end build and nothing from a CDN
(``bruce/admin/static`` holds the little CSS and JS there is, and the vendored uPlot that draws
the charts). ``auth`` owns the token, the
login session, CSRF and the login rate limit; ``server`` the app, its lifecycle, the gate, its
security headers and health; ``pages`` one class per group of pages (overview, charts, logs, llm,
turns, jobs, pairing, memory, artifacts, chat, metrics, evals), each with its ``routes()``. Everything but
``/healthz`` and ``/login`` needs the admin token.
"""

from bruce.admin.server import AdminServer

__all__ = ["AdminServer"]
