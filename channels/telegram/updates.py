"""One Telegram update, handled: a message handed to the core, a button press decided.

Updates are handled one at a time, in the order they are given (``update_id`` order, from the
poller or the webhook). Access: ``deliver`` applies the allow-list (and pairing). In groups
(``groups: true``), only messages that mention the bot or reply to it are passed on, without the
mention. ``/id`` answers anyone in a private chat (a stranger once a minute); in a group, a
sender outside ``allowed_users`` gets no answer to ``/id``, ``/start`` or ``/help``. A press of
an approval button calls ``decide``; the request message is then edited to show the outcome,
without buttons. Edits are ignored; anything but text gets "not supported yet" (allowed senders
only).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import structlog

from bruce.channel import Inbound, IncomingMessage
from bruce.clock import Clock
from bruce.config.schema import TelegramConfig
from bruce.limits import Quiet
from bruce.turns.commands import help_text
from bruce.values import ConversationId

if TYPE_CHECKING:
    from aiogram.types import CallbackQuery, Message, Update

    from channels.telegram.bot import TelegramBot

__all__ = ["UpdateHandler", "ABOUT", "PLATFORM", "UNSUPPORTED"]

log = structlog.get_logger(__name__)

ID_QUIET_S = 60.0  # a sender outside the allow-list gets one /id answer a minute
PLATFORM = "Telegram"
UNSUPPORTED = "I can only read text messages for now; photos, voice messages, stickers and files are not supported yet."
ABOUT = ("Write to me in plain text. When an action needs your approval I ask first, with buttons. Documents I "
         "save arrive as files.")


class UpdateHandler:
    """The Telegram channel's reading side: each update it is given, in order."""

    name = "telegram"

    def __init__(self, section: TelegramConfig, *, clock: Clock, assistant_name: str,
                 bot: Callable[[], Awaitable[TelegramBot]]) -> None:
        self._section = section
        self._clock = clock
        self._assistant = assistant_name
        self._bot = bot  # aiogram's side of the channel, once its import has finished
        self._inbound: Inbound | None = None
        self._username = ""
        self._bot_id = 0
        self._order = asyncio.Lock()  # updates are handled one at a time, in order
        self._id_told = Quiet(ID_QUIET_S)  # strangers answered /id lately

    def attach(self, inbound: Inbound | None) -> None:
        """Where messages and presses go (None once the channel stops)."""
        self._inbound = inbound

    def identify(self, username: str, bot_id: int) -> None:
        """The bot's own name and id (from ``getMe``), to recognise a mention or a reply to it."""
        self._username = username
        self._bot_id = bot_id

    async def handle(self, update: Update) -> None:
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
        report = await self._inbound.decide(ConversationId(self.name, str(message.chat.id)), str(query.from_user.id), rid,
                                            verb == "approve")
        await bot.answer_button(query, report.text, alert=not report.accepted)
        if report.accepted:
            await bot.show_outcome(message, report.text)  # type: ignore[arg-type]  # (a Message: it has text)
