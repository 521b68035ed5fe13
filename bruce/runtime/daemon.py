"""The running daemon: what ``build_app`` (``bruce/app.py``) assembled, and its lifecycle.

``start`` claims the channels (one process per channel and database), closes what a stopped
process left, starts receiving, recovers pending messages and starts the scheduler; ``stop``
drains the turns in flight and closes everything in order. The admin page is served on request
(``start_admin``, ``bruce run`` only).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from bruce.actions.registry import ToolRegistry
from bruce.channel import Channel, OperatorChannel
from bruce.clock import Clock
from bruce.config.schema import Config
from bruce.errors import BruceError
from bruce.jobs.book import JobBook
from bruce.jobs.scheduler import Scheduler
from bruce.llm.service import LLMService
from bruce.media.keep import KeptMedia
from bruce.memory.long_term import Memory
from bruce.runtime.control import Control, ServerStatus
from bruce.runtime.event_loop import running_loop_name
from bruce.runtime.leases import Leases, channel_lease
from bruce.runtime.outbox import Outbox
from bruce.runtime.worker import Worker
from bruce.store import Store

if TYPE_CHECKING:
    from bruce.admin import AdminServer

__all__ = ["App"]

log = structlog.get_logger(__name__)


class MCPServers(ServerStatus, Protocol):
    """The MCP bridge (``tools/mcp``), as the daemon reports and stops it."""

    async def stop(self) -> None: ...


@dataclass
class App:
    config: Config
    clock: Clock
    store: Store
    llm: LLMService
    registry: ToolRegistry
    worker: Worker
    outbox: Outbox
    jobs: JobBook
    control: Control  # the owner's requests from the machine, served by the console socket
    scheduler: Scheduler | None = None  # None: scheduler.enabled is false
    admin: AdminServer | None = None  # serving once start_admin() ran (``bruce run``)
    mcp: MCPServers | None = None  # the configured MCP servers (None: there are none)
    memory: Memory | None = None  # long-term memory (bruce/memory/long_term.py)
    channels: dict[str, Channel] = field(default_factory=dict)
    # True: other apps in this process use the tools' worker processes too (``bruce eval`` runs
    # cases side by side); stop() leaves them running and the owner calls stop_tool_workers()
    shares_tool_workers: bool = False
    adapters: frozenset[str] = frozenset()  # the chat platforms this build has an adapter for
    stop_tools: Callable[[], None] = lambda: None  # ends the tools' worker processes (calculator, page reader)
    leases: Leases | None = None  # this process's hold on its channels and the scheduler (one per database)
    kept_media: KeptMedia | None = None  # photos kept for media.keep_days, cleaned at start and daily
    # False while ``bruce run`` loads the model client and its channels do not read yet: /healthz says "starting"
    ready: bool = True
    _stopped: bool = field(default=False, init=False)
    _lost: set[asyncio.Task[None]] = field(default_factory=set, init=False)  # channels stopped on a lost lease

    async def _claim_channels(self) -> None:
        """One process per channel and database, however its path is spelled (the lease is in the
        database): a second `bruce chat` would answer the same messages and run the same approved
        actions twice, and two pollers of one bot token steal each other's updates."""
        if self.leases is None:
            return
        for name in self.channels:
            holder = await self.leases.take(channel_lease(name))
            if holder is not None:
                raise BruceError(
                    f"another Bruce process ({holder}) is already serving the {name} channel with the database "
                    f"{self.config.storage.path}; stop it first (one process per channel and database)")
        self.leases.subscribe(self._lease_lost)

    def _lease_lost(self, name: str) -> None:
        """Another process took a lease over while this one stalled: stop what it guarded."""
        for channel_name, channel in self.channels.items():
            if channel_lease(channel_name) == name:
                log.error("app.channel_taken_over", channel=channel_name)
                task = asyncio.create_task(channel.stop(), name=f"channel.stop:{channel_name}")
                self._lost.add(task)
                task.add_done_callback(self._lost.discard)

    def warnings(self) -> list[str]:
        """What is missing for Bruce to be useful, each with how to fix it."""
        notes = []
        hint = self.llm.missing_configuration()
        if hint:
            notes.append(hint)
        for name, section in self.config.channels.sections().items():
            if section.enabled and name not in self.adapters:
                notes.append(f"channels.{name}.enabled is true, but this version of Bruce has no {name} adapter; "
                             "that channel stays off.")
        if not self.config.scheduler.enabled:
            notes.append("scheduler.enabled is false: reminders and scheduled jobs are stored but never sent; "
                         "set it to true to have them fire.")
        if not any(n not in ("console", "web") for n in self.channels):
            via = getattr(self.channels.get("console"), "path", None)
            web = f", or in the admin page's /chat ({self.config.admin.base_url}/chat)" if "web" in self.channels else ""
            notes.append("No chat platform is enabled; talk to Bruce with `bruce chat` in another terminal"
                         + (f" (it attaches to {via})" if via else "") + web + ".")
        return notes

    async def start(self) -> None:
        # what the previous run left is everything stored before our channels start receiving;
        # recovery must not touch a message of this run, which its own turn handles
        await self._claim_channels()
        await self.worker.close_interrupted_actions()  # its notices are sent by recover() below
        left_over = await self.worker.queue_left_over()  # answered before any message that arrives from now on
        for channel in self.channels.values():
            if isinstance(channel, OperatorChannel):
                await channel.start_operated(self.worker, self.control)
            else:
                await channel.start(self.worker)
        log.info("app.started", channels=sorted(self.channels), model=self.config.llm.model,
                 timezone=self.config.assistant.timezone, event_loop=running_loop_name())
        for note in self.warnings():
            log.warning("app.setup_incomplete", hint=note)
        await self.worker.recover(up_to_id=left_over)
        if self.kept_media is not None:
            await self.kept_media.start()
        if self.scheduler is not None:
            await self.scheduler.start()

    async def start_admin(self) -> str | None:
        """Serve the admin page on ``admin.host:port`` (``bruce run`` only); its URL, or None when
        ``admin.enabled`` is false. Raises ConfigError on a host beyond loopback without a token."""
        a = self.config.admin
        if not a.enabled:
            return None  # and the page's modules (aiohttp's web server, Jinja, prometheus_client) stay unloaded
        from bruce.admin import AdminServer
        from bruce.admin.auth import resolve_token

        token, generated = resolve_token(a.token.get_secret_value() if a.token else None, host=a.host,
                                         data_dir=self.config.storage.path.parent)
        if generated is not None:
            log.warning("admin.token_file", path=str(generated),
                        hint="admin.token is not set; log in to the admin page with the token in this file (mode 0600)")
        chat = self.channels.get("web")
        self.admin = AdminServer(store=self.store, clock=self.clock, token=token, host=a.host, port=a.port,
                                 health=self._health, artifacts_dir=self.config.tools.artifacts.dir, jobs=self.jobs,
                                 budget=self.llm.budget, zone=self.config.assistant.zone,
                                 chat_routes=chat.routes() if chat is not None and hasattr(chat, "routes") else None,
                                 eval_runs_dir=self.config.eval.runs_dir, allowed_hosts=a.allowed_hosts,
                                 data_dir=self.config.storage.path.parent)
        try:
            return await self.admin.start()
        except OSError as exc:
            raise BruceError(f"the admin page cannot listen on {a.host}:{a.port} ({exc.strerror or exc}); another "
                             "Bruce or program has that port: stop it, or set admin.port (or admin.enabled: false)"
                             ) from None

    async def _health(self) -> dict[str, Any]:
        scheduler = "off" if self.scheduler is None else "running" if self.scheduler.running else "standby"
        received = self.control.health()
        found: dict[str, Any] = {"scheduler": scheduler,
                                 "channels": {name: {"last_receive": received.get(name)} for name in self.channels}}
        if not self.ready:
            found["status"] = "starting"  # 503 until it can answer
        if self.mcp is not None:
            found["mcp"] = {s["server"]: s["state"] for s in self.mcp.status()}
        return found

    async def stop(self) -> None:
        """Drain and close; calling it again does nothing."""
        if self._stopped:
            return
        self._stopped = True
        try:
            if self.kept_media is not None:
                await self.kept_media.stop()
            if self.scheduler is not None:
                await self.scheduler.stop()  # no new firing; the runs in flight drain with the turns
            await self.worker.close(self.config.assistant.shutdown_timeout_s)
            if self.scheduler is not None:
                await self.scheduler.wait_idle()
            if self.memory is not None:
                await self.memory.close()  # extractions in flight: a short drain, then cancelled whole
        finally:
            await self._close_rest()

    async def _close_rest(self) -> None:
        for channel in self.channels.values():
            await channel.stop()
        if self.admin is not None:
            await self.admin.stop()
        if self.mcp is not None:
            await self.mcp.stop()  # stdio servers' processes end with their links
        if self.leases is not None:
            await self.leases.close()  # released: the next process takes over at once
        await self.store.close()
        if not self.shares_tool_workers:
            self.stop_tools()
        log.info("app.stopped")
