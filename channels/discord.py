"""The Discord channel, on discord.py 2: the adapter behind the channel port.

discord.py stays in here (and in ``discord_ui``); ``bruce`` never imports it. What it does:

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
messages and other bots' are ignored. Attachments and stickers get "not supported yet" (only
allowed senders are told; any text with them still goes on). Messages are handed over one at a
time in the order they arrived. ``last_receive`` is the time of the last gateway dispatch.

While a turn runs: the typing indicator every ``TYPING_EVERY_S`` for the whole turn, and, for
turns that run tools, one status message with the steps (see ``discord_ui``).

Sending. Replies are cut by ``discord_format.split_message`` (2000 characters, code fences kept
whole) and every message goes out with ``allowed_mentions=AllowedMentions.none()`` (also the
client's default). discord.py itself waits out a 429 whose ``retry_after`` is under 30 s and
retries 5xx a few times; what it gives up on becomes ``ChannelSendError`` (``translate_error``):
rate limits retryable with ``retry_after``, 5xx and network errors retryable, missing access,
unknown channel and other refusals permanent. The outbox does the rest.

Approvals and commands: buttons with persistent custom ids (``discord_ui``), pressed by anyone
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
import yarl
from discord import app_commands

from bruce.channel import ConfirmationRequest, DecisionReport, Inbound, IncomingMessage
from bruce.clock import Clock
from bruce.config.schema import DiscordConfig
from bruce.errors import BruceError, ChannelSendError, ConfigError, StoreError
from bruce.turns.commands import COMMANDS, CommandSpec, help_text
from bruce.values import ConversationId, DecisionOutcome
from channels.discord_format import MESSAGE_LIMIT, split_message
from channels.discord_ui import NO_MENTIONS, StatusMessage, approval_text, approval_view, decided_text, parse_custom_id

__all__ = ["DiscordChannel", "translate_error", "INTENTS"]

log = structlog.get_logger(__name__)

_T = TypeVar("_T")

DISCORD_API = discord.http.Route.BASE  # Discord's own, put back when no api_base is set
TYPING_EVERY_S = 8.0  # Discord shows "typing" for 10 s
SEND_TIMEOUT_S = 60.0  # discord.py may itself wait out a short rate limit or retry a 5xx inside this
START_BACKOFF_S = (1.0, 2.0, 4.0, 8.0, 15.0)
RECENT_SENT = 500  # our latest message ids, to recognise a reply to one of them
GUILD_READY_TIMEOUT_S = 0.5  # on_ready waits this long after the last GUILD_CREATE (discord.py's default: 2 s)
UNSUPPORTED = "I can only read text messages for now; files, images and stickers are not supported yet."
PLATFORM = "Discord"
ABOUT = ("Write to me in a direct message, or mention me in a channel I'm allowed in. When an action needs your "
         "approval I ask first, with buttons. Documents I save arrive as files.")
ANSWERED_HERE = ("help", "id")  # the slash commands this channel answers itself (ephemerally), after the rest
NOT_HERE = "I don't answer in this channel."


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


_SEND_ERRORS = (discord.HTTPException, discord.RateLimited, aiohttp.ClientError, OSError, TimeoutError)


def _redirect(url: str, gateway: yarl.URL) -> str:
    """discord.py's gateway URL, sent to ``gateway`` with discord.py's own query."""
    return str(gateway.update_query(yarl.URL(url).query))


def _wrap_ws_connect(http: discord.http.HTTPClient, gateway: yarl.URL) -> None:
    connect = http.ws_connect

    async def ws_connect(url: str, *, compress: int = 0) -> aiohttp.ClientWebSocketResponse:
        return await connect(_redirect(url, gateway), compress=compress)

    setattr(http, "ws_connect", ws_connect)  # noqa: B010  (this instance only)


class _Client(discord.Client):
    """The discord.py client; its events go to the channel."""

    def __init__(self, channel: DiscordChannel, gateway_url: str | None) -> None:
        super().__init__(intents=INTENTS, allowed_mentions=NO_MENTIONS, max_ratelimit_timeout=30.0,
                         guild_ready_timeout=GUILD_READY_TIMEOUT_S)
        self._channel = channel
        self.tree: app_commands.CommandTree[_Client] = app_commands.CommandTree(self)
        if gateway_url:
            _wrap_ws_connect(self.http, yarl.URL(gateway_url))

    async def on_ready(self) -> None:
        self._channel._on_ready()

    async def on_socket_event_type(self, event_type: str) -> None:
        self._channel._received()

    async def on_message(self, message: discord.Message) -> None:
        await self._channel._on_message(message)

    async def on_interaction(self, interaction: discord.Interaction) -> None:
        await self._channel._on_interaction(interaction)

    async def on_error(self, event_method: str, /, *args: Any, **kwargs: Any) -> None:
        log.exception("discord.event_failed", event=event_method)  # a bug of ours: the next events still come


class DiscordChannel:
    name = "discord"
    max_message_length = MESSAGE_LIMIT

    def __init__(self, section: DiscordConfig, *, clock: Clock, assistant_name: str = "Bruce") -> None:
        if section.token is None:
            raise ConfigError("channels.discord.token: required when channels.discord.enabled is true "
                              '(e.g. token: "${DISCORD_BOT_TOKEN}")')
        discord.http.Route.BASE = section.api_base.rstrip("/") if section.api_base else DISCORD_API
        self._section = section
        self._clock = clock
        self._assistant = assistant_name
        self._client = _Client(self, section.gateway_url)
        self._register_commands()
        self._inbound: Inbound | None = None
        self._ready = asyncio.Event()
        self._runner: asyncio.Task[None] | None = None
        self._order = asyncio.Lock()  # messages are handed over one at a time, in arrival order
        self._sent: dict[int, None] = {}  # our latest message ids (ordered), for replies to them
        self._expiries: dict[str, asyncio.Task[None]] = {}
        self.last_receive: datetime | None = None

    # lifecycle ---------------------------------------------------------------------------

    async def start(self, inbound: Inbound) -> None:
        self._inbound = inbound
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
            raise _start_error(failure, self._section.ready_timeout_s)
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
                self._client = _Client(self, self._section.gateway_url)
                self._register_commands()
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
        except (*_SEND_ERRORS, discord.DiscordException) as exc:
            log.warning("discord.commands_not_registered", error=type(exc).__name__)

    async def stop(self) -> None:
        for task in self._expiries.values():
            task.cancel()
        await asyncio.gather(*self._expiries.values(), return_exceptions=True)
        self._expiries.clear()
        await self._client.close()
        if self._runner is not None:
            self._runner.cancel()
            await asyncio.gather(self._runner, return_exceptions=True)
            self._runner = None
        self._inbound = None
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
        private = _is_dm(message.channel)
        text: str | None = message.content.strip()
        if not private:
            if not self._allowed_here(message.channel):
                return
            text = self._addressed_text(message, me.id)
            if text is None:
                return
        sender = str(message.author.id)
        if message.attachments or message.stickers:
            if sender in self._section.allowed_users:  # not for strangers: they get nothing
                await self._reply(message.channel.id, UNSUPPORTED)
        if not text:
            return
        await self._inbound.deliver(IncomingMessage(
            channel=self.name, chat_id=str(message.channel.id), sender_id=sender, text=text,
            platform_message_id=str(message.id), timestamp=message.created_at, private=private,
            sender_name=message.author.display_name or message.author.name))

    def _allowed_here(self, channel: Any) -> bool:
        ids = {str(getattr(channel, "id", "")), str(getattr(channel, "parent_id", None) or "")}
        return bool(ids & set(self._section.allowed_channels))

    def _addressed_text(self, message: discord.Message, me: int) -> str | None:
        """In a guild: the text if it mentions the bot or replies to it (mention removed), else None."""
        mentioned = me in message.raw_mentions or any(user.id == me for user in message.mentions)
        reference = message.reference
        resolved = reference.resolved if reference is not None else None
        replied = reference is not None and (
            isinstance(resolved, discord.Message) and resolved.author.id == me or reference.message_id in self._sent)
        if not (mentioned or replied):
            return None
        return re.sub(rf"<@!?{me}>", "", message.content).strip()

    async def _on_interaction(self, interaction: discord.Interaction) -> None:
        if interaction.type is not discord.InteractionType.component or not isinstance(interaction.data, dict):
            return
        parsed = parse_custom_id(str(interaction.data.get("custom_id", "")))
        if parsed is None or self._inbound is None:
            return
        approve, rid = parsed
        report = await self._inbound.decide(ConversationId(self.name, str(interaction.channel_id)), str(interaction.user.id),
                                            rid, approve)
        await self._answer_press(interaction, rid, report)

    async def _answer_press(self, interaction: discord.Interaction, rid: str, report: DecisionReport) -> None:
        """The outcome on the request (buttons disabled) for the presser; a refusal only for them."""
        message = interaction.message
        finished = report.accepted or report.outcome in (
            DecisionOutcome.EXPIRED, DecisionOutcome.ALREADY_DECIDED, DecisionOutcome.NOT_FOUND)
        step_up = message is not None and not any("bruce:approve:" in str(getattr(c, "custom_id", ""))
                                                  for row in message.components for c in getattr(row, "children", []))
        try:
            if report.accepted and message is not None:
                self._cancel_expiry(rid)
                await interaction.response.edit_message(content=decided_text(message.content, report.text),
                                                        view=approval_view(rid, step_up=step_up, disabled=True),
                                                        allowed_mentions=NO_MENTIONS)
                return
            await interaction.response.send_message(report.text[:MESSAGE_LIMIT], ephemeral=True,
                                                    allowed_mentions=NO_MENTIONS)
            if finished and message is not None:
                self._cancel_expiry(rid)
                await message.edit(view=approval_view(rid, step_up=step_up, disabled=True))
        except _SEND_ERRORS as exc:
            log.warning("discord.press_not_answered", confirmation=rid, error=type(exc).__name__)

    # slash commands ----------------------------------------------------------------------

    def _register_commands(self) -> None:
        """The menu commands of the table (``bruce.turns.commands``): those the core answers are
        passed on as their text; ``/help`` and ``/id`` are answered here."""
        tree = self._client.tree
        menu = {spec.name: spec for spec in COMMANDS if spec.in_menu}
        for spec in menu.values():
            if spec.name not in ANSWERED_HERE:
                self._pass_on(tree, spec)

        @tree.command(name="help", description=menu["help"].describe(PLATFORM))
        async def help_(interaction: discord.Interaction) -> None:
            await self._ephemeral(interaction, help_text(self._assistant, about=ABOUT, platform=PLATFORM))

        @tree.command(name="id", description=menu["id"].describe(PLATFORM))
        async def id_(interaction: discord.Interaction) -> None:
            await self._ephemeral(interaction, f"Your Discord user id is {interaction.user.id}.")

    def _pass_on(self, tree: app_commands.CommandTree[_Client], spec: CommandSpec) -> None:
        @tree.command(name=spec.name, description=spec.describe(PLATFORM))
        async def passed_on(interaction: discord.Interaction) -> None:
            await self._slash_to_core(interaction, spec.usage, spec.ack)

    async def _ephemeral(self, interaction: discord.Interaction, text: str) -> None:
        with contextlib.suppress(*_SEND_ERRORS):
            await interaction.response.send_message(text, ephemeral=True, allowed_mentions=NO_MENTIONS)

    async def _slash_to_core(self, interaction: discord.Interaction, text: str, ack: str) -> None:
        """``/new``, ``/jobs``, ``/usage`` go to the core as that text (it answers in the conversation)."""
        channel = interaction.channel
        private = channel is None or _is_dm(channel)
        if self._inbound is None or interaction.channel_id is None or not private and not self._allowed_here(channel):
            await self._ephemeral(interaction, NOT_HERE)
            return
        allowed = str(interaction.user.id) in self._section.allowed_users
        await self._ephemeral(interaction, ack if allowed else "Got it.")
        async with self._order:
            try:
                await self._inbound.deliver(IncomingMessage(
                    channel=self.name, chat_id=str(interaction.channel_id), sender_id=str(interaction.user.id),
                    text=text, platform_message_id=f"interaction:{interaction.id}",
                    timestamp=interaction.created_at, private=private,
                    sender_name=interaction.user.display_name or interaction.user.name))
            except StoreError as exc:
                log.warning("discord.store_failed", interaction=interaction.id, error=str(exc))

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
        except _SEND_ERRORS as exc:
            raise translate_error(exc) from None

    def _remember(self, message: discord.Message) -> None:
        self._sent[message.id] = None
        while len(self._sent) > RECENT_SENT:
            del self._sent[next(iter(self._sent))]

    async def send_text(self, chat_id: str, text: str) -> None:
        for part in split_message(text, MESSAGE_LIMIT):
            self._remember(await self._call(self._target(chat_id).send(part, allowed_mentions=NO_MENTIONS)))

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
            with contextlib.suppress(*_SEND_ERRORS):
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
        text = approval_text(request)
        sent = await self._call(self._target(chat_id).send(
            text, view=approval_view(request.id, step_up=request.step_up), allowed_mentions=NO_MENTIONS))
        self._remember(sent)
        self._expiries[request.id] = asyncio.create_task(self._expire(sent, request), name="discord.expiry")

    async def _expire(self, message: discord.Message, request: ConfirmationRequest) -> None:
        """At expiry the request's buttons are disabled: decided (perhaps typed, or on the machine) or
        expired, it takes no press any more. (After a restart, a press is answered as expired.)"""
        await asyncio.sleep(max((request.expires_at - self._clock.now()).total_seconds(), 0.0))
        self._expiries.pop(request.id, None)
        with contextlib.suppress(*_SEND_ERRORS):
            await message.edit(view=approval_view(request.id, step_up=request.step_up, disabled=True))

    def _cancel_expiry(self, rid: str) -> None:
        task = self._expiries.pop(rid, None)
        if task is not None:
            task.cancel()

    async def send_file(self, chat_id: str, path: Path, caption: str | None = None) -> None:
        content = (caption or "")[:MESSAGE_LIMIT] or None
        self._remember(await self._call(self._target(chat_id).send(
            content, file=discord.File(path, filename=path.name), allowed_mentions=NO_MENTIONS)))


def _is_dm(channel: Any) -> bool:
    if isinstance(channel, discord.DMChannel):
        return True
    return isinstance(channel, discord.PartialMessageable) and channel.guild_id is None and (
        channel.type in (None, discord.ChannelType.private))


def _start_error(failure: BaseException | None, timeout_s: float) -> BruceError:
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
