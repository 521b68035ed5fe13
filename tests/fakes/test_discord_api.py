"""Prove FakeDiscord works end to end through a real discord.py Client (REST and gateway)."""

from __future__ import annotations

import asyncio
import io
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp
import discord
import pytest
import yarl
from discord import app_commands

from tests.fakes.discord_api import IS_VOICE_MESSAGE, FakeDiscord, patch_discord_py, voice_attachment

USER = 4242


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as server:
        with patch_discord_py(server):
            yield server


class Harness:
    """A real discord.Client started against the fake, its events in queues."""

    def __init__(self, fake: FakeDiscord, *, message_content: bool = True, tree: bool = False) -> None:
        intents = discord.Intents.default()
        intents.message_content = message_content
        self.fake = fake
        self.client = discord.Client(intents=intents, guild_ready_timeout=0.05)
        self.tree = app_commands.CommandTree(self.client) if tree else None
        self.ready = asyncio.Event()
        self.messages: asyncio.Queue[discord.Message] = asyncio.Queue()
        self.interactions: asyncio.Queue[discord.Interaction] = asyncio.Queue()
        self.on_interaction: Callable[[discord.Interaction], Awaitable[None]] | None = None
        self.task: asyncio.Task[None] | None = None
        self.client.event(self.on_ready)
        self.client.event(self.on_message)
        self.client.event(self._interaction)

    async def on_ready(self) -> None:
        self.ready.set()

    async def on_message(self, message: discord.Message) -> None:
        await self.messages.put(message)

    async def _interaction(self, interaction: discord.Interaction) -> None:
        if self.on_interaction is not None:
            await self.on_interaction(interaction)
        await self.interactions.put(interaction)

    _interaction.__name__ = "on_interaction"

    async def start(self) -> None:
        self.task = asyncio.create_task(self.client.start(self.fake.token))
        ready = asyncio.ensure_future(self.ready.wait())
        done, _ = await asyncio.wait([ready, self.task], timeout=10, return_when=asyncio.FIRST_COMPLETED)
        if ready not in done:
            ready.cancel()
            if self.task in done:
                self.task.result()
            raise AssertionError("the client did not become ready")

    async def close(self) -> None:
        await self.client.close()
        if self.task is not None:
            await asyncio.wait_for(self.task, 10)

    async def next_message(self) -> discord.Message:
        return await asyncio.wait_for(self.messages.get(), 5)

    async def next_interaction(self) -> discord.Interaction:
        return await asyncio.wait_for(self.interactions.get(), 5)

    def guild_channel(self) -> discord.TextChannel:
        channel = self.client.get_channel(self.fake.guild_channel_id)
        assert isinstance(channel, discord.TextChannel)
        return channel


@pytest.fixture
async def bot(fake: FakeDiscord) -> AsyncIterator[Harness]:
    harness = Harness(fake)
    await harness.start()
    try:
        yield harness
    finally:
        await harness.close()


async def dm_channel(fake: FakeDiscord, bot: Harness) -> discord.DMChannel:
    fake.dm(USER, "hi")
    channel = (await bot.next_message()).channel
    assert isinstance(channel, discord.DMChannel)
    return channel


async def test_login_identify_and_ready(fake: FakeDiscord, bot: Harness) -> None:
    client = bot.client
    assert client.user is not None and client.user.id == fake.bot_id and client.user.name == "bruce"
    assert client.application_id == fake.application_id
    assert [c.path for c in fake.calls[:2]] == ["/users/@me", "/oauth2/applications/@me"]
    assert fake.calls[0].headers["Authorization"] == f"Bot {fake.token}"
    identify = next(e for e in fake.gateway_events if e["op"] == 2)
    assert identify["d"]["token"] == fake.token and fake.intents == client.intents.value
    assert fake.intents is not None and fake.intents & discord.Intents(message_content=True).value
    guild = client.get_guild(fake.guild_id)
    assert guild is not None and guild.me is not None and guild.me.id == fake.bot_id
    assert bot.guild_channel().name == "general"
    conn = fake.gateway_connections[0]
    assert conn.query["v"] == "10" and conn.query["encoding"] == "json"
    if discord.utils._ActiveDecompressionContext.COMPRESSION_TYPE == "zlib-stream":  # no zstandard installed
        assert conn.query["compress"] == "zlib-stream" and conn.compression == "zlib-stream"
    await fake.wait_gateway(1)  # discord.py heartbeats at once after HELLO; the fake acks
    assert any(item["op"] == 11 for item in conn.sent)


async def test_dm_reaches_on_message_with_a_dm_channel(fake: FakeDiscord, bot: Harness) -> None:
    payload = fake.dm(USER, "hello there", username="ana")
    message = await bot.next_message()
    assert isinstance(message.channel, discord.DMChannel) and message.guild is None
    assert message.channel.id == int(payload["channel_id"])
    assert (message.author.id, message.author.name, message.content) == (USER, "ana", "hello there")
    await message.channel.send("hi back")
    (call,) = await fake.wait_for("POST", rf"^/channels/{payload['channel_id']}/messages$")
    assert call.json["content"] == "hi back"
    dm = await message.author.create_dm()  # POST /users/@me/channels: the same DM channel
    assert dm.id == message.channel.id and fake.calls_to("POST", "^/users/@me/channels$")[0].json == {
        "recipient_id": USER}


async def test_guild_mention_puts_the_bot_in_mentions(fake: FakeDiscord, bot: Harness) -> None:
    fake.guild_message(USER, "are you there?", mention_bot=True)
    message = await bot.next_message()
    assert isinstance(message.channel, discord.TextChannel) and message.guild is not None
    assert message.channel.id == fake.guild_channel_id and message.guild.id == fake.guild_id
    assert bot.client.user in message.mentions and message.content == f"<@{fake.bot_id}> are you there?"
    assert isinstance(message.author, discord.Member) and message.author.id == USER
    fake.guild_message(USER, "just chatting")
    plain = await bot.next_message()
    assert bot.client.user not in plain.mentions and plain.content == "just chatting"


async def test_reply_to_the_bot(fake: FakeDiscord, bot: Harness) -> None:
    sent = await bot.guild_channel().send("question?")
    fake.guild_message(USER, "answer", reply_to_bot_message=sent.id)
    reply = await bot.next_message()
    assert reply.type is discord.MessageType.reply and reply.reference is not None
    assert reply.reference.message_id == sent.id and bot.client.user in reply.mentions
    answer = await reply.reply("thanks")
    call = fake.calls_to("POST", r"/messages$")[-1]
    assert call.json["message_reference"]["message_id"] == reply.id
    assert answer.reference is not None and answer.reference.message_id == reply.id


async def test_without_message_content_intent(fake: FakeDiscord) -> None:
    harness = Harness(fake, message_content=False)
    await harness.start()
    try:
        fake.guild_message(USER, "secret")
        assert (await harness.next_message()).content == ""
        fake.guild_message(USER, "to you", mention_bot=True)
        assert (await harness.next_message()).content.endswith("to you")
        fake.dm(USER, "private")
        assert (await harness.next_message()).content == "private"
    finally:
        await harness.close()


async def test_send_records_allowed_mentions(fake: FakeDiscord, bot: Harness) -> None:
    channel = bot.guild_channel()
    none = discord.AllowedMentions.none()
    first = await channel.send(f"hi <@{USER}>", allowed_mentions=none)
    second = await channel.send("again")
    call = fake.calls_to("POST", rf"^/channels/{channel.id}/messages$")[0]
    assert call.json["allowed_mentions"] == none.to_dict() and call.json["content"] == f"hi <@{USER}>"
    assert second.id > first.id and first.author == bot.client.user and first.channel.id == channel.id
    assert fake.messages[first.id]["content"] == f"hi <@{USER}>"
    assert fake.messages[first.id]["allowed_mentions"] == none.to_dict()


async def test_rate_limit_is_waited_and_retried(fake: FakeDiscord, bot: Harness) -> None:
    fake.fail_next("POST", r"/messages$", status=429, retry_after=0.3)
    started = time.monotonic()
    message = await bot.guild_channel().send("patience")
    assert time.monotonic() - started >= 0.3
    calls = fake.calls_to("POST", r"/messages$")
    assert len(calls) == 2 and calls[1].at - calls[0].at >= 0.3
    assert list(fake.messages) == [message.id]


async def test_forbidden_and_not_found(fake: FakeDiscord, bot: Harness) -> None:
    fake.fail_next("POST", r"/messages$", status=403)
    with pytest.raises(discord.Forbidden) as forbidden:
        await bot.guild_channel().send("nope")
    assert (forbidden.value.status, forbidden.value.code, forbidden.value.text) == (403, 50001, "Missing Access")
    assert fake.messages == {}
    with pytest.raises(discord.NotFound) as missing:
        await bot.client.get_partial_messageable(123).send("nowhere")
    assert missing.value.code == 10003


async def test_bad_messages_are_refused(fake: FakeDiscord, bot: Harness) -> None:
    with pytest.raises(discord.HTTPException) as too_long:
        await bot.guild_channel().send("x" * 2001)
    assert too_long.value.status == 400 and too_long.value.code == 50035
    with pytest.raises(discord.HTTPException) as empty:
        await bot.guild_channel().send("")
    assert empty.value.code == 50006
    fake.dm(USER, "hi")
    channel = (await bot.next_message()).channel
    fake.dm_closed.add(USER)
    with pytest.raises(discord.Forbidden) as closed:
        await channel.send("hello?")
    assert closed.value.code == 50007


async def test_edit_and_delete(fake: FakeDiscord, bot: Harness) -> None:
    message = await bot.guild_channel().send("draft")
    edited = await message.edit(content="final")
    assert edited.content == "final" and edited.edited_at is not None
    assert fake.messages[message.id]["content"] == "final"
    (patch,) = fake.calls_to("PATCH", rf"/messages/{message.id}$")
    assert patch.json["content"] == "final"
    await message.delete()
    assert message.id not in fake.messages and message.id in fake.deleted
    assert len(fake.calls_to("DELETE", rf"/messages/{message.id}$")) == 1
    with pytest.raises(discord.NotFound) as gone:
        await message.edit(content="again")
    assert gone.value.code == 10008


async def test_typing(fake: FakeDiscord, bot: Harness) -> None:
    channel = bot.guild_channel()
    async with channel.typing():
        await fake.wait_for("POST", "/typing$")
    assert fake.typing == [channel.id]


async def test_files_are_uploaded_and_attachments_readable(fake: FakeDiscord, bot: Harness) -> None:
    message = await bot.guild_channel().send("report", file=discord.File(io.BytesIO(b"hello file"), "r.txt"))
    call = fake.calls_to("POST", r"/messages$")[-1]
    assert call.json["content"] == "report"
    assert [(f["filename"], f["size"]) for f in call.files] == [("r.txt", 10)]
    assert [(a.filename, a.size) for a in message.attachments] == [("r.txt", 10)]
    assert await message.attachments[0].read() == b"hello file"
    fake.dm(USER, "look", attachments=[{"filename": "p.png", "content_type": "image/png", "data": b"\x89PNG"}])
    incoming = await bot.next_message()
    (attachment,) = incoming.attachments
    assert (attachment.filename, attachment.size, attachment.content_type) == ("p.png", 4, "image/png")
    assert await attachment.read() == b"\x89PNG"


async def test_press_button_and_ephemeral_response(fake: FakeDiscord, bot: Harness) -> None:
    channel = await dm_channel(fake, bot)
    view = discord.ui.View()
    view.add_item(discord.ui.Button(label="Approve", custom_id="approve:1"))
    message = await channel.send("Approve?", view=view)
    posted = fake.calls_to("POST", r"/messages$")[-1].json
    assert posted["components"][0]["components"][0]["custom_id"] == "approve:1"
    results: list[Any] = []

    async def respond(interaction: discord.Interaction) -> None:
        results.append(await interaction.response.send_message("done", ephemeral=True))

    bot.on_interaction = respond
    interaction_id = fake.press_button(USER, "approve:1", message.id, channel_id=channel.id)
    interaction = await bot.next_interaction()
    assert interaction.id == int(interaction_id) and interaction.type is discord.InteractionType.component
    assert interaction.data is not None and interaction.data["custom_id"] == "approve:1"
    assert interaction.user.id == USER and interaction.message is not None and interaction.message.id == message.id
    assert isinstance(interaction.channel, discord.DMChannel) and interaction.channel.id == channel.id
    (call,) = fake.interaction_responses
    assert call.path == f"/interactions/{interaction_id}/{interaction.token}/callback"
    assert call.json["type"] == 4 and call.json["data"]["content"] == "done" and call.json["data"]["flags"] == 64
    assert results[0].is_ephemeral() and results[0].message_id is not None
    late = await interaction.followup.send("late", wait=True)
    assert fake.messages[late.id]["content"] == "late"
    async with aiohttp.ClientSession() as session, session.post(
            f"{fake.api_base}{call.path}", json={"type": 4, "data": {"content": "again"}}) as resp:
        assert resp.status == 400 and (await resp.json())["code"] == 40060


async def test_update_message_from_a_button(fake: FakeDiscord, bot: Harness) -> None:
    channel = bot.guild_channel()
    message = await channel.send("Approve?", view=discord.ui.View().add_item(
        discord.ui.Button(label="Yes", custom_id="yes")))

    async def respond(interaction: discord.Interaction) -> None:
        await interaction.response.edit_message(content="Approved", view=None)

    bot.on_interaction = respond
    fake.press_button(USER, "yes", message.id, in_dm=False)
    interaction = await bot.next_interaction()
    assert interaction.guild_id == fake.guild_id and isinstance(interaction.user, discord.Member)
    assert fake.messages[message.id]["content"] == "Approved" and fake.messages[message.id]["components"] == []
    assert fake.interaction_responses[0].json["type"] == 7


async def test_slash_command_through_a_command_tree(fake: FakeDiscord) -> None:
    harness = Harness(fake, tree=True)
    assert harness.tree is not None

    @harness.tree.command(name="status", description="Show the status")
    async def status(interaction: discord.Interaction) -> None:
        await interaction.response.defer(thinking=True)
        await interaction.edit_original_response(content="all good")
        await interaction.followup.send("and more")

    await harness.start()
    try:
        synced = await harness.tree.sync()
        assert [c.name for c in synced] == ["status"] and [c["name"] for c in fake.commands] == ["status"]
        assert fake.calls_to("PUT", rf"^/applications/{fake.application_id}/commands$")
        fake.slash_command(USER, "status")
        interaction = await harness.next_interaction()
        assert interaction.type is discord.InteractionType.application_command
        assert interaction.command is not None and interaction.command.name == "status"
        await fake.wait_for("POST", rf"^/webhooks/{fake.application_id}/")
        (call,) = fake.interaction_responses
        assert call.json["type"] == 5
        original = fake.calls_to("PATCH", "/messages/@original$")[0]
        assert original.json["content"] == "all good"
        contents = sorted(m["content"] for m in fake.messages.values())
        assert contents == ["all good", "and more"]
        assert all(not m["flags"] & 128 for m in fake.messages.values())  # no longer "thinking"
    finally:
        await harness.close()


async def test_command_registration_scopes_and_validation(fake: FakeDiscord, bot: Harness) -> None:
    http, app, guild = bot.client.http, fake.application_id, fake.guild_id
    made = await http.bulk_upsert_guild_commands(app, guild, [{"name": "ask", "description": "Ask", "type": 1}])
    assert made[0]["guild_id"] == str(guild) and fake.guild_commands[guild][0]["name"] == "ask"
    assert fake.commands == [] and await http.get_guild_commands(app, guild) == made
    with pytest.raises(discord.HTTPException) as bad:
        await http.bulk_upsert_global_commands(app, [{"name": "Bad Name", "description": "x"}])
    assert bad.value.code == 50035 and fake.commands == []
    await http.upsert_global_command(app, {"name": "ping", "description": "Ping"})
    assert [c["name"] for c in fake.commands] == ["ping"]


async def test_events_before_identify_wait_for_ready(fake: FakeDiscord) -> None:
    fake.dm(USER, "early bird")
    harness = Harness(fake)
    await harness.start()
    try:
        assert (await harness.next_message()).content == "early bird"
    finally:
        await harness.close()


async def test_revoked_token_fails_login(fake: FakeDiscord) -> None:
    fake.revoked = True
    client = discord.Client(intents=discord.Intents.default())
    try:
        with pytest.raises(discord.LoginFailure):
            await client.start(fake.token)
    finally:
        await client.close()
    assert fake.calls[0].path == "/users/@me" and fake.gateway_connections == []


async def test_revoking_a_live_session_closes_it_with_4004(fake: FakeDiscord) -> None:
    harness = Harness(fake)
    await harness.start()
    try:
        fake.revoked = True
        assert harness.task is not None
        with pytest.raises(discord.ConnectionClosed) as closed:
            await asyncio.wait_for(harness.task, 5)
        assert closed.value.code == 4004 and fake.gateway_connections[0].close_code == 4004
    finally:
        await harness.client.close()


async def test_resume_replays_missed_events(fake: FakeDiscord, bot: Harness) -> None:
    fake.drop_connections(4000)
    fake.dm(USER, "while you were away")
    message = await bot.next_message()
    assert message.content == "while you were away"
    resume = (await fake.wait_gateway(6))[0]
    first, second = fake.gateway_connections
    assert first.close_code == 4000 and first.session is not None and second.session is first.session
    assert resume["d"]["session_id"] == first.session.id and second.ready_sent
    assert [e["t"] for e in second.sent if e["op"] == 0] == ["MESSAGE_CREATE", "RESUMED"]


async def test_raw_http_answers(fake: FakeDiscord) -> None:
    auth = {"Authorization": f"Bot {fake.token}"}
    async with aiohttp.ClientSession() as session:
        async with session.get(f"{fake.api_base}/users/@me", headers=auth) as resp:
            assert resp.status == 200 and resp.headers["Content-Type"] == "application/json"
        async with session.get(f"{fake.api_base}/users/@me", headers={"Authorization": "Bot wrong"}) as resp:
            assert resp.status == 401 and await resp.json() == {"message": "401: Unauthorized", "code": 0}
        async with session.get(f"{fake.api_base}/no/such/thing", headers=auth) as resp:
            assert resp.status == 404 and resp.headers["Content-Type"] == "application/json"
        async with session.post(f"{fake.api_base}/channels/{fake.guild_channel_id}/typing", headers=auth) as resp:
            assert resp.status == 204 and "Content-Type" not in resp.headers
        async with session.get(f"{fake.api_base}/gateway/bot", headers=auth) as resp:
            body = await resp.json()
            assert body["url"] == fake.gateway_url and body["shards"] == 1
            assert body["session_start_limit"]["max_concurrency"] == 1
    assert [c.method for c in fake.calls] == ["GET", "GET", "GET", "POST", "GET"]


async def test_raw_gateway_text_frames_and_close_codes(fake: FakeDiscord) -> None:
    async with aiohttp.ClientSession() as session:
        async with session.ws_connect(f"{fake.gateway_url}?v=10&encoding=json") as ws:
            hello = await ws.receive()
            assert hello.type is aiohttp.WSMsgType.TEXT and hello.json()["op"] == 10
            assert hello.json()["d"]["heartbeat_interval"] == fake.heartbeat_interval_ms
            await ws.send_json({"op": 1, "d": None})
            assert (await ws.receive_json())["op"] == 11
            await ws.send_json({"op": 2, "d": {"token": fake.token, "intents": 513, "properties": {}}})
            ready, guild = await ws.receive_json(), await ws.receive_json()
            assert (ready["t"], ready["s"], guild["t"], guild["s"]) == ("READY", 1, "GUILD_CREATE", 2)
            assert ready["d"]["user"]["id"] == str(fake.bot_id) and ready["d"]["resume_gateway_url"] == fake.gateway_url
            assert guild["d"]["channels"][0]["id"] == str(fake.guild_channel_id)
            await fake.wait_ready()
            fake.dm(USER, "not for you")  # DIRECT_MESSAGES is not in intents 513
            fake.guild_message(USER, "for you")
            message = await ws.receive_json()
            assert (message["t"], message["s"], message["d"]["content"]) == ("MESSAGE_CREATE", 3, "")  # no content
            assert [d["t"] for d in fake.dropped] == ["MESSAGE_CREATE"]
        async with session.ws_connect(fake.gateway_url) as ws:
            await ws.receive()
            await ws.send_json({"op": 2, "d": {"token": "wrong", "intents": 0}})
            assert (await ws.receive()).type is aiohttp.WSMsgType.CLOSE and ws.close_code == 4004
        async with session.ws_connect(fake.gateway_url) as ws:
            await ws.receive()
            await ws.send_json({"op": 3, "d": {}})
            assert (await ws.receive()).type is aiohttp.WSMsgType.CLOSE and ws.close_code == 4003


async def test_close_leaves_nothing_running() -> None:
    fake = FakeDiscord()
    await fake.start()
    with patch_discord_py(fake):
        harness = Harness(fake)
        await harness.start()
        fake.dm(USER, "bye")
        await harness.next_message()
        await fake.close()  # the fake goes first: the websocket is closed, the server stopped
        await harness.client.close()
        assert harness.task is not None
        harness.task.cancel()  # the client may be backing off before reconnecting
        await asyncio.gather(harness.task, return_exceptions=True)
    await asyncio.sleep(0)
    others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task() and not t.done()]
    assert others == []
    assert fake.gateway_connections[0].close_code == 1001
    assert discord.http.Route.BASE == "https://discord.com/api/v10"


async def test_enforce_nonce_returns_the_earlier_message_instead_of_a_second(fake: FakeDiscord, bot: Harness) -> None:
    channel = bot.guild_channel()
    first = await channel.send("once", nonce="bruce-1-0")  # discord.py sends enforce_nonce: true with it
    again = await channel.send("once", nonce="bruce-1-0")
    other = await channel.send("once", nonce="bruce-2-0")
    assert again.id == first.id and other.id != first.id
    assert [m["content"] for m in fake.messages.values()] == ["once", "once"]
    assert fake.calls_to("POST", r"/messages$")[0].json["enforce_nonce"] is True


async def test_a_nonce_is_forgotten_after_the_window_and_is_at_most_25_characters(
        fake: FakeDiscord, bot: Harness) -> None:
    channel = bot.guild_channel()
    fake.nonce_window_s = 0.0
    first = await channel.send("late", nonce="n1")
    await asyncio.sleep(0.01)
    assert (await channel.send("late", nonce="n1")).id != first.id
    with pytest.raises(discord.HTTPException) as info:
        await channel.send("long", nonce="x" * 26)
    assert info.value.status == 400 and info.value.code == 50035


async def test_a_hung_create_stores_the_message_but_never_answers(fake: FakeDiscord, bot: Harness) -> None:
    channel = bot.guild_channel()
    fake.hang_next("POST", r"/messages$")
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(channel.send("lost answer", nonce="h1"), 0.5)
    assert [m["content"] for m in fake.messages.values()] == ["lost answer"]
    resent = await channel.send("lost answer", nonce="h1")  # the same nonce: the same message
    assert int(next(iter(fake.messages))) == resent.id and len(fake.messages) == 1


async def test_a_voice_message_stickers_and_embeds_arrive_as_discord_py_reads_them(fake: FakeDiscord, bot: Harness):
    fake.dm(USER, "", attachments=[voice_attachment(b"OggS voice", 3.5)], stickers=["wave"],
            embeds=[{"type": "rich", "title": "A card"}])
    message = await bot.next_message()
    (voice,) = message.attachments
    assert voice.is_voice_message() and voice.duration == 3.5 and voice.waveform
    assert message.flags.voice and message.flags.value & IS_VOICE_MESSAGE
    assert (voice.filename, voice.content_type, voice.size) == ("voice-message.ogg", "audio/ogg", 10)
    assert [s.name for s in message.stickers] == ["wave"] and message.stickers[0].url.endswith(".png")
    assert [e.title for e in message.embeds] == ["A card"]
    assert await voice.read() == b"OggS voice"
    url = yarl.URL(voice.url)
    assert url.host == "127.0.0.1" and {"ex", "is", "hm"} <= set(url.query)
    (download,) = fake.downloads
    assert "Authorization" not in download.headers and download.path.startswith("/attachments/")


async def test_broken_files_fail_as_asked(fake: FakeDiscord, bot: Harness):
    data = bytes(range(256)) * 40
    names = ("gone", "down", "cut", "hung", "chunked")
    fake.dm(USER, "", attachments=[{"filename": f"{name}.bin", "data": data} for name in names])
    gone, down, cut, hung, chunked = (await bot.next_message()).attachments
    fake.break_file(chunked.url, chunked=True)
    fake.break_file(gone.url, status=404)
    fake.break_file(down.url, status=500)
    fake.break_file(cut.url, cut_at=1000)
    fake.break_file(hung.url, hang=True)
    async with aiohttp.ClientSession() as session:
        async with session.get(gone.url) as response:
            assert response.status == 404 and "no longer available" in await response.text()
        async with session.get(down.url) as response:
            assert response.status == 500
        async with session.get(cut.url) as response:
            assert response.content_length == len(data)
            with pytest.raises(aiohttp.ClientPayloadError):
                await response.read()
        async with session.get(chunked.url) as response:
            assert response.content_length is None and await response.read() == data
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.3):
                await session.get(hung.url)
    assert len(fake.downloads) == 5
