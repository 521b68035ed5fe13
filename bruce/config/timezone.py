"""The machine's IANA time zone, the default of ``assistant.timezone``, and what counts as a zone.

``local_zone_name`` reads ``TZ``, then the name ``/etc/localtime``'s symlink points at, then falls
back to UTC; ``is_zone`` is the rule ``assistant.timezone`` is checked with.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

__all__ = ["is_zone", "local_zone_name"]

_ZONE_PREFIXES = ("posix/", "right/")  # tzdata's copies of every zone, the same zone by another name


def is_zone(name: str) -> bool:
    """Whether ``name`` is an IANA zone this machine knows."""
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):  # OSError: a folder ("Europe"), a name too long
        return False
    return True


def _zone_in_link(target: str) -> str | None:
    """The zone a link to ``.../zoneinfo/Area/City`` names, or None."""
    _, found, name = target.rpartition("/zoneinfo/")
    if not found:
        return None
    for prefix in _ZONE_PREFIXES:
        name = name.removeprefix(prefix)
    return name if is_zone(name) else None


def local_zone_name(environ: Mapping[str, str] | None = None, localtime: Path = Path("/etc/localtime")) -> str:
    """This machine's IANA zone: ``TZ`` (a leading ':' stripped, as glibc allows) when it names
    one, then the zone ``localtime``'s symlink points at, then UTC. Read here rather than with
    tzlocal: two lookups need no dependency, and a bad value falls back instead of failing."""
    environ = os.environ if environ is None else environ
    tz = environ.get("TZ", "").removeprefix(":")
    if tz and is_zone(tz):
        return tz
    try:
        targets = [os.readlink(localtime), os.path.realpath(localtime)]  # the link itself, then its end
    except (OSError, ValueError):  # not a link (a copied file), missing
        return "UTC"
    for target in targets:
        name = _zone_in_link(target)
        if name:
            return name
    return "UTC"
