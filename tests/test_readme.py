"""What the README and docs/configuration.md tell a newcomer, checked against the code, so a
claim that went stale (issue 34: "Not in this version: MCP servers, long-term memory", built-in
tools without the memory ones, Telegram's streaming said missing) fails here."""

from __future__ import annotations

import re
from pathlib import Path

from bruce.app import tool_set
from bruce.config.loader import parse_config

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _listed_tools(paragraph: str) -> set[str]:
    """`proactive.create` / `list` names proactive.create and proactive.list."""
    names, prefix = set(), ""
    for token in re.findall(r"`([a-z_.]+)`", paragraph):
        if "." in token:
            prefix = token.split(".", 1)[0]
            names.add(token)
        elif prefix:
            names.add(f"{prefix}.{token}")
    return names


def test_the_readme_lists_every_built_in_tool(tmp_path):
    config = parse_config({"storage": {"path": str(tmp_path / "bruce.db")}}, environ={})
    built_in = {contract.name for contract, _ in tool_set(config, None)}
    paragraph = README.split("Built-in tools: ", 1)[1].split(". ", 1)[0]
    assert _listed_tools(paragraph) == built_in


def test_the_readme_calls_nothing_missing_that_exists():
    assert "Not in this version" not in README
    for shipped in ("docs/mcp.md", "docs/memory.md"):
        assert f"({shipped})" in README


def test_the_readme_telegram_section_names_api_base():
    telegram = README.split("**Telegram.**", 1)[1].split("**Discord.**", 1)[0]
    assert "`channels.telegram.api_base`" in telegram and "Bot API server" in telegram


def test_configuration_says_which_channels_show_the_streamed_answer():
    row = next(line for line in (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8").splitlines()
               if line.startswith("| `stream` |"))
    assert "no channel shows the streamed text" not in row
    assert "Telegram shows the answer as it is written" in row
