"""load_config and parse_config: a file to a validated Config, paths against the file's folder."""

from __future__ import annotations

from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from bruce.cli.main import main
from bruce.config.loader import anchored, default_config_path, load_config, parse_config
from bruce.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]


def test_the_shipped_config_is_valid_and_keeps_secrets_out():
    config = load_config(REPO / "config.yml", environ={})
    assert config.llm.model == "openai/gpt-4o-mini"
    assert config.llm.api_key is None and config.admin.host == "127.0.0.1"
    assert config.assistant.max_turns == 5 and config.assistant.history_limit == 15
    text = (REPO / "config.yml").read_text()
    assert "${OPENAI_API_KEY}" in text and "${TELEGRAM_BOT_TOKEN}" in text


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


def test_relative_paths_resolve_against_the_config_files_folder(tmp_path, monkeypatch):
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "config.yml").write_text(
        "storage: {path: data/bruce.db}\n"
        "tools: {files: {notes_dir: notes}}\n"
        "console: {socket_path: run/bruce.sock}\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    config = load_config(Path("..") / "etc" / "config.yml", environ={})  # the file named relative to the cwd too
    base = etc.resolve()
    assert config.storage.path == base / "data" / "bruce.db"
    assert config.tools.files.notes_dir == base / "notes"
    assert config.tools.artifacts.dir == base / "data" / "artifacts"  # a default is relative to the file too
    assert config.console.socket_path == base / "run" / "bruce.sock"


def test_absolute_and_home_paths_stay_as_written(tmp_path):
    (tmp_path / "config.yml").write_text(
        f"storage: {{path: {tmp_path / 'abs.db'}}}\n"
        "tools: {files: {notes_dir: ~/notes}, artifacts: {dir: \"~\"}}\n")  # bare ~ is YAML null
    config = load_config(tmp_path / "config.yml", environ={})
    assert config.storage.path == tmp_path / "abs.db"
    assert config.tools.files.notes_dir == Path.home() / "notes"
    assert config.tools.artifacts.dir == Path.home()


def test_parse_config_keeps_relative_paths_unless_given_a_base_dir(tmp_path):
    data = {"storage": {"path": "data/x.db"}}
    assert parse_config(data, environ={}).storage.path == Path("data/x.db")
    assert parse_config({}, environ={}).console.socket_path == Path("data/bruce.sock")
    anchored = parse_config(data, environ={}, base_dir=tmp_path)
    assert anchored.storage.path == tmp_path / "data" / "x.db"
    assert anchored.console.socket_path == tmp_path / "data" / "bruce.sock"


def test_the_timezone_defaults_to_the_machines_zone_from_the_given_environ():
    config = parse_config({"assistant": {"name": "Ana"}}, environ={"TZ": "Asia/Kathmandu"})
    assert config.assistant.timezone == "Asia/Kathmandu" and config.assistant.name == "Ana"
    assert parse_config({}, environ={"TZ": "Asia/Kathmandu"}).assistant.timezone == "Asia/Kathmandu"
    assert parse_config({"assistant": {"timezone": "${BRUCE_TZ}"}}, environ={"TZ": "Asia/Kathmandu"}).assistant.zone \
        == ZoneInfo("Asia/Kathmandu")  # an empty value is no value
    written = parse_config({"assistant": {"timezone": "Europe/Lisbon"}}, environ={"TZ": "Asia/Kathmandu"})
    assert written.assistant.timezone == "Europe/Lisbon"


def test_the_shipped_config_leaves_the_timezone_to_the_machine():
    config = load_config(REPO / "config.yml", environ={"TZ": "Asia/Kathmandu"})
    assert config.assistant.timezone == "Asia/Kathmandu"
    assert config.console.socket_path == REPO / "data" / "bruce.sock"


def test_anchored_puts_every_relative_path_under_the_folder_and_keeps_absolute_ones(tmp_path):
    config = parse_config({"eval": {"cases_dir": "cases", "runs_dir": str(tmp_path / "runs")},
                           "mcp_servers": {"a": {"command": "python", "cwd": "servers/a"},
                                           "b": {"command": "python"}}}, environ={})
    moved = anchored(config, tmp_path / "etc")
    assert moved.eval.cases_dir == tmp_path / "etc" / "cases" and moved.eval.runs_dir == tmp_path / "runs"
    assert moved.mcp_servers["a"].cwd == tmp_path / "etc" / "servers" / "a" and moved.mcp_servers["b"].cwd is None
    assert moved.tools.artifacts.dir == tmp_path / "etc" / "data" / "artifacts"
    assert config.storage.path == Path("data/bruce.db")  # the config it was given is unchanged


def test_the_config_file_is_bruce_config_else_config_yml():
    assert default_config_path({"BRUCE_CONFIG": "/etc/bruce/config.yml"}) == Path("/etc/bruce/config.yml")
    assert default_config_path({"BRUCE_CONFIG": ""}) == Path("config.yml")
    assert default_config_path({}) == Path("config.yml")


def test_a_document_that_is_not_a_mapping_names_the_root():
    for data in ([1, 2], "text", 3):
        with pytest.raises(ConfigError) as info:
            parse_config(data, source="x.yml", environ={})
        assert info.value.problems == ["<root>: must be a mapping of keys"] and info.value.source == "x.yml"
    assert parse_config(None, environ={}).assistant.name == "Bruce"  # an empty file is all defaults
