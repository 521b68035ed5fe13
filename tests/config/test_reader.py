"""The strict YAML reader and ${VAR} expansion (bruce/config/reader.py)."""

from __future__ import annotations

import pytest

from bruce.config.loader import load_config, parse_config
from bruce.config.reader import MAX_ALIASES, decode, expand, parse_yaml
from bruce.errors import ConfigError


def load_problems(tmp_path, text: str | bytes) -> list[str]:
    path = tmp_path / "config.yml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={})
    return info.value.problems


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


def test_a_character_yaml_does_not_allow_is_refused_with_its_line(tmp_path):
    assert load_problems(tmp_path, "assistant:\n  name: a\x07b\n") == [
        "not valid YAML at line 2: character U+0007 is not allowed"]


def test_variables_are_expanded_from_the_environment():
    config = parse_config(
        {"llm": {"api_key": "${MY_KEY}", "api_base": "${BASE:-http://127.0.0.1:11434}"}},
        environ={"MY_KEY": "sk-abc"},
    )
    assert config.llm.api_key.get_secret_value() == "sk-abc"
    assert config.llm.api_base == "http://127.0.0.1:11434"
    assert "sk-abc" not in repr(config)


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


def test_parse_yaml_reads_a_document_and_names_where_it_is_wrong():
    assert parse_yaml("a: {b: [1, 2]}\n") == {"a": {"b": [1, 2]}}
    assert parse_yaml("") is None
    with pytest.raises(ConfigError) as info:
        parse_yaml("a: 1\na: 2\n")
    assert info.value.problems == ["a: duplicate key at line 2 (first at line 1)"] and info.value.source is None
    with pytest.raises(ConfigError) as info:
        parse_yaml("a: !!python/object:os.system x\n")  # SafeLoader types only
    assert info.value.problems[0].startswith("not valid YAML")


def test_the_alias_budget_is_counted_per_document():
    text = "a: &a [x]\n" + "".join(f"b{i}: *a\n" for i in range(MAX_ALIASES))
    assert len(parse_yaml(text)) == MAX_ALIASES + 1
    with pytest.raises(ConfigError, match="more than 20 aliases"):
        parse_yaml(text + "c: *a\n")


def test_decode_names_the_first_byte_that_is_not_utf8():
    assert decode("olá".encode()) == "olá"
    with pytest.raises(ConfigError, match=r"line 1, column 3 \(byte 0xff\)"):
        decode(b"ab\xffc")


def test_expand_walks_lists_and_mappings_and_leaves_other_values():
    data = {"a": ["${X}", {"b": "${Y:-d}"}], "n": 3, "t": True, "none": None, "${X}": "key"}
    assert expand(data, {"X": "x"}) == {"a": ["x", {"b": "d"}], "n": 3, "t": True, "none": None, "${X}": "key"}
    assert expand("$X ${lower} ${1X}", {"X": "no", "lower": "yes"}) == "$X yes ${1X}"  # only ${NAME} is a variable
