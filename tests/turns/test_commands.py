"""The command table and its parser: every command the core answers is in the table and parses
from its text; a command's name must be the whole word (``/newsletter`` is text)."""

from __future__ import annotations

import pytest

from bruce.turns.commands import COMMANDS, Command, CommandName, help_text, parse_command


@pytest.mark.parametrize("text", ["/new", "  /new  ", "/new@bruce_test_bot", "/new let's talk about cats"])
def test_new_is_a_command(text):
    assert parse_command(text) == Command(CommandName.NEW, None)


@pytest.mark.parametrize("text", ["/newsletter", "new", "please /new", "/new-ish"])
def test_other_texts_are_not_new(text):
    assert parse_command(text) is None


def test_decisions_still_parse():
    assert parse_command("/approve ABCDEF12") == Command(CommandName.APPROVE, "abcdef12")
    assert parse_command("/deny@bot 0123abcd") == Command(CommandName.DENY, "0123abcd")
    assert parse_command("/approve now") == Command(CommandName.APPROVE, None)


def test_the_core_answers_every_command_of_the_table():
    assert {spec.name for spec in COMMANDS} == {str(name) for name in CommandName}
    assert len({spec.name for spec in COMMANDS}) == len(COMMANDS)


@pytest.mark.parametrize("spec", COMMANDS, ids=lambda s: s.name)
def test_each_command_parses_from_its_usage(spec):
    usage = spec.usage.replace("ID", "1234abcd" if spec.name in ("approve", "deny") else "42")
    assert parse_command(usage).name is CommandName(spec.name)


def test_memory_help_and_forget_parse():
    assert parse_command("/help@bot") == Command(CommandName.HELP, None)
    assert parse_command("/memory") == Command(CommandName.MEMORY, None)
    assert parse_command("/forget 7") == Command(CommandName.FORGET, "7")
    assert parse_command("/forget x") == Command(CommandName.FORGET, None)
    assert parse_command("/helpful") is None and parse_command("/forgetful") is None and parse_command("/identity") is None
    assert parse_command("/id") == Command(CommandName.ID, None)


def test_a_menu_line_says_how_to_type_a_command_with_an_argument():
    by_name = {spec.name: spec for spec in COMMANDS}
    assert by_name["approve"].menu_line() == "approve a pending request: /approve ID"
    assert by_name["id"].menu_line("Telegram") == "your Telegram user id, for the allow-list"
    assert by_name["new"].menu_line() == by_name["new"].describe()


def test_help_names_every_command_and_describes_id_for_the_platform_or_for_none():
    everywhere = help_text("Bruce", about="Write to me.")
    on_telegram = help_text("Bruce", about="Write to me.", platform="Telegram")
    assert everywhere.startswith("I'm Bruce, your assistant. Write to me.")
    assert "/id: your user id on Telegram or Discord, for the allow-list (ask the bot there)" in everywhere
    assert "/id: your Telegram user id, for the allow-list" in on_telegram
    assert "/approve ID: approve a pending request" in everywhere
