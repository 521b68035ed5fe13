"""channels.discord.interactions: where the bot listens, and the slash commands it registers
from the command table. Presses and commands end to end are in ``test_channel.py``."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import discord

from bruce.turns.commands import COMMANDS
from channels.discord.interactions import ANSWERED_HERE, Interactions, allowed_here, is_dm

ALLOWED = SimpleNamespace(allowed_channels=["500"], allowed_users=["111"])


def test_a_guild_channel_or_its_threads_must_be_allowed():
    assert allowed_here(SimpleNamespace(id=500), ALLOWED)
    assert allowed_here(SimpleNamespace(id=501, parent_id=500), ALLOWED)  # a thread counts by its parent
    assert not allowed_here(SimpleNamespace(id=501, parent_id=None), ALLOWED)
    assert not allowed_here(SimpleNamespace(), ALLOWED)


def test_only_a_private_channel_is_a_direct_message():
    state = SimpleNamespace(self_id=1)
    assert is_dm(discord.PartialMessageable(state=state, id=9, guild_id=None, type=discord.ChannelType.private))
    assert is_dm(discord.PartialMessageable(state=state, id=9, guild_id=None))
    assert not is_dm(discord.PartialMessageable(state=state, id=9, guild_id=7, type=discord.ChannelType.text))
    assert not is_dm(SimpleNamespace(id=9))


async def test_the_menu_commands_are_registered_from_the_table():
    client = discord.Client(intents=discord.Intents.none())
    tree = discord.app_commands.CommandTree(client)
    interactions = Interactions(ALLOWED, clock=None, assistant_name="Bruce", order=asyncio.Lock())
    interactions.register(tree)
    assert sorted(c.name for c in tree.get_commands()) == sorted(s.name for s in COMMANDS if s.in_menu)
    assert set(ANSWERED_HERE) <= {c.name for c in tree.get_commands()}
    await client.close()
