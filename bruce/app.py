"""The one place that wires Bruce together: config in, a running App out.

Channels and tools are chosen here by name; nothing else in ``bruce`` imports them.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

import structlog

from bruce.approvals import ApprovalDesk
from bruce.channel import Channel
from bruce.clock import Clock, SystemClock
from bruce.config import Config
from bruce.confirmations import Confirmations
from bruce.errors import BruceError, ConfigError, ContractError
from bruce.llm import LLMService
from bruce.log import Redactor
from bruce.registry import ToolRegistry
from bruce.store import Store
from bruce.worker import Worker, WorkerSettings
from tools.builtin import builtin_tools

__all__ = ["App", "build_app"]

log = structlog.get_logger(__name__)

_ADAPTERS_NOT_YET_BUILT = ("telegram", "discord")  # their configuration keys exist already


@dataclass
class App:
    config: Config
    clock: Clock
    store: Store
    llm: LLMService
    registry: ToolRegistry
    worker: Worker
    channels: dict[str, Channel] = field(default_factory=dict)
    _stopped: bool = field(default=False, init=False)
    _locks: list[TextIO] = field(default_factory=list, init=False)

    def _claim_channels(self) -> None:
        """One process per channel and database: a second `bruce chat` on the same database
        would answer the same messages and run the same approved actions twice."""
        for name in self.channels:
            path = Path(f"{self.config.storage.path}.{name}.lock")
            handle = path.open("w")
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.close()
                raise BruceError(
                    f"another Bruce process is already serving the {name} channel with {self.config.storage.path}; "
                    "stop it first (one process per channel and database)") from None
            self._locks.append(handle)

    def warnings(self) -> list[str]:
        """What is missing for Bruce to be useful, each with how to fix it."""
        notes = []
        hint = self.llm.missing_configuration()
        if hint:
            notes.append(hint)
        for name in _ADAPTERS_NOT_YET_BUILT:
            if getattr(self.config.channels, name).enabled:
                notes.append(
                    f"channels.{name}.enabled is true, but this version of Bruce has no {name} adapter yet; "
                    "that channel stays off."
                )
        if not any(n != "console" for n in self.channels):
            notes.append("No chat channel is running; `bruce chat` talks to Bruce in this terminal.")
        return notes

    async def start(self) -> None:
        # what the previous run left is everything stored before our channels start receiving;
        # recovery must not touch a message or reply of this run, which its own turn handles
        self._claim_channels()
        await self.worker.close_interrupted_actions()  # its notices are sent by recover() below
        left_over = await self.store.max_message_id()
        for channel in self.channels.values():
            await channel.start(self.worker.deliver)
        log.info("app.started", channels=sorted(self.channels), model=self.config.llm.model)
        for note in self.warnings():
            log.warning("app.setup_incomplete", hint=note)
        await self.worker.recover(up_to_id=left_over)

    async def stop(self) -> None:
        """Drain and close; calling it again does nothing."""
        if self._stopped:
            return
        self._stopped = True
        try:
            await self.worker.close(self.config.assistant.shutdown_timeout_s)
        finally:
            await self._close_rest()

    async def _close_rest(self) -> None:
        for channel in self.channels.values():
            await channel.stop()
        await self.store.close()
        for handle in self._locks:  # closing the file releases the lock
            handle.close()
        self._locks.clear()
        log.info("app.stopped")


async def build_app(
    config: Config,
    *,
    clock: Clock | None = None,
    environ: Mapping[str, str] | None = None,
    redactor: Redactor | None = None,
    extra_channels: list[Channel] | None = None,
) -> App:
    clock = clock or SystemClock()
    environ = os.environ if environ is None else environ
    redactor = redactor or Redactor(config.secrets())
    store = await Store.open(config.storage.path, clock)
    llm = LLMService(config.llm, store=store, clock=clock, environ=environ)
    confirmations = Confirmations(store, clock, ttl_s=config.tools.confirmation_ttl_s, redactor=redactor)
    registry = ToolRegistry(
        store=store,
        clock=clock,
        zone=config.assistant.zone,
        confirmations=confirmations,
        default_timeout_s=config.tools.timeout_s,
        audit_output_max_chars=config.tools.audit_output_max_chars,
        overrides=config.tools.overrides,
        redactor=redactor,
    )
    try:
        registry.register_all(builtin_tools(config, store=store))
    except ContractError as exc:
        await store.close()
        raise ConfigError(str(exc)) from None
    channels: dict[str, Channel] = {c.name: c for c in extra_channels or []}
    a = config.assistant
    worker = Worker(
        store=store,
        llm=llm,
        registry=registry,
        clock=clock,
        settings=WorkerSettings(
            name=a.name,
            system_prompt=a.system_prompt,
            zone=a.zone,
            max_turns=a.max_turns,
            history_limit=a.history_limit,
            summary_batch=a.summary_batch,
            recovery_max_age_s=a.recovery_max_age_s,
            admin_base_url=config.admin.base_url,
            approval_poll_s=config.tools.approval_poll_s,
            max_message_chars=a.max_message_chars,
            summary_model=config.llm.summary_model,
        ),
        channels=channels,
        confirmations=confirmations,
        desk=ApprovalDesk(store=store, llm=llm, registry=registry, confirmations=confirmations,
                          admin_base_url=config.admin.base_url),
        allow_lists={
            "telegram": frozenset(config.channels.telegram.allowed_users),
            "discord": frozenset(config.channels.discord.allowed_users),
        },
    )
    return App(config=config, clock=clock, store=store, llm=llm, registry=registry, worker=worker, channels=channels)
