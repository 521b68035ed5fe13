"""config.yml: pydantic models, ``${VAR}`` expansion, errors that name the key path.

``load_config(path, environ)`` is the one entry. Every model forbids unknown keys, so a typo
fails at start-up with its path (``llm.timout_s: unknown key``) instead of being ignored.

The file is read as UTF-8 by a ``yaml.SafeLoader`` that also refuses what would otherwise hang,
trace or be silently ignored: duplicate keys, nesting deeper than ``MAX_DEPTH``, more than
``MAX_ALIASES`` alias uses, a document that expands (through aliases) to more than
``MAX_NODES`` values, and an alias that refers to itself; each refusal names the key path
and the line. What needs the tool contracts (``tools.overrides`` naming a tool that does not
exist) is checked by ``unknown_overrides`` against the contract names.

Relative paths (``storage.path``, ``tools.artifacts.dir``, ``tools.files.notes_dir``,
``console.socket_path``, ``eval.cases_dir``, ``eval.runs_dir``) resolve against the config file's
folder, never the current directory.
``assistant.timezone`` defaults to this machine's zone (``local_zone_name``: TZ, /etc/localtime, UTC).
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import httpx
import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

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
    "ConsoleConfig",
    "EvalConfig",
    "load_config",
    "parse_config",
    "parse_yaml",
    "default_config_path",
    "local_zone_name",
    "unknown_overrides",
    "MAX_MESSAGE_CHARS",
]

MAX_MESSAGE_CHARS = 100_000  # the console shows up to this much in one piece; platforms allow far less

DEFAULT_SYSTEM_PROMPT = (
    "You are {name}, a personal assistant running on your owner's own machine. "
    "Be concise and direct. Use tools when they help, and report only what they returned."
)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _blank_to_none(value: Any) -> Any:
    return None if isinstance(value, str) and not value.strip() else value


def _is_zone(name: str) -> bool:
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):  # OSError: a folder ("Europe"), a name too long
        return False
    return True


_ZONE_PREFIXES = ("posix/", "right/")  # tzdata's copies of every zone, the same zone by another name


def _zone_in_link(target: str) -> str | None:
    """The zone a link to ``.../zoneinfo/Area/City`` names, or None."""
    _, found, name = target.rpartition("/zoneinfo/")
    if not found:
        return None
    for prefix in _ZONE_PREFIXES:
        name = name.removeprefix(prefix)
    return name if _is_zone(name) else None


def local_zone_name(environ: Mapping[str, str] | None = None, localtime: Path = Path("/etc/localtime")) -> str:
    """This machine's IANA zone: ``TZ`` (a leading ':' stripped, as glibc allows) when it names
    one, then the zone ``localtime``'s symlink points at, then UTC. Read here rather than with
    tzlocal: two lookups need no dependency, and a bad value falls back instead of failing."""
    environ = os.environ if environ is None else environ
    tz = environ.get("TZ", "").removeprefix(":")
    if tz and _is_zone(tz):
        return tz
    try:
        targets = [os.readlink(localtime), os.path.realpath(localtime)]  # the link itself, then its end
    except (OSError, ValueError):  # not a link (a copied file), missing
        return "UTC"
    for target in targets:
        name = _zone_in_link(target)
        if name:
            return name
    return "UTC"


class AssistantConfig(_Model):
    name: str = Field("Bruce", min_length=1)
    timezone: str = Field(default_factory=local_zone_name)  # parse_config fills it from its environ
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    max_turns: int = Field(5, ge=1, le=50)
    max_turn_tokens: int = Field(60000, ge=1000, le=10_000_000)  # prompt + completion over a turn's model calls
    history_limit: int = Field(15, ge=2, le=500)
    summary_batch: int = Field(8, ge=1, le=100)  # a fold every 4 exchanges: half the background calls of 4
    max_message_chars: int = Field(16000, ge=100, le=MAX_MESSAGE_CHARS)
    recovery_max_age_s: float = Field(3600.0, gt=0)
    shutdown_timeout_s: float = Field(30.0, gt=0)

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        if not _is_zone(value):
            raise ValueError(f"unknown IANA timezone {value!r}")
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


class BudgetConfig(_Model):
    daily_usd: float | None = Field(None, ge=0)  # null: no cost limit; the day is assistant.timezone's
    daily_tokens: int | None = Field(None, ge=0)  # null: no token limit (prompt + completion)


class LLMConfig(_Model):
    model: str = Field("openai/gpt-4o-mini", min_length=1)
    api_base: str | None = None
    api_key: SecretStr | None = None
    fallbacks: list[str | ModelEndpoint] = Field(default_factory=list)
    timeout_s: float = Field(60.0, gt=0)
    num_retries: int = Field(2, ge=0, le=10)
    retry_backoff_s: float = Field(1.0, ge=0)
    turn_deadline_s: float = Field(90.0, gt=0)  # one turn's total wait on models: attempts, retries, fallbacks
    circuit_failures: int = Field(3, ge=0, le=100)  # consecutive failures that open a model's circuit; 0: never
    circuit_cooldown_s: float = Field(60.0, gt=0)  # an open circuit skips its model this long, then one trial
    summary_model: str | None = None
    stream: bool = True  # stream answers to channels that show progress
    budget: BudgetConfig = BudgetConfig()

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
    pairing: bool = False  # a stranger in a private chat gets a code the owner approves (`bruce pairing approve`)

    _ids = field_validator("allowed_users", mode="before")(_ids_as_text)


class TelegramWebhookConfig(_Model):
    """Webhook mode: Telegram posts updates to ``url``; Bruce serves them at host:port/path."""

    url: str | None = None  # the public https URL Telegram calls (a reverse proxy in front of host:port)
    path: str = Field("/telegram/webhook", pattern=r"^/[A-Za-z0-9/_.-]*$")
    secret_token: SecretStr | None = None  # required in webhook mode: checked on every request
    host: str = "127.0.0.1"
    port: int = Field(8443, ge=0, le=65535)

    _blank = field_validator("url", "secret_token", mode="before")(_blank_to_none)


class TelegramConfig(ChannelSection):
    token: SecretStr | None = None
    api_base: str | None = None
    mode: Literal["polling", "webhook"] = "polling"
    webhook: TelegramWebhookConfig = TelegramWebhookConfig()
    groups: bool = True  # in groups, answer allow-listed senders who mention the bot or reply to it
    poll_timeout_s: int = Field(30, ge=1, le=50)  # getUpdates long-poll time-out

    _blank = field_validator("token", "api_base", mode="before")(_blank_to_none)

    @model_validator(mode="after")
    def _webhook_complete(self) -> TelegramConfig:
        if self.enabled and self.mode == "webhook" and (self.webhook.url is None or self.webhook.secret_token is None):
            raise ValueError("webhook mode needs channels.telegram.webhook.url and webhook.secret_token")
        return self


class DiscordConfig(ChannelSection):
    token: SecretStr | None = None
    api_base: str | None = None  # replaces discord.py's Route.BASE, e.g. http://127.0.0.1:PORT/api/v10
    gateway_url: str | None = None  # the gateway websocket to connect to instead of Discord's
    allowed_channels: list[str] = Field(default_factory=list)  # guild channel ids answered on a mention; empty: none
    ready_timeout_s: float = Field(30.0, gt=0, le=600)  # start-up fails when the gateway is not ready by then

    _blank = field_validator("token", "api_base", "gateway_url", mode="before")(_blank_to_none)
    _channel_ids = field_validator("allowed_channels", mode="before")(_ids_as_text)


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


_ALLOWED_HOST = re.compile(r"[a-z0-9_.-]+(?::[0-9]{1,5})?|\[[0-9a-f:.]+\](?::[0-9]{1,5})?")


def _allowed_host(value: str) -> str:
    host = value.strip().lower()
    if not _ALLOWED_HOST.fullmatch(host):
        raise ValueError(f"{value[:80]!r} is not a host name or host:port")
    return host


class WebToolsConfig(_Model):
    search_backend: Literal["duckduckgo", "searxng", "brave"] = "duckduckgo"
    searxng_url: str | None = None
    brave_api_key: SecretStr | None = None
    max_results: int = Field(5, ge=1, le=20)
    allow_private: bool = False
    read_max_bytes: int = Field(2_000_000, ge=1024)
    read_timeout_s: float = Field(15.0, gt=0)
    cache_ttl_s: float = Field(300.0, ge=0, le=86400)  # a repeated search or page read within this is answered from memory; 0: off
    # not empty: web.read_url fetches only these hosts ("host" or "host:port"), every redirect too
    # (``bruce eval`` keeps its cases on a local page server this way)
    allowed_hosts: list[Annotated[str, AfterValidator(_allowed_host)]] = Field(default_factory=list)

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


_HOST_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?")


def _host_problem(host: str) -> str | None:
    """Why an (already IDNA-encoded, lower-case) host is no host at all, or None."""
    if not host:
        return "has no host"
    try:
        ipaddress.ip_address(host)
        return None
    except ValueError:
        pass
    labels = host.removesuffix(".").split(".")
    if "%" in host or not all(_HOST_LABEL.fullmatch(label) for label in labels):
        return "has an invalid host name"
    return None


def _url_problem(url: str) -> str | None:
    """Why ``url`` cannot be an http.post allow-list entry, or None. The same parser (httpx) and
    the same rules as the tool itself, so what passes here is what the tool accepts; the URL is
    never echoed (it may hold a password)."""
    try:
        parsed = httpx.URL(url)
        scheme, userinfo, path = parsed.scheme, parsed.userinfo, parsed.path
        host = parsed.raw_host.decode("ascii").lower()
        parsed.host  # noqa: B018  (decoding an IDNA host can fail only here)
        _ = parsed.port
    except (httpx.InvalidURL, TypeError, ValueError):  # idna's errors are ValueErrors
        return "is not a valid URL (check the host name)"
    if scheme not in ("http", "https"):
        return "is not an http(s) URL"
    if userinfo:
        return "must not contain a user:password part"
    if any(segment in (".", "..") for segment in path.split("/")):
        return "must not contain '.' or '..' path segments"
    return _host_problem(host)


def _allowed_url(url: str) -> str:
    problem = _url_problem(url)
    if problem:
        raise ValueError(problem)
    return url


class HttpPostConfig(_Model):
    allowed_urls: list[Annotated[str, AfterValidator(_allowed_url)]] = Field(default_factory=list)
    timeout_s: float = Field(15.0, gt=0)


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


def unknown_overrides(tools: ToolsConfig, known: Iterable[str]) -> list[str]:
    """One problem per ``tools.overrides`` entry that names no tool in ``known`` (contract names);
    shared by ``bruce config check`` and start-up, so both refuse the same configs."""
    names = sorted(set(known))
    return [f"tools.overrides.{name}: unknown tool (known tools: {', '.join(names)})"
            for name in sorted(set(tools.overrides) - set(names))
            if not name.startswith("mcp.")]  # an MCP server's tools are known once it connects


class LoggingConfig(_Model):
    level: Literal["debug", "info", "warning", "error"] = "info"
    format: Literal["auto", "json", "console"] = "auto"


class RuntimeConfig(_Model):
    event_loop: Literal["auto", "uvloop", "asyncio"] = "auto"  # bruce.runtime.event_loop: uvloop where installed


class ConsoleConfig(_Model):
    socket_path: Path = Path("data/bruce.sock")  # the daemon's local console socket (mode 0600)


class SchedulerConfig(_Model):
    enabled: bool = True
    misfire_grace_s: int = Field(21600, ge=0, le=30 * 86400)  # a run late by more than this is missed, not fired
    max_failures: int = Field(3, ge=1, le=100)  # consecutive failed deliveries that flag a job
    dedup_window_s: int = Field(600, ge=0, le=86400)  # the same job created again within this returns the first


class LimitsConfig(_Model):
    messages_per_minute: int = Field(20, ge=1, le=10_000)  # per sender and per conversation, sliding window
    messages_per_hour: int = Field(200, ge=1, le=100_000)


RiskName = Literal["low", "medium", "high", "critical", "forbidden"]
MCP_SERVER_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}")


class MCPServerConfig(_Model):
    """One MCP server: ``command`` (stdio, started and supervised by Bruce) or ``url`` (HTTP)."""

    enabled: bool = True
    command: str | None = None  # "python" is the interpreter running Bruce
    args: list[str] = Field(default_factory=list)
    env: dict[str, SecretStr] = Field(default_factory=dict)  # added to a minimal default environment
    cwd: Path | None = None  # relative: against the config file's folder
    url: str | None = None
    headers: dict[str, SecretStr] = Field(default_factory=dict)
    transport: Literal["auto", "streamable_http", "sse"] = "auto"  # auto: streamable HTTP, then SSE
    enabled_tools: list[str] | None = None  # null: every tool the server lists
    disabled_tools: list[str] = Field(default_factory=list)
    risk: RiskName = "high"  # of every tool of this server, unless tool_risk says otherwise
    tool_risk: dict[str, RiskName] = Field(default_factory=dict)
    timeout_s: float = Field(30.0, gt=0, le=3600)  # one call
    connect_timeout_s: float = Field(2.0, gt=0, le=120)  # connection and handshake
    ping_interval_s: float = Field(15.0, gt=0, le=3600)  # how often a connected server is checked
    reconnect_max_s: float = Field(60.0, gt=0, le=3600)  # the longest wait between reconnection attempts

    @model_validator(mode="after")
    def _one_transport(self) -> MCPServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError("give either command (a stdio server) or url (an HTTP server), not both or neither")
        if self.url is not None and not re.fullmatch(r"https?://[^\s/]+(/\S*)?", self.url):
            raise ValueError(f"url must be an http:// or https:// address, not {self.url[:80]!r}")
        if self.command is not None and not self.command.strip():
            raise ValueError("command must not be empty")
        return self


class MemoryConfig(_Model):
    """Long-term memory (docs/memory.md): facts about the owner, kept across sessions."""

    enabled: bool = True  # false: nothing new is remembered (extraction, summaries, memory.remember off)
    recent_limit: int = Field(20, ge=0, le=200)  # facts in each prompt's <memory>, newest first
    recent_days: int = Field(30, ge=1, le=3650)  # ...seen within this many days
    max_context_chars: int = Field(4000, ge=200, le=100_000)  # the <memory> part's ceiling
    summarize_after: int = Field(5, ge=1, le=1000)  # new facts since the last summary that trigger the next
    archive_after_days: int = Field(30, ge=1, le=3650)  # summarized facts older than this leave the read path
    max_concurrent: int = Field(2, ge=1, le=32)  # background extractions at once (one per conversation)
    extract_after_s: float = Field(2.0, ge=0, le=3600)  # extraction waits for the conversation to pause this long
    model: str | None = None  # null: llm.summary_model, else the chat model


class MCPServeConfig(_Model):
    """``bruce mcp serve``: Bruce's own tools for another MCP client."""

    trusted: bool = False  # true: tools that need confirmation are offered too (the client asks its user)
    port: int = Field(8766, ge=0, le=65535)  # the HTTP transport, always on 127.0.0.1
    # where reminders made over MCP are delivered ('<channel>:<chat id>'); null: the chat written in last
    conversation: str | None = Field(None, pattern=r"^[a-z][a-z0-9_-]*:[^\s:]+$")


class EvalConfig(_Model):
    """``bruce eval`` (docs/eval.md): where the cases and the runs are, and the judge's endpoint."""

    cases_dir: Path = Path("evals")  # relative: to the config file's folder
    runs_dir: Path = Path("eval-runs")  # each run writes <runs_dir>/<timestamp>/; the admin page lists them
    judge_api_base: str | None = None  # null: llm.api_base when the judge has llm.model's provider, else litellm's
    judge_api_key: SecretStr | None = None  # null: likewise llm.api_key, else the provider's usual variable

    _blank = field_validator("judge_api_base", "judge_api_key", mode="before")(_blank_to_none)


class Config(_Model):
    assistant: AssistantConfig = Field(default_factory=AssistantConfig)  # the zone is read when it is made
    llm: LLMConfig = LLMConfig()
    storage: StorageConfig = StorageConfig()
    channels: ChannelsConfig = ChannelsConfig()
    admin: AdminConfig = AdminConfig()
    tools: ToolsConfig = ToolsConfig()
    logging: LoggingConfig = LoggingConfig()
    runtime: RuntimeConfig = RuntimeConfig()
    console: ConsoleConfig = ConsoleConfig()
    scheduler: SchedulerConfig = SchedulerConfig()
    limits: LimitsConfig = LimitsConfig()
    memory: MemoryConfig = MemoryConfig()
    mcp_servers: dict[str, MCPServerConfig] = Field(default_factory=dict)
    mcp_serve: MCPServeConfig = MCPServeConfig()
    eval: EvalConfig = EvalConfig()

    @field_validator("mcp_servers")
    @classmethod
    def _server_names(cls, servers: dict[str, MCPServerConfig]) -> dict[str, MCPServerConfig]:
        bad = [n for n in servers if not MCP_SERVER_NAME.fullmatch(n)]
        if bad:
            raise ValueError(f"server name {bad[0][:40]!r}: use 1-32 lower-case letters, digits, '_' or '-'")
        return servers

    def anchored(self, base_dir: Path) -> Config:
        """This config with each relative path (``storage.path``, ``tools.artifacts.dir``,
        ``tools.files.notes_dir``, ``console.socket_path``, ``eval.cases_dir``, ``eval.runs_dir``)
        under ``base_dir``; absolute paths are kept and ``~`` is expanded."""
        def at(path: Path) -> Path:
            path = path.expanduser()
            return path if path.is_absolute() else base_dir / path

        tools = self.tools
        return self.model_copy(update={
            "storage": self.storage.model_copy(update={"path": at(self.storage.path)}),
            "tools": tools.model_copy(update={
                "artifacts": tools.artifacts.model_copy(update={"dir": at(tools.artifacts.dir)}),
                "files": tools.files.model_copy(update={"notes_dir": at(tools.files.notes_dir)}),
            }),
            "console": self.console.model_copy(update={"socket_path": at(self.console.socket_path)}),
            "eval": self.eval.model_copy(update={"cases_dir": at(self.eval.cases_dir),
                                                 "runs_dir": at(self.eval.runs_dir)}),
            "mcp_servers": {name: server.model_copy(update={"cwd": at(server.cwd) if server.cwd else None})
                            for name, server in self.mcp_servers.items()},
        })

    def secrets(self) -> list[str]:
        """Every secret value in this config, for the log redactor."""
        found: list[SecretStr | None] = [
            self.llm.api_key,
            self.channels.telegram.token,
            self.channels.telegram.webhook.secret_token,
            self.channels.discord.token,
            self.admin.token,
            self.tools.web.brave_api_key,
            self.eval.judge_api_key,
        ]
        found += [e.api_key for e in self.llm.endpoints()]
        for server in self.mcp_servers.values():
            found += [*server.env.values(), *server.headers.values()]
        return sorted({s.get_secret_value() for s in found if s and s.get_secret_value()})


_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def _expand(value: Any, environ: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        return _VAR.sub(lambda m: environ.get(m.group(1)) or m.group(2) or "", value)  # empty: the default
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
    "string_type": "must be text",
}


_UNION_TAGS = {"str", "ModelEndpoint"}  # pydantic names the union member tried; not a key


def _key_path(loc: Iterable[Any]) -> str:
    """``('tools', 'http_post', 'allowed_urls', 1)`` -> ``tools.http_post.allowed_urls[1]``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part not in _UNION_TAGS:
            out += f".{part}" if out else str(part)
    return out


def _describe(error: Any) -> str:
    loc = _key_path(error["loc"])
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
    return any(str(p) in ("api_key", "token", "secret_token", "judge_api_key") for p in error["loc"])


def _with_local_zone(data: dict[str, Any], environ: Mapping[str, str]) -> dict[str, Any]:
    """``data`` with ``assistant.timezone`` set to this machine's zone (from ``environ``'s TZ)
    when it is absent or empty."""
    assistant = data.get("assistant", {})
    if not isinstance(assistant, dict) or _blank_to_none(assistant.get("timezone")) is not None:
        return data  # set, or not a mapping (which validation reports)
    return {**data, "assistant": {**assistant, "timezone": local_zone_name(environ)}}


def parse_config(data: Any, *, source: str | None = None, environ: Mapping[str, str] | None = None,
                 base_dir: Path | None = None) -> Config:
    """Validate ``data``; relative paths are resolved against ``base_dir`` (None: kept as given)."""
    environ = os.environ if environ is None else environ
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError("<root>: must be a mapping of keys", source=source)
    try:
        config = Config.model_validate(_with_local_zone(_expand(data, environ), environ))
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            if _is_secret_path(error):
                error = {**error, "input": "<redacted>"}
            problems.append(_describe(error))
        raise ConfigError(sorted(set(problems)), source=source) from None
    return config if base_dir is None else config.anchored(base_dir)


def default_config_path(environ: Mapping[str, str] | None = None) -> Path:
    environ = os.environ if environ is None else environ
    return Path(environ.get("BRUCE_CONFIG") or "config.yml")


MAX_DEPTH = 32  # mappings and lists inside each other; Bruce's own keys go 4 deep
MAX_ALIASES = 20  # *alias uses in one file: enough to share a list, far too few for a bomb
MAX_NODES = 50_000  # values in the document once every alias is expanded


class _Refused(yaml.YAMLError):
    """A document the loader will not build: ``where`` is the key path, ``mark`` the place."""

    def __init__(self, where: str, problem: str, mark: Any) -> None:
        self.where, self.problem, self.mark = where, problem, mark
        super().__init__(problem)

    def describe(self) -> str:
        line = f" at line {self.mark.line + 1}" if self.mark is not None else ""
        return f"{self.where or '<root>'}: {self.problem}{line}"


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that keeps track of the key path while composing, and refuses duplicate keys,
    deep nesting, alias bombs and self-referring aliases before anything is constructed."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._path: list[str | int] = []
        self._aliases = 0
        self._open_anchors: set[str] = set()
        self._weights: dict[int, int] = {}  # id(node) -> values it expands to

    def _where(self) -> str:
        text = _key_path(self._path)
        return text if len(text) <= 120 else text[:117] + "..."

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        if parent is not None:
            if isinstance(index, yaml.ScalarNode):
                self._path.append(str(index.value))
            elif isinstance(index, int):
                self._path.append(index)  # a list position, shown as [i]
            else:
                self._path.append("<key>")
        try:
            return self._compose_checked()
        finally:
            if parent is not None:
                self._path.pop()

    def _compose_checked(self) -> yaml.Node | None:
        event = self.peek_event()  # type: ignore[no-untyped-call]
        if isinstance(event, yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                raise _Refused(self._where(), f"more than {MAX_ALIASES} aliases (*name) in one file", event.start_mark)
            if event.anchor in self._open_anchors:
                raise _Refused(self._where(), f"the alias *{event.anchor} refers to itself", event.start_mark)
            return super().compose_node(None, None)  # type: ignore[arg-type]
        if len(self._path) > MAX_DEPTH:
            raise _Refused(self._where(), f"nested more than {MAX_DEPTH} levels deep", event.start_mark)
        anchor = getattr(event, "anchor", None)
        if anchor is not None:
            self._open_anchors.add(anchor)
        try:
            node = super().compose_node(None, None)  # type: ignore[arg-type]
        finally:
            if anchor is not None:
                self._open_anchors.discard(anchor)
        if isinstance(node, yaml.MappingNode):
            self._refuse_duplicates(node)
        if node is not None:
            self._weigh(node)
        return node

    def _refuse_duplicates(self, node: yaml.MappingNode) -> None:
        seen: dict[tuple[str, str], yaml.Node] = {}
        for key, _ in node.value:
            if not isinstance(key, yaml.ScalarNode):
                continue
            first = seen.setdefault((key.tag, key.value), key)
            if first is not key:
                where = _key_path([*self._path, str(key.value)])
                raise _Refused(where, f"duplicate key at {_place(key, first)} (first at {_place(first, key)})", None)

    def _weigh(self, node: yaml.Node) -> None:
        if isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        elif isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        else:
            children = []
        weight = 1 + sum(self._weights.get(id(child), 1) for child in children)
        self._weights[id(node)] = weight
        if weight > MAX_NODES:
            raise _Refused(self._where(), f"expands to more than {MAX_NODES} values (through aliases?)",
                           node.start_mark)


def _place(node: yaml.Node, other: yaml.Node) -> str:
    """``line N``, with the column when ``other`` is on the same line."""
    mark = node.start_mark
    if mark.line == other.start_mark.line:
        return f"line {mark.line + 1}, column {mark.column + 1}"
    return f"line {mark.line + 1}"


def _decode(raw: bytes) -> str:
    """The file as text, or ConfigError at the first byte that is not UTF-8."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise ConfigError(f"not valid UTF-8 text at line {line}, column {column} (byte 0x{raw[exc.start]:02x}); "
                          "save the file as UTF-8") from None


def _yaml_problem(exc: yaml.YAMLError, text: str) -> str:
    if isinstance(exc, _Refused):
        return exc.describe()
    mark = getattr(exc, "problem_mark", None)
    if mark is not None:
        said = "; ".join(p for p in (getattr(exc, "context", None), getattr(exc, "problem", None)) if p)
        return f"not valid YAML at line {mark.line + 1}, column {mark.column + 1}" + (f": {said}" if said else "")
    if isinstance(exc, yaml.reader.ReaderError):  # a character YAML does not allow (NUL, a control code)
        line = text.count("\n", 0, exc.position) + 1
        return f"not valid YAML at line {line}: character U+{exc.character:04X} is not allowed"
    return "not valid YAML"


def parse_yaml(text: str) -> Any:
    """The YAML document in ``text`` (SafeLoader types), or ConfigError saying where it is wrong."""
    try:
        loader = _StrictLoader(text)  # the reader refuses characters YAML does not allow here
    except yaml.YAMLError as exc:
        raise ConfigError(_yaml_problem(exc, text)) from None
    try:
        return loader.get_single_data()
    except yaml.YAMLError as exc:
        raise ConfigError(_yaml_problem(exc, text)) from None
    finally:
        loader.dispose()


def load_config(path: Path | str | None = None, environ: Mapping[str, str] | None = None) -> Config:
    """Read, expand and validate a config file; raise ConfigError naming each bad key."""
    environ = os.environ if environ is None else environ
    path = Path(path) if path is not None else default_config_path(environ)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}", source=str(path)) from None
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}", source=str(path)) from None
    try:
        data = parse_yaml(_decode(raw))
    except ConfigError as exc:
        raise ConfigError(exc.problems, source=str(path)) from None
    return parse_config(data, source=str(path), environ=environ, base_dir=path.resolve().parent)
