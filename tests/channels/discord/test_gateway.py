"""channels.discord.gateway: discord.py's failures as the outbox and the operator read them, and
the gateway URL a configured ``gateway_url`` sends discord.py to."""

from __future__ import annotations

import aiohttp
import discord
import yarl

from bruce.errors import ChannelSendError, ConfigError
from channels.discord.gateway import INTENTS, _redirect, start_error, translate_error


class Response:
    def __init__(self, status, headers=None):
        self.status, self.reason, self.headers = status, "x", headers or {}


def test_errors_are_translated_for_the_outbox():
    limited = translate_error(discord.HTTPException(Response(429, {"Retry-After": "7"}), {"message": "slow"}))
    assert (limited.retryable, limited.retry_after) == (True, 7.0)
    assert translate_error(discord.RateLimited(40.0)).retry_after == 40.0
    assert translate_error(discord.DiscordServerError(Response(503), "down")).retryable
    assert not translate_error(discord.Forbidden(Response(403), {"message": "Missing Access", "code": 50001})).retryable
    assert not translate_error(discord.NotFound(Response(404), {"message": "Unknown Channel", "code": 10003})).retryable
    assert translate_error(TimeoutError()).retryable
    assert isinstance(translate_error(aiohttp.ClientConnectionError()), ChannelSendError)
    assert translate_error(aiohttp.ClientConnectionError()).retryable


def test_a_start_that_failed_names_what_to_check():
    refused = start_error(discord.LoginFailure("bad"), 30)
    assert isinstance(refused, ConfigError) and "channels.discord.token" in str(refused)
    unreachable = start_error(aiohttp.ClientConnectionError(), 30)
    assert not isinstance(unreachable, ConfigError) and "channels.discord.api_base" in str(unreachable)
    assert "within 2.5 s (channels.discord.ready_timeout_s)" in str(start_error(None, 2.5))


def test_the_gateway_url_keeps_discord_pys_query():
    url = _redirect("wss://gateway.discord.gg/?v=10&encoding=json&compress=zlib-stream", yarl.URL("ws://127.0.0.1:9/gw"))
    assert url == "ws://127.0.0.1:9/gw?v=10&encoding=json&compress=zlib-stream"


def test_the_intents_include_message_content_and_nothing_more_privileged():
    assert INTENTS.message_content and INTENTS.guilds and INTENTS.dm_messages and INTENTS.guild_messages
    assert not INTENTS.members and not INTENTS.presences
