"""Who may see the admin page: the admin token, a login session, CSRF, and a login rate limit.

* The token is ``admin.token``; without one, a token is generated at the first start and kept in
  ``<storage folder>/admin.token`` (mode 0600), and the log says where. A host beyond loopback
  without a configured token is refused at start-up.
* The JSON API takes ``Authorization: Bearer TOKEN``; pages also take the session cookie the
  ``/login`` form sets (HttpOnly, SameSite=Strict, random, kept in memory: a restart logs out).
* A state-changing request made with the cookie must carry the session's CSRF token (form field
  ``csrf`` or header ``X-CSRF-Token``); with the Bearer header there is no ambient credential, so
  none is needed.
* Tokens are compared in constant time. Failed logins (the form, or a wrong Bearer token) are
  limited twice: a client address failing ``max_failures`` times within a minute is refused
  (429) until the minute has passed, and when all addresses together fail ``max_total_failures``
  times within a minute, every login from anywhere is refused for ``lockout_s`` (a local user
  can bind any 127.x address, so the per-address limit alone does not bound guessing).
* A configured token has at least ``MIN_ADMIN_TOKEN`` (32) characters (``bruce.config.rules``,
  the rule ``bruce config check`` applies too); a generated one has 43.
"""

from __future__ import annotations

import hmac
import os
import secrets
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from bruce.config.rules import MIN_ADMIN_TOKEN, admin_token_problem, is_loopback
from bruce.errors import ConfigError

__all__ = ["resolve_token", "Sessions", "LoginLimiter", "is_loopback", "COOKIE"]

COOKIE = "bruce_session"


def resolve_token(configured: str | None, *, host: str, data_dir: Path) -> tuple[str, Path | None]:
    """The token to require, and the file it was generated into (None: it is the configured one)."""
    if configured:
        problem = admin_token_problem(configured)
        if problem:
            raise ConfigError(problem)
        return configured, None
    if not is_loopback(host):
        raise ConfigError(f"admin.host is {host!r}, beyond this machine, and admin.token is not set: set admin.token "
                          f"(at least {MIN_ADMIN_TOKEN} random characters) or keep admin.host at 127.0.0.1")
    path = data_dir / "admin.token"
    if path.exists():
        token = path.read_text().strip()
        if len(token) >= MIN_ADMIN_TOKEN:
            return token, path
    token = secrets.token_urlsafe(32)
    data_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(token + "\n")
    os.chmod(path, 0o600)
    return token, path


def same(given: str | None, expected: str) -> bool:
    return given is not None and hmac.compare_digest(given.encode(), expected.encode())


@dataclass
class Session:
    csrf: str
    expires: float


class Sessions:
    def __init__(self, *, lifetime_s: float = 12 * 3600) -> None:
        self._lifetime = lifetime_s
        self._sessions: dict[str, Session] = {}

    def new(self, now: float) -> tuple[str, Session]:
        sid = secrets.token_urlsafe(32)
        session = Session(csrf=secrets.token_urlsafe(24), expires=now + self._lifetime)
        self._sessions[sid] = session
        return sid, session

    def get(self, sid: str | None, now: float) -> Session | None:
        if not sid:
            return None
        session = self._sessions.get(sid)
        if session is None or session.expires <= now:
            self._sessions.pop(sid, None)
            return None
        return session

    def end(self, sid: str | None) -> None:
        if sid:
            self._sessions.pop(sid, None)


class LoginLimiter:
    """Failed logins per client address and for all addresses together (``now``: monotonic s)."""

    def __init__(self, *, max_failures: int = 5, window_s: float = 60.0, max_total_failures: int = 20,
                 lockout_s: float = 300.0) -> None:
        self._max = max_failures
        self._window = window_s
        self._max_total = max_total_failures
        self._lockout_s = lockout_s
        self._failures: dict[str, deque[float]] = {}
        self._all: deque[float] = deque()  # every failure of the last window, whoever made it
        self._locked_until: float | None = None

    def blocked(self, client: str, now: float) -> float | None:
        """Seconds to wait, or None when this client may try."""
        if self._locked_until is not None:
            if now < self._locked_until:
                return self._locked_until - now
            self._locked_until = None
        times = self._failures.get(client)
        if not times:
            return None
        _expire(times, now - self._window)
        if len(times) < self._max:
            return None
        return times[0] + self._window - now

    def failed(self, client: str, now: float) -> None:
        self._failures.setdefault(client, deque()).append(now)
        if len(self._failures) > 10_000:  # a ceiling on what strangers can make us keep
            self._failures.pop(next(iter(self._failures)))
        self._all.append(now)
        _expire(self._all, now - self._window)
        if len(self._all) >= self._max_total:
            self._locked_until = now + self._lockout_s
            self._all.clear()


def _expire(times: deque[float], before: float) -> None:
    while times and times[0] <= before:
        times.popleft()
