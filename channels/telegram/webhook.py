"""Receiving from Telegram by webhook: an aiohttp server for ``channels.telegram.webhook``.

Every request must carry ``X-Telegram-Bot-Api-Secret-Token`` (401 without it); an update is
answered 200 once it is handled, and 503 when it could not be stored, so Telegram sends it
again. The body is read with ``read_json``: a lone surrogate (the JSON escape ``\\ud800``) is
read as U+FFFD, so such an update is stored and answered 200 like any other, never a 500 that
Telegram would send again forever.

An album comes as one request per item, at about the same time: the items are gathered until
none has come for ``album_quiet_s`` and handled as one message; each request is answered once it
was (503 for all if it could not be stored). Items Telegram sends one after another, each
waiting for the previous answer, are handled one by one: nothing is lost either way.
"""

from __future__ import annotations

import asyncio
import hmac
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import structlog
from aiohttp import web

from bruce.config.schema import TelegramWebhookConfig
from bruce.errors import BruceError, StoreError
from bruce.safe_text import read_json
from channels.telegram.api import ALLOWED_UPDATES, BotAPI, Refused, Unreachable
from channels.telegram.media import album_key

if TYPE_CHECKING:
    from aiogram.types import Update

    from channels.telegram.bot import TelegramBot

__all__ = ["WebhookServer"]

log = structlog.get_logger(__name__)


class WebhookServer:
    """The webhook's server and its registration with Telegram (``setWebhook``). ``bot`` waits
    for aiogram, ``handle`` takes one update, ``handle_album`` one album's, ``received`` is told
    of each update that came."""

    def __init__(self, api: BotAPI, hook: TelegramWebhookConfig, *, bot: Callable[[], Awaitable[TelegramBot]],
                 handle: Callable[[Update], Awaitable[None]], handle_album: Callable[[list[Update]], Awaitable[None]],
                 received: Callable[[], None], album_quiet_s: float = 1.0) -> None:
        self._api = api
        self._hook = hook
        self._bot = bot
        self._handle = handle
        self._handle_album = handle_album
        self._received = received
        self._runner: web.AppRunner | None = None
        self._quiet = album_quiet_s
        self._albums: dict[tuple[Any, str], _Album] = {}  # albums still arriving, by (chat, media_group_id)

    async def start(self) -> None:
        hook = self._hook
        assert hook.url is not None and hook.secret_token is not None  # checked by the config
        app = web.Application(client_max_size=1024 * 1024)
        app.router.add_post(hook.path, self._on_update)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, hook.host, hook.port)
        await site.start()
        try:
            await self._api.call("setWebhook", {"url": hook.url, "secret_token": hook.secret_token.get_secret_value(),
                                                "allowed_updates": ALLOWED_UPDATES})
        except Refused as exc:
            raise BruceError(f"Telegram refused the webhook (channels.telegram.webhook.url): {exc.description}") from None
        except Unreachable:
            raise BruceError("Telegram is unreachable; webhook mode cannot register its URL") from None

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @property
    def port(self) -> int | None:
        """The port the server listens on (the configured one, or the one given for 0)."""
        if self._runner is None or not self._runner.addresses:
            return None
        return int(self._runner.addresses[0][1])

    async def _on_update(self, request: web.Request) -> web.Response:
        secret = self._hook.secret_token
        assert secret is not None
        given = request.headers.get("X-Telegram-Bot-Api-Secret-Token", "")
        if not hmac.compare_digest(given.encode(), secret.get_secret_value().encode()):
            log.warning("telegram.webhook_refused", remote=request.remote)
            return web.json_response({"ok": False, "error": "missing or wrong secret token"}, status=401)
        bot = await self._bot()
        try:
            body = read_json(await request.read())
            update = bot.read_update(body)
        except (ValueError, RecursionError):
            return web.json_response({"ok": False, "error": "not a Telegram update"}, status=400)
        self._received()
        try:
            if (album := album_key(body)) is not None:
                await self._gather(album, int(body.get("update_id") or 0), update)
            else:
                await self._handle(update)
        except StoreError:  # not acknowledged: Telegram sends it again
            return web.json_response({"ok": False, "error": "try again"}, status=503)
        return web.json_response({"ok": True})

    async def _gather(self, key: tuple[Any, str], update_id: int, update: Update) -> None:
        """One album item: the first request waits for the others, then hands them all on; every
        request returns (or raises) once the album was handled."""
        album = self._albums.get(key)
        if album is not None:
            album.updates.append((update_id, update))
            album.arrived.set()
            await asyncio.shield(album.done)
            return
        album = self._albums[key] = _Album([(update_id, update)])
        try:
            while True:
                album.arrived.clear()
                try:
                    await asyncio.wait_for(album.arrived.wait(), self._quiet)
                except TimeoutError:
                    break
            del self._albums[key]
            await self._handle_album([update for _, update in sorted(album.updates, key=lambda pair: pair[0])])
        except BaseException as exc:
            if self._albums.get(key) is album:
                del self._albums[key]
            album.done.set_exception(exc if isinstance(exc, Exception) else StoreError("the album was not handled"))
            raise
        album.done.set_result(None)


@dataclass
class _Album:
    """An album's updates while they arrive, and the outcome every request of it waits for."""

    updates: list[tuple[int, Update]]  # (update_id, update), as they came
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    done: asyncio.Future[None] = field(default_factory=lambda: asyncio.get_running_loop().create_future())

    def __post_init__(self) -> None:
        self.done.add_done_callback(lambda future: future.cancelled() or future.exception())  # retrieved
