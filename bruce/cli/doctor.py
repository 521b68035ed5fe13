"""``bruce doctor``: is this setup ready to start? One line per check, greppable:

    ✓ what is fine
    ✗ what blocks start-up — fix: what to do
    ! what works but deserves a look — fix: what to do
    – what was not checked, and why

The exit status is 2 when the config itself is invalid (nothing else is checked then), 1 when
any line is ✗, else 0. Tokens and keys are never printed: a secret is named by the variable it
came from (``$TELEGRAM_BOT_TOKEN``), or by its last four characters when the config holds it.
The LLM check makes one tiny call per model (primary and each fallback) through ``LLMService``,
recorded in a scratch in-memory database: the real one is only opened, never written by a call.
"""

from __future__ import annotations

import argparse
import asyncio
import errno
import os
import pwd
import re
import shlex
import shutil
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from bruce.clock import SystemClock
from bruce.config.loader import load_config
from bruce.config.reader import parse_yaml
from bruce.config.schema import AdminConfig, ChannelSection, Config, ModelEndpoint
from bruce.errors import ConfigError, LLMNotConfigured, LLMUnavailable, StoreError

__all__ = ["add_arguments", "doctor_command", "diagnose", "Mark", "Finding", "SYSTEMD_UNIT"]

SYSTEMD_UNIT = Path("/etc/systemd/system/bruce.service")
LOW_DISK_BYTES = 100 * 1024 * 1024
MIN_ADMIN_TOKEN = 16
TELEGRAM_API = "https://api.telegram.org"
DISCORD_API = "https://discord.com/api/v10"  # discord.py's Route.BASE
_PROBE = [{"role": "user", "content": "Reply with the single word: ok"}]
_REF = re.compile(r"\s*\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-[^}]*)?\}\s*")

Out = Callable[[str], None]


class Mark(StrEnum):
    OK = "✓"
    FAIL = "✗"
    WARN = "!"
    SKIP = "–"


@dataclass(frozen=True, slots=True)
class Finding:
    mark: Mark
    text: str
    fix: str | None = None

    def line(self) -> str:
        return f"{self.mark} {self.text}" + (f" — fix: {self.fix}" if self.fix else "")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-llm", action="store_true", help="skip the call to each model")
    parser.add_argument("--timeout", type=float, default=15.0, metavar="S", help="per network check (default 15)")
    parser.add_argument("--unit", type=Path, default=SYSTEMD_UNIT, help=f"systemd unit to check (default {SYSTEMD_UNIT})")


def doctor_command(config_path: Path, args: argparse.Namespace) -> int:
    return asyncio.run(diagnose(config_path, llm=not args.no_llm, timeout_s=args.timeout, unit=args.unit))


async def diagnose(config_path: Path, *, environ: Mapping[str, str] | None = None, llm: bool = True,
                   timeout_s: float = 15.0, unit: Path = SYSTEMD_UNIT, out: Out = print) -> int:
    """Run every check, printing each line as it is known; return the exit status."""
    from bruce.cli.main import check_config
    from bruce.log import Redactor, configure_logging

    environ = os.environ if environ is None else environ
    try:
        config = load_config(config_path, environ)
        check_config(config, source=str(config_path))
    except ConfigError as exc:
        out(Finding(Mark.FAIL, f"config {config_path} is invalid", "correct these keys, then run bruce doctor again").line())
        for problem in exc.problems:
            out(f"    {problem}")
        return 2
    configure_logging(level="error", fmt=config.logging.format, redactor=Redactor(config.secrets()))
    raw = parse_yaml(Path(config_path).read_text(encoding="utf-8"))
    findings = [Finding(Mark.OK, f"config {config_path}: valid, as `bruce run` checks it")]
    findings += _secrets_in_file(raw)
    for finding in findings:
        out(finding.line())
    checks: list[list[Finding]] = []
    for found in (await _database(config), _disk(config), _timezone(config),
                  await _llm(config, raw, environ, timeout_s) if llm else [Finding(Mark.SKIP, "llm: not called (--no-llm)")],
                  await _channels(config, raw, timeout_s), await _daemon(config), _mcp(config), _admin(config, raw),
                  _systemd(config, unit)):
        for finding in found:
            out(finding.line())
        checks.append(found)
    failed = any(f.mark is Mark.FAIL for found in [findings, *checks] for f in found)
    return 1 if failed else 0


# -- where a secret came from --------------------------------------------------------------------

def _raw_at(raw: Any, *keys: str | int) -> Any:
    for key in keys:
        if isinstance(raw, dict) and isinstance(key, str):
            raw = raw.get(key)
        elif isinstance(raw, list) and isinstance(key, int) and key < len(raw):
            raw = raw[key]
        else:
            return None
    return raw


def _variable(raw: Any, *keys: str | int) -> str | None:
    """The NAME of a value written as ``${NAME}`` in the file, else None."""
    value = _raw_at(raw, *keys)
    match = _REF.fullmatch(value) if isinstance(value, str) else None
    return match.group(1) if match else None


def _named(raw: Any, keys: tuple[str | int, ...], value: str) -> str:
    """How to refer to a secret without showing it."""
    name = _variable(raw, *keys)
    if name:
        return f"${name}"
    return f"****{value[-4:]}" if len(value) >= 12 else "****"


def _fill(var: str | None, what: str, key: str) -> str:
    """The fix for a secret that is not set."""
    if var is None:
        return f'set {key}: "${{NAME}}" and NAME to {what} in .env'
    return f"set {var} to {what} in .env and load it: set -a; . ./.env; set +a"


_SECRET_KEYS: tuple[tuple[str, ...], ...] = (
    ("llm", "api_key"), ("channels", "telegram", "token"), ("channels", "discord", "token"), ("admin", "token"),
    ("tools", "web", "brave_api_key"),
)


def _secrets_in_file(raw: Any) -> list[Finding]:
    found = []
    for keys in _SECRET_KEYS:
        value = _raw_at(raw, *keys)
        if isinstance(value, str) and value.strip() and "${" not in value:
            path = ".".join(keys)
            found.append(Finding(Mark.WARN, f"{path} is written in the config file itself",
                                 f"move it to .env and write {path.rsplit('.', 1)[-1]}: \"${{NAME}}\""))
    return found


# -- storage -------------------------------------------------------------------------------------

def _existing_folder(path: Path) -> Path:
    folder = path
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return folder


def _user() -> str:
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:  # a uid with no passwd entry (a container)
        return str(os.geteuid())


async def _database(config: Config) -> list[Finding]:
    from bruce.store import Store

    path = config.storage.path
    if not path.exists():
        folder = _existing_folder(path.parent)
        if os.access(folder, os.W_OK | os.X_OK):
            return [Finding(Mark.OK, f"database: no database yet, it will be created at {path} on first run")]
        return [Finding(Mark.FAIL, f"database: {folder} is not writable, so {path} cannot be created",
                        f"make {folder} writable for {_user()}, or point storage.path elsewhere")]
    try:
        store = await Store.open(path, SystemClock(), busy_timeout_ms=config.storage.busy_timeout_ms, create=False)
    except StoreError as exc:
        return [Finding(Mark.FAIL, f"database {path}: {exc}", "see docs/operations.md (backups, restore)")]
    try:
        version = await store.migrate()
    finally:
        await store.close()
    if not (os.access(path, os.W_OK) and os.access(path.parent, os.W_OK | os.X_OK)):
        return [Finding(Mark.FAIL, f"database {path}: schema version {version}, but not writable",
                        f"make {path} and {path.parent} writable for {_user()}")]
    return [Finding(Mark.OK, f"database {path}: writable, schema version {version}")]


def _disk(config: Config) -> list[Finding]:
    folder = _existing_folder(config.storage.path.parent)
    free = shutil.disk_usage(folder).free
    text = f"disk: {free / 1024**2:,.0f} MB free at {folder}"
    if free < LOW_DISK_BYTES:
        return [Finding(Mark.WARN, text, f"free some space (below {LOW_DISK_BYTES // 1024**2} MB writes may fail)")]
    return [Finding(Mark.OK, text)]


def _timezone(config: Config) -> list[Finding]:
    now = SystemClock().now().astimezone(config.assistant.zone)
    return [Finding(Mark.OK, f"timezone: {config.assistant.timezone} (now {now:%H:%M}, UTC{now:%z})")]


# -- the language models -------------------------------------------------------------------------

def _llm_fix(reason: str, endpoint: ModelEndpoint, key: str | None) -> str:
    where = f"llm.api_base ({endpoint.api_base})" if endpoint.api_base else "the network"
    if "refused" in reason or "connect" in reason:
        return f"check {where} and that the server there is running"
    if "key" in reason:
        return f"put a valid key in {key}" if key else "check the model's API key"
    if "rejected" in reason:
        return f"check the model name {endpoint.model!r} (and that the key may use it)"
    if "timed out" in reason:
        return f"check {where}; the model did not answer in time"
    return "check the provider's status page and the llm settings"


async def _probe(config: Config, index: int, endpoint: ModelEndpoint, environ: Mapping[str, str], store: Any,
                 key: str | None, timeout_s: float) -> Finding:
    from bruce.config.schema import LLMConfig
    from bruce.llm.service import LLMService
    from bruce.turns.scope import TurnScope, new_turn_id
    from bruce.values import TurnSource

    label = f"llm {endpoint.model}" if index == 0 else f"llm fallback {index} {endpoint.model}"
    timeout = min(timeout_s, config.llm.timeout_s)
    one = LLMConfig(model=endpoint.model, api_base=endpoint.api_base, api_key=endpoint.api_key, num_retries=0,
                    timeout_s=timeout, turn_deadline_s=timeout + 1, circuit_failures=0, stream=False)
    clock = SystemClock()
    scope = TurnScope(turn_id=new_turn_id(), conversation_id="doctor:llm", user_id=None)
    await store.messages.start_turn(scope.turn_id, scope.conversation_id, source=TurnSource.CHAT,
                                    inbound_message_id=None)
    started = clock.monotonic()
    try:
        await LLMService(one, store=store, clock=clock, environ=environ).complete(list(_PROBE), scope=scope)
    except LLMNotConfigured as exc:
        return Finding(Mark.FAIL, f"{label}: no API key or endpoint configured", exc.hint)
    except LLMUnavailable as exc:
        reason = "; ".join(r for _, r in exc.attempts)
        return Finding(Mark.FAIL, f"{label}: did not answer ({reason})", _llm_fix(reason, endpoint, key))
    return Finding(Mark.OK, f"{label}: answered in {clock.monotonic() - started:.1f} s")


async def _llm(config: Config, raw: Any, environ: Mapping[str, str], timeout_s: float) -> list[Finding]:
    from bruce.llm.service import provider_key_env
    from bruce.store import Store

    store = await Store.open(":memory:", SystemClock())  # the probes' llm_calls rows go nowhere
    try:
        await store.messages.ensure_conversation("doctor:llm", "doctor", "llm")
        probes = []
        for index, endpoint in enumerate(config.llm.endpoints()):
            own = index > 0 and isinstance(config.llm.fallbacks[index - 1], ModelEndpoint)
            keys: tuple[str | int, ...] = ("llm", "fallbacks", index - 1, "api_key") if own else ("llm", "api_key")
            name = _variable(raw, *keys)
            key = f"${name}" if name else (f"${provider_key_env(endpoint.model)}"
                                           if provider_key_env(endpoint.model) and not endpoint.api_key else None)
            probes.append(_probe(config, index, endpoint, environ, store, key, timeout_s))
        return list(await asyncio.gather(*probes))
    finally:
        await store.close()


# -- chat platforms ------------------------------------------------------------------------------

async def _get(url: str, headers: Mapping[str, str], timeout_s: float) -> tuple[int, Any] | str:
    """(status, JSON body or None), or why no answer came; the URL (it may hold a token) is never shown."""
    import aiohttp

    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_s)) as session:
            async with session.get(url, headers=dict(headers)) as response:
                try:
                    body = await response.json(content_type=None)
                except ValueError:
                    body = None
                return response.status, body
    except TimeoutError:
        return f"no answer within {timeout_s:g} s"
    except aiohttp.ClientConnectorError as exc:
        return f"cannot connect to {exc.host}:{exc.port}"
    except (aiohttp.ClientError, ValueError):
        return "the request failed"


async def _token_works(name: str, section: ChannelSection, token: str, timeout_s: float) -> tuple[bool, str]:
    base = getattr(section, "api_base", None)
    if name == "telegram":
        result = await _get(f"{(base or TELEGRAM_API).rstrip('/')}/bot{token}/getMe", {}, timeout_s)
    else:
        result = await _get(f"{(base or DISCORD_API).rstrip('/')}/users/@me", {"Authorization": f"Bot {token}"},
                            timeout_s)
    if isinstance(result, str):
        return False, result
    status, body = result
    if status == 200 and isinstance(body, dict):
        me = body.get("result", body) if name == "telegram" else body
        username = me.get("username") if isinstance(me, dict) else None
        return True, f"bot @{username}" if username else "accepted"
    said = body.get("description") or body.get("message") if isinstance(body, dict) else None
    return False, f"refused ({status}{': ' + str(said)[:80] if said else ''})"


async def _channel(name: str, section: ChannelSection, raw: Any, timeout_s: float) -> list[Finding]:
    keys: tuple[str | int, ...] = ("channels", name, "token")
    secret = getattr(section, "token", None)
    var = _variable(raw, *keys)
    found = []
    if secret is None or not secret.get_secret_value():
        found.append(Finding(Mark.FAIL, f"{name}: no token" + (f" (${var} is empty)" if var else ""),
                             _fill(var, "the bot token", f"channels.{name}.token")))
    else:
        token = secret.get_secret_value()
        ok, said = await _token_works(name, section, token, timeout_s)
        source = _named(raw, keys, token)
        found.append(Finding(Mark.OK, f"{name}: token from {source} works ({said})") if ok else
                     Finding(Mark.FAIL, f"{name}: token from {source} {said}",
                             f"put the bot's current token in {source if var else f'channels.{name}.token'}"))
    if not section.allowed_users and section.pairing:
        found.append(Finding(Mark.WARN, f"{name}: allowed_users is empty: only paired users can talk to Bruce",
                             f"approve yourself with `bruce pairing approve CODE`, or add your id to "
                             f"channels.{name}.allowed_users"))
    elif not section.allowed_users:
        found.append(Finding(Mark.FAIL, f"{name}: allowed_users is empty: nobody can talk to Bruce",
                             f"add your user id to channels.{name}.allowed_users"))
    else:
        found.append(Finding(Mark.OK, f"{name}: {len(section.allowed_users)} allowed user(s)"))
    return found


async def _channels(config: Config, raw: Any, timeout_s: float) -> list[Finding]:
    found: list[Finding] = []
    for name, section in config.channels.sections().items():
        if not section.enabled:
            found.append(Finding(Mark.SKIP, f"{name}: disabled"))
        else:
            found += await _channel(name, section, raw, timeout_s)
    return found


async def _daemon(config: Config) -> list[Finding]:
    """A running daemon, asked over its console socket when each channel last received."""
    from bruce.app import daemon_health

    health = await daemon_health(config)
    if health is None:
        return [Finding(Mark.SKIP, f"daemon: none answers at {config.console.socket_path}")]
    found = [Finding(Mark.OK, f"daemon: running, console socket {config.console.socket_path}")]
    for name, when in sorted(health.items()):
        if when is None:
            found.append(Finding(Mark.WARN, f"{name}: nothing received from the platform yet",
                                 "check the daemon's log (telegram.poll_failed, telegram.conflict)"))
        else:
            found.append(Finding(Mark.OK, f"{name}: last received from the platform at {when}"))
    return found


def _mcp(config: Config) -> list[Finding]:
    servers = getattr(config, "mcp_servers", None)
    if not servers:
        return [Finding(Mark.SKIP, "MCP: none configured")]
    return [Finding(Mark.SKIP, f"MCP: {len(servers)} server(s) configured; not checked by doctor yet")]


# -- the admin page ------------------------------------------------------------------------------

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


def _admin(config: Config, raw: Any) -> list[Finding]:
    """``bruce run`` serves the admin page: a token it would refuse blocks start-up; a port in
    use is a warning (it may be this very Bruce, running)."""
    admin = config.admin
    if not admin.enabled:
        return [Finding(Mark.SKIP, "admin: disabled")]
    return _admin_checks(admin, raw, config.storage.path.parent)


def _admin_checks(admin: AdminConfig, raw: Any, data_dir: Path) -> list[Finding]:
    found = []
    where = f"{admin.host}:{admin.port}"
    problem = _port_problem(admin.host, admin.port)
    if problem:
        found.append(Finding(Mark.WARN, f"admin: {where} {problem}", "stop the other program or set admin.port"))
    else:
        found.append(Finding(Mark.OK, f"admin: {where} is free"))
    if admin.host not in ("127.0.0.1", "::1", "localhost"):
        found.append(Finding(Mark.WARN, f"admin: listens on {admin.host}, beyond this machine",
                             "set admin.host: 127.0.0.1 and reach it through SSH or a reverse proxy"))
    var = _variable(raw, "admin", "token")
    token = admin.token.get_secret_value() if admin.token else ""
    generate = "python3 -c 'import secrets; print(secrets.token_urlsafe(32))'"
    if not token and admin.host in ("127.0.0.1", "::1", "localhost"):
        found.append(Finding(Mark.OK, "admin: no token set" + (f" (${var} is empty)" if var else "")
                             + f"; one is generated at the first start into {data_dir / 'admin.token'} (mode 0600)"))
    elif not token:
        found.append(Finding(Mark.FAIL, "admin: no token, and the page listens beyond this machine"
                             + (f" (${var} is empty)" if var else ""),
                             _fill(var, f"a long random value ({generate})", "admin.token")))
    elif len(token) < MIN_ADMIN_TOKEN:
        found.append(Finding(Mark.FAIL, f"admin: the token from {_named(raw, ('admin', 'token'), token)} is "
                             f"{len(token)} characters", f"use at least {MIN_ADMIN_TOKEN}: {generate}"))
    else:
        found.append(Finding(Mark.OK, f"admin: token from {_named(raw, ('admin', 'token'), token)} is set"))
    return found


# -- the systemd unit ----------------------------------------------------------------------------

def _unit_service(text: str) -> dict[str, list[str]]:
    """The [Service] section's settings, each key with every value it was given."""
    found: dict[str, list[str]] = {}
    section = ""
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            section = line.strip("[]")
        elif section == "Service" and "=" in line:
            key, value = line.split("=", 1)
            found.setdefault(key.strip(), []).append(value.strip())
    return found


def _covered(path: Path, roots: list[Path]) -> bool:
    return any(path == root or root in path.parents for root in roots)


def _written_paths(config: Config) -> list[Path]:
    paths = [config.storage.path.parent, config.tools.artifacts.dir, config.tools.files.notes_dir]
    console = getattr(config, "console", None)
    if console is not None:
        paths.append(Path(console.socket_path).parent)
    return list(dict.fromkeys(p.absolute() for p in paths))


def _systemd(config: Config, unit: Path) -> list[Finding]:
    if not unit.exists():
        return [Finding(Mark.SKIP, f"systemd: no unit at {unit}")]
    service = _unit_service(unit.read_text(encoding="utf-8", errors="replace"))
    user = (service.get("User") or ["root"])[-1]
    if user != _user():
        return [Finding(Mark.SKIP, f"systemd: {unit} runs as {user}; run doctor as that user "
                                   f"(sudo -u {user} ...) to check its paths")]
    found = []
    workdir = Path((service.get("WorkingDirectory") or ["/"])[-1].lstrip("-"))
    if not workdir.is_dir():
        found.append(Finding(Mark.FAIL, f"systemd: WorkingDirectory {workdir} does not exist",
                             f"create it or fix WorkingDirectory= in {unit}"))
    argv = shlex.split((service.get("ExecStart") or [""])[-1].lstrip("-@:+!"))
    if not argv or not os.access(argv[0], os.X_OK):
        found.append(Finding(Mark.FAIL, f"systemd: ExecStart's program {argv[0] if argv else '(none)'} is not "
                                        "an executable", f"install Bruce there or fix ExecStart= in {unit}"))
    config_arg = argv[argv.index("--config") + 1] if "--config" in argv[:-1] else None
    if config_arg is not None and not (workdir / config_arg).is_file():
        found.append(Finding(Mark.FAIL, f"systemd: ExecStart's --config {config_arg} does not exist",
                             f"run bruce init --config {config_arg}, or fix ExecStart= in {unit}"))
    roots = [Path(p.lstrip("-+")) for line in service.get("ReadWritePaths", []) for p in line.split()]
    strict = (service.get("ProtectSystem") or ["no"])[-1] in ("strict", "full", "true", "yes")
    outside = [p for p in _written_paths(config) if not _covered(p, roots)] if strict or roots else []
    outside = [p for p in outside if not any(q in p.parents for q in outside)]  # data/notes goes with data
    if outside:
        found.append(Finding(Mark.FAIL, f"systemd: ReadWritePaths does not cover {', '.join(map(str, outside))}",
                             f"add them to ReadWritePaths= in {unit}, or point storage.path and the tool "
                             "folders under it"))
    return found or [Finding(Mark.OK, f"systemd: {unit} paths exist and cover what Bruce writes")]
