"""The aiogram half of the Telegram channel: reading updates and sending.

``channels.telegram.channel`` imports this module in a thread once the channel has started, because
``import aiogram`` takes CPU (about a second with its types deferred, ``deferred_types``;
seconds without): receiving starts at once over raw Bot API calls, and the first batch of updates
waits for this module, not the other way round. Nothing outside ``channels/telegram/``
imports it, and ``bruce`` never does.

Every aiogram failure is translated here: a send raises ``ChannelSendError`` (the outbox's
language), and the calls whose failure does not matter (typing, a button's alert, the
outcome edit) swallow it.
"""

from __future__ import annotations

import contextlib
import html
from pathlib import Path
from typing import Any, Literal

import structlog
from aiogram import Bot
from aiogram.client.default import DefaultBotProperties
from aiogram.client.session.aiohttp import AiohttpSession
from aiogram.client.telegram import PRODUCTION, TelegramAPIServer
from aiogram.exceptions import (
    TelegramAPIError,
    TelegramBadRequest,
    TelegramForbiddenError,
    TelegramNetworkError,
    TelegramNotFound,
    TelegramRetryAfter,
    TelegramServerError,
)
from aiogram.methods import Response, SendMessageDraft, TelegramMethod
from aiogram.types import CallbackQuery, FSInputFile, InlineKeyboardButton, InlineKeyboardMarkup, Message, Update

from bruce.errors import ChannelSendError
from channels.telegram.deferred_types import METHODS_USED, prebuild
from channels.telegram.format import plain_text

__all__ = ["TelegramBot", "translate_error", "DRAFT_MAX_CHARS", "DraftOutcome"]

log = structlog.get_logger(__name__)

prebuild()  # the types and calls Bruce uses, built here in the import thread, not on the first update


def _response_types(methods: tuple[str, ...]) -> dict[Any, Any]:
    """``Response[T]`` for each return type of ``methods`` (``aiogram.methods`` names), built now."""
    import aiogram.methods

    returning = {getattr(aiogram.methods, name).__returning__ for name in methods}
    return {kind: Response[kind] for kind in returning}  # type: ignore[valid-type]


_RESPONSES = _response_types(METHODS_USED)  # kept for good (see ``_Session``), built in the import thread

DRAFT_MAX_CHARS = 4000
DraftOutcome = Literal["shown", "refused", "unsupported"]


def translate_error(exc: TelegramAPIError) -> ChannelSendError:
    """A Telegram failure as the outbox understands it."""
    if isinstance(exc, TelegramRetryAfter):
        return ChannelSendError(f"rate limited by Telegram: {exc.message}", retryable=True, retry_after=exc.retry_after)
    if isinstance(exc, (TelegramNetworkError, TelegramServerError)):
        return ChannelSendError(f"Telegram unreachable: {exc.message}", retryable=True)
    return ChannelSendError(f"Telegram refused it: {exc.message}", retryable=False)


def _is_parse_error(exc: TelegramBadRequest) -> bool:
    return "can't parse entities" in exc.message.lower() or "can't find end of" in exc.message.lower()


class _Session(AiohttpSession):
    """aiogram's session, keeping every ``Response[T]`` it parses with.

    aiogram builds ``Response[method.__returning__]`` for each answer, and pydantic keeps
    parametrized generics only in a weak cache: once the garbage collector has dropped one,
    the next request builds its schema again (a few ms of CPU each time; the Telegram
    benchmark's burst went from 35 to 23 ms of CPU per message with them kept). There are
    a handful of return types, so keeping them costs nothing. Those of the calls Bruce makes
    are built when this module is imported (in the import thread), not by the first reply.
    """

    def check_response(self, bot: Bot, method: TelegramMethod[Any], status_code: int, content: str) -> Response[Any]:
        returning = method.__returning__
        if returning not in _RESPONSES:
            _RESPONSES[returning] = Response[returning]  # type: ignore[valid-type]
        return super().check_response(bot, method, status_code, content)


class TelegramBot:
    """One bot token's aiogram ``Bot``, with the operations the channel needs."""

    def __init__(self, token: str, api_base: str | None, *, send_timeout_s: float = 60.0) -> None:
        api = TelegramAPIServer.from_base(api_base) if api_base else PRODUCTION
        # no link previews: Telegram's servers would fetch the first URL of a message, so a URL a
        # steered model wrote into its answer (with data in it) would be requested without a click
        self._bot = Bot(token, session=_Session(api=api, timeout=send_timeout_s), default=DefaultBotProperties(link_preview_is_disabled=True))

    def read_update(self, item: Any) -> Update:
        """One update of a ``getUpdates`` answer or a webhook call; ValueError when it does not parse."""
        return Update.model_validate(item, context={"bot": self._bot})

    async def close(self) -> None:
        await self._bot.session.close()

    # sends whose failure the outbox handles -------------------------------------------------

    async def send_html(self, chat_id: int, piece: str, buttons: list[tuple[str, str]] | None = None) -> None:
        """One message of at most 4096 characters of Telegram HTML; plain text if Telegram
        cannot parse it. ``buttons``: (label, callback data) pairs on one row."""
        markup = None
        if buttons:
            markup = InlineKeyboardMarkup(inline_keyboard=[
                [InlineKeyboardButton(text=label, callback_data=data) for label, data in buttons]])
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

    async def send_document(self, chat_id: int, path: Path, caption: str | None) -> None:
        try:
            await self._bot.send_document(chat_id, FSInputFile(path), caption=(caption or "")[:1024] or None)
        except TelegramAPIError as exc:
            raise translate_error(exc) from None
        except TimeoutError:
            raise ChannelSendError("Telegram did not answer in time", retryable=True) from None

    # best-effort calls --------------------------------------------------------------------

    async def send_plain(self, chat_id: int, text: str) -> None:
        """A short notice (``/id``, ``/help``); a failure is not retried."""
        with contextlib.suppress(TelegramAPIError, TimeoutError):
            await self._bot.send_message(chat_id, text)

    async def typing(self, chat_id: int) -> None:
        with contextlib.suppress(TelegramAPIError, TimeoutError):
            await self._bot.send_chat_action(chat_id, "typing")

    async def draft(self, chat_id: int, draft_id: int, text: str) -> DraftOutcome:
        """One draft update: ``shown``; ``refused`` when this chat's draft was refused (a user
        who blocked the bot, a chat it cannot draft in); ``unsupported`` when the server does not
        know the method (404), which holds for every chat."""
        try:
            await self._bot(SendMessageDraft(chat_id=chat_id, draft_id=draft_id, text=text[:DRAFT_MAX_CHARS]))
        except TelegramNotFound as exc:
            log.info("telegram.drafts_unsupported", error=exc.message)
            return "unsupported"
        except (TelegramBadRequest, TelegramForbiddenError) as exc:
            log.info("telegram.draft_refused", chat=chat_id, error=exc.message)
            return "refused"
        except (TelegramAPIError, TimeoutError):
            return "shown"  # a hiccup: the next one may go through
        return "shown"

    async def answer_button(self, query: CallbackQuery, text: str, *, alert: bool) -> None:
        with contextlib.suppress(TelegramAPIError, TimeoutError):
            await query.answer(text[:200], show_alert=alert)

    async def show_outcome(self, message: Message, outcome: str) -> None:
        """The request message, edited to end with the decision and without its buttons. Its
        formatting is kept: Telegram hands the message back as text and entities, which
        ``html_text`` turns into the HTML it was sent as."""
        with contextlib.suppress(TelegramAPIError, TimeoutError):
            await self._bot.edit_message_text(
                text=f"{message.html_text if message.text else ''}\n\n<b>{html.escape(outcome)}</b>"[:4096],
                chat_id=message.chat.id, message_id=message.message_id, parse_mode="HTML", reply_markup=None)
