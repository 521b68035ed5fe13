"""What Discord users do besides writing: slash commands and presses of the approval buttons.

Slash commands come from the command table (``bruce.turns.commands``): those the core answers
(``/new``, ``/jobs``, ``/usage``) are passed on as their text, in the conversation's order;
``/help`` and ``/id`` are answered here, ephemerally. A press is decided by ``inbound.decide``
from the button's custom id alone (someone else than the requester is refused, ephemerally); the
request is then edited to show the outcome, its buttons disabled. At a request's expiry its
buttons are disabled too (``watch_expiry``).

Where the bot listens is also decided here, for messages and commands alike: a direct message
always (``is_dm``), in a guild only in a channel of ``allowed_channels`` (``allowed_here``).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import discord
import structlog
from discord import app_commands

from bruce.channel import ConfirmationRequest, DecisionReport, Inbound, IncomingMessage
from bruce.clock import Clock
from bruce.config.schema import DiscordConfig
from bruce.errors import StoreError
from bruce.turns.commands import COMMANDS, CommandSpec, help_text
from bruce.values import ConversationId, DecisionOutcome
from channels.discord.format import MESSAGE_LIMIT
from channels.discord.gateway import SEND_ERRORS, GatewayClient
from channels.discord.ui import NO_MENTIONS, approval_view, decided_text, parse_custom_id

__all__ = ["Interactions", "allowed_here", "is_dm", "ABOUT", "ANSWERED_HERE"]

log = structlog.get_logger(__name__)

PLATFORM = "Discord"
ABOUT = ("Write to me in a direct message, or mention me in a channel I'm allowed in. When an action needs your "
         "approval I ask first, with buttons. You can send me voice messages, photos and files (PDF, text) too; "
         "documents I save arrive as files.")
ANSWERED_HERE = ("help", "id")  # the slash commands this channel answers itself (ephemerally), after the rest
NOT_HERE = "I don't answer in this channel."


class Interactions:
    """The Discord channel's slash commands, button presses and approval expiries."""

    name = "discord"

    def __init__(self, section: DiscordConfig, *, clock: Clock, assistant_name: str, order: asyncio.Lock) -> None:
        self._section = section
        self._clock = clock
        self._assistant = assistant_name
        self._order = order  # the channel's: commands are handed over in line with messages
        self._inbound: Inbound | None = None
        self._expiries: dict[str, asyncio.Task[None]] = {}

    def attach(self, inbound: Inbound | None) -> None:
        """Where commands and presses go (None once the channel stops)."""
        self._inbound = inbound

    async def stop(self) -> None:
        for task in self._expiries.values():
            task.cancel()
        await asyncio.gather(*self._expiries.values(), return_exceptions=True)
        self._expiries.clear()

    # button presses ----------------------------------------------------------------------

    async def on_interaction(self, interaction: discord.Interaction) -> None:
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
                                                        allowed_mentions=NO_MENTIONS, suppress_embeds=True)
                return
            await interaction.response.send_message(report.text[:MESSAGE_LIMIT], ephemeral=True,
                                                    allowed_mentions=NO_MENTIONS, suppress_embeds=True)
            if finished and message is not None:
                self._cancel_expiry(rid)
                await message.edit(view=approval_view(rid, step_up=step_up, disabled=True))
        except SEND_ERRORS as exc:
            log.warning("discord.press_not_answered", confirmation=rid, error=type(exc).__name__)

    def watch_expiry(self, message: discord.Message, request: ConfirmationRequest) -> None:
        """Disable the buttons of a request just sent once it expires."""
        self._expiries[request.id] = asyncio.create_task(self._expire(message, request), name="discord.expiry")

    async def _expire(self, message: discord.Message, request: ConfirmationRequest) -> None:
        """At expiry the request's buttons are disabled: decided (perhaps typed, or on the machine) or
        expired, it takes no press any more. (After a restart, a press is answered as expired.)"""
        await asyncio.sleep(max((request.expires_at - self._clock.now()).total_seconds(), 0.0))
        self._expiries.pop(request.id, None)
        with contextlib.suppress(*SEND_ERRORS):
            await message.edit(view=approval_view(request.id, step_up=request.step_up, disabled=True))

    def _cancel_expiry(self, rid: str) -> None:
        task = self._expiries.pop(rid, None)
        if task is not None:
            task.cancel()

    # slash commands ----------------------------------------------------------------------

    def register(self, tree: app_commands.CommandTree[GatewayClient]) -> None:
        """The menu commands of the table (``bruce.turns.commands``): those the core answers are
        passed on as their text; ``/help`` and ``/id`` are answered here."""
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

    def _pass_on(self, tree: app_commands.CommandTree[GatewayClient], spec: CommandSpec) -> None:
        @tree.command(name=spec.name, description=spec.describe(PLATFORM))
        async def passed_on(interaction: discord.Interaction) -> None:
            await self._slash_to_core(interaction, spec.usage, spec.ack)

    async def _ephemeral(self, interaction: discord.Interaction, text: str) -> None:
        with contextlib.suppress(*SEND_ERRORS):
            await interaction.response.send_message(text, ephemeral=True, allowed_mentions=NO_MENTIONS,
                                                    suppress_embeds=True)

    async def _slash_to_core(self, interaction: discord.Interaction, text: str, ack: str) -> None:
        """``/new``, ``/jobs``, ``/usage`` go to the core as that text (it answers in the conversation)."""
        channel = interaction.channel
        private = channel is None or is_dm(channel)
        if self._inbound is None or interaction.channel_id is None or not private and not allowed_here(
                channel, self._section):
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


def allowed_here(channel: Any, section: DiscordConfig) -> bool:
    """Whether a guild channel (a thread counts by its parent) is one of ``allowed_channels``."""
    ids = {str(getattr(channel, "id", "")), str(getattr(channel, "parent_id", None) or "")}
    return bool(ids & set(section.allowed_channels))


def is_dm(channel: Any) -> bool:
    if isinstance(channel, discord.DMChannel):
        return True
    return isinstance(channel, discord.PartialMessageable) and channel.guild_id is None and (
        channel.type in (None, discord.ChannelType.private))
