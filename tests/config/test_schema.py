"""Config: defaults, ${VAR} expansion, and errors that name the key path."""

from __future__ import annotations

import types
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Union, get_args, get_origin
from zoneinfo import ZoneInfo

import pytest
from pydantic import BaseModel, SecretStr

from bruce.cli.main import main
from bruce.config.loader import load_config, parse_config
from bruce.config.schema import Config
from bruce.config.timezone import local_zone_name
from bruce.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]


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


# --- hardening: what the loader and the models refuse ----------------------------------------


def load_problems(tmp_path, text: str | bytes) -> list[str]:
    path = tmp_path / "config.yml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={})
    return info.value.problems


def test_max_message_chars_has_an_upper_bound():
    assert problems({"assistant": {"max_message_chars": 10**9}}) == [
        "assistant.max_message_chars: must be at most 100000 (got 1000000000)"]


def test_duplicate_keys_are_refused_with_their_path_and_lines(tmp_path):
    assert load_problems(tmp_path, "assistant: {name: A}\nassistant: {name: B}\n") == [
        "assistant: duplicate key at line 2 (first at line 1)"]
    text = "llm:\n  model: openai/a\n  timeout_s: 5\n  model: openai/b\n"
    assert load_problems(tmp_path, text) == ["llm.model: duplicate key at line 4 (first at line 2)"]


def test_an_alias_bomb_is_refused_before_it_grows(tmp_path):
    lines = ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 4)]  # 27 aliases, 729 items
    (problem,) = load_problems(tmp_path, "\n".join(lines) + "\n")
    assert "aliases" in problem and "line 4" in problem


def test_aliases_that_expand_too_far_are_refused(tmp_path):
    # within the alias budget (16 uses), each level doubles a large list: 2000 * 2**8 items
    lines = ["b0: &b0 [" + ", ".join(["x"] * 2000) + "]"]
    lines += [f"b{i}: &b{i} [*b{i - 1}, *b{i - 1}]" for i in range(1, 9)]
    (problem,) = load_problems(tmp_path, "\n".join(lines) + "\n")
    assert "expands to more than" in problem


def test_a_recursive_alias_is_refused(tmp_path):
    (problem,) = load_problems(tmp_path, "assistant: &a {name: x, more: *a}\n")
    assert problem.startswith("assistant.more: ") and "refers to itself" in problem


def test_a_few_aliases_for_shared_values_still_work(tmp_path):
    path = tmp_path / "config.yml"
    path.write_text("channels:\n  telegram: {allowed_users: &owners [1, 2]}\n  discord: {allowed_users: *owners}\n")
    assert load_config(path, environ={}).channels.discord.allowed_users == ["1", "2"]


def test_deep_nesting_is_refused_with_a_message_not_a_traceback(tmp_path):
    (problem,) = load_problems(tmp_path, "a: " + "[" * 5000 + "]" * 5000 + "\n")
    assert "nested more than" in problem and "line 1" in problem


def test_a_file_that_is_not_utf8_is_refused_with_its_line(tmp_path):
    (problem,) = load_problems(tmp_path, b"assistant:\n  name: caf\xe9\n")
    assert problem == "not valid UTF-8 text at line 2, column 12 (byte 0xe9); save the file as UTF-8"


def test_config_check_refuses_what_run_refuses(tmp_path, capsys):
    path = tmp_path / "config.yml"
    path.write_text("tools: {overrides: {web.serch: {enabled: false}}}\n")
    assert main(["--config", str(path), "config", "check"]) == 2
    err = capsys.readouterr().err
    assert "tools.overrides.web.serch: unknown tool" in err and "web.search" in err and "Traceback" not in err


def test_key_paths_that_start_like_a_type_name_are_kept():
    # pydantic tags union members ("str"); a key such as "stream" must not be mistaken for one
    assert problems({"llm": {"stream": "maybe"}}) == ["llm.stream: must be true or false (got 'maybe')"]


def test_a_character_yaml_does_not_allow_is_refused_with_its_line(tmp_path):
    assert load_problems(tmp_path, "assistant:\n  name: a\x07b\n") == [
        "not valid YAML at line 2: character U+0007 is not allowed"]


# --- paths, the machine's timezone, ${VAR:-default} (issue 8) ------------------------------------

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


def test_a_directory_is_no_timezone():
    assert problems({"assistant": {"timezone": "Europe"}}) == ["assistant.timezone: unknown IANA timezone 'Europe'"]


@pytest.mark.parametrize(("value", "environ", "expected"), [
    ("${X:-fallback}", {}, "fallback"),
    ("${X:-fallback}", {"X": ""}, "fallback"),  # set but empty: the default, as the shell does
    ("${X:-fallback}", {"X": "set"}, "set"),
    ("${X}", {}, ""),
    ("${X}", {"X": ""}, ""),
    ("${X}", {"X": "set"}, "set"),
    ("a${X:-}b", {}, "ab"),
])
def test_variable_defaults_behave_like_the_shell(value, environ, expected):
    assert parse_config({"assistant": {"name": f"{value}!"}}, environ=environ).assistant.name == f"{expected}!"


def test_scheduler_keys_are_checked_with_their_path():
    found = problems({"scheduler": {"enabled": "sometimes", "misfire_grace_s": -5, "max_failures": 0,
                                    "every": 3}})
    assert any(p.startswith("scheduler.enabled: must be true or false") for p in found)
    assert any(p.startswith("scheduler.misfire_grace_s: must be at least 0") for p in found)
    assert any(p.startswith("scheduler.max_failures: must be at least 1") for p in found)
    assert "scheduler.every: unknown key" in found
    config = parse_config({"scheduler": {"enabled": False, "misfire_grace_s": 600}}, environ={})
    assert (config.scheduler.enabled, config.scheduler.misfire_grace_s) == (False, 600)


# --- secrets: every SecretStr of the model reaches the log redactor ------------------------------

def _filled(annotation: Any, make: Callable[[], SecretStr]) -> Any:
    """A value of ``annotation`` whose every SecretStr is a fresh one from ``make`` (built without
    validation; a required key without a secret is None), or None when the type holds no SecretStr."""
    origin, args = get_origin(annotation), get_args(annotation)
    if annotation is SecretStr:
        return make()
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        values = {name: _filled(field.annotation, make) for name, field in annotation.model_fields.items()}
        values = {name: value for name, value in values.items() if value is not None}
        required = {name: None for name, field in annotation.model_fields.items() if field.is_required()}
        return annotation.model_construct(**{**required, **values}) if values else None
    if origin is Annotated:
        return _filled(args[0], make)
    if origin in (Union, types.UnionType):
        return next((v for v in (_filled(a, make) for a in args) if v is not None), None)
    if origin in (list, tuple):
        item = _filled(args[0], make)
        return None if item is None else [item]
    if origin is dict:
        item = _filled(args[1], make)
        return None if item is None else {"x": item}
    return None


def _distinct_secrets() -> tuple[list[str], Callable[[], SecretStr]]:
    made: list[str] = []

    def make() -> SecretStr:
        made.append(f"secret-{len(made):02d}")
        return SecretStr(made[-1])
    return made, make


def test_secrets_finds_every_secret_field_the_schema_declares():
    made, make = _distinct_secrets()
    config = _filled(Config, make)
    # llm key and a fallback's, telegram token and webhook secret, discord, admin, brave, judge, mcp env and headers
    assert len(made) >= 10
    assert config.secrets() == sorted(made)


def test_a_new_secret_field_anywhere_is_found_without_being_listed():
    class Inner(BaseModel):
        key: SecretStr | None = None

    class Vault(BaseModel):
        by_name: dict[str, SecretStr] = {}
        items: list[Inner] = []

    class Extended(Config):
        vault: Vault = Vault()

    config = Extended.model_validate({"vault": {"by_name": {"a": "sk-in-a-dict"}, "items": [{"key": "sk-in-a-list"}, {}]},
                                      "admin": {"token": "admin-token"}})
    assert config.secrets() == ["admin-token", "sk-in-a-dict", "sk-in-a-list"]
    made, make = _distinct_secrets()
    assert _filled(Extended, make).secrets() == sorted(made) and len(made) >= 12


def test_secrets_from_the_environment_are_found_and_empty_ones_skipped():
    config = parse_config({
        "llm": {"api_key": "${KEY}", "fallbacks": ["openai/b", {"model": "openai/c", "api_key": "sk-c"}]},
        "mcp_servers": {"home": {"url": "https://mcp.example/x", "headers": {"Authorization": "Bearer ${TOKEN}"},
                                 "env": {"EMPTY": "${UNSET}"}}},
    }, environ={"KEY": "sk-main", "TOKEN": "t0k"})
    assert config.secrets() == ["Bearer t0k", "sk-c", "sk-main"]
