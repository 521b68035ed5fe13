"""config.yml: pydantic models, ``${VAR}`` expansion, errors that name the key path.

``load_config(path, environ)`` is the one entry. Every model forbids unknown keys, so a typo
fails at start-up with its path (``llm.timout_s: unknown key``) instead of being ignored.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import yaml
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator, model_validator

from bruce.errors import ConfigError

__all__ = [
    "Config",
    "AssistantConfig",
    "LLMConfig",
    "ModelEndpoint",
    "StorageConfig",
    "ChannelSection",
    "TelegramConfig",
    "DiscordConfig",
    "AdminConfig",
    "ToolsConfig",
    "ToolOverride",
    "LoggingConfig",
    "load_config",
    "default_config_path",
]

DEFAULT_SYSTEM_PROMPT = (
    "You are {name}, a personal assistant running on your owner's own machine. "
    "Be concise and direct. Use tools when they help, and report only what they returned."
)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _blank_to_none(value: Any) -> Any:
    return None if isinstance(value, str) and not value.strip() else value


class AssistantConfig(_Model):
    name: str = Field("Bruce", min_length=1)
    timezone: str = "America/Sao_Paulo"
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    max_turns: int = Field(5, ge=1, le=50)
    history_limit: int = Field(15, ge=2, le=500)
    summary_batch: int = Field(4, ge=1, le=100)
    max_message_chars: int = Field(16000, ge=100)
    recovery_max_age_s: float = Field(3600.0, gt=0)
    shutdown_timeout_s: float = Field(30.0, gt=0)

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(f"unknown IANA timezone {value!r}") from exc
        return value

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)


class ModelEndpoint(_Model):
    """A fallback model, optionally with its own endpoint and key."""

    model: str = Field(min_length=1)
    api_base: str | None = None
    api_key: SecretStr | None = None

    _blank = field_validator("api_base", "api_key", mode="before")(_blank_to_none)


class LLMConfig(_Model):
    model: str = Field("openai/gpt-4o-mini", min_length=1)
    api_base: str | None = None
    api_key: SecretStr | None = None
    fallbacks: list[str | ModelEndpoint] = Field(default_factory=list)
    timeout_s: float = Field(60.0, gt=0)
    num_retries: int = Field(2, ge=0, le=10)
    retry_backoff_s: float = Field(1.0, ge=0)
    summary_model: str | None = None
    stream: bool = True  # stream answers to channels that show progress

    _blank = field_validator("api_base", "api_key", "summary_model", mode="before")(_blank_to_none)

    def endpoints(self) -> list[ModelEndpoint]:
        """Primary first, then fallbacks; a bare fallback name shares the primary's endpoint."""
        primary = ModelEndpoint(model=self.model, api_base=self.api_base, api_key=self.api_key)
        out = [primary]
        for item in self.fallbacks:
            if isinstance(item, str):
                out.append(ModelEndpoint(model=item, api_base=self.api_base, api_key=self.api_key))
            else:
                out.append(item)
        return out


class StorageConfig(_Model):
    path: Path = Path("data/bruce.db")
    busy_timeout_ms: int = Field(5000, ge=1, le=600_000)  # wait this long for another process's lock


def _ids_as_text(value: Any) -> Any:
    return [str(x) for x in value] if isinstance(value, list) else value


class ChannelSection(_Model):
    """What every chat platform's section has: on/off and who may talk to the assistant."""

    enabled: bool = False
    allowed_users: list[str] = Field(default_factory=list)

    _ids = field_validator("allowed_users", mode="before")(_ids_as_text)


class TelegramConfig(ChannelSection):
    token: SecretStr | None = None
    api_base: str | None = None
    mode: Literal["polling", "webhook"] = "polling"

    _blank = field_validator("token", "api_base", mode="before")(_blank_to_none)


class DiscordConfig(ChannelSection):
    token: SecretStr | None = None
    api_base: str | None = None
    gateway_url: str | None = None

    _blank = field_validator("token", "api_base", "gateway_url", mode="before")(_blank_to_none)


class ChannelsConfig(_Model):
    telegram: TelegramConfig = TelegramConfig()
    discord: DiscordConfig = DiscordConfig()
    send_retries: int = Field(5, ge=0, le=20)  # retryable send failures tried again, with backoff
    send_backoff_s: float = Field(1.0, ge=0)
    resend_interval_s: float = Field(60.0, gt=0)  # unsent replies are tried again this often
    resend_max_age_s: float = Field(86400.0, gt=0)  # then given up (status failed, logged)

    def sections(self) -> dict[str, ChannelSection]:
        """Each platform's section by channel name."""
        found = {name: getattr(self, name) for name in type(self).model_fields}
        return {name: value for name, value in found.items() if isinstance(value, ChannelSection)}


class AdminConfig(_Model):
    enabled: bool = True
    host: str = "127.0.0.1"
    port: int = Field(8765, ge=0, le=65535)
    token: SecretStr | None = None

    _blank = field_validator("token", mode="before")(_blank_to_none)

    @property
    def base_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"


class ToolOverride(_Model):
    """Tightening only: a tool can be disabled or made to ask first, never loosened."""

    enabled: bool = True
    require_confirmation: bool = False


class WebToolsConfig(_Model):
    search_backend: Literal["duckduckgo", "searxng", "brave"] = "duckduckgo"
    searxng_url: str | None = None
    brave_api_key: SecretStr | None = None
    max_results: int = Field(5, ge=1, le=20)
    allow_private: bool = False
    read_max_bytes: int = Field(2_000_000, ge=1024)
    read_timeout_s: float = Field(15.0, gt=0)

    _blank = field_validator("searxng_url", "brave_api_key", mode="before")(_blank_to_none)

    @model_validator(mode="after")
    def _backend_settings(self) -> WebToolsConfig:
        if self.search_backend == "searxng" and not self.searxng_url:
            raise ValueError("search_backend searxng needs searxng_url")
        if self.search_backend == "brave" and not self.brave_api_key:
            raise ValueError("search_backend brave needs brave_api_key (e.g. \"${BRAVE_API_KEY}\")")
        return self


class ArtifactsConfig(_Model):
    dir: Path = Path("data/artifacts")
    max_bytes: int = Field(1_000_000, ge=1024)


class FilesConfig(_Model):
    notes_dir: Path = Path("data/notes")
    max_bytes: int = Field(200_000, ge=1024)


class HttpPostConfig(_Model):
    allowed_urls: list[str] = Field(default_factory=list)
    timeout_s: float = Field(15.0, gt=0)

    @field_validator("allowed_urls")
    @classmethod
    def _http_urls(cls, urls: list[str]) -> list[str]:
        for url in urls:
            if not url.startswith(("http://", "https://")):
                raise ValueError(f"{url!r} is not an http(s) URL")
        return urls


class ToolsConfig(_Model):
    timeout_s: float = Field(30.0, gt=0)
    audit_output_max_chars: int = Field(8000, ge=256)
    confirmation_ttl_s: float = Field(600.0, gt=0)
    approval_poll_s: float = Field(2.0, gt=0)
    overrides: dict[str, ToolOverride] = Field(default_factory=dict)
    web: WebToolsConfig = WebToolsConfig()
    artifacts: ArtifactsConfig = ArtifactsConfig()
    files: FilesConfig = FilesConfig()
    http_post: HttpPostConfig = HttpPostConfig()


class LoggingConfig(_Model):
    level: Literal["debug", "info", "warning", "error"] = "info"
    format: Literal["auto", "json", "console"] = "auto"


class Config(_Model):
    assistant: AssistantConfig = AssistantConfig()
    llm: LLMConfig = LLMConfig()
    storage: StorageConfig = StorageConfig()
    channels: ChannelsConfig = ChannelsConfig()
    admin: AdminConfig = AdminConfig()
    tools: ToolsConfig = ToolsConfig()
    logging: LoggingConfig = LoggingConfig()

    def secrets(self) -> list[str]:
        """Every secret value in this config, for the log redactor."""
        found: list[SecretStr | None] = [
            self.llm.api_key,
            self.channels.telegram.token,
            self.channels.discord.token,
            self.admin.token,
            self.tools.web.brave_api_key,
        ]
        found += [e.api_key for e in self.llm.endpoints()]
        return sorted({s.get_secret_value() for s in found if s and s.get_secret_value()})


_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def _expand(value: Any, environ: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        return _VAR.sub(lambda m: environ.get(m.group(1), m.group(2) or ""), value)
    if isinstance(value, list):
        return [_expand(v, environ) for v in value]
    if isinstance(value, dict):
        return {k: _expand(v, environ) for k, v in value.items()}
    return value


_MESSAGES = {
    "extra_forbidden": "unknown key",
    "missing": "required key is missing",
    "greater_than": "must be greater than {gt}",
    "greater_than_equal": "must be at least {ge}",
    "less_than_equal": "must be at most {le}",
    "int_parsing": "must be a whole number",
    "int_type": "must be a whole number",
    "float_parsing": "must be a number",
    "float_type": "must be a number",
    "bool_parsing": "must be true or false",
    "bool_type": "must be true or false",
    "string_too_short": "must not be empty",
    "model_type": "must be a mapping of keys",
    "dict_type": "must be a mapping of keys",
    "list_type": "must be a list",
}


def _describe(error: Any) -> str:
    loc = ".".join(str(p) for p in error["loc"] if not str(p).startswith(("str", "ModelEndpoint")))
    template = _MESSAGES.get(error["type"])
    ctx = error.get("ctx") or {}
    if error["type"] == "greater_than" and ctx.get("gt") == 0:
        template = "must be a positive number"
    if error["type"] == "value_error":
        return f"{loc or '<root>'}: {error['msg'].removeprefix('Value error, ')}"
    if template is None:
        message = error["msg"].removeprefix("Value error, ")
    else:
        message = template.format(**ctx)
    if error["type"] not in ("extra_forbidden", "missing") and not isinstance(error["input"], dict):
        message += f" (got {error['input']!r})"
    return f"{loc or '<root>'}: {message}"


def _is_secret_path(error: Any) -> bool:
    return any(str(p) in ("api_key", "token") for p in error["loc"])


def parse_config(data: Any, *, source: str | None = None, environ: Mapping[str, str] | None = None) -> Config:
    environ = os.environ if environ is None else environ
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError("<root>: must be a mapping of keys", source=source)
    try:
        return Config.model_validate(_expand(data, environ))
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            if _is_secret_path(error):
                error = {**error, "input": "<redacted>"}
            problems.append(_describe(error))
        raise ConfigError(sorted(set(problems)), source=source) from None


def default_config_path(environ: Mapping[str, str] | None = None) -> Path:
    environ = os.environ if environ is None else environ
    return Path(environ.get("BRUCE_CONFIG") or "config.yml")


def load_config(path: Path | str | None = None, environ: Mapping[str, str] | None = None) -> Config:
    """Read, expand and validate a config file; raise ConfigError naming each bad key."""
    environ = os.environ if environ is None else environ
    path = Path(path) if path is not None else default_config_path(environ)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}", source=str(path)) from None
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}", source=str(path)) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(f"not valid YAML{where}", source=str(path)) from None
    return parse_config(data, source=str(path), environ=environ)
