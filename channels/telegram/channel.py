"""The Telegram channel, on aiogram 3: the adapter behind the channel port.

aiogram stays in the ``channels/telegram/`` package; ``bruce`` never imports it. This module
does not import it either: ``import aiogram`` costs seconds of CPU, so the control calls
(``getMe``, ``deleteWebhook``, ``setMyCommands``, ``setWebhook``, ``getUpdates``) are plain
Bot API requests (JSON over aiohttp) and receiving starts at once, while
``channels.telegram.bot`` (aiogram: reading updates into its types, sending) is imported in
a thread beside it. The first updates wait for that import, never the other way round.

Receiving (``polling.py``, ``webhook.py``; the control calls in
``api.py``). Long polling by default: our own loop around ``getUpdates``, not aiogram's
``Dispatcher.start_polling``, because a bot must never end up half-dead: ``getMe`` at start
is retried with backoff while the network is down (a 401 is a clear error naming
``channels.telegram.token``); any webhook is deleted first; ``409 Conflict`` (another
instance polling the same token), time-outs and 5xx back off and go on, and repeated 409s
are logged as such; a watchdog restarts the loop when no ``getUpdates`` has completed for
three poll time-outs; ``last_receive`` is the time of the last one that did. Each update is
read on its own, so one aiogram cannot read (a Bot API newer than aiogram, a broken proxy) is
logged and skipped instead of stopping every update behind it. Updates are handled one at a
time in ``update_id`` order, so a chat's messages are stored in the order they were sent even
in a burst (``deliver`` only stores and starts the turn, so this costs little). An update is
confirmed to Telegram (the next ``offset``) only once its message is stored: a database
failure leaves it with Telegram, to be fetched again. Webhook mode serves
``channels.telegram.webhook`` with aiohttp, checks ``X-Telegram-Bot-Api-Secret-Token`` on
every request (401 without it) and answers 200 once the update is handled.

Access (``updates.py``, which handles each update): ``deliver`` applies the allow-list (and
pairing). In groups (``groups: true``), only messages that mention the bot or reply to it are
passed on, without the mention. ``/id`` answers anyone in a private chat (a stranger once a
minute); in a group, a sender outside ``allowed_users`` gets no answer to ``/id``, ``/start`` or
``/help``.

Media (``media.py``, ``files.py``): voice notes, audio files, photos (the largest size) and files
reach the core as attachments with their caption as the text; an album is one message; a sticker,
video, location and the like is an ``OTHER`` the core answers. ``fetch`` downloads one
(``getFile``, then ``/file/bot<token>/<path>`` under ``api_base``) only when the core asks, never
past ``max_bytes``; a failure is a ``MediaFetchError`` with a clear reason.

While a turn runs: ``typing`` every 4 s; in private chats the progress events are shown as a
``sendMessageDraft`` draft (tool steps, then the answer as it streams), at most one draft a
second, and typing alone if the server refuses drafts (for every chat when it does not know
the method, for the turn when one chat's draft is refused). The reply itself is always a normal
``sendMessage``: the model's Markdown as Telegram HTML (``format``), plain text if
Telegram cannot parse it. Approval requests carry inline Approve / Deny buttons whose
``callback_data`` holds only the decision and the request id; a press calls ``decide``, and
the request message is edited to show the outcome, without buttons. A step-up request has
no Approve button: it says to run ``bruce approve ID`` on the machine.

Telegram's errors become ``ChannelSendError`` (``bot.translate_error``):
``RetryAfter`` retryable with its ``retry_after``; network errors and 5xx retryable; a
blocked bot, a chat not found and other refusals permanent. The outbox does the rest.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import importlib
import time
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import structlog

from bruce.channel import Attachment, ConfirmationRequest, Inbound
from bruce.clock import Clock
from bruce.config.rules import token_required
from bruce.config.schema import TelegramConfig
from bruce.errors import BruceError, ChannelSendError, ConfigError
from bruce.turns.commands import COMMANDS
from bruce.turns.progress import ProgressEvent, TextDelta, Thinking, ToolFinished, ToolStarted
from channels.telegram.api import BotAPI, Refused, Unreachable, check_token
from channels.telegram.files import fetch_file
from channels.telegram.format import to_telegram_html
from channels.telegram.polling import Poller
from channels.telegram.split import split_html
from channels.telegram.updates import PLATFORM, UpdateHandler
from channels.telegram.webhook import WebhookServer

if TYPE_CHECKING:
    from channels.telegram.bot import TelegramBot

__all__ = ["TelegramChannel"]

log = structlog.get_logger(__name__)

TYPING_EVERY_S = 4.0
DRAFT_EVERY_S = 1.0
MENU = [{"command": spec.name, "description": spec.menu_line(PLATFORM)} for spec in COMMANDS]  # setMyCommands


class TelegramChannel:
    name = "telegram"
    max_message_length = 3500  # Markdown in; as HTML it is split again at Telegram's 4096

    def __init__(self, section: TelegramConfig, *, clock: Clock, assistant_name: str = "Bruce",
                 fetch_timeout_s: float = 60.0) -> None:
        if section.token is None:
            raise ConfigError(token_required(self.name))
        check_token(section.token.get_secret_value())
        self._api = BotAPI(section.token.get_secret_value(), section.api_base)
        self._section = section
        self._clock = clock
        self._fetch_timeout = fetch_timeout_s
        self._sdk: asyncio.Task[TelegramBot] | None = None  # aiogram, loading in a thread
        self._username = ""
        self._updates = UpdateHandler(section, clock=clock, assistant_name=assistant_name, bot=self._bot)
        self._poller = Poller(self._api, poll_timeout_s=section.poll_timeout_s, clock=clock, connect=self._reconnect,
                              bot=self._bot, handle=self._updates.handle, handle_album=self._updates.handle_album,
                              received=self._received)
        self._webhook = WebhookServer(self._api, section.webhook, bot=self._bot, handle=self._updates.handle,
                                      handle_album=self._updates.handle_album, received=self._received)
        self._drafts_refused = False
        self.last_receive: datetime | None = None  # the last getUpdates (or webhook call) that completed

    # lifecycle ---------------------------------------------------------------------------

    async def start(self, inbound: Inbound) -> None:
        self._updates.attach(inbound)
        self._sdk = asyncio.create_task(self._load_sdk(), name="telegram.sdk")
        connected = await self._connect(first=True)
        if self._section.mode == "webhook":
            if not connected:
                raise BruceError("Telegram is unreachable; webhook mode cannot register its URL")
            await self._webhook.start()
        else:
            self._poller.start(connected)
        log.info("telegram.started", mode=self._section.mode, bot=self._username or None)

    async def _load_sdk(self) -> TelegramBot:
        started = time.monotonic()
        try:
            module = await asyncio.to_thread(importlib.import_module, "channels.telegram.bot")
        except Exception:  # a broken install: nothing can be read or sent, say so once
            log.exception("telegram.sdk_failed")
            raise
        log.info("telegram.sdk_ready", seconds=round(time.monotonic() - started, 2))
        assert self._section.token is not None
        bot: TelegramBot = module.TelegramBot(self._section.token.get_secret_value(), self._section.api_base,
                                              send_timeout_s=self._section.send_timeout_s)
        return bot

    async def _bot(self) -> TelegramBot:
        """aiogram's side of the channel, once its import has finished."""
        if self._sdk is None:  # not started, or stopped: the outbox keeps the reply for later
            raise ChannelSendError("the Telegram channel is not running", retryable=True)
        return await asyncio.shield(self._sdk)

    async def _connect(self, *, first: bool) -> bool:
        """``getMe`` and the bot's commands. A 401 is a configuration error; a network that is
        down at start is tried again (in the background after the first attempt)."""
        try:
            me = await self._api.call("getMe", {})
        except Refused as exc:
            if exc.status == 401:
                raise ConfigError("channels.telegram.token was refused by Telegram (401 Unauthorized): "
                                  "check the token with @BotFather") from None
            if exc.status not in (429,) and exc.status < 500:
                raise ConfigError(f"channels.telegram: getMe was refused ({exc.status} {exc.description}); "
                                  "check channels.telegram.token and channels.telegram.api_base") from None
            log.warning("telegram.unreachable", error=f"{exc.status} {exc.description}", retrying=True)
            if first:
                return False
            raise
        except Unreachable as exc:
            log.warning("telegram.unreachable", error=type(exc).__name__, retrying=True)
            if first:
                return False
            raise
        self._username = str((me or {}).get("username") or "").lower()
        self._updates.identify(self._username, int((me or {}).get("id") or 0))
        with contextlib.suppress(Refused, *Unreachable):
            await self._api.call("setMyCommands", {"commands": MENU})
        return True

    async def _reconnect(self) -> bool:
        return await self._connect(first=False)

    async def stop(self) -> None:
        await self._poller.stop()
        await self._webhook.stop()
        await self._api.close()
        if self._sdk is not None:
            if self._sdk.done() and not self._sdk.cancelled() and self._sdk.exception() is None:
                await self._sdk.result().close()
            else:  # still importing (its thread finishes on its own) or failed (logged where awaited)
                self._sdk.cancel()
            self._sdk = None
        self._updates.attach(None)

    # receiving ---------------------------------------------------------------------------

    def _received(self) -> None:
        self.last_receive = self._clock.now()

    async def fetch(self, attachment: Attachment, *, max_bytes: int) -> bytes:
        """An attachment's bytes (``files.py``): ``MediaFetchError`` when it cannot be had."""
        return await fetch_file(self._api, attachment, max_bytes=max_bytes, timeout_s=self._fetch_timeout)

    @property
    def webhook_port(self) -> int | None:
        """The port the webhook server listens on (the configured one, or the one given for 0)."""
        return self._webhook.port

    # sending -----------------------------------------------------------------------------

    async def send_text(self, chat_id: str, text: str) -> None:
        bot = await self._bot()
        pieces = split_html(to_telegram_html(text), 4096) or split_html(html.escape(text.strip() or "…"), 4096)
        for piece in pieces:  # (Markdown that renders to nothing is sent as the text it was)
            await bot.send_html(int(chat_id), piece)

    @contextlib.asynccontextmanager
    async def thinking(self, chat_id: str) -> AsyncIterator[None]:
        typing = asyncio.create_task(self._type(int(chat_id)), name="telegram.typing")
        try:
            yield
        finally:
            typing.cancel()
            await asyncio.gather(typing, return_exceptions=True)

    async def _type(self, chat_id: int) -> None:
        bot = await self._bot()
        while True:
            await bot.typing(chat_id)
            await asyncio.sleep(TYPING_EVERY_S)

    @contextlib.asynccontextmanager
    async def progress(self, chat_id: str) -> AsyncIterator[_Draft]:
        chat = int(chat_id)
        draft = _Draft(self, chat, live=chat > 0 and not self._drafts_refused)  # private chats have positive ids
        async with self.thinking(chat_id):
            try:
                yield draft
            finally:
                await draft.close()

    async def send_confirmation(self, chat_id: str, request: ConfirmationRequest) -> None:
        lines = [f"<b>Approval needed</b> (request <code>{html.escape(request.id)}</code>)",
                 html.escape(request.summary),
                 f"Tool: <code>{html.escape(request.tool_name)}</code> (risk {html.escape(request.risk)})",
                 f"Side effects: {html.escape(request.side_effects)}"]
        if request.expires_shown:
            lines.append(f"Expires at {html.escape(request.expires_shown)}.")
        if request.preview:
            lines.append(f"<pre>{html.escape(request.preview[:2500])}</pre>")
        buttons = [("Deny", f"deny:{request.id}")]
        if request.step_up:
            lines.append(f"This needs the owner's approval on the machine: run <code>bruce approve "
                         f"{html.escape(request.id)}</code> there.")
        else:
            buttons.insert(0, ("Approve", f"approve:{request.id}"))
        await (await self._bot()).send_html(int(chat_id), "\n".join(lines)[:4096], buttons)

    async def send_file(self, chat_id: str, path: Path, caption: str | None = None) -> None:
        await (await self._bot()).send_document(int(chat_id), path, caption)

    async def _draft(self, chat_id: int, draft_id: int, text: str) -> bool:
        """One draft update; False when it was refused: for this turn when the chat refused it,
        for good (every chat) when the server does not know the method."""
        outcome = await (await self._bot()).draft(chat_id, draft_id, text)
        if outcome == "unsupported":
            self._drafts_refused = True
        return outcome == "shown"


class _Draft:
    """A turn's live view in a private chat: tool steps, then the streamed answer, as a draft
    updated at most once a second (the typing action runs beside it)."""

    def __init__(self, channel: TelegramChannel, chat_id: int, *, live: bool) -> None:
        self._channel = channel
        self._chat = chat_id
        self._live = live
        self._id = int(time.time() * 1000) % 2_000_000_000 or 1
        self._text = ""
        self._step = ""
        self._shown = ""
        self._last = 0.0
        self.wants_text = live

    async def emit(self, event: ProgressEvent) -> None:
        if not self._live:
            return
        match event:
            case Thinking():
                self._text = ""
            case ToolStarted(activity=activity):
                self._step = f"{activity}…"
            case ToolFinished():
                self._step = ""
            case TextDelta(text=text):
                self._text += text
        await self._show()

    async def _show(self, *, final: bool = False) -> None:
        text = self._text.strip() or self._step
        if not text or text == self._shown:
            return
        now = time.monotonic()
        if not final and now - self._last < DRAFT_EVERY_S:
            return
        self._last, self._shown = now, text
        self._live = await self._channel._draft(self._chat, self._id, text)

    async def close(self) -> None:
        """Nothing to clear: the reply itself (a normal message) replaces the draft."""
