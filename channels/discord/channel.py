"""The Discord channel, on discord.py 2: the adapter behind the channel port.

discord.py stays in ``channels/discord/`` (the client in ``gateway``, slash commands and button
presses in ``interactions``, what is drawn in ``ui``); ``bruce`` never imports it. What it does:

Connecting. A ``discord.Client`` with the intents ``guilds``, ``dm_messages``,
``guild_messages`` and ``message_content``. Message Content is a *privileged* intent: without
it switched on for the bot (developer portal > the application > Bot > Privileged Gateway
Intents > Message Content Intent) Discord closes the gateway with 4014, which ``start`` reports
as a configuration error. ``client.start`` runs in a task; ``start()`` returns once ``on_ready``
has fired, and fails clearly when it does not within ``ready_timeout_s``: a refused token
(``discord.LoginFailure``, gateway close 4004) is a ``ConfigError`` naming
``channels.discord.token``; a network that is down while logging in is tried again, with
backoff, until then. After that, reconnecting and resuming are discord.py's job.

The two locations, and the discord.py hooks they use (set here and nowhere else):

* ``api_base`` replaces ``discord.http.Route.BASE`` (a class attribute: every REST call,
  interaction callbacks included, builds its URL from it when the ``Route`` is made). It is set
  when the channel is built; without ``api_base`` it is put back to Discord's own.
* ``gateway_url``: an unsharded ``Client.connect`` never asks ``GET /gateway/bot``; it opens
  ``DiscordWebSocket.DEFAULT_GATEWAY`` (or, on a resume, the READY's ``resume_gateway_url``)
  through ``client.http.ws_connect(url)``. This client's ``http.ws_connect`` is wrapped to send
  every gateway connection, resumes included, to ``gateway_url``, keeping discord.py's query
  (``v``, ``encoding``, ``compress``). Nothing global changes.

Listening. Direct messages always reach the core (``private=True``); in a guild, a message
reaches it only in a channel of ``allowed_channels`` (a thread counts by its parent) and only
when it mentions the bot (``<@id>``; ``@everyone`` does not count) or replies to one of its
messages, with the mention removed (``private=False``). Who may talk is the worker's admission:
``allowed_users``, pairing for strangers in DMs, silence for strangers in guilds. The bot's own
messages and other bots' are ignored. Files, voice messages and stickers go with the message as
its ``attachments`` (``media``: one message, one turn, whatever it carries; the text is its
caption), and ``fetch`` (``bruce.channel.MediaChannel``) downloads a file's bytes when the core
asks. Messages are handed over one at a time in the order they arrived. ``last_receive`` is the
time of the last gateway dispatch.

While a turn runs: the typing indicator every ``TYPING_EVERY_S`` for the whole turn, and, for
turns that run tools, one status message with the steps (see ``ui``).

Sending. Replies are cut by ``format.split_message`` (2000 characters, code fences kept
whole) and every message goes out with ``allowed_mentions=AllowedMentions.none()`` (also the
client's default). The outbox sends through the ``*_keyed`` methods (``bruce.channel.KeyedChannel``):
the key becomes the message's ``nonce``, which discord.py sends with ``enforce_nonce: true``, so
Discord answers a second create with the same nonce (within its window of a few minutes) with
the message it already made: a resend after a crash between Discord's answer and the outbox's
record is not doubled. discord.py itself waits out a 429 whose ``retry_after`` is under 30 s and
retries 5xx a few times; what it gives up on becomes ``ChannelSendError`` (``gateway.translate_error``):
rate limits retryable with ``retry_after``, 5xx and network errors retryable, missing access,
unknown channel and other refusals permanent. The outbox does the rest.

Approvals and commands: buttons with persistent custom ids (``ui``; ``interactions``), pressed by anyone
but decided by ``inbound.decide`` (someone else than the requester is refused, ephemerally);
the slash commands ``/new``, ``/jobs`` and ``/usage`` (passed on as that text), ``/help`` and ``/id``
(answered ephemerally) are registered at start-up.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Awaitable
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
import discord
import structlog

from bruce.channel import Attachment, ConfirmationRequest, Inbound, IncomingMessage
from bruce.clock import Clock
from bruce.config.rules import token_required
from bruce.config.schema import DiscordConfig
from bruce.errors import ChannelSendError, ConfigError, StoreError
from channels.discord.format import MESSAGE_LIMIT, split_message
from channels.discord.gateway import SEND_ERRORS, GatewayClient, start_error, translate_error
from channels.discord.interactions import Interactions, allowed_here, is_dm
from channels.discord.media import Downloads, attachments_of
from channels.discord.ui import NO_MENTIONS, StatusMessage, approval_text, approval_view

__all__ = ["DiscordChannel"]

log = structlog.get_logger(__name__)

_T = TypeVar("_T")

DISCORD_API = discord.http.Route.BASE  # Discord's own, put back when no api_base is set
TYPING_EVERY_S = 8.0  # Discord shows "typing" for 10 s
SEND_TIMEOUT_S = 60.0  # discord.py may itself wait out a short rate limit or retry a 5xx inside this
START_BACKOFF_S = (1.0, 2.0, 4.0, 8.0, 15.0)
RECENT_SENT = 500  # our latest message ids, to recognise a reply to one of them
FETCH_TIMEOUT_S = 60.0  # a download that has not finished by then fails (config.media.fetch_timeout_s)


def _nonce(key: str | None) -> dict[str, Any]:
    """``send``'s nonce argument: the outbox's key, or none (discord.py then makes a random one)."""
    return {} if key is None else {"nonce": key}


def _addressed_text(message: discord.Message, me: int, sent: dict[int, None]) -> str | None:
    """In a guild: the text if it mentions the bot or replies to one of ``sent`` (mention removed), else None."""
    mentioned = me in message.raw_mentions or any(user.id == me for user in message.mentions)
    reference = message.reference
    resolved = reference.resolved if reference is not None else None
    replied = reference is not None and (
        isinstance(resolved, discord.Message) and resolved.author.id == me or reference.message_id in sent)
    if not (mentioned or replied):
        return None
    return re.sub(rf"<@!?{me}>", "", message.content).strip()


class DiscordChannel:
    name = "discord"
    max_message_length = MESSAGE_LIMIT

    def __init__(self, section: DiscordConfig, *, clock: Clock, assistant_name: str = "Bruce",
                 fetch_timeout_s: float = FETCH_TIMEOUT_S) -> None:
        if section.token is None:
            raise ConfigError(token_required(self.name))
        discord.http.Route.BASE = section.api_base.rstrip("/") if section.api_base else DISCORD_API
        self._section = section
        self._clock = clock
        self._order = asyncio.Lock()  # messages are handed over one at a time, in arrival order
        self._interactions = Interactions(section, clock=clock, assistant_name=assistant_name, order=self._order)
        self._client = self._new_client()
        self._inbound: Inbound | None = None
        self._ready = asyncio.Event()
        self._runner: asyncio.Task[None] | None = None
        self._sent: dict[int, None] = {}  # our latest message ids (ordered), for replies to them
        self._downloads = Downloads(timeout_s=fetch_timeout_s)
        self.last_receive: datetime | None = None

    # lifecycle ---------------------------------------------------------------------------

    def _new_client(self) -> GatewayClient:
        client = GatewayClient(self._section.gateway_url, ready=self._on_ready, received=self._received,
                               message=self._on_message, interaction=self._interactions.on_interaction)
        self._interactions.register(client.tree)
        return client

    async def start(self, inbound: Inbound) -> None:
        self._inbound = inbound
        self._interactions.attach(inbound)
        self._runner = asyncio.create_task(self._run(), name="discord.client")
        ready = asyncio.create_task(self._ready.wait(), name="discord.ready")
        try:
            await asyncio.wait({self._runner, ready}, timeout=self._section.ready_timeout_s,
                               return_when=asyncio.FIRST_COMPLETED)
        finally:
            ready.cancel()
        if not self._ready.is_set():
            failure = self._runner.exception() if self._runner.done() else None
            await self.stop()
            raise start_error(failure, self._section.ready_timeout_s)
        await self._sync_commands()
        user = self._client.user
        log.info("discord.started", bot=user.name if user else None)

    async def _run(self) -> None:
        """``client.start``; a network that is down while logging in is tried again."""
        assert self._section.token is not None
        attempt = 0
        while True:
            try:
                await self._client.start(self._section.token.get_secret_value())
                return
            except (aiohttp.ClientError, OSError, discord.DiscordServerError, discord.GatewayNotFound,
                    AttributeError) as exc:
                # AttributeError: discord.py 2.7's reconnect after a first gateway connection that
                # failed reads ``self.ws.sequence`` while ``ws`` is still None; it is the same
                # unreachable gateway, so it is retried like one
                if isinstance(exc, AttributeError) and self._client.ws is not None:
                    log.exception("discord.stopped", error=type(exc).__name__)
                    raise
                if self._ready.is_set() or self._client.is_closed():
                    log.error("discord.stopped", error=type(exc).__name__)
                    raise
                log.warning("discord.unreachable", error=type(exc).__name__, retrying=True)
                await self._client.close()
                await self._clock.sleep(START_BACKOFF_S[min(attempt, len(START_BACKOFF_S) - 1)])
                attempt += 1
                # a client that failed to start cannot be started again (its session is closed)
                self._client = self._new_client()
            except Exception as exc:
                log.exception("discord.stopped", error=type(exc).__name__)
                raise

    def _on_ready(self) -> None:
        self._received()
        self._ready.set()

    async def _sync_commands(self) -> None:
        try:
            async with asyncio.timeout(SEND_TIMEOUT_S):
                await self._client.tree.sync()
        except (*SEND_ERRORS, discord.DiscordException) as exc:
            log.warning("discord.commands_not_registered", error=type(exc).__name__)

    async def stop(self) -> None:
        await self._interactions.stop()
        await self._client.close()
        if self._runner is not None:
            self._runner.cancel()
            await asyncio.gather(self._runner, return_exceptions=True)
            self._runner = None
        self._inbound = None
        self._interactions.attach(None)
        await self._downloads.close()
        discord.http.Route.BASE = DISCORD_API  # a class attribute: leave the process as it was

    def _received(self) -> None:
        self.last_receive = self._clock.now()

    # receiving ---------------------------------------------------------------------------

    async def _on_message(self, message: discord.Message) -> None:
        async with self._order:
            try:
                await self._take(message)
            except StoreError as exc:  # the gateway does not send it again: say so
                log.warning("discord.store_failed", message=message.id, error=str(exc))
                await self._reply(message.channel.id, "I could not take that message just now; please send it again.")

    async def _take(self, message: discord.Message) -> None:
        me = self._client.user
        if self._inbound is None or me is None or message.author.bot or message.author.id == me.id:
            return
        if message.type not in (discord.MessageType.default, discord.MessageType.reply):
            return
        private = is_dm(message.channel)
        text: str | None = message.content.strip()
        if not private:
            if not allowed_here(message.channel, self._section):
                return
            text = _addressed_text(message, me.id, self._sent)
            if text is None:
                return
        attachments = attachments_of(message, has_text=bool(text))
        if not text and not attachments:
            return
        await self._inbound.deliver(IncomingMessage(
            channel=self.name, chat_id=str(message.channel.id), sender_id=str(message.author.id), text=text or "",
            platform_message_id=str(message.id), timestamp=message.created_at, private=private,
            sender_name=message.author.display_name or message.author.name, attachments=attachments))

    async def fetch(self, attachment: Attachment, *, max_bytes: int) -> bytes:
        """An attachment's bytes from Discord's file server (``media.Downloads``)."""
        return await self._downloads.fetch(attachment, max_bytes=max_bytes)

    # sending -----------------------------------------------------------------------------

    def split(self, text: str) -> list[str]:
        """The outbox's pieces: Discord messages with their code fences whole."""
        return split_message(text, MESSAGE_LIMIT)

    def _target(self, chat_id: str | int) -> discord.PartialMessageable:
        return self._client.get_partial_messageable(int(chat_id))

    async def _call(self, call: Awaitable[_T]) -> _T:
        try:
            async with asyncio.timeout(SEND_TIMEOUT_S):
                return await call
        except SEND_ERRORS as exc:
            raise translate_error(exc) from None

    def _remember(self, message: discord.Message) -> None:
        self._sent[message.id] = None
        while len(self._sent) > RECENT_SENT:
            del self._sent[next(iter(self._sent))]

    async def send_text(self, chat_id: str, text: str) -> None:
        for part in split_message(text, MESSAGE_LIMIT):
            await self.send_text_keyed(chat_id, part, key=None)

    async def send_text_keyed(self, chat_id: str, text: str, *, key: str | None) -> None:
        """One message (an outbox piece is one already); with ``key`` as its nonce, enforced."""
        self._remember(await self._call(self._target(chat_id).send(
            text, **_nonce(key), allowed_mentions=NO_MENTIONS, suppress_embeds=True)))

    async def _reply(self, chat_id: int, text: str) -> None:
        with contextlib.suppress(ChannelSendError):
            await self.send_text(str(chat_id), text)

    @contextlib.asynccontextmanager
    async def thinking(self, chat_id: str) -> AsyncIterator[None]:
        typing = asyncio.create_task(self._type(self._target(chat_id)), name="discord.typing")
        try:
            yield
        finally:
            typing.cancel()
            await asyncio.gather(typing, return_exceptions=True)

    async def _type(self, target: discord.PartialMessageable) -> None:
        while True:
            with contextlib.suppress(*SEND_ERRORS):
                async with asyncio.timeout(TYPING_EVERY_S):
                    await target.typing()
            await asyncio.sleep(TYPING_EVERY_S)

    @contextlib.asynccontextmanager
    async def progress(self, chat_id: str) -> AsyncIterator[StatusMessage]:
        status = StatusMessage(self._target(chat_id))
        async with self.thinking(chat_id):
            try:
                yield status
            finally:
                await status.close()

    async def send_confirmation(self, chat_id: str, request: ConfirmationRequest) -> None:
        await self.send_confirmation_keyed(chat_id, request, key=None)

    async def send_confirmation_keyed(self, chat_id: str, request: ConfirmationRequest, *, key: str | None) -> None:
        text = approval_text(request)
        sent = await self._call(self._target(chat_id).send(
            text, view=approval_view(request.id, step_up=request.step_up), **_nonce(key), allowed_mentions=NO_MENTIONS,
            suppress_embeds=True))
        self._remember(sent)
        self._interactions.watch_expiry(sent, request)

    async def send_file(self, chat_id: str, path: Path, caption: str | None = None) -> None:
        await self.send_file_keyed(chat_id, path, caption, key=None)

    async def send_file_keyed(self, chat_id: str, path: Path, caption: str | None, *, key: str | None) -> None:
        content = (caption or "")[:MESSAGE_LIMIT] or None
        self._remember(await self._call(self._target(chat_id).send(
            content, file=discord.File(path, filename=path.name), **_nonce(key), allowed_mentions=NO_MENTIONS,
            suppress_embeds=True)))
