"""``people`` and ``access``: the owner's ids per platform, and the tools a guest may use."""

from __future__ import annotations

import pytest

from bruce.config.loader import parse_config
from bruce.config.people import DEFAULT_GUEST_TOOLS
from bruce.errors import ConfigError


def test_without_a_people_section_there_is_no_owner_list_and_guests_get_the_default_tools():
    config = parse_config({}, environ={})
    assert config.people.owner is None
    assert config.access.guest_tools == list(DEFAULT_GUEST_TOOLS) == [
        "clock.now", "math.calculate", "web.search", "web.read_url", "proactive.*", "memory.*"]


def test_owner_ids_are_text_per_channel_however_yaml_typed_them():
    config = parse_config({"people": {"owner": {"telegram": [123], "discord": ["456"]}}}, environ={})
    assert config.people.owner is not None
    assert config.people.owner.ids() == {"telegram": frozenset({"123"}), "discord": frozenset({"456"})}


def test_an_unknown_platform_under_people_owner_is_named():
    with pytest.raises(ConfigError, match=r"people\.owner\.slack"):
        parse_config({"people": {"owner": {"slack": [1]}}}, environ={})


def test_a_guest_tools_entry_with_a_space_is_refused_with_its_text():
    with pytest.raises(ConfigError, match="'web search'"):
        parse_config({"access": {"guest_tools": ["web search"]}}, environ={})
