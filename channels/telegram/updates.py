"""One Telegram update, handled: a message handed to the core, a button press decided.

Updates are handled one at a time, in the order they are given (``update_id`` order, from the
poller or the webhook). Access: ``deliver`` applies the allow-list (and pairing). In groups
(``groups: true``), only messages that mention the bot or reply to it are passed on, without the
mention. ``/id`` answers anyone in a private chat (a stranger once a minute); in a group, a
sender outside ``allowed_users`` gets no answer to ``/id``, ``/start`` or ``/help``. A press of
an approval button calls ``decide``; the request message is then edited to show the outcome,
without buttons. Edits are ignored.

Media (``media.py``): a voice note, photo, file, sticker, location... goes to the core like text,
as attachments with the caption as the text (in a group the caption must mention the bot, or the
message reply to it); the core decides what to read and answers the rest. An album (several
updates with one ``media_group_id``, given together by the poller or the webhook) is one message
with every item, under the first item's id, so a redelivery is recognised.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import structlog

from bruce.channel import Attachment, Inbound, IncomingMessage
from bruce.clock import Clock
from bruce.config.schema import TelegramConfig
from bruce.limits import Quiet
from bruce.turns.commands import help_text
from bruce.values import ConversationId
from channels.telegram.media import attachments_of

if TYPE_CHECKING:
    from aiogram.types import CallbackQuery, Message, Update

    from channels.telegram.bot import TelegramBot

__all__ = ["UpdateHandler", "ABOUT", "PLATFORM"]

log = structlog.get_logger(__name__)

ID_QUIET_S = 60.0  # a sender outside the allow-list gets one /id answer a minute
PLATFORM = "Telegram"
ABOUT = ("Write to me, or send a voice note, a photo or a document (PDF or text). When an action needs your "
         "approval I ask first, with buttons. Documents I save arrive as files.")


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
                await self._on_messages([update.message])
            elif update.callback_query is not None:
                await self._on_button(update.callback_query)
            elif update.edited_message is not None:
                log.info("telegram.edit_ignored", chat=update.edited_message.chat.id)

    async def handle_album(self, updates: Sequence[Update]) -> None:
        """The updates of one album (one ``media_group_id``, in order): one message for the core,
        with every item's attachment and the caption of the item that carries one."""
        messages = [update.message for update in updates if update.message is not None]
        async with self._order:
            if messages:
                await self._on_messages(messages)

    async def _on_messages(self, messages: list[Message]) -> None:
        first = messages[0]
        if self._inbound is None or first.from_user is None:
            return
        private = first.chat.type == "private"
        sender = str(first.from_user.id)
        attachments = _numbered([attachment for message in messages for attachment in attachments_of(message)])
        text = next((m.text or m.caption for m in messages if m.text or m.caption), None) or ""
        if not private:
            if not self._section.groups:
                return
            addressed = self._addressed_text(text, messages, media=bool(attachments))
            if addressed is None:
                return
            text = addressed
        if not text.strip() and not attachments:  # a service message (a member joined, a pin...)
            log.info("telegram.nothing_to_read", chat=first.chat.id)
            return
        if not attachments and await self._local_command(first, text, sender, private):
            return
        await self._inbound.deliver(IncomingMessage(
            channel=self.name, chat_id=str(first.chat.id), sender_id=sender, text=text,
            platform_message_id=f"{first.chat.id}:{first.message_id}", timestamp=first.date, private=private,
            sender_name=first.from_user.full_name or first.from_user.username, attachments=attachments))

    def _addressed_text(self, text: str, messages: list[Message], *, media: bool) -> str | None:
        """In a group: the text (or caption) if it mentions the bot or one of the messages replies
        to it (mention removed), else None. Text that was only the mention counts only with media."""
        to_us = any(m.reply_to_message is not None and m.reply_to_message.from_user is not None
                    and m.reply_to_message.from_user.id == self._bot_id for m in messages)
        # @name, not the start of a longer one (@name_2bot is another bot)
        found = re.search(rf"@{re.escape(self._username)}(?!\w)", text, re.IGNORECASE) if self._username else None
        if found:
            text = text[:found.start()] + text[found.end():]
        elif not to_us:
            return None
        return text.strip() or ("" if media else None)

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


def _numbered(attachments: list[Attachment]) -> tuple[Attachment, ...]:
    """An album's photos as ``photo-1.jpg``, ``photo-2.jpg``...; a lone photo stays ``photo.jpg``."""
    photos = [a for a in attachments if a.name == "photo.jpg"]
    if len(photos) < 2:
        return tuple(attachments)
    count = iter(range(1, len(photos) + 1))
    return tuple(replace(a, name=f"photo-{next(count)}.jpg") if a.name == "photo.jpg" else a for a in attachments)
