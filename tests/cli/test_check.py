"""``check_config``: what start-up would refuse, found from the contracts and the config alone
(no database is opened), every problem named at once with the config file it came from."""

from __future__ import annotations

import pytest

from bruce.cli.check import check_config
from bruce.errors import ConfigError


def test_a_good_config_passes_without_a_database(make_config, tmp_path):
    check_config(make_config())
    assert not (tmp_path / "bruce.db").exists()


def test_every_problem_is_named_with_the_file(make_config):
    config = make_config(tools={"overrides": {"web.serch": {"enabled": False}, "mcp.files.read": {"enabled": False}}},
                         admin={"host": "0.0.0.0"})
    with pytest.raises(ConfigError) as raised:
        check_config(config, source="config.yml")
    problems = raised.value.problems
    assert any(p.startswith("tools.overrides.web.serch: unknown tool") for p in problems)
    assert not any("mcp.files.read" in p for p in problems)  # an MCP server's tools are known once it connects
    assert any(p.startswith("admin.token: required when admin.host (0.0.0.0)") for p in problems)
    assert "config.yml" in str(raised.value)


def test_guest_tools_naming_a_high_or_critical_tool_or_the_owners_things_are_refused(make_config):
    config = make_config(access={"guest_tools": ["clock.now", "http.post", "files.*", "artifact.save", "web.serch",
                                                 "mcp.calendar.*"]})
    with pytest.raises(ConfigError) as raised:
        check_config(config, source="config.yml")
    problems = [p for p in raised.value.problems if p.startswith("access.guest_tools")]
    assert problems == [
        "access.guest_tools: 'http.post' names http.post (risk critical): a guest never gets a tool of risk high or "
        "critical",
        "access.guest_tools: 'files.*' names files.write (risk high): a guest never gets a tool of risk high or critical",
        "access.guest_tools: 'artifact.save' names artifact.save: the owner's own things (artifacts, the notes "
        "folder) are never a guest's",
        problems[3],
    ]
    assert problems[3].startswith("access.guest_tools: 'web.serch' names no tool (known tools: artifact.save, ")


def test_the_default_guest_tools_pass(make_config):
    check_config(make_config(people={"owner": {"telegram": [111]}}))
