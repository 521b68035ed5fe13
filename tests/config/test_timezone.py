"""The machine's time zone and what counts as a zone (bruce/config/timezone.py)."""

from __future__ import annotations

import pytest

from bruce.config.loader import parse_config
from bruce.config.timezone import is_zone, local_zone_name
from bruce.errors import ConfigError


def problems(data) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse_config(data, environ={})
    return info.value.problems


@pytest.mark.parametrize("tz", ["Asia/Kathmandu", ":Asia/Kathmandu"])
def test_the_local_zone_is_tz_first(tmp_path, tz):
    link = tmp_path / "localtime"
    link.symlink_to("/usr/share/zoneinfo/Europe/Berlin")
    assert local_zone_name({"TZ": tz}, localtime=link) == "Asia/Kathmandu"


@pytest.mark.parametrize("target", ["/usr/share/zoneinfo/Europe/Berlin", "../usr/share/zoneinfo/Europe/Berlin"])
@pytest.mark.parametrize("tz", [None, "", "Mars/Olympus", "UTC0", "Europe", "/etc/passwd", "../x"])
def test_then_the_etc_localtime_link(tmp_path, target, tz):
    link = tmp_path / "localtime"
    link.symlink_to(target)  # the target need not exist: only the name in the link is read
    environ = {} if tz is None else {"TZ": tz}
    assert local_zone_name(environ, localtime=link) == "Europe/Berlin"


def test_then_utc(tmp_path):
    assert local_zone_name({}, localtime=tmp_path / "missing") == "UTC"
    (tmp_path / "copied").write_bytes(b"TZif")  # a copied zone file names no zone
    assert local_zone_name({}, localtime=tmp_path / "copied") == "UTC"
    (tmp_path / "odd").symlink_to("/nowhere/Europe/Berlin")
    assert local_zone_name({"TZ": "Nowhere/City"}, localtime=tmp_path / "odd") == "UTC"


def test_a_directory_is_no_timezone():
    assert problems({"assistant": {"timezone": "Europe"}}) == ["assistant.timezone: unknown IANA timezone 'Europe'"]


@pytest.mark.parametrize(("name", "known"), [("UTC", True), ("Europe/Berlin", True), ("America/Sao_Paulo", True),
                                             ("Europe", False), ("Mars/Olympus", False), ("", False),
                                             ("../etc/passwd", False), ("x" * 300, False)])
def test_is_zone(name, known):
    assert is_zone(name) is known


def test_a_posix_copy_of_a_zone_is_the_zone(tmp_path):
    link = tmp_path / "localtime"
    link.symlink_to("/usr/share/zoneinfo/posix/Asia/Tokyo")
    assert local_zone_name({}, localtime=link) == "Asia/Tokyo"
