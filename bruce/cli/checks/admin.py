"""``bruce doctor``'s check of the admin page: its port, where it listens, its token."""

from __future__ import annotations

import errno
import socket
from pathlib import Path
from typing import Any

from bruce.cli.checks.findings import Finding, Mark, fill, named, variable
from bruce.config.rules import MIN_ADMIN_TOKEN
from bruce.config.schema import AdminConfig, Config

__all__ = ["MIN_ADMIN_TOKEN", "check_admin"]


def _port_problem(host: str, port: int) -> str | None:
    """Why ``host:port`` cannot be bound now, or None."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror:
        return f"the host {host!r} is not known"
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server will
        try:
            sock.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return "is in use (by a Bruce already running, or another program)"
            return f"cannot be bound ({exc.strerror})"
    return None


def check_admin(config: Config, raw: Any, *, daemon_running: bool = False) -> list[Finding]:
    """``bruce run`` serves the admin page: a token it would refuse blocks start-up; a port in
    use is a warning, unless the daemon doctor found running holds it (it serves the page there)."""
    admin = config.admin
    if not admin.enabled:
        return [Finding(Mark.SKIP, "admin: disabled")]
    return _admin_checks(admin, raw, config.storage.path.parent, daemon_running)


def _admin_checks(admin: AdminConfig, raw: Any, data_dir: Path, daemon_running: bool) -> list[Finding]:
    found = []
    where = f"{admin.host}:{admin.port}"
    problem = _port_problem(admin.host, admin.port)
    if problem and daemon_running and problem.startswith("is in use"):
        found.append(Finding(Mark.OK, f"admin: {where} is served by the running daemon"))
    elif problem:
        found.append(Finding(Mark.WARN, f"admin: {where} {problem}", "stop the other program or set admin.port"))
    else:
        found.append(Finding(Mark.OK, f"admin: {where} is free"))
    if admin.host not in ("127.0.0.1", "::1", "localhost"):
        found.append(Finding(Mark.WARN, f"admin: listens on {admin.host}, beyond this machine",
                             "set admin.host: 127.0.0.1 and reach it through SSH or a reverse proxy"))
    var = variable(raw, "admin", "token")
    token = admin.token.get_secret_value() if admin.token else ""
    generate = "python3 -c 'import secrets; print(secrets.token_urlsafe(32))'"
    if not token and admin.host in ("127.0.0.1", "::1", "localhost"):
        found.append(Finding(Mark.OK, "admin: no token set" + (f" (${var} is empty)" if var else "")
                             + f"; one is generated at the first start into {data_dir / 'admin.token'} (mode 0600)"))
    elif not token:
        found.append(Finding(Mark.FAIL, "admin: no token, and the page listens beyond this machine"
                             + (f" (${var} is empty)" if var else ""),
                             fill(var, f"a long random value ({generate})", "admin.token")))
    elif len(token) < MIN_ADMIN_TOKEN:
        found.append(Finding(Mark.FAIL, f"admin: the token from {named(raw, ('admin', 'token'), token)} is "
                             f"{len(token)} characters", f"use at least {MIN_ADMIN_TOKEN}: {generate}"))
    else:
        found.append(Finding(Mark.OK, f"admin: token from {named(raw, ('admin', 'token'), token)} is set"))
    return found
