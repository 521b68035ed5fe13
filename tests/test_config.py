"""Config: defaults, ${VAR} expansion, and errors that name the key path."""

from __future__ import annotations

from pathlib import Path

import pytest

from bruce.cli import main
from bruce.config import load_config, parse_config
from bruce.errors import ConfigError

REPO = Path(__file__).resolve().parents[1]


def problems(data, environ=None) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse_config(data, environ=environ or {})
    return info.value.problems


def test_the_shipped_config_is_valid_and_keeps_secrets_out():
    config = load_config(REPO / "config.yml", environ={})
    assert config.llm.model == "openai/gpt-4o-mini"
    assert config.llm.api_key is None and config.admin.host == "127.0.0.1"
    assert config.assistant.max_turns == 5 and config.assistant.history_limit == 15
    text = (REPO / "config.yml").read_text()
    assert "${OPENAI_API_KEY}" in text and "${TELEGRAM_BOT_TOKEN}" in text


def test_variables_are_expanded_from_the_environment():
    config = parse_config(
        {"llm": {"api_key": "${MY_KEY}", "api_base": "${BASE:-http://127.0.0.1:11434}"}},
        environ={"MY_KEY": "sk-abc"},
    )
    assert config.llm.api_key.get_secret_value() == "sk-abc"
    assert config.llm.api_base == "http://127.0.0.1:11434"
    assert "sk-abc" not in repr(config)


def test_bad_values_name_their_key_path():
    found = problems({
        "llm": {"timeout_s": -1, "num_retries": "many"},
        "assistant": {"timezone": "Mars/Olympus", "max_turns": 0},
        "channels": {"telegram": {"enabled": "perhaps"}},
    })
    assert "llm.timeout_s: must be a positive number (got -1)" in found
    assert any(p.startswith("llm.num_retries: must be a whole number") for p in found)
    assert any(p.startswith("assistant.timezone: unknown IANA timezone 'Mars/Olympus'") for p in found)
    assert any(p.startswith("assistant.max_turns: must be at least 1") for p in found)
    assert any(p.startswith("channels.telegram.enabled: must be true or false") for p in found)


def test_unknown_keys_are_errors():
    assert problems({"llm": {"timout_s": 3}, "extra": 1}) == ["extra: unknown key", "llm.timout_s: unknown key"]


def test_secret_values_never_appear_in_errors():
    found = problems({"llm": {"api_key": ["sk-secret-value"]}})
    assert not any("sk-secret-value" in p for p in found)


def test_file_problems(tmp_path):
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "nope.yml", environ={})
    bad = tmp_path / "bad.yml"
    bad.write_text("llm:\n  model: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML at line"):
        load_config(bad, environ={})
    scalar = tmp_path / "scalar.yml"
    scalar.write_text("just a string\n")
    with pytest.raises(ConfigError, match="<root>: must be a mapping"):
        load_config(scalar, environ={})


def test_config_check_command(tmp_path, capsys, monkeypatch):
    good = tmp_path / "good.yml"
    good.write_text("assistant: {name: Alfred}\n")
    assert main(["--config", str(good), "config", "check"]) == 0
    assert "config ok" in capsys.readouterr().out

    bad = tmp_path / "bad.yml"
    bad.write_text("llm: {timeout_s: 0}\n")
    assert main(["--config", str(bad), "config", "check"]) == 2
    err = capsys.readouterr().err
    assert "llm.timeout_s: must be a positive number" in err and "Traceback" not in err

    monkeypatch.setenv("BRUCE_CONFIG", str(bad))
    assert main(["config", "check"]) == 2
