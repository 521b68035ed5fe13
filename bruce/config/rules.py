"""Rules a config value must follow, shared with the code that enforces them at run time.

* Hosts (``tools.web.allowed_hosts``): ``host_entry`` writes a host the way the allow-list does
  (lower case, IPv6 in brackets, ``:port`` when given); the config checks each entry with
  ``allowed_host`` and ``web.read_url`` compares the URL's host through ``host_entry``.
* URLs (``tools.http_post.allowed_urls``): ``url_problem`` says why a URL is no usable http(s)
  URL (the same parser, httpx, and the same rules for an entry in the config and for every URL
  ``http.post`` is asked to use); ``plain_path`` refuses a path a server could read as another one.
* The admin page (``admin``): ``admin_token_problem`` is the one token rule (``bruce config check``,
  ``bruce run`` and the token the daemon generates all meet ``MIN_ADMIN_TOKEN`` characters);
  ``host_header_allowed`` says whether a request's ``Host`` names this machine (loopback) or an
  ``admin.allowed_hosts`` entry, the guard against DNS rebinding.
* Chat platforms (``channels``): ``channel_problems`` is what start-up refuses about an enabled
  channel's section before any network call (a missing token, a Telegram token of the wrong
  shape); the channels raise the same words (``token_required``, ``telegram_token_problem``).
* Small value rules the models reuse (``blank_to_none``, ``ids_as_text``) and the check of
  ``tools.overrides`` against the tool contracts (``unknown_overrides``).
"""

from __future__ import annotations

import ipaddress
import re
import unicodedata
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import httpx

if TYPE_CHECKING:
    from bruce.config.schema import ChannelsConfig, ToolsConfig

__all__ = [
    "MIN_ADMIN_TOKEN",
    "LOOPBACK_NAMES",
    "admin_token_problem",
    "channel_problems",
    "allowed_host",
    "allowed_url",
    "blank_to_none",
    "host_entry",
    "host_header_allowed",
    "host_problem",
    "is_loopback",
    "ids_as_text",
    "plain_path",
    "telegram_token_problem",
    "token_required",
    "unknown_overrides",
    "url_problem",
]

_ALLOWED_HOST = re.compile(r"[a-z0-9_.-]+(?::[0-9]{1,5})?|\[[0-9a-f:.]+\](?::[0-9]{1,5})?")
_HOST_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?")
_MAX_DECODING_ROUNDS = 4  # percent-encoding nested deeper than this is refused
MIN_ADMIN_TOKEN = 32  # characters of admin.token; a generated one has 43
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


def blank_to_none(value: Any) -> Any:
    """An empty or blank text (an unset ``${VAR}``) is no value."""
    return None if isinstance(value, str) and not value.strip() else value


def ids_as_text(value: Any) -> Any:
    """User and channel ids as text, however YAML typed them (``123`` or ``"123"``)."""
    return [str(x) for x in value] if isinstance(value, list) else value


def host_entry(host: str, port: int | None = None) -> str:
    """``host`` as a host allow-list writes it: lower case, IPv6 in brackets, ``:port`` when given."""
    host = host.lower()
    shown = f"[{host}]" if ":" in host else host
    return shown if port is None else f"{shown}:{port}"


def allowed_host(value: str) -> str:
    """A ``tools.web.allowed_hosts`` entry (``host`` or ``host:port``), normalised, or ValueError."""
    host = value.strip().lower()
    if not _ALLOWED_HOST.fullmatch(host):
        raise ValueError(f"{value[:80]!r} is not a host name or host:port")
    return host


_TOKEN_VARIABLES = {"telegram": "TELEGRAM_BOT_TOKEN", "discord": "DISCORD_BOT_TOKEN"}


def token_required(channel: str) -> str:
    """The words for an enabled channel without a token."""
    variable = _TOKEN_VARIABLES.get(channel, f"{channel.upper()}_TOKEN")
    return (f"channels.{channel}.token: required when channels.{channel}.enabled is true "
            f'(e.g. token: "${{{variable}}}")')


def telegram_token_problem(token: str) -> str | None:
    """Why ``token`` is not the shape of a bot token (``123456:ABC-...``, as aiogram checks it), or None."""
    left, sep, right = token.partition(":")
    if not sep or not left.isdigit() or not right or any(c.isspace() for c in token):
        return "channels.telegram.token: not a Telegram bot token (it looks like 123456:ABC-...)"
    return None


def channel_problems(channels: ChannelsConfig) -> list[str]:
    """What start-up refuses about the enabled channels' sections, known without asking the platform."""
    problems = []
    for name, section in channels.sections().items():
        if not section.enabled:
            continue
        token = getattr(section, "token", None)
        if token is None:
            problems.append(token_required(name))
        elif name == "telegram" and (problem := telegram_token_problem(token.get_secret_value())):
            problems.append(problem)
    return problems


def admin_token_problem(token: str | None) -> str | None:
    """Why a configured ``admin.token`` is refused, or None (no token: one is generated)."""
    if token is not None and len(token) < MIN_ADMIN_TOKEN:
        return (f"admin.token: at least {MIN_ADMIN_TOKEN} characters (it has {len(token)}); make one with "
                "python3 -c 'import secrets; print(secrets.token_urlsafe(32))'")
    return None


def _split_host(entry: str) -> tuple[str, str | None]:
    """``host[:port]`` or ``[v6][:port]``, already matched by ``_ALLOWED_HOST``: the host (IPv6
    without brackets) and the port, if any."""
    if entry.startswith("["):
        host, _, rest = entry[1:].partition("]")
        return host, rest[1:] or None
    host, _, port = entry.partition(":")
    return host, port or None


def is_loopback(host: str) -> bool:
    """``localhost`` or a loopback address (any of 127.0.0.0/8, ``::1``)."""
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def host_header_allowed(header: str | None, allowed: Iterable[str] = ()) -> bool:
    """Whether a request's ``Host`` header names this machine (``localhost``, a loopback address,
    with or without a port) or an entry of ``allowed`` (``allowed_host`` entries: ``name`` matches
    any port, ``name:port`` that port only). A page on another name reaching the server through
    DNS rebinding carries its own name here, so it is refused."""
    value = (header or "").strip().lower()
    if not _ALLOWED_HOST.fullmatch(value):
        return False
    host, port = _split_host(value)
    if is_loopback(host):
        return True
    for entry in allowed:
        want_host, want_port = _split_host(entry)
        if want_host == host and want_port in (None, port):
            return True
    return False


def host_problem(host: str) -> str | None:
    """Why an (already IDNA-encoded, lower-case) host is no host at all, or None."""
    if not host:
        return "has no host"
    try:
        ipaddress.ip_address(host)
        return None
    except ValueError:
        pass
    labels = host.removesuffix(".").split(".")
    if "%" in host or not all(_HOST_LABEL.fullmatch(label) for label in labels):
        return "has an invalid host name"
    return None


def url_problem(url: str) -> str | None:
    """Why ``url`` cannot be used by http.post (as an allow-list entry or as a target), or None:
    it must parse, be http(s), name a valid host, carry no ``user:password`` part and no ``.`` or
    ``..`` path segment. The URL is never echoed (it may hold a password)."""
    try:
        parsed = httpx.URL(url)
        scheme, userinfo, path = parsed.scheme, parsed.userinfo, parsed.path
        host = parsed.raw_host.decode("ascii").lower()
        parsed.host  # noqa: B018  (decoding an IDNA host can fail only here)
        _ = parsed.port
    except (httpx.InvalidURL, TypeError, ValueError):  # idna's errors are ValueErrors
        return "is not a valid URL (check the host name)"
    if scheme not in ("http", "https"):
        return "is not an http(s) URL"
    if userinfo:
        return "must not contain a user:password part"
    if any(segment in (".", "..") for segment in path.split("/")):
        return "must not contain '.' or '..' path segments"
    return host_problem(host)


def allowed_url(url: str) -> str:
    """A ``tools.http_post.allowed_urls`` entry, or ValueError saying what is wrong with it."""
    problem = url_problem(url)
    if problem:
        raise ValueError(problem)
    return url


def _decoded(path: str) -> str | None:
    """``path`` percent-decoded until nothing changes (NFKC-normalised), or None if that does not end
    or gives bytes that are not UTF-8."""
    for _ in range(_MAX_DECODING_ROUNDS):
        try:
            once = unquote(path, errors="strict")
        except UnicodeDecodeError:
            return None
        if once == path:
            return unicodedata.normalize("NFKC", path)
        path = once
    return None


def plain_path(path: str) -> str | None:
    """The decoded path, or None if a server could read it as another path than the one matched:
    ``.``/``..`` segments, ``;``, backslashes, empty segments, control characters, an encoded (or
    look-alike) ``/``, in any percent-encoding and Unicode compatibility form."""
    decoded = _decoded(path)
    if decoded is None or decoded.count("/") != path.count("/"):  # an encoded (or look-alike) slash
        return None
    segments = decoded.split("/")
    if any(c in decoded for c in "\\;") or any(ord(c) < 0x20 or c == "\x7f" for c in decoded):
        return None
    if any(segment in (".", "..") for segment in segments) or "" in segments[1:-1]:
        return None
    return decoded


def unknown_overrides(tools: ToolsConfig, known: Iterable[str]) -> list[str]:
    """One problem per ``tools.overrides`` entry that names no tool in ``known`` (contract names);
    shared by ``bruce config check`` and start-up, so both refuse the same configs."""
    names = sorted(set(known))
    return [f"tools.overrides.{name}: unknown tool (known tools: {', '.join(names)})"
            for name in sorted(set(tools.overrides) - set(names))
            if not name.startswith("mcp.")]  # an MCP server's tools are known once it connects
