"""Rules a config value must follow, shared with the code that enforces them at run time.

* Hosts (``tools.web.allowed_hosts``): ``allowed_host`` checks and normalises each entry.
* URLs (``tools.http_post.allowed_urls``): ``url_problem`` says why a URL is no usable http(s)
  URL, with the same parser as the tool itself (httpx).
* Small value rules the models reuse (``blank_to_none``, ``ids_as_text``) and the check of
  ``tools.overrides`` against the tool contracts (``unknown_overrides``).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import httpx

if TYPE_CHECKING:
    from bruce.config.schema import ToolsConfig

__all__ = [
    "allowed_host",
    "allowed_url",
    "blank_to_none",
    "host_problem",
    "ids_as_text",
    "unknown_overrides",
    "url_problem",
]

_ALLOWED_HOST = re.compile(r"[a-z0-9_.-]+(?::[0-9]{1,5})?|\[[0-9a-f:.]+\](?::[0-9]{1,5})?")
_HOST_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?")


def blank_to_none(value: Any) -> Any:
    """An empty or blank text (an unset ``${VAR}``) is no value."""
    return None if isinstance(value, str) and not value.strip() else value


def ids_as_text(value: Any) -> Any:
    """User and channel ids as text, however YAML typed them (``123`` or ``"123"``)."""
    return [str(x) for x in value] if isinstance(value, list) else value


def allowed_host(value: str) -> str:
    """A ``tools.web.allowed_hosts`` entry (``host`` or ``host:port``), normalised, or ValueError."""
    host = value.strip().lower()
    if not _ALLOWED_HOST.fullmatch(host):
        raise ValueError(f"{value[:80]!r} is not a host name or host:port")
    return host


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


def unknown_overrides(tools: ToolsConfig, known: Iterable[str]) -> list[str]:
    """One problem per ``tools.overrides`` entry that names no tool in ``known`` (contract names);
    shared by ``bruce config check`` and start-up, so both refuse the same configs."""
    names = sorted(set(known))
    return [f"tools.overrides.{name}: unknown tool (known tools: {', '.join(names)})"
            for name in sorted(set(tools.overrides) - set(names))
            if not name.startswith("mcp.")]  # an MCP server's tools are known once it connects
