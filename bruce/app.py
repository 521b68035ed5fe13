"""The one place that wires Bruce together: config in, a running App out.

Channels and tools are chosen here by name; nothing else in ``bruce`` imports them. Chat
platforms are built from their config sections through ``CHANNEL_FACTORIES``; an enabled
section with no factory is reported, not silently ignored.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib
import os
import socket
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import structlog

from bruce.actions.approvals import ApprovalDesk
from bruce.actions.confirmations import Confirmations
from bruce.actions.guests import GuestTools
from bruce.actions.registry import ToolRegistry
from bruce.channel import Channel
from bruce.clock import Clock, SystemClock
from bruce.config.schema import ChannelSection, Config
from bruce.contracts import ToolContract, ToolHandler
from bruce.errors import ConfigError, ContractError
from bruce.jobs.book import JobBook
from bruce.jobs.briefing import Briefing, BriefingPlan
from bruce.jobs.scheduler import Scheduler, SchedulerSettings
from bruce.limits import RateLimiter
from bruce.llm.budget import Budget
from bruce.llm.capabilities import supports_vision
from bruce.llm.service import LLMService, load_litellm
from bruce.llm.transcription import Transcription
from bruce.log import Redactor
from bruce.media.intake import MediaIntake
from bruce.media.keep import KeptMedia
from bruce.media.rules import MediaSettings
from bruce.memory.long_term import Memory, MemorySettings
from bruce.runtime.access import Access, AccessRule
from bruce.runtime.control import Control
from bruce.runtime.daemon import App
from bruce.runtime.leases import Leases
from bruce.runtime.outbox import Outbox, OutboxSettings
from bruce.runtime.recovery import Recovery
from bruce.runtime.worker import Worker, WorkerSettings
from bruce.store import Store
from bruce.turns.chat_commands import ChatCommands
from bruce.turns.conversations import Conversations
from bruce.turns.decisions import Decisions
from bruce.turns.delivery import Delivery
from bruce.turns.indicator import Indicator
from bruce.turns.runner import TurnRunner, TurnSettings
from bruce.values import ConversationId

if TYPE_CHECKING:
    from channels.console import ConsoleChannel
    from channels.console_socket import SocketConsole
    from tools.mcp.bridge import MCPBridge

__all__ = ["build_app", "load_libraries", "CHANNEL_FACTORIES", "console_channel", "socket_console", "web_chat", "tool_set",
           "stop_tool_workers", "probe_mcp", "tool_server", "ToolServer", "connect_mcp"]

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class ChannelContext:
    """What a channel factory may use besides its own config section."""

    clock: Clock
    config: Config


ChannelFactory = Callable[[Any, ChannelContext], Channel]

def _telegram(section: Any, context: ChannelContext) -> Channel:
    from channels.telegram.channel import TelegramChannel

    return TelegramChannel(section, clock=context.clock, assistant_name=context.config.assistant.name,
                           fetch_timeout_s=context.config.media.fetch_timeout_s)


def _discord(section: Any, context: ChannelContext) -> Channel:
    from channels.discord.channel import DiscordChannel

    return DiscordChannel(section, clock=context.clock, assistant_name=context.config.assistant.name,
                          fetch_timeout_s=context.config.media.fetch_timeout_s)


# channel name -> factory taking that channel's config section (``channels.<name>``)
CHANNEL_FACTORIES: dict[str, ChannelFactory] = {"telegram": _telegram, "discord": _discord}

# channel name -> the module with its SDK, which the channel otherwise imports in a thread once started
CHANNEL_SDKS: dict[str, str] = {"telegram": "channels.telegram.bot"}


async def load_libraries(config: Config) -> None:
    """Import what the first message needs, in a thread, while the app is built: litellm (the
    model client) and the SDK of each enabled channel (aiogram's types). ``bruce run`` awaits
    it before any channel starts reading, so no update waits for an import. A channel SDK that
    fails to import is left to its channel, which reports it when it starts."""
    modules = [CHANNEL_SDKS[name] for name, section in config.channels.sections().items()
               if section.enabled and name in CHANNEL_SDKS]

    def load() -> None:
        load_litellm()
        for module in modules:
            try:
                importlib.import_module(module)
            except Exception:  # the channel's own import says what broke
                log.warning("app.preload_failed", module=module)

    await asyncio.to_thread(load)


def console_channel(config: Config, clock: Clock) -> ConsoleChannel:
    """The terminal channel of ``bruce chat``."""
    from channels.console import ConsoleChannel

    return ConsoleChannel(clock=clock, assistant_name=config.assistant.name)


def socket_console(config: Config, clock: Clock) -> SocketConsole:
    """The daemon's console channel: ``bruce chat`` and ``bruce approve`` attach to it."""
    from channels.console_socket import SocketConsole

    return SocketConsole(path=config.console.socket_path, clock=clock, assistant_name=config.assistant.name)


def web_chat(config: Config, clock: Clock) -> Channel:
    """The admin page's chat (``channels/web_chat.py``), served by ``bruce run`` with the admin page;
    files sent there are kept in ``uploads/`` beside the database."""
    from channels.web_chat import WebChat

    return WebChat(clock=clock, uploads=config.storage.path.parent / "uploads", max_file_mb=config.media.max_file_mb,
                   keep_days=config.media.keep_days)


async def probe_mcp(config: Config) -> list[dict[str, Any]]:
    """Connect to each configured MCP server now (each bounded by its connect_timeout_s), report,
    disconnect: ``bruce mcp status`` when no daemon runs. Opens no database."""
    registry = ToolRegistry(store=cast(Store, None), clock=SystemClock(), zone=config.assistant.zone,  # nothing runs
                            confirmations=cast(Confirmations, None))
    bridge = await connect_mcp(config, registry, SystemClock())
    try:
        return bridge.status()
    finally:
        await bridge.stop()


class ToolServer:
    """Bruce's own tools (not those it takes from MCP servers) as an MCP server for another
    client (``bruce mcp serve``, ``tools/mcp/serve``), over the database ``tool_server`` opened."""

    def __init__(self, server: Any) -> None:
        self._server = server

    async def serve_stdio(self) -> None:
        from tools.mcp import serve

        await serve.serve_stdio(self._server)

    def bind(self, port: int) -> socket.socket:
        """The listening socket on 127.0.0.1; raises OSError when the port is taken."""
        from tools.mcp import serve

        return serve.bind_loopback(port)

    async def serve_http(self, sock: socket.socket, token: str) -> None:
        """Serve on ``sock`` with ``token`` as the bearer every request must carry."""
        from tools.mcp import serve

        await serve.serve_http(self._server, sock=sock, token=token)


@contextlib.asynccontextmanager
async def tool_server(config: Config, *, transport: str, redactor: Redactor | None = None,
                      on_job_changed: Callable[[str], None] | None = None) -> AsyncIterator[ToolServer]:
    """Open the database, register the built-in tools and yield them as an MCP server; on the
    way out, close the database and stop the tools' worker processes. ``on_job_changed(job_id)``:
    told of each job made or changed over MCP (the CLI tells the running daemon)."""
    from tools.builtin import shutdown_tools
    from tools.mcp import serve

    clock = SystemClock()
    redactor = redactor or Redactor(config.secrets())
    store = await Store.open(config.storage.path, clock, busy_timeout_ms=config.storage.busy_timeout_ms)
    try:
        confirmations = Confirmations(store, clock, ttl_s=config.tools.confirmation_ttl_s, redactor=redactor,
                                      zone=config.assistant.zone)
        jobs = JobBook(store=store, clock=clock, zone=config.assistant.zone, admin_base_url=config.admin.base_url,
                       dedup_window_s=config.scheduler.dedup_window_s,
                       max_live_jobs=config.scheduler.max_active_jobs)
        if on_job_changed is not None:
            jobs.subscribe(on_job_changed)
        registry = await _registry(config, store, clock, redactor, confirmations, jobs)
        conversation = await _mcp_conversation(config, store)
        server = serve.build_server(registry, trusted=config.mcp_serve.trusted, conversation_id=conversation)
        log.info("mcp_serve.starting", transport=transport, conversation=str(conversation) if conversation else None,
                 tools=sorted(serve.exposed(registry, trusted=config.mcp_serve.trusted)))
        yield ToolServer(server)
    finally:
        await store.close()
        shutdown_tools()


async def _mcp_conversation(config: Config, store: Store) -> ConversationId | None:
    """Where a reminder made over MCP is delivered: ``mcp_serve.conversation``, else the chat the
    owner wrote in last; None when there is none yet (the proactive tools then say so)."""
    chosen = config.mcp_serve.conversation
    if chosen is None:
        latest = await store.messages.latest_conversation()
        return ConversationId.parse(latest) if latest is not None else None
    conversation = ConversationId.parse(chosen)
    await store.messages.ensure_conversation(chosen, conversation.channel, conversation.chat_id)
    return conversation


def stop_tool_workers() -> None:
    """Stop the tools' worker processes (calculator, page reader) that apps sharing them left running."""
    from tools.builtin import shutdown_tools

    shutdown_tools()


def tool_set(config: Config, store: Store | None, jobs: JobBook | None = None,
             memory: Memory | None = None) -> list[tuple[ToolContract, ToolHandler]]:
    """The built-in tools. With ``store`` None only the contracts are usable (``bruce tools``)."""
    from tools.builtin import builtin_tools

    return builtin_tools(config, store=store, jobs=jobs, memory=memory)


def _configured_channels(config: Config, clock: Clock) -> dict[str, Channel]:
    context = ChannelContext(clock=clock, config=config)
    built = {}
    for name, section in config.channels.sections().items():
        factory = CHANNEL_FACTORIES.get(name)
        if section.enabled and factory is not None:
            built[name] = factory(section, context)
    return built


def _access_rules(sections: Mapping[str, ChannelSection]) -> dict[str, AccessRule]:
    return {name: AccessRule(frozenset(section.allowed_users), pairing=section.pairing)
            for name, section in sections.items()}


async def _registry(config: Config, store: Store, clock: Clock, redactor: Redactor,
                    confirmations: Confirmations, jobs: JobBook, memory: Memory | None = None) -> ToolRegistry:
    registry = ToolRegistry(
        store=store, clock=clock, zone=config.assistant.zone, confirmations=confirmations,
        default_timeout_s=config.tools.timeout_s, audit_output_max_chars=config.tools.audit_output_max_chars,
        overrides=config.tools.overrides, redactor=redactor, guests=GuestTools(config.access.guest_tools),
    )
    try:
        registry.register_all(tool_set(config, store, jobs, memory))
    except ContractError as exc:
        raise ConfigError(str(exc)) from None
    return registry


async def build_app(
    config: Config,
    *,
    clock: Clock | None = None,
    environ: Mapping[str, str] | None = None,
    redactor: Redactor | None = None,
    extra_channels: list[Channel] | None = None,
    fire_jobs: bool = True,
    extract_memory: bool = True,
    shares_tool_workers: bool = False,
) -> App:
    """``fire_jobs``: run the scheduler (``bruce run``); an in-process ``bruce chat`` does not, so
    it never holds the scheduler lock a daemon started beside it needs. ``extract_memory``: after
    each answered message, long-term memory learns from it in the background (a model call);
    ``bruce eval`` turns it off for the cases that do not test it. ``shares_tool_workers``: see
    ``App.shares_tool_workers``."""
    clock = clock or SystemClock()
    environ = os.environ if environ is None else environ
    redactor = redactor or Redactor(config.secrets())
    if any(server.enabled for server in config.mcp_servers.values()):
        from tools.mcp.bridge import preload

        preload()  # the SDK imports in a thread while the rest is built
    store = await Store.open(config.storage.path, clock, busy_timeout_ms=config.storage.busy_timeout_ms)
    try:
        return await _assemble(config, store, clock, environ, redactor, extra_channels or [], fire_jobs=fire_jobs,
                               extract_memory=extract_memory, shares_tool_workers=shares_tool_workers)
    except BaseException:  # an open database keeps a thread alive: never leave one behind
        await store.close()
        raise


async def _assemble(config: Config, store: Store, clock: Clock, environ: Mapping[str, str], redactor: Redactor,
                    extra_channels: list[Channel], *, fire_jobs: bool, extract_memory: bool,
                    shares_tool_workers: bool) -> App:
    budget = Budget(store=store, clock=clock, zone=config.assistant.zone, daily_usd=config.llm.budget.daily_usd,
                    daily_tokens=config.llm.budget.daily_tokens)
    llm = LLMService(config.llm, store=store, clock=clock, environ=environ, budget=budget if budget.enabled else None)
    confirmations = Confirmations(store, clock, ttl_s=config.tools.confirmation_ttl_s, redactor=redactor,
                                  zone=config.assistant.zone)
    jobs = JobBook(store=store, clock=clock, zone=config.assistant.zone, admin_base_url=config.admin.base_url,
                   dedup_window_s=config.scheduler.dedup_window_s, max_live_jobs=config.scheduler.max_active_jobs)
    memory = _memory(config, store, llm, clock)
    registry = await _registry(config, store, clock, redactor, confirmations, jobs, memory)
    channels = _configured_channels(config, clock)
    channels.update({c.name: c for c in extra_channels})
    c = config.channels
    outbox = Outbox(store=store, channels=channels, clock=clock, settings=OutboxSettings(
        send_retries=c.send_retries, backoff_s=c.send_backoff_s, resend_interval_s=c.resend_interval_s,
        resend_max_age_s=c.resend_max_age_s))
    kept = KeptMedia(data_dir=config.storage.path.parent, clock=clock, keep_days=config.media.keep_days)
    media = _media(config, store, channels, kept, clock, llm.budget, environ)
    conversations = _conversations(config, store, clock, llm, registry, confirmations, outbox, channels, memory,
                                   media)
    worker = _worker(config, store, clock, llm, conversations, confirmations, outbox, channels,
                     on_answered=memory.after_message if extract_memory else None)
    scheduler = None
    leases = Leases(store=store.leases, clock=clock)  # this process's hold on the scheduler and its channels
    if config.scheduler.enabled and fire_jobs:
        s = config.scheduler
        scheduler = Scheduler(store=store, clock=clock, book=jobs, doors=worker, notices=outbox, budget=llm.budget,
                              settings=SchedulerSettings(misfire_grace_s=s.misfire_grace_s, max_failures=s.max_failures),
                              leases=leases, briefing=Briefing(store=store, clock=clock, plan=BriefingPlan.of(config)))
    mcp = await connect_mcp(config, registry, clock) if config.mcp_servers else None
    control = Control(doors=worker, channels=channels, scheduler=scheduler, mcp=mcp)
    return App(config=config, clock=clock, store=store, llm=llm, registry=registry, worker=worker, outbox=outbox,
               jobs=jobs, control=control, scheduler=scheduler, channels=channels, memory=memory, mcp=mcp, leases=leases,
               shares_tool_workers=shares_tool_workers, adapters=frozenset(CHANNEL_FACTORIES),
               stop_tools=stop_tool_workers, kept_media=kept)


def _memory(config: Config, store: Store, llm: LLMService, clock: Clock) -> Memory:
    m = config.memory
    return Memory(store=store, llm=llm, clock=clock, settings=MemorySettings(
        enabled=m.enabled, recent_limit=m.recent_limit, recent_days=m.recent_days, max_context_chars=m.max_context_chars,
        summarize_after=m.summarize_after, archive_after_days=m.archive_after_days, max_concurrent=m.max_concurrent,
        extract_after_s=m.extract_after_s,
        model=m.model or config.llm.summary_model))


def _media(config: Config, store: Store, channels: Mapping[str, Channel], kept: KeptMedia, clock: Clock,
           budget: Budget | None, environ: Mapping[str, str]) -> MediaIntake:
    """Voice notes, photos and documents (docs/media.md): fetched through the channels the outbox
    sends with; heard by ``media.transcription_model``; photos when ``media.vision`` says so, else
    when litellm's data says ``llm.model`` takes images (asked once, at the first photo)."""
    m = config.media
    transcriber = Transcription(m, config.llm, store=store, clock=clock, budget=budget, environ=environ) \
        if m.transcription_model else None
    vision = functools.cache(lambda: m.vision if m.vision is not None else supports_vision(config.llm.model))
    return MediaIntake(
        store=store, channels=channels, keep=kept, transcriber=transcriber, sees_images=vision,
        settings=MediaSettings(enabled=m.enabled, max_voice_s=m.max_voice_s, max_file_mb=m.max_file_mb,
                               keep_days=m.keep_days, max_document_chars=m.max_document_chars,
                               fetch_timeout_s=m.fetch_timeout_s))


def _conversations(config: Config, store: Store, clock: Clock, llm: LLMService, registry: ToolRegistry,
                   confirmations: Confirmations, outbox: Outbox, channels: Mapping[str, Channel],
                   memory: Memory, media: MediaIntake) -> Conversations:
    """The turn engine: one runner, the chat commands, the decisions, in one conversation's order."""
    a = config.assistant
    desk = ApprovalDesk(store=store, llm=llm, registry=registry, confirmations=confirmations, outbox=outbox,
                        admin_base_url=config.admin.base_url)
    indicator = Indicator(channels)
    runner = TurnRunner(
        store=store, llm=llm, registry=registry, clock=clock, outbox=outbox, indicator=indicator,
        delivery=Delivery(store=store, outbox=outbox, artifacts_dir=config.tools.artifacts.dir),
        budget=llm.budget, memory=memory, media=media,
        settings=TurnSettings(name=a.name, system_prompt=a.system_prompt, zone=a.zone, max_model_calls=a.max_turns,
                              max_turn_tokens=a.max_turn_tokens,
                              history_limit=a.history_limit, summary_batch=a.summary_batch,
                              admin_base_url=config.admin.base_url),
    )
    return Conversations(
        store=store, outbox=outbox, runner=runner,
        commands=ChatCommands(store=store, llm=llm, clock=clock, zone=a.zone, outbox=outbox, indicator=indicator,
                              memory=memory, assistant=a.name, summary_model=config.llm.summary_model),
        decisions=Decisions(store=store, confirmations=confirmations, desk=desk, outbox=outbox, indicator=indicator,
                            history=runner),
    )


def _worker(config: Config, store: Store, clock: Clock, llm: LLMService, conversations: Conversations,
            confirmations: Confirmations, outbox: Outbox, channels: dict[str, Channel], *,
            on_answered: Callable[[ConversationId, int, str], None] | None) -> Worker:
    """Admission, the message tasks, recovery of what a stopped process left."""
    a, c = config.assistant, config.channels
    recovery = Recovery(store=store, confirmations=confirmations, outbox=outbox, clock=clock, zone=a.zone,
                        served=channels.keys(), max_age_s=a.recovery_max_age_s)
    return Worker(
        store=store, llm=llm, clock=clock, conversations=conversations, outbox=outbox, recovery=recovery,
        confirmations=confirmations, served=channels,
        access=Access(store=store, clock=clock, rules=_access_rules(c.sections()), channels=channels,
                      owners=config.people.owner.ids() if config.people.owner is not None else None),
        limiter=RateLimiter(per_minute=config.limits.messages_per_minute, per_hour=config.limits.messages_per_hour),
        zone=a.zone, on_answered=on_answered,
        settings=WorkerSettings(max_message_chars=a.max_message_chars, approval_poll_s=config.tools.approval_poll_s,
                                history_limit=a.history_limit, summary_batch=a.summary_batch,
                                summary_model=config.llm.summary_model),
    )


async def connect_mcp(config: Config, registry: ToolRegistry, clock: Clock) -> MCPBridge:
    """Connect every configured MCP server (``tools/mcp``), each bounded by its connect_timeout_s,
    and register the tools of those that answered; the rest reconnect in the background."""
    from tools.mcp.bridge import MCPBridge

    # a stdio server's stderr goes to <data>/mcp/<name>.log
    bridge = MCPBridge(config.mcp_servers, registry, clock=clock, log_dir=config.storage.path.parent / "mcp",
                       zone=config.assistant.timezone)
    try:
        await bridge.start()
    except BaseException:
        await bridge.stop()
        raise
    return bridge
