"""The Telegram channel, on aiogram 3: the adapter behind the channel port.

aiogram stays in the ``channels/telegram*.py`` modules; ``bruce`` never imports it. This module
does not import it either: ``import aiogram`` costs seconds of CPU, so the control calls
(``getMe``, ``deleteWebhook``, ``setMyCommands``, ``setWebhook``, ``getUpdates``) are plain
Bot API requests (JSON over aiohttp) and receiving starts at once, while
``channels.telegram_bot`` (aiogram: reading updates into its types, sending) is imported in
a thread beside it. The first updates wait for that import, never the other way round.

Receiving. Long polling by default: our own loop around ``getUpdates``, not aiogram's
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

Access: ``deliver`` applies the allow-list (and pairing). In groups (``groups: true``), only
messages that mention the bot or reply to it are passed on, without the mention. ``/id`` answers
anyone in a private chat (a stranger once a minute); in a group, a sender outside
``allowed_users`` gets no answer to ``/id``, ``/start`` or ``/help``.

While a turn runs: ``typing`` every 4 s; in private chats the progress events are shown as a
``sendMessageDraft`` draft (tool steps, then the answer as it streams), at most one draft a
second, and typing alone if the server refuses drafts (for every chat when it does not know
the method, for the turn when one chat's draft is refused). The reply itself is always a normal
``sendMessage``: the model's Markdown as Telegram HTML (``telegram_format``), plain text if
Telegram cannot parse it. Approval requests carry inline Approve / Deny buttons whose
``callback_data`` holds only the decision and the request id; a press calls ``decide``, and
the request message is edited to show the outcome, without buttons. A step-up request has
no Approve button: it says to run ``bruce approve ID`` on the machine.

Telegram's errors become ``ChannelSendError`` (``telegram_bot.translate_error``):
``RetryAfter`` retryable with its ``retry_after``; network errors and 5xx retryable; a
blocked bot, a chat not found and other refusals permanent. The outbox does the rest.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import html
import importlib
import json
import re
import time
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiohttp
import structlog
from aiohttp import web

from bruce.channel import ConfirmationRequest, Inbound, IncomingMessage
from bruce.clock import Clock
from bruce.config.schema import TelegramConfig
from bruce.errors import BruceError, ChannelSendError, ConfigError, StoreError
from bruce.limits import Quiet
from bruce.turns.commands import COMMANDS, help_text
from bruce.turns.progress import ProgressEvent, TextDelta, Thinking, ToolFinished, ToolStarted
from channels.telegram_format import split_html, to_telegram_html

if TYPE_CHECKING:
    from aiogram.types import CallbackQuery, Message, Update

    from channels.telegram_bot import TelegramBot

__all__ = ["TelegramChannel"]

log = structlog.get_logger(__name__)

OFFICIAL_API = "https://api.telegram.org"
TYPING_EVERY_S = 4.0
DRAFT_EVERY_S = 1.0
START_BACKOFF_S = (1.0, 2.0, 4.0, 8.0, 15.0, 30.0)  # getMe at start while the network is down
POLL_BACKOFF_MAX_S = 30.0
CONTROL_TIMEOUT_S = 20.0  # getMe, deleteWebhook, setMyCommands, setWebhook
MAX_ANSWER_BYTES = 32 * 2**20  # a getUpdates answer is at most 100 updates; a proxy gone wrong gets no more
CONFLICTS_BEFORE_WARNING = 3
ID_QUIET_S = 60.0  # a sender outside the allow-list gets one /id answer a minute
ALLOWED_UPDATES = ["message", "edited_message", "callback_query"]
PLATFORM = "Telegram"
MENU = [{"command": spec.name, "description": spec.menu_line(PLATFORM)} for spec in COMMANDS]  # setMyCommands
UNSUPPORTED = "I can only read text messages for now; photos, voice messages, stickers and files are not supported yet."
ABOUT = ("Write to me in plain text. When an action needs your approval I ask first, with buttons. Documents I "
         "save arrive as files.")


def _check_token(token: str) -> None:
    """The shape of a bot token (``123456:ABC-...``), as aiogram checks it, without importing aiogram."""
    left, sep, right = token.partition(":")
    if not sep or not left.isdigit() or not right or any(c.isspace() for c in token):
        raise ConfigError("channels.telegram.token: not a Telegram bot token (it looks like 123456:ABC-...)")


class Refused(Exception):
    """A Bot API call answered ``ok: false`` (or not with JSON at all)."""

    def __init__(self, method: str, status: int, description: str, retry_after: float | None = None) -> None:
        super().__init__(f"{method}: {status} {description}")
        self.status, self.description, self.retry_after = status, description, retry_after


Unreachable = (aiohttp.ClientError, TimeoutError)  # no answer at all: the network, a time-out


class BotAPI:
    """The Bot API's control calls as plain JSON requests: what receiving needs before (and
    without) aiogram."""

    def __init__(self, token: str, api_base: str | None) -> None:
        self._base = f"{(api_base or OFFICIAL_API).rstrip('/')}/bot{token}"
        self._http: aiohttp.ClientSession | None = None

    async def call(self, method: str, params: dict[str, Any], *, timeout: float = CONTROL_TIMEOUT_S) -> Any:
        """The call's ``result``; ``Refused`` when Telegram says no, ``Unreachable`` when it says nothing."""
        if self._http is None or self._http.closed:
            self._http = aiohttp.ClientSession()
        async with self._http.post(f"{self._base}/{method}", json=params,
                                   timeout=aiohttp.ClientTimeout(total=timeout)) as response:
            raw = await response.content.read(MAX_ANSWER_BYTES + 1)
            status = response.status
        if len(raw) > MAX_ANSWER_BYTES:
            raise Refused(method, status, f"an answer over {MAX_ANSWER_BYTES // 2**20} MB")
        try:
            body = json.loads(raw)
        except (ValueError, RecursionError):  # not JSON, or JSON nested past the parser's depth
            raise Refused(method, status, "not a JSON answer") from None
        if not isinstance(body, dict):
            raise Refused(method, status, "not a Bot API answer")
        if status == 200 and body.get("ok") is True:
            return body.get("result")
        parameters = body.get("parameters")
        retry_after = parameters.get("retry_after") if isinstance(parameters, dict) else None
        raise Refused(method, status, str(body.get("description") or "no description")[:300],
                      float(retry_after) if isinstance(retry_after, int | float) else None)

    async def close(self) -> None:
        if self._http is not None:
            await self._http.close()
            self._http = None


class TelegramChannel:
    name = "telegram"
    max_message_length = 3500  # Markdown in; as HTML it is split again at Telegram's 4096

    def __init__(self, section: TelegramConfig, *, clock: Clock, assistant_name: str = "Bruce") -> None:
        if section.token is None:
            raise ConfigError("channels.telegram.token: required when channels.telegram.enabled is true "
                              '(e.g. token: "${TELEGRAM_BOT_TOKEN}")')
        _check_token(section.token.get_secret_value())
        self._api = BotAPI(section.token.get_secret_value(), section.api_base)
        self._section = section
        self._clock = clock
        self._assistant = assistant_name
        self._inbound: Inbound | None = None
        self._sdk: asyncio.Task[TelegramBot] | None = None  # aiogram, loading in a thread
        self._username = ""
        self._bot_id = 0
        self._tasks: list[asyncio.Task[None]] = []
        self._runner: web.AppRunner | None = None
        self._drafts_refused = False
        self._order = asyncio.Lock()  # updates are handled one at a time, in order
        self._polled_at = time.monotonic()  # the last getUpdates that completed (monotonic)
        self.last_receive: datetime | None = None  # the last getUpdates (or webhook call) that completed
        self._id_told = Quiet(ID_QUIET_S)  # strangers answered /id lately

    # lifecycle ---------------------------------------------------------------------------

    async def start(self, inbound: Inbound) -> None:
        self._inbound = inbound
        self._sdk = asyncio.create_task(self._load_sdk(), name="telegram.sdk")
        connected = await self._connect(first=True)
        if self._section.mode == "webhook":
            if not connected:
                raise BruceError("Telegram is unreachable; webhook mode cannot register its URL")
            await self._serve_webhook()
        else:
            self._tasks.append(asyncio.create_task(self._keep_polling(connected), name="telegram.poll"))
            self._tasks.append(asyncio.create_task(self._watchdog(), name="telegram.watchdog"))
        log.info("telegram.started", mode=self._section.mode, bot=self._username or None)

    async def _load_sdk(self) -> TelegramBot:
        started = time.monotonic()
        try:
            module = await asyncio.to_thread(importlib.import_module, "channels.telegram_bot")
        except Exception:  # a broken install: nothing can be read or sent, say so once
            log.exception("telegram.sdk_failed")
            raise
        log.info("telegram.sdk_ready", seconds=round(time.monotonic() - started, 2))
        assert self._section.token is not None
        bot: TelegramBot = module.TelegramBot(self._section.token.get_secret_value(), self._section.api_base)
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
        self._bot_id = int((me or {}).get("id") or 0)
        with contextlib.suppress(Refused, *Unreachable):
            await self._api.call("setMyCommands", {"commands": MENU})
        return True

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        await self._api.close()
        if self._sdk is not None:
            if self._sdk.done() and not self._sdk.cancelled() and self._sdk.exception() is None:
                await self._sdk.result().close()
            else:  # still importing (its thread finishes on its own) or failed (logged where awaited)
                self._sdk.cancel()
            self._sdk = None
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
            except (Refused, *Unreachable):
                continue
        while True:
            try:
                await self._api.call("deleteWebhook", {"drop_pending_updates": False})
                break
            except Refused as exc:
                if exc.status == 401:
                    log.error("telegram.stopped", reason="channels.telegram.token was refused (401 Unauthorized)")
                    return
                log.warning("telegram.delete_webhook_failed", error=f"{exc.status} {exc.description}")
            except Unreachable as exc:
                log.warning("telegram.delete_webhook_failed", error=type(exc).__name__)
            await self._clock.sleep(2.0)
        await self._poll()

    async def _poll(self) -> None:
        offset: int | None = None
        conflicts, failures = 0, 0
        timeout = self._section.poll_timeout_s
        while True:
            params: dict[str, Any] = {"timeout": timeout, "allowed_updates": ALLOWED_UPDATES}
            if offset is not None:
                params["offset"] = offset
            try:
                result = await self._api.call("getUpdates", params, timeout=timeout + 10)
                if not isinstance(result, list):
                    raise Refused("getUpdates", 200, "the result is not a list of updates")
            except Refused as exc:
                if exc.status == 401:
                    log.error("telegram.stopped", reason="channels.telegram.token was refused (401 Unauthorized)")
                    return
                if exc.status == 409:
                    conflicts += 1
                    if conflicts == CONFLICTS_BEFORE_WARNING:
                        log.error("telegram.conflict", hint="another instance may be polling the same bot token")
                    await self._clock.sleep(min(2.0 ** min(conflicts, 5), POLL_BACKOFF_MAX_S))
                    continue
                failures += 1
                log.warning("telegram.poll_failed", error=f"{exc.status} {exc.description}", attempt=failures)
                await self._clock.sleep(max(exc.retry_after or 0.0, min(2.0 ** min(failures, 5), POLL_BACKOFF_MAX_S)))
                continue
            except Unreachable as exc:
                failures += 1
                log.warning("telegram.poll_failed", error=type(exc).__name__, attempt=failures)
                await self._clock.sleep(min(2.0 ** min(failures, 5), POLL_BACKOFF_MAX_S))
                continue
            conflicts = failures = 0
            self._received()
            offset = await self._take(result, offset)

    async def _take(self, items: list[Any], offset: int | None) -> int | None:
        """Handle one ``getUpdates`` answer in ``update_id`` order; the next offset to ask for.
        An update is confirmed once handled; one that cannot be stored is not, and the rest of
        the batch waits with it for the next poll."""
        numbered = [(item["update_id"], item) for item in items
                    if isinstance(item, dict) and isinstance(item.get("update_id"), int)]
        if len(numbered) < len(items):
            log.warning("telegram.update_unreadable", update_id=None, count=len(items) - len(numbered))
        if not numbered:
            return offset
        bot = await self._bot()
        for update_id, item in sorted(numbered, key=lambda pair: pair[0]):
            if update_id < (offset or 0):
                continue
            try:
                update = bot.read_update(item)
            except ValueError:
                log.warning("telegram.update_unreadable", update_id=update_id)
                offset = update_id + 1
                continue
            try:
                await self._handle(update)
            except StoreError as exc:  # not confirmed: Telegram gives it to us again
                log.warning("telegram.store_failed", update_id=update_id, error=str(exc))
                await self._clock.sleep(2.0)
                return offset
            except Exception:  # a bug of ours on this update: logged, and the next ones still come
                log.exception("telegram.update_failed", update_id=update_id)
            offset = update_id + 1
        return offset

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
        try:
            await self._api.call("setWebhook", {"url": hook.url, "secret_token": hook.secret_token.get_secret_value(),
                                                "allowed_updates": ALLOWED_UPDATES})
        except Refused as exc:
            raise BruceError(f"Telegram refused the webhook (channels.telegram.webhook.url): {exc.description}") from None
        except Unreachable:
            raise BruceError("Telegram is unreachable; webhook mode cannot register its URL") from None

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
        if not hmac.compare_digest(given.encode(), secret.get_secret_value().encode()):
            log.warning("telegram.webhook_refused", remote=request.remote)
            return web.json_response({"ok": False, "error": "missing or wrong secret token"}, status=401)
        bot = await self._bot()
        try:
            update = bot.read_update(await request.json())
        except (ValueError, RecursionError):
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
                await (await self._bot()).send_plain(message.chat.id, UNSUPPORTED)
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
        # @name, not the start of a longer one (@name_2bot is another bot)
        found = re.search(rf"@{re.escape(self._username)}(?!\w)", text, re.IGNORECASE) if self._username else None
        if found:
            return (text[:found.start()] + text[found.end():]).strip() or None
        return (text.strip() or None) if to_us else None

    async def _local_command(self, message: Message, text: str, sender: str, private: bool) -> bool:
        """/start, /help and /id are answered here; /approve, /deny, /new, /jobs and everything else go on.
        In a group, a sender outside ``allowed_users`` gets no answer to them; in a private chat,
        /id answers anyone (that is how a new user learns their id), a stranger once a minute."""
        word = text.strip().split(maxsplit=1)[0].lower() if text.strip() else ""
        word = word.split("@", 1)[0]
        if word not in ("/id", "/start", "/help"):
            return False
        allowed = sender in self._section.allowed_users
        if not private and not allowed:
            log.info("telegram.group_command_ignored", chat=message.chat.id, command=word)
            return True
        if word == "/id":
            if allowed or self._id_told.first_in_a_while(sender, self._clock.monotonic()):
                await (await self._bot()).send_plain(message.chat.id, f"Your Telegram user id is {sender}.")
            return True
        if allowed:
            await (await self._bot()).send_plain(message.chat.id, help_text(self._assistant, about=ABOUT, platform=PLATFORM))
            return True
        return False  # /start or /help from a stranger goes on to admission (pairing explains itself)

    async def _on_button(self, query: CallbackQuery) -> None:
        if self._inbound is None:
            return
        bot = await self._bot()
        verb, _, rid = (query.data or "").partition(":")
        message = query.message
        if verb not in ("approve", "deny") or message is None or not hasattr(message, "text"):
            await bot.answer_button(query, "This button is not one of mine.", alert=True)
            return
        report = await self._inbound.decide(f"{self.name}:{message.chat.id}", str(query.from_user.id), rid,
                                            verb == "approve")
        await bot.answer_button(query, report.text, alert=not report.accepted)
        if report.accepted:
            await bot.show_outcome(message, report.text)  # type: ignore[arg-type]  # (a Message: it has text)

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
