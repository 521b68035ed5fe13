"""Receiving from Telegram by webhook: an aiohttp server for ``channels.telegram.webhook``.

Every request must carry ``X-Telegram-Bot-Api-Secret-Token`` (401 without it); an update is
answered 200 once it is handled, and 503 when it could not be stored, so Telegram sends it
again. The body is read with ``read_json``: a lone surrogate (the JSON escape ``\\ud800``) is
read as U+FFFD, so such an update is stored and answered 200 like any other, never a 500 that
Telegram would send again forever.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import structlog
from aiohttp import web

from bruce.config.schema import TelegramWebhookConfig
from bruce.errors import BruceError, StoreError
from bruce.safe_text import read_json
from channels.telegram.api import ALLOWED_UPDATES, BotAPI, Refused, Unreachable

if TYPE_CHECKING:
    from aiogram.types import Update

    from channels.telegram.bot import TelegramBot

__all__ = ["WebhookServer"]

log = structlog.get_logger(__name__)


class WebhookServer:
    """The webhook's server and its registration with Telegram (``setWebhook``). ``bot`` waits
    for aiogram, ``handle`` takes one update, ``received`` is told of each update that came."""

    def __init__(self, api: BotAPI, hook: TelegramWebhookConfig, *, bot: Callable[[], Awaitable[TelegramBot]],
                 handle: Callable[[Update], Awaitable[None]], received: Callable[[], None]) -> None:
        self._api = api
        self._hook = hook
        self._bot = bot
        self._handle = handle
        self._received = received
        self._runner: web.AppRunner | None = None

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
            update = bot.read_update(read_json(await request.read()))
        except (ValueError, RecursionError):
            return web.json_response({"ok": False, "error": "not a Telegram update"}, status=400)
        self._received()
        try:
            await self._handle(update)
        except StoreError:  # not acknowledged: Telegram sends it again
            return web.json_response({"ok": False, "error": "try again"}, status=503)
        return web.json_response({"ok": True})
