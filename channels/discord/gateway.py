"""The discord.py client the Discord channel runs, and discord.py's failures in Bruce's terms.

``GatewayClient`` is a ``discord.Client`` with the intents ``guilds``, ``dm_messages``,
``guild_messages`` and ``message_content`` (privileged: switch it on in the developer portal),
no mentions by default, and its slash-command tree; its events go to the callbacks it is built
with. With a ``gateway_url`` its ``http.ws_connect`` is wrapped to send every gateway
connection, resumes included, to that URL, keeping discord.py's query (``v``, ``encoding``,
``compress``); nothing global changes (``channel.py`` explains both locations).

``translate_error`` turns a failed send into ``ChannelSendError`` (rate limits retryable with
their ``retry_after``, 5xx and network errors retryable, other refusals permanent);
``start_error`` turns a start that never got ready into a clear error naming the key to check.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import discord
import structlog
import yarl
from discord import app_commands

from bruce.errors import BruceError, ChannelSendError, ConfigError
from channels.discord.ui import NO_MENTIONS

__all__ = ["GatewayClient", "INTENTS", "SEND_ERRORS", "start_error", "translate_error"]

log = structlog.get_logger(__name__)

GUILD_READY_TIMEOUT_S = 0.5  # on_ready waits this long after the last GUILD_CREATE (discord.py's default: 2 s)


def _intents() -> discord.Intents:
    intents = discord.Intents.none()
    intents.guilds = True
    intents.dm_messages = True
    intents.guild_messages = True
    intents.message_content = True  # privileged: switch it on in the developer portal
    return intents


INTENTS = _intents()


def translate_error(exc: BaseException) -> ChannelSendError:
    """A Discord failure as the outbox understands it."""
    if isinstance(exc, discord.RateLimited):
        return ChannelSendError(f"rate limited by Discord for {exc.retry_after:.1f} s", retryable=True,
                                retry_after=exc.retry_after)
    if isinstance(exc, discord.HTTPException):
        if exc.status == 429:
            return ChannelSendError("rate limited by Discord (429)", retryable=True, retry_after=_retry_after(exc))
        if isinstance(exc, discord.DiscordServerError) or exc.status >= 500:
            return ChannelSendError(f"Discord failed ({exc.status})", retryable=True)
        return ChannelSendError(f"Discord refused it ({exc.status} {exc.text[:200]})".rstrip(), retryable=False)
    if isinstance(exc, TimeoutError):
        return ChannelSendError("Discord did not answer in time", retryable=True)
    return ChannelSendError(f"Discord unreachable ({type(exc).__name__})", retryable=True)


def _retry_after(exc: discord.HTTPException) -> float | None:
    headers = getattr(exc.response, "headers", None) or {}
    for name in ("Retry-After", "X-RateLimit-Reset-After"):
        with contextlib.suppress(TypeError, ValueError):
            return max(float(headers[name]), 0.0)
    return None


SEND_ERRORS = (discord.HTTPException, discord.RateLimited, aiohttp.ClientError, OSError, TimeoutError)


def _redirect(url: str, gateway: yarl.URL) -> str:
    """discord.py's gateway URL, sent to ``gateway`` with discord.py's own query."""
    return str(gateway.update_query(yarl.URL(url).query))


def _wrap_ws_connect(http: discord.http.HTTPClient, gateway: yarl.URL) -> None:
    connect = http.ws_connect

    async def ws_connect(url: str, *, compress: int = 0) -> aiohttp.ClientWebSocketResponse:
        return await connect(_redirect(url, gateway), compress=compress)

    setattr(http, "ws_connect", ws_connect)  # noqa: B010  (this instance only)


class GatewayClient(discord.Client):
    """The discord.py client; its events go to the callbacks it is built with."""

    def __init__(self, gateway_url: str | None, *, ready: Callable[[], None], received: Callable[[], None],
                 message: Callable[[discord.Message], Awaitable[None]],
                 interaction: Callable[[discord.Interaction], Awaitable[None]]) -> None:
        super().__init__(intents=INTENTS, allowed_mentions=NO_MENTIONS, max_ratelimit_timeout=30.0,
                         guild_ready_timeout=GUILD_READY_TIMEOUT_S)
        self._when_ready = ready  # (discord.Client has its own ``_ready``)
        self._when_received = received
        self._when_message = message
        self._when_interaction = interaction
        self.tree: app_commands.CommandTree[GatewayClient] = app_commands.CommandTree(self)
        if gateway_url:
            _wrap_ws_connect(self.http, yarl.URL(gateway_url))

    async def on_ready(self) -> None:
        self._when_ready()

    async def on_socket_event_type(self, event_type: str) -> None:
        self._when_received()

    async def on_message(self, message: discord.Message) -> None:
        await self._when_message(message)

    async def on_interaction(self, interaction: discord.Interaction) -> None:
        await self._when_interaction(interaction)

    async def on_error(self, event_method: str, /, *args: Any, **kwargs: Any) -> None:
        log.exception("discord.event_failed", event=event_method)  # a bug of ours: the next events still come


def start_error(failure: BaseException | None, timeout_s: float) -> BruceError:
    """Why ``start`` failed: ``failure`` is what ended the client, None when it merely never got ready."""
    if isinstance(failure, discord.LoginFailure) or (
            isinstance(failure, discord.ConnectionClosed) and failure.code == 4004):
        return ConfigError("channels.discord.token was refused by Discord (401 Unauthorized): check the bot's "
                           "token in the developer portal (Bot > Reset Token)")
    if isinstance(failure, discord.PrivilegedIntentsRequired):
        return ConfigError("channels.discord: the bot needs the privileged Message Content intent; turn it on in "
                           "the developer portal (Bot > Privileged Gateway Intents > Message Content Intent)")
    if failure is not None:
        return BruceError(f"Discord could not be reached ({type(failure).__name__}); check channels.discord.api_base, "
                          "channels.discord.gateway_url and the network")
    return BruceError(f"Discord did not get ready within {timeout_s:g} s (channels.discord.ready_timeout_s); check "
                      "channels.discord.gateway_url and the network")
