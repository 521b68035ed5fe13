"""The Telegram channel, on aiogram 3: the adapter behind the channel port.

aiogram stays in here (and in ``telegram_format``); ``bruce`` never imports it. What it does:

Receiving. Long polling by default: our own loop around ``getUpdates`` (aiogram's ``Bot``,
methods and types), not ``Dispatcher.start_polling``, because a bot must never end up
half-dead: ``getMe`` at start is retried with backoff while the network is down (a 401 is a
clear error naming ``channels.telegram.token``); any webhook is deleted first; ``409
Conflict`` (another instance polling the same token), time-outs and 5xx back off and go on,
and repeated 409s are logged as such; a watchdog restarts the loop when no ``getUpdates``
has completed for three poll time-outs; ``last_receive`` is the time of the last one that did.
Updates are handled one at a time in ``update_id`` order, so a chat's messages are stored in
the order they were sent even in a burst (``deliver`` only stores and starts the turn, so
this costs little). An update is confirmed to Telegram (the next ``offset``) only once its
message is stored: a database failure leaves it with Telegram, to be fetched again.
Webhook mode serves ``channels.telegram.webhook`` with aiohttp, checks
``X-Telegram-Bot-Api-Secret-Token`` on every request (401 without it) and answers 200 once
the update is handled.

Access: ``deliver`` applies the allow-list (and pairing). In groups (``groups: true``), only
messages that mention the bot or reply to it are passed on, without the mention.

While a turn runs: ``typing`` every 4 s; in private chats the progress events are shown as a
``sendMessageDraft`` draft (tool steps, then the answer as it streams), at most one draft a
second, and typing alone if the server refuses drafts. The reply itself is always a normal
``sendMessage``: the model's Markdown as Telegram HTML (``telegram_format``), plain text if
Telegram cannot parse it. Approval requests carry inline Approve / Deny buttons whose
``callback_data`` holds only the decision and the request id; a press calls ``decide``, and
the request message is edited to show the outcome, without buttons. A step-up request has
no Approve button: it says to run ``bruce approve ID`` on the machine.

Telegram's errors become ``ChannelSendError``: ``RetryAfter`` retryable with its
``retry_after``; network errors and 5xx retryable; a blocked bot, a chat not found and other
refusals permanent. The outbox does the rest.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import time
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path

import aiohttp
import structlog
from aiogram import Bot
from aiogram.client.session.aiohttp import AiohttpSession
from aiogram.client.telegram import PRODUCTION, TelegramAPIServer
from aiogram.exceptions import (
    AiogramError,
    ClientDecodeError,
    TelegramAPIError,
    TelegramBadRequest,
    TelegramConflictError,
    TelegramForbiddenError,
    TelegramNetworkError,
    TelegramNotFound,
    TelegramRetryAfter,
    TelegramServerError,
    TelegramUnauthorizedError,
)
from aiogram.methods import DeleteWebhook, GetUpdates, SendMessageDraft, SetMyCommands, SetWebhook
from aiogram.types import (
    BotCommand,
    CallbackQuery,
    FSInputFile,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    Message,
    Update,
)
from aiogram.utils.token import TokenValidationError
from aiohttp import web

from bruce.channel import ConfirmationRequest, Inbound, IncomingMessage
from bruce.clock import Clock
from bruce.config import TelegramConfig
from bruce.errors import BruceError, ChannelSendError, ConfigError, StoreError
from bruce.progress import ProgressEvent, TextDelta, Thinking, ToolFinished, ToolStarted
from channels.telegram_format import plain_text, split_html, to_telegram_html

__all__ = ["TelegramChannel", "translate_error"]

log = structlog.get_logger(__name__)

TYPING_EVERY_S = 4.0
DRAFT_EVERY_S = 1.0
DRAFT_MAX_CHARS = 4000
START_BACKOFF_S = (1.0, 2.0, 4.0, 8.0, 15.0, 30.0)  # getMe at start while the network is down
POLL_BACKOFF_MAX_S = 30.0
CONFLICTS_BEFORE_WARNING = 3
ALLOWED_UPDATES = ["message", "edited_message", "callback_query"]
COMMANDS = [("help", "what I can do"), ("id", "your Telegram user id, for the allow-list"),
            ("approve", "approve a pending request: /approve ID"), ("deny", "deny a pending request: /deny ID"),
            ("new", "start a fresh conversation (a summary of this one is kept)"),
            ("jobs", "your reminders and scheduled jobs, with their next run"),
            ("usage", "model calls, tokens and cost of the last days"),
            ("memory", "what I remember about you"), ("forget", "forget one thing I remember: /forget ID")]
STEP_TEXT = {"web.search": "Searching the web…", "web.read_url": "Reading a page…", "math.calculate": "Calculating…",
             "clock.now": "Checking the time…", "artifact.save": "Saving a document…",
             "files.write": "Preparing a note…", "http.post": "Preparing a request…"}
UNSUPPORTED = "I can only read text messages for now; photos, voice messages, stickers and files are not supported yet."
HELP = ("I'm {name}, your assistant. Write to me in plain text. When an action needs your approval I ask "
        "first, with buttons. Documents I save arrive as files. /new starts a fresh conversation (I keep a short "
        "summary of this one). /id shows your Telegram user id.")


def translate_error(exc: TelegramAPIError) -> ChannelSendError:
    """A Telegram failure as the outbox understands it."""
    if isinstance(exc, TelegramRetryAfter):
        return ChannelSendError(f"rate limited by Telegram: {exc.message}", retryable=True, retry_after=exc.retry_after)
    if isinstance(exc, (TelegramNetworkError, TelegramServerError)):
        return ChannelSendError(f"Telegram unreachable: {exc.message}", retryable=True)
    return ChannelSendError(f"Telegram refused it: {exc.message}", retryable=False)


def _is_parse_error(exc: TelegramBadRequest) -> bool:
    return "can't parse entities" in exc.message.lower() or "can't find end of" in exc.message.lower()


class TelegramChannel:
    name = "telegram"
    max_message_length = 3500  # Markdown in; as HTML it is split again at Telegram's 4096

    def __init__(self, section: TelegramConfig, *, clock: Clock, assistant_name: str = "Bruce") -> None:
        if section.token is None:
            raise ConfigError("channels.telegram.token: required when channels.telegram.enabled is true "
                              '(e.g. token: "${TELEGRAM_BOT_TOKEN}")')
        self._api = TelegramAPIServer.from_base(section.api_base) if section.api_base else PRODUCTION
        session = AiohttpSession(api=self._api)
        try:
            self._bot = Bot(section.token.get_secret_value(), session=session)
        except TokenValidationError:
            raise ConfigError("channels.telegram.token: not a Telegram bot token (it looks like 123456:ABC-...)") from None
        self._section = section
        self._clock = clock
        self._assistant = assistant_name
        self._inbound: Inbound | None = None
        self._username = ""
        self._bot_id = 0
        self._tasks: list[asyncio.Task[None]] = []
        self._runner: web.AppRunner | None = None
        self._drafts_refused = False
        self._skipped: list[int] = []  # offsets past unreadable updates, confirmed with the next poll
        self._order = asyncio.Lock()  # updates are handled one at a time, in order
        self._polled_at = time.monotonic()  # the last getUpdates that completed (monotonic)
        self.last_receive: datetime | None = None  # the last getUpdates (or webhook call) that completed

    # lifecycle ---------------------------------------------------------------------------

    async def start(self, inbound: Inbound) -> None:
        self._inbound = inbound
        connected = await self._connect(first=True)
        if self._section.mode == "webhook":
            if not connected:
                raise BruceError("Telegram is unreachable; webhook mode cannot register its URL")
            await self._serve_webhook()
        else:
            self._tasks.append(asyncio.create_task(self._keep_polling(connected), name="telegram.poll"))
            self._tasks.append(asyncio.create_task(self._watchdog(), name="telegram.watchdog"))
        log.info("telegram.started", mode=self._section.mode, bot=self._username or None)

    async def _connect(self, *, first: bool) -> bool:
        """``getMe`` and the bot's commands. A 401 is a configuration error; a network that is
        down at start is tried again (in the background after the first attempt)."""
        try:
            me = await self._bot.get_me()
        except TelegramUnauthorizedError:
            raise ConfigError("channels.telegram.token was refused by Telegram (401 Unauthorized): "
                              "check the token with @BotFather") from None
        except (TelegramNetworkError, TelegramServerError, TelegramRetryAfter, TimeoutError) as exc:
            log.warning("telegram.unreachable", error=type(exc).__name__, retrying=True)
            if first:
                return False
            raise
        self._username, self._bot_id = (me.username or "").lower(), me.id
        with contextlib.suppress(TelegramAPIError):
            await self._bot(SetMyCommands(commands=[BotCommand(command=c, description=d) for c, d in COMMANDS]))
        return True

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        await self._bot.session.close()
        self._inbound = None

    # receiving: long polling ---------------------------------------------------------------

    async def _keep_polling(self, connected: bool) -> None:
        delay_index = 0
        while not connected:
            await self._clock.sleep(START_BACKOFF_S[min(delay_index, len(START_BACKOFF_S) - 1)])
            delay_index += 1
            try:
                connected = await self._connect(first=False)
            except ConfigError as exc:
                log.error("telegram.stopped", reason=str(exc))
                return
            except (TelegramAPIError, TimeoutError):
                continue
        while True:
            try:
                await self._bot(DeleteWebhook(drop_pending_updates=False))
                break
            except TelegramUnauthorizedError:
                log.error("telegram.stopped", reason="channels.telegram.token was refused (401 Unauthorized)")
                return
            except (TelegramAPIError, TimeoutError) as exc:
                log.warning("telegram.delete_webhook_failed", error=type(exc).__name__)
                await self._clock.sleep(2.0)
        await self._poll()

    async def _poll(self) -> None:
        offset: int | None = None
        conflicts, failures = 0, 0
        timeout = self._section.poll_timeout_s
        while True:
            try:
                updates = await self._bot(GetUpdates(offset=offset, timeout=timeout, allowed_updates=ALLOWED_UPDATES),
                                          request_timeout=timeout + 10)
            except TelegramUnauthorizedError:
                log.error("telegram.stopped", reason="channels.telegram.token was refused (401 Unauthorized)")
                return
            except TelegramConflictError:
                conflicts += 1
                if conflicts == CONFLICTS_BEFORE_WARNING:
                    log.error("telegram.conflict", hint="another instance may be polling the same bot token")
                await self._clock.sleep(min(2.0 ** min(conflicts, 5), POLL_BACKOFF_MAX_S))
                continue
            except ClientDecodeError:  # an update aiogram cannot read: one by one, skipping it
                updates = await self._readable_updates(offset)
            except (TelegramAPIError, AiogramError, TimeoutError) as exc:
                failures += 1
                log.warning("telegram.poll_failed", error=type(exc).__name__, attempt=failures)
                await self._clock.sleep(min(2.0 ** min(failures, 5), POLL_BACKOFF_MAX_S))
                continue
            conflicts = failures = 0
            self._received()
            for update in sorted(updates, key=lambda u: u.update_id):
                if update.update_id < (offset or 0):
                    continue
                try:
                    await self._handle(update)
                except StoreError as exc:  # not confirmed: Telegram gives it to us again
                    log.warning("telegram.store_failed", update_id=update.update_id, error=str(exc))
                    await self._clock.sleep(2.0)
                    break
                except Exception:  # a bug of ours on this update: logged, and the next ones still come
                    log.exception("telegram.update_failed", update_id=update.update_id)
                offset = update.update_id + 1
            else:
                offset = max([offset or 0, *self._skipped]) or offset
                self._skipped.clear()

    async def _readable_updates(self, offset: int | None) -> list[Update]:
        """The pending updates read one at a time from the raw answer: one that does not parse
        (a Bot API newer than aiogram, a broken proxy) is logged and skipped instead of
        stopping every update behind it."""
        url = self._api.api_url(self._bot.token, "getUpdates")
        params = {"timeout": 0, **({"offset": offset} if offset is not None else {})}
        readable: list[Update] = []
        async with aiohttp.ClientSession() as http:
            async with http.post(url, json=params, timeout=aiohttp.ClientTimeout(total=20)) as response:
                body = await response.json(content_type=None)
        for item in body.get("result") or []:
            try:
                readable.append(Update.model_validate(item, context={"bot": self._bot}))
            except ValueError:
                update_id = item.get("update_id") if isinstance(item, dict) else None
                log.warning("telegram.update_unreadable", update_id=update_id)
                if isinstance(update_id, int):
                    self._skipped.append(update_id + 1)
        return readable

    def _received(self) -> None:
        self._polled_at = time.monotonic()
        self.last_receive = self._clock.now()

    async def _watchdog(self) -> None:
        """Restart polling when no getUpdates has completed for three poll time-outs."""
        limit = 3 * (self._section.poll_timeout_s + 10)
        while True:
            await asyncio.sleep(self._section.poll_timeout_s)
            poller = self._tasks[0] if self._tasks else None
            if poller is None:
                return
            if time.monotonic() - self._polled_at > limit and not poller.done():
                log.error("telegram.poll_stalled", seconds=round(time.monotonic() - self._polled_at))
                poller.cancel()
                await asyncio.gather(poller, return_exceptions=True)
                self._polled_at = time.monotonic()
                self._tasks[0] = asyncio.create_task(self._keep_polling(True), name="telegram.poll")

    # receiving: webhook ------------------------------------------------------------------

    async def _serve_webhook(self) -> None:
        hook = self._section.webhook
        assert hook.url is not None and hook.secret_token is not None  # checked by the config
        app = web.Application(client_max_size=1024 * 1024)
        app.router.add_post(hook.path, self._on_webhook)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, hook.host, hook.port)
        await site.start()
        await self._bot(SetWebhook(url=hook.url, secret_token=hook.secret_token.get_secret_value(),
                                   allowed_updates=ALLOWED_UPDATES))

    @property
    def webhook_port(self) -> int | None:
        """The port the webhook server listens on (the configured one, or the one given for 0)."""
        if self._runner is None or not self._runner.addresses:
            return None
        return int(self._runner.addresses[0][1])

    async def _on_webhook(self, request: web.Request) -> web.Response:
        secret = self._section.webhook.secret_token
        assert secret is not None
        given = request.headers.get("X-Telegram-Bot-Api-Secret-Token", "")
        if not _same(given, secret.get_secret_value()):
            log.warning("telegram.webhook_refused", remote=request.remote)
            return web.json_response({"ok": False, "error": "missing or wrong secret token"}, status=401)
        try:
            update = Update.model_validate(await request.json(), context={"bot": self._bot})
        except ValueError:
            return web.json_response({"ok": False, "error": "not a Telegram update"}, status=400)
        self._received()
        try:
            await self._handle(update)
        except StoreError:  # not acknowledged: Telegram sends it again
            return web.json_response({"ok": False, "error": "try again"}, status=503)
        return web.json_response({"ok": True})

    # one update ------------------------------------------------------------------------

    async def _handle(self, update: Update) -> None:
        async with self._order:
            if update.message is not None:
                await self._on_message(update.message)
            elif update.callback_query is not None:
                await self._on_button(update.callback_query)
            elif update.edited_message is not None:
                log.info("telegram.edit_ignored", chat=update.edited_message.chat.id)

    async def _on_message(self, message: Message) -> None:
        if self._inbound is None or message.from_user is None:
            return
        private = message.chat.type == "private"
        sender = str(message.from_user.id)
        text = message.text
        if not private:
            if not self._section.groups:
                return
            text = self._addressed_text(message)
            if text is None:
                return
        if text is None:
            if sender in self._section.allowed_users:  # not for strangers: they get nothing
                await self._reply(message.chat.id, UNSUPPORTED)
            return
        if await self._local_command(message, text, sender, private):
            return
        await self._inbound.deliver(IncomingMessage(
            channel=self.name, chat_id=str(message.chat.id), sender_id=sender, text=text,
            platform_message_id=f"{message.chat.id}:{message.message_id}", timestamp=message.date,
            private=private, sender_name=message.from_user.full_name or message.from_user.username))

    def _addressed_text(self, message: Message) -> str | None:
        """In a group: the text if it mentions the bot or replies to it (mention removed), else None."""
        text = message.text or ""
        replied = message.reply_to_message
        to_us = replied is not None and replied.from_user is not None and replied.from_user.id == self._bot_id
        mention = f"@{self._username}" if self._username else None
        if mention and mention in text.lower():
            start = text.lower().index(mention)
            return (text[:start] + text[start + len(mention):]).strip() or None
        return (text.strip() or None) if to_us else None

    async def _local_command(self, message: Message, text: str, sender: str, private: bool) -> bool:
        """/start, /help and /id are answered here; /approve, /deny, /new, /jobs and everything else go on."""
        word = text.strip().split(maxsplit=1)[0].lower() if text.strip() else ""
        word = word.split("@", 1)[0]
        if word == "/id":
            await self._reply(message.chat.id, f"Your Telegram user id is {sender}.")
            return True
        if word in ("/start", "/help") and (sender in self._section.allowed_users or not private):
            await self._reply(message.chat.id, HELP.format(name=self._assistant))
            return True
        return False  # /start from a stranger goes on to admission (pairing explains itself)

    async def _reply(self, chat_id: int, text: str) -> None:
        with contextlib.suppress(TelegramAPIError, TimeoutError):
            await self._bot.send_message(chat_id, text)

    async def _on_button(self, query: CallbackQuery) -> None:
        if self._inbound is None:
            return
        verb, _, rid = (query.data or "").partition(":")
        message = query.message
        if verb not in ("approve", "deny") or not isinstance(message, Message):
            with contextlib.suppress(TelegramAPIError):
                await query.answer("This button is not one of mine.", show_alert=True)
            return
        report = await self._inbound.decide(f"{self.name}:{message.chat.id}", str(query.from_user.id), rid,
                                            verb == "approve")
        with contextlib.suppress(TelegramAPIError):
            await query.answer(report.text[:200], show_alert=not report.accepted)
        if report.accepted:
            with contextlib.suppress(TelegramAPIError):
                await self._bot.edit_message_text(
                    text=f"{html.escape(message.text or '')}\n\n<b>{html.escape(report.text)}</b>"[:4096],
                    chat_id=message.chat.id, message_id=message.message_id, parse_mode="HTML", reply_markup=None)

    # sending -----------------------------------------------------------------------------

    async def send_text(self, chat_id: str, text: str) -> None:
        pieces = split_html(to_telegram_html(text), 4096) or split_html(html.escape(text.strip() or "…"), 4096)
        for piece in pieces:  # (Markdown that renders to nothing is sent as the text it was)
            await self._send_html(int(chat_id), piece)

    async def _send_html(self, chat_id: int, piece: str, markup: InlineKeyboardMarkup | None = None) -> None:
        try:
            try:
                await self._bot.send_message(chat_id, piece, parse_mode="HTML", reply_markup=markup)
            except TelegramBadRequest as exc:
                if not _is_parse_error(exc):
                    raise
                log.warning("telegram.html_refused", error=exc.message)
                await self._bot.send_message(chat_id, plain_text(piece)[:4096], reply_markup=markup)
        except TelegramAPIError as exc:
            raise translate_error(exc) from None
        except TimeoutError:
            raise ChannelSendError("Telegram did not answer in time", retryable=True) from None

    @contextlib.asynccontextmanager
    async def thinking(self, chat_id: str) -> AsyncIterator[None]:
        typing = asyncio.create_task(self._type(int(chat_id)), name="telegram.typing")
        try:
            yield
        finally:
            typing.cancel()
            await asyncio.gather(typing, return_exceptions=True)

    async def _type(self, chat_id: int) -> None:
        while True:
            with contextlib.suppress(TelegramAPIError, TimeoutError):
                await self._bot.send_chat_action(chat_id, "typing")
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
        if request.preview:
            lines.append(f"<pre>{html.escape(request.preview[:2500])}</pre>")
        buttons = [InlineKeyboardButton(text="Deny", callback_data=f"deny:{request.id}")]
        if request.step_up:
            lines.append(f"This needs the owner's approval on the machine: run <code>bruce approve "
                         f"{html.escape(request.id)}</code> there.")
        else:
            buttons.insert(0, InlineKeyboardButton(text="Approve", callback_data=f"approve:{request.id}"))
        await self._send_html(int(chat_id), "\n".join(lines)[:4096], InlineKeyboardMarkup(inline_keyboard=[buttons]))

    async def send_file(self, chat_id: str, path: Path, caption: str | None = None) -> None:
        try:
            await self._bot.send_document(int(chat_id), FSInputFile(path), caption=(caption or "")[:1024] or None)
        except TelegramAPIError as exc:
            raise translate_error(exc) from None

    async def _draft(self, chat_id: int, draft_id: int, text: str) -> bool:
        """One draft update; False (and drafts off for good) when the server refuses the method."""
        try:
            await self._bot(SendMessageDraft(chat_id=chat_id, draft_id=draft_id, text=text[:DRAFT_MAX_CHARS]))
        except (TelegramNotFound, TelegramBadRequest, TelegramForbiddenError) as exc:
            log.info("telegram.drafts_refused", error=exc.message)
            self._drafts_refused = True
            return False
        except (TelegramAPIError, TimeoutError):
            return True  # a hiccup: the next one may go through
        return True


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
            case ToolStarted(tool=tool):
                self._step = STEP_TEXT.get(tool, f"Using {tool}…")
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


def _same(given: str, expected: str) -> bool:
    import hmac

    return hmac.compare_digest(given.encode(), expected.encode())
