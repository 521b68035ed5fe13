"""How a doctor's finding reads, and how a secret is named without being shown."""

from __future__ import annotations

from bruce.cli.checks.findings import Finding, Mark, check_secrets_in_file, fill, named, variable

RAW = {"llm": {"api_key": "${LLM_KEY}", "fallbacks": [{"api_key": "${:bad}"}, {"api_key": " ${SECOND:-x} "}]},
       "admin": {"token": "written-in-the-file-0123"}, "channels": {"telegram": {"token": ""}}}


def test_a_finding_is_one_line_with_its_fix():
    assert Finding(Mark.OK, "database: fine").line() == "✓ database: fine"
    assert Finding(Mark.FAIL, "disk: full", "free some space").line() == "✗ disk: full — fix: free some space"


def test_a_variable_is_found_where_the_file_refers_to_one():
    assert variable(RAW, "llm", "api_key") == "LLM_KEY"
    assert variable(RAW, "llm", "fallbacks", 1, "api_key") == "SECOND"
    assert variable(RAW, "llm", "fallbacks", 0, "api_key") is None
    assert variable(RAW, "llm", "fallbacks", 5, "api_key") is None and variable(RAW, "admin", "token") is None


def test_a_secret_is_named_by_its_variable_or_its_last_four_characters():
    assert named(RAW, ("llm", "api_key"), "sk-anything") == "$LLM_KEY"
    assert named(RAW, ("admin", "token"), "written-in-the-file-0123") == "****0123"
    assert named(RAW, ("admin", "token"), "short") == "****"


def test_the_fix_for_a_missing_secret_says_where_to_put_it():
    assert fill("TG_TOKEN", "the bot token", "channels.telegram.token") == (
        "set TG_TOKEN to the bot token in .env and load it: set -a; . ./.env; set +a")
    assert fill(None, "the bot token", "channels.telegram.token") == (
        'set channels.telegram.token: "${NAME}" and NAME to the bot token in .env')


def test_a_secret_written_in_the_file_is_a_warning():
    assert [f.line() for f in check_secrets_in_file(RAW)] == [
        '! admin.token is written in the config file itself — fix: move it to .env and write token: "${NAME}"']
