"""Error text that names the key path (bruce/config/messages.py)."""

from __future__ import annotations

import pytest

from bruce.config.loader import parse_config
from bruce.config.messages import describe, key_path
from bruce.errors import ConfigError


def problems(data, environ=None) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse_config(data, environ=environ or {})
    return info.value.problems


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


def test_key_paths_that_start_like_a_type_name_are_kept():
    # pydantic tags union members ("str"); a key such as "stream" must not be mistaken for one
    assert problems({"llm": {"stream": "maybe"}}) == ["llm.stream: must be true or false (got 'maybe')"]


def test_a_key_path_is_dotted_with_list_positions_in_brackets():
    assert key_path(("tools", "http_post", "allowed_urls", 1)) == "tools.http_post.allowed_urls[1]"
    assert key_path(("llm", "fallbacks", 0, "ModelEndpoint", "model")) == "llm.fallbacks[0].model"
    assert key_path(("llm", "fallbacks", 2, "str")) == "llm.fallbacks[2]"
    assert key_path(()) == "" and key_path([0, 1]) == "[0][1]"


def test_describe_uses_the_table_and_falls_back_to_pydantics_words():
    assert describe({"loc": (), "type": "model_type", "msg": "x", "input": 1}) == \
        "<root>: must be a mapping of keys (got 1)"
    assert describe({"loc": ("a",), "type": "greater_than", "msg": "x", "input": 0, "ctx": {"gt": 2}}) == \
        "a: must be greater than 2 (got 0)"
    assert describe({"loc": ("a",), "type": "missing", "msg": "x", "input": {}}) == "a: required key is missing"
    assert describe({"loc": ("a", "b"), "type": "value_error", "msg": "Value error, no good", "input": 1}) == \
        "a.b: no good"
    assert describe({"loc": ("a",), "type": "literal_error", "msg": "Input should be 'x'", "input": "y"}) == \
        "a: Input should be 'x' (got 'y')"


def test_every_secret_key_is_redacted_in_errors():
    found = problems({"channels": {"telegram": {"token": ["tg-secret"], "webhook": {"secret_token": ["wh-secret"]}}},
                      "eval": {"judge_api_key": ["judge-secret"]}})
    assert found and not any("secret" in p.split(": ", 1)[1] for p in found), found
    assert all("<redacted>" in p for p in found)
