"""config.yml's pydantic models: every section, its keys, their defaults and bounds.

Every model is frozen and forbids unknown keys, so a typo fails at start-up with its path
(``llm.timout_s: unknown key``) instead of being ignored. The rules the models share with the
tools live in ``bruce.config.rules``, the machine's time zone in ``bruce.config.timezone``;
reading a file into a ``Config`` is ``bruce.config.loader.load_config``. ``Config.secrets()``
finds every ``SecretStr`` by walking the model, so a new secret field reaches the log redactor
without being listed.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Annotated, Literal
from zoneinfo import ZoneInfo

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from bruce.config.briefing import BriefingConfig
from bruce.config.email import EmailConfig
from bruce.config.people import AccessConfig, PeopleConfig
from bruce.config.rules import allowed_host, allowed_url, blank_to_none, ids_as_text
from bruce.config.timezone import is_zone, local_zone_name

__all__ = [
    "Config", "AssistantConfig", "LLMConfig", "ModelEndpoint", "StorageConfig", "ChannelSection",
    "ChannelsConfig", "TelegramConfig", "DiscordConfig", "AdminConfig", "ToolsConfig", "ToolOverride",
    "WebToolsConfig", "LimitsConfig", "LoggingConfig", "ConsoleConfig", "EvalConfig", "MCPServerConfig",
    "MAX_MESSAGE_CHARS", "PeopleConfig", "AccessConfig", "MediaConfig", "MemoryConfig",
]


MAX_MESSAGE_CHARS = 100_000  # the console shows up to this much in one piece; platforms allow far less

DEFAULT_SYSTEM_PROMPT = (
    "You are {name}, a personal assistant running on your owner's own machine. "
    "Be concise and direct. Use tools when they help, and report only what they returned."
)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


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
        if not is_zone(value):
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

    _blank = field_validator("api_base", "api_key", mode="before")(blank_to_none)


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

    _blank = field_validator("api_base", "api_key", "summary_model", mode="before")(blank_to_none)

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
    backups_keep: int = Field(7, ge=1, le=1000)  # `bruce backup`'s stamped files kept in backups/ (the newest)



class ChannelSection(_Model):
    """What every chat platform's section has: on/off and who may talk to the assistant."""

    enabled: bool = False
    allowed_users: list[str] = Field(default_factory=list)
    pairing: bool = False  # a stranger in a private chat gets a code the owner approves (`bruce pairing approve`)

    _ids = field_validator("allowed_users", mode="before")(ids_as_text)


class TelegramWebhookConfig(_Model):
    """Webhook mode: Telegram posts updates to ``url``; Bruce serves them at host:port/path."""

    url: str | None = None  # the public https URL Telegram calls (a reverse proxy in front of host:port)
    path: str = Field("/telegram/webhook", pattern=r"^/[A-Za-z0-9/_.-]*$")
    secret_token: SecretStr | None = None  # required in webhook mode: checked on every request
    host: str = "127.0.0.1"
    port: int = Field(8443, ge=0, le=65535)

    _blank = field_validator("url", "secret_token", mode="before")(blank_to_none)


class TelegramConfig(ChannelSection):
    token: SecretStr | None = None
    api_base: str | None = None
    mode: Literal["polling", "webhook"] = "polling"
    webhook: TelegramWebhookConfig = TelegramWebhookConfig()
    groups: bool = True  # in groups, answer allow-listed senders who mention the bot or reply to it
    poll_timeout_s: int = Field(30, ge=1, le=50)  # getUpdates long-poll time-out
    send_timeout_s: float = Field(60.0, gt=0, le=600)  # a send with no answer by then is tried again (may double)

    _blank = field_validator("token", "api_base", mode="before")(blank_to_none)

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

    _blank = field_validator("token", "api_base", "gateway_url", mode="before")(blank_to_none)
    _channel_ids = field_validator("allowed_channels", mode="before")(ids_as_text)


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
    # beyond loopback, the host names (``name`` or ``name:port``) the page answers to, e.g. a reverse
    # proxy's; a request naming any other Host is refused (DNS rebinding)
    allowed_hosts: list[Annotated[str, AfterValidator(allowed_host)]] = Field(default_factory=list)

    _blank = field_validator("token", mode="before")(blank_to_none)

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
    cache_ttl_s: float = Field(300.0, ge=0, le=86400)  # a repeated search or page read within this is answered from memory; 0: off
    # not empty: web.read_url fetches only these hosts ("host" or "host:port"), every redirect too
    # (``bruce eval`` keeps its cases on a local page server this way)
    allowed_hosts: list[Annotated[str, AfterValidator(allowed_host)]] = Field(default_factory=list)

    _blank = field_validator("searxng_url", "brave_api_key", mode="before")(blank_to_none)

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
    allowed_urls: list[Annotated[str, AfterValidator(allowed_url)]] = Field(default_factory=list)
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
    email: EmailConfig = EmailConfig()


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
    max_active_jobs: int = Field(50, ge=1, le=10_000)  # live (active or paused) jobs per conversation
    briefing: BriefingConfig = BriefingConfig()  # the morning briefing job (bruce.jobs.briefing); off by default


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


class MediaConfig(_Model):
    """Voice notes, photos and documents sent in chat (docs/media.md)."""

    enabled: bool = True  # false: every attachment gets a clear "not read" reply, with no download and no call
    transcription_model: str | None = None  # e.g. openai/whisper-1, groq/whisper-large-v3; null: voice is not heard
    api_base: str | None = None  # null: llm.api_base
    api_key: SecretStr | None = None  # null: llm.api_key
    max_voice_s: int = Field(300, ge=1, le=7200)  # a longer voice note or audio file is refused before any call
    max_file_mb: float = Field(20, gt=0, le=2000)  # a larger file is refused before any download
    keep_days: int = Field(30, ge=1, le=3650)  # photos are kept under the data folder this long
    max_document_chars: int = Field(20000, ge=500, le=1_000_000)  # a document's text is cut here, with a note
    fetch_timeout_s: float = Field(60.0, gt=0, le=3600)  # a download taking longer is given up, with a reply
    vision: bool | None = None  # null: litellm's capability data for llm.model decides; true/false: you do

    _blank = field_validator("api_base", "api_key", "transcription_model", mode="before")(blank_to_none)


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

    _blank = field_validator("judge_api_base", "judge_api_key", mode="before")(blank_to_none)


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
    media: MediaConfig = MediaConfig()
    mcp_servers: dict[str, MCPServerConfig] = Field(default_factory=dict)
    mcp_serve: MCPServeConfig = MCPServeConfig()
    eval: EvalConfig = EvalConfig()
    people: PeopleConfig = PeopleConfig()  # the owner's ids; everyone else admitted is a guest
    access: AccessConfig = AccessConfig()  # what a guest may use

    @field_validator("mcp_servers")
    @classmethod
    def _server_names(cls, servers: dict[str, MCPServerConfig]) -> dict[str, MCPServerConfig]:
        bad = [n for n in servers if not MCP_SERVER_NAME.fullmatch(n)]
        if bad:
            raise ValueError(f"server name {bad[0][:40]!r}: use 1-32 lower-case letters, digits, '_' or '-'")
        return servers

    def secrets(self) -> list[str]:
        """Every secret value in this config, for the log redactor: each ``SecretStr`` found by
        walking the model (nested sections, lists and mappings), so none is listed by hand."""
        return sorted({s.get_secret_value() for s in _secrets_in(self) if s.get_secret_value()})


def _secrets_in(value: object) -> Iterator[SecretStr]:
    if isinstance(value, SecretStr):
        yield value
    elif isinstance(value, BaseModel):
        for name in type(value).model_fields:
            yield from _secrets_in(getattr(value, name))
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _secrets_in(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _secrets_in(item)
