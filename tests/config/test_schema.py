"""config.yml's models: bounds, sections, and secrets() (bruce/config/schema.py)."""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Annotated, Any, Union, get_args, get_origin

import pytest
from pydantic import BaseModel, SecretStr

from bruce.config.loader import parse_config
from bruce.config.schema import Config
from bruce.errors import ConfigError


def problems(data, environ=None) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse_config(data, environ=environ or {})
    return info.value.problems


def test_max_message_chars_has_an_upper_bound():
    assert problems({"assistant": {"max_message_chars": 10**9}}) == [
        "assistant.max_message_chars: must be at most 100000 (got 1000000000)"]


def test_scheduler_keys_are_checked_with_their_path():
    found = problems({"scheduler": {"enabled": "sometimes", "misfire_grace_s": -5, "max_failures": 0,
                                    "every": 3}})
    assert any(p.startswith("scheduler.enabled: must be true or false") for p in found)
    assert any(p.startswith("scheduler.misfire_grace_s: must be at least 0") for p in found)
    assert any(p.startswith("scheduler.max_failures: must be at least 1") for p in found)
    assert "scheduler.every: unknown key" in found
    config = parse_config({"scheduler": {"enabled": False, "misfire_grace_s": 600}}, environ={})
    assert (config.scheduler.enabled, config.scheduler.misfire_grace_s) == (False, 600)


def test_the_live_job_cap_defaults_to_50_and_is_checked():
    assert parse_config({}, environ={}).scheduler.max_active_jobs == 50
    assert any(p.startswith("scheduler.max_active_jobs: must be at least 1")
               for p in problems({"scheduler": {"max_active_jobs": 0}}))
    assert parse_config({"scheduler": {"max_active_jobs": 5}}, environ={}).scheduler.max_active_jobs == 5


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


def test_endpoints_are_the_primary_then_the_fallbacks():
    config = parse_config({"llm": {"model": "openai/a", "api_base": "http://x", "api_key": "k",
                                   "fallbacks": ["openai/b", {"model": "openai/c", "api_key": "kc"}]}}, environ={})
    endpoints = config.llm.endpoints()
    assert [e.model for e in endpoints] == ["openai/a", "openai/b", "openai/c"]
    assert endpoints[1].api_base == "http://x" and endpoints[1].api_key == config.llm.api_key
    assert endpoints[2].api_base is None and endpoints[2].api_key.get_secret_value() == "kc"


def test_channel_sections_and_the_admin_address():
    config = parse_config({"channels": {"telegram": {"allowed_users": [1, "2"]}}, "admin": {"host": "::1"}},
                          environ={})
    assert set(config.channels.sections()) == {"telegram", "discord"}
    assert config.channels.telegram.allowed_users == ["1", "2"]
    assert config.admin.base_url == "http://[::1]:8765"
