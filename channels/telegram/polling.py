"""Receiving from Telegram by long polling: our own loop around ``getUpdates``, and a watchdog.

Not aiogram's ``Dispatcher.start_polling``, because a bot must never end up half-dead: while the
network is down at start, ``getMe`` is tried again with backoff; any webhook is deleted first;
``409 Conflict`` (another instance polling the same token), time-outs and 5xx back off and go
on, and repeated 409s are logged as such; the watchdog restarts the loop when no ``getUpdates``
has completed for three poll time-outs. Each update is read on its own, so one aiogram cannot
read is logged and skipped; updates are handled in ``update_id`` order, and one is confirmed to
Telegram (the next ``offset``) only once it is handled: a database failure leaves it with
Telegram, to be fetched again. An album's updates are handled together, as one message, and
confirmed together once it was: a crash while it arrives loses nothing.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import structlog

from bruce.clock import Clock
from bruce.errors import ConfigError, StoreError
from channels.telegram.api import ALLOWED_UPDATES, BotAPI, Refused, Unreachable
from channels.telegram.media import album_key

if TYPE_CHECKING:
    from aiogram.types import Update

    from channels.telegram.bot import TelegramBot

__all__ = ["Poller"]

log = structlog.get_logger(__name__)

START_BACKOFF_S = (1.0, 2.0, 4.0, 8.0, 15.0, 30.0)  # getMe at start while the network is down
POLL_BACKOFF_MAX_S = 30.0
CONFLICTS_BEFORE_WARNING = 3
ALBUM_QUIET_S = 1.0  # an album at the end of an answer: asked for again after this, in case it goes on
_TOKEN_REFUSED = "channels.telegram.token was refused (401 Unauthorized)"


class Poller:
    """The polling loop and its watchdog. ``connect`` is the channel's ``getMe`` (True once it
    answered; a ConfigError ends polling), ``bot`` waits for aiogram, ``handle`` takes one update,
    ``handle_album`` the updates of one album, and ``received`` is told of each ``getUpdates`` that completed."""

    def __init__(self, api: BotAPI, *, poll_timeout_s: int, clock: Clock, connect: Callable[[], Awaitable[bool]],
                 bot: Callable[[], Awaitable[TelegramBot]], handle: Callable[[Update], Awaitable[None]],
                 handle_album: Callable[[list[Update]], Awaitable[None]], received: Callable[[], None]) -> None:
        self._api = api
        self._timeout = poll_timeout_s
        self._clock = clock
        self._connect = connect
        self._bot = bot
        self._handle = handle
        self._handle_album = handle_album
        self._received = received
        self._album_seen: tuple[int, int] | None = None  # an album held back once (first, last update_id)
        self._tasks: list[asyncio.Task[None]] = []  # the loop, then its watchdog
        self._polled_at = time.monotonic()  # the last getUpdates that completed (monotonic)

    def start(self, connected: bool) -> None:
        self._tasks.append(asyncio.create_task(self._keep_polling(connected), name="telegram.poll"))
        self._tasks.append(asyncio.create_task(self._watchdog(), name="telegram.watchdog"))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()

    async def _keep_polling(self, connected: bool) -> None:
        if not connected and not await self._reconnect():
            return
        if not await self._delete_webhook():
            return
        await self._poll()

    async def _reconnect(self) -> bool:
        """``getMe`` again with backoff until it answers; False when the token is refused."""
        delay_index = 0
        while True:
            await self._clock.sleep(START_BACKOFF_S[min(delay_index, len(START_BACKOFF_S) - 1)])
            delay_index += 1
            try:
                if await self._connect():
                    return True
            except ConfigError as exc:
                log.error("telegram.stopped", reason=str(exc))
                return False
            except (Refused, *Unreachable):
                continue

    async def _delete_webhook(self) -> bool:
        """No webhook may stand in the way of getUpdates; False when the token is refused."""
        while True:
            try:
                await self._api.call("deleteWebhook", {"drop_pending_updates": False})
                return True
            except Refused as exc:
                if exc.status == 401:
                    log.error("telegram.stopped", reason=_TOKEN_REFUSED)
                    return False
                log.warning("telegram.delete_webhook_failed", error=f"{exc.status} {exc.description}")
            except Unreachable as exc:
                log.warning("telegram.delete_webhook_failed", error=type(exc).__name__)
            await self._clock.sleep(2.0)

    async def _poll(self) -> None:
        offset: int | None = None
        conflicts, failures = 0, 0
        while True:
            params: dict[str, Any] = {"timeout": self._timeout, "allowed_updates": ALLOWED_UPDATES}
            if offset is not None:
                params["offset"] = offset
            try:
                result = await self._api.call("getUpdates", params, timeout=self._timeout + 10)
                if not isinstance(result, list):
                    raise Refused("getUpdates", 200, "the result is not a list of updates")
            except Refused as exc:
                if exc.status == 401:
                    log.error("telegram.stopped", reason=_TOKEN_REFUSED)
                    return
                if exc.status == 409:
                    conflicts += 1
                    await self._conflict(conflicts)
                    continue
                failures += 1
                log.warning("telegram.poll_failed", error=f"{exc.status} {exc.description}", attempt=failures)
                await self._clock.sleep(max(exc.retry_after or 0.0, _backoff(failures)))
                continue
            except Unreachable as exc:
                failures += 1
                log.warning("telegram.poll_failed", error=type(exc).__name__, attempt=failures)
                await self._clock.sleep(_backoff(failures))
                continue
            conflicts = failures = 0
            self._polled_at = time.monotonic()
            self._received()
            offset = await self._take(result, offset)

    async def _conflict(self, conflicts: int) -> None:
        """Another getUpdates on the same token: wait, and say so once it keeps happening."""
        if conflicts == CONFLICTS_BEFORE_WARNING:
            log.error("telegram.conflict", hint="another instance may be polling the same bot token")
        await self._clock.sleep(_backoff(conflicts))

    async def _take(self, items: list[Any], offset: int | None) -> int | None:
        """Handle one ``getUpdates`` answer in ``update_id`` order; the next offset to ask for.
        An update is confirmed once handled; one that cannot be stored is not, and the rest of
        the batch waits with it for the next poll. An album (consecutive updates with one
        ``media_group_id``) is handled as one; one at the end of the answer may go on in the next,
        so it is asked for again after ``ALBUM_QUIET_S`` (not confirmed meanwhile) and handled
        once an answer shows it complete: followed by another update, or unchanged."""
        numbered = [(item["update_id"], item) for item in items
                    if isinstance(item, dict) and isinstance(item.get("update_id"), int)]
        if len(numbered) < len(items):
            log.warning("telegram.update_unreadable", update_id=None, count=len(items) - len(numbered))
        runs = _runs(sorted((pair for pair in numbered if pair[0] >= (offset or 0)), key=lambda pair: pair[0]))
        if not runs:
            return offset
        bot = await self._bot()
        for index, run in enumerate(runs):
            first, last = run[0][0], run[-1][0]
            if album_key(run[0][1]) is not None and index == len(runs) - 1 and self._album_seen != (first, last):
                self._album_seen = (first, last)
                await self._clock.sleep(ALBUM_QUIET_S)
                return first
            self._album_seen = None
            updates = self._read(bot, run)
            try:
                if album_key(run[0][1]) is not None and updates:
                    await self._handle_album(updates)
                elif updates:
                    await self._handle(updates[0])
            except StoreError as exc:  # not confirmed: Telegram gives it to us again
                log.warning("telegram.store_failed", update_id=first, error=str(exc))
                await self._clock.sleep(2.0)
                return first
            except Exception:  # a bug of ours on this update: logged, and the next ones still come
                log.exception("telegram.update_failed", update_id=first)
            offset = last + 1
        return offset

    @staticmethod
    def _read(bot: TelegramBot, run: list[tuple[int, Any]]) -> list[Update]:
        """The run's updates in aiogram's types; one aiogram cannot read is logged and left out."""
        updates = []
        for update_id, item in run:
            try:
                updates.append(bot.read_update(item))
            except ValueError:
                log.warning("telegram.update_unreadable", update_id=update_id)
        return updates

    async def _watchdog(self) -> None:
        """Restart polling when no getUpdates has completed for three poll time-outs."""
        limit = 3 * (self._timeout + 10)
        while True:
            await asyncio.sleep(self._timeout)
            poller = self._tasks[0] if self._tasks else None
            if poller is None:
                return
            if time.monotonic() - self._polled_at > limit and not poller.done():
                log.error("telegram.poll_stalled", seconds=round(time.monotonic() - self._polled_at))
                poller.cancel()
                await asyncio.gather(poller, return_exceptions=True)
                self._polled_at = time.monotonic()
                self._tasks[0] = asyncio.create_task(self._keep_polling(True), name="telegram.poll")


def _backoff(failures: int) -> float:
    return min(2.0 ** min(failures, 5), POLL_BACKOFF_MAX_S)


def _runs(numbered: list[tuple[int, Any]]) -> list[list[tuple[int, Any]]]:
    """The updates in runs to handle as one: an album's consecutive items together, others alone."""
    runs: list[list[tuple[int, Any]]] = []
    for pair in numbered:
        key = album_key(pair[1])
        if runs and key is not None and album_key(runs[-1][0][1]) == key:
            runs[-1].append(pair)
        else:
            runs.append([pair])
    return runs
