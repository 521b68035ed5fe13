"""Fake Discord for tests: the REST API and the gateway websocket as one aiohttp app on 127.0.0.1, for
driving a real ``discord.Client`` (discord.py 2.x) end to end::

    async with FakeDiscord() as fake, patch_discord_py(fake):
        client = discord.Client(intents=intents, guild_ready_timeout=0.05)
        task = asyncio.create_task(client.start(fake.token))
        await fake.wait_ready()
        fake.dm(42, "hello")                       # on_message(message) with a DMChannel
        ...
        await client.close(); await task

``patch_discord_py`` points ``discord.http.Route.BASE`` at ``api_base`` and
``discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY`` at ``gateway_url`` (a plain ``discord.Client`` never
asks ``GET /gateway``: it connects to ``DEFAULT_GATEWAY``), and restores both afterwards. Pass
``guild_ready_timeout`` (e.g. 0.05) to the client: discord.py waits that long after the last GUILD_CREATE
before ``on_ready`` (2 s by default).

REST (``/api/v10``, v9 accepted too). Every JSON answer has ``Content-Type: application/json`` exactly
(discord.py only decodes that) and ``Via: 1.1 google`` (discord.py takes a 429 without ``Via`` for a
Cloudflare ban). Behaviour kept from Discord:

* ``Authorization: Bot <token>`` on every bot endpoint; wrong or missing, or ``revoked``: 401
  ``{"message": "401: Unauthorized", "code": 0}``. Interaction callbacks and ``/webhooks/{app}/{token}``
  need no header, as on Discord.
* ``POST /channels/{id}/messages`` (JSON or multipart ``payload_json`` + ``files[n]``): 404 Unknown Channel
  (10003) for a channel the fake does not know, 400 "Cannot send an empty message" (50006), 400 Invalid
  Form Body (50035) for content over 2000 characters or a reply (``message_reference``) to an unknown
  message unless ``fail_if_not_exists`` is false, 403 "Cannot send messages to this user" (50007) in the
  DM of a user in ``dm_closed``. A reply has type 19 and ``referenced_message``. A ``nonce`` over 25
  characters is 400 Invalid Form Body; with ``enforce_nonce: true``, a nonce the same author used within
  ``nonce_window_s`` (Discord: "the past few minutes") creates nothing: the answer is that earlier message.
* ``PATCH``/``DELETE /channels/{id}/messages/{mid}``: 404 Unknown Message (10008); editing a user's message
  is 403 (50005); deleting one in a DM is 403 (50003). ``POST /channels/{id}/typing``: 204.
* ``POST /interactions/{id}/{token}/callback``: 404 Unknown interaction (10062) for an interaction never
  dispatched, 400 "Interaction has already been acknowledged." (40060) for a second response. discord.py
  always asks ``?with_response=1``, so the answer is 200 with the interaction callback object (with the
  message created, for types 4, 5 and 7); without the parameter it is 204. Type 7 (and 6 then
  ``PATCH @original``) edits the message the component is on.
* Application commands: name and description are validated as Discord does for slash commands (400 50035).

Files. A user's message may carry attachments (``dm``/``guild_message`` ``attachments=``: ``id``,
``filename``, ``size``, ``url``, ``proxy_url``, ``content_type``; a voice message, ``voice_attachment``,
has ``duration_secs`` and a base64 ``waveform`` and sets the message flag ``IS_VOICE_MESSAGE``), sticker
items (``stickers=``) and embeds (``embeds=``). An attachment's ``url`` is
``{base_url}/attachments/{channel}/{id}/{filename}`` with Discord's signing query (``ex``, ``is``, ``hm``),
on the same host as ``api_base``; ``GET`` serves its bytes with its ``Content-Type`` and needs no
token, as Discord's CDN. Each request is recorded in ``downloads``; ``break_file(url, ...)`` makes the
file answer a status (404 as an expired link, 500), never answer, or send only some bytes and drop the
connection.

The gateway (``/gateway``, any query string) speaks JSON. With ``compress=zlib-stream`` in the query (what
discord.py asks unless ``zstandard`` is installed) every message is a binary frame from one
``zlib.compressobj`` per connection, flushed with ``Z_SYNC_FLUSH`` (discord.py waits for the
``00 00 ff ff`` suffix); otherwise (no ``compress``, or ``zstd-stream``, which the fake does not speak)
messages are text frames, which discord.py accepts whatever it asked for. HELLO, heartbeat ACKs, IDENTIFY ->
READY + GUILD_CREATE (close 4004 for a wrong token or ``revoked``, 4014 for privileged intents when
``refuse_privileged_intents``, 4005 for a second IDENTIFY, 4003 for anything but a heartbeat before it),
RESUME -> the missed events then RESUMED (an unknown session gets op 9 ``false``), op 8 ->
GUILD_MEMBERS_CHUNK. Dispatches follow the session's intents: MESSAGE_CREATE needs GUILD_MESSAGES or
DIRECT_MESSAGES (else it is put in ``dropped``), and without MESSAGE_CONTENT a guild message that does not
mention the bot arrives with empty content, attachments, embeds and components. Events dispatched before
any client identified are delivered after the first READY; events for a disconnected session wait for its
RESUME.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import json
import re
import secrets
import time
import zlib
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from aiohttp import WSMsgType, web

DISCORD_EPOCH_MS = 1420070400000
MAX_CONTENT = 2000
EPHEMERAL = 1 << 6
LOADING = 1 << 7
ATTACHMENT_SIZE_LIMIT = 10 * 1024 * 1024
IS_VOICE_MESSAGE = 1 << 13  # a message flag: its one attachment is a voice message
STICKER_FORMATS = {"png": 1, "apng": 2, "lottie": 3, "gif": 4}

INTENT_GUILDS = 1 << 0
INTENT_GUILD_MEMBERS = 1 << 1
INTENT_GUILD_PRESENCES = 1 << 8
INTENT_GUILD_MESSAGES = 1 << 9
INTENT_DIRECT_MESSAGES = 1 << 12
INTENT_MESSAGE_CONTENT = 1 << 15
PRIVILEGED_INTENTS = INTENT_GUILD_MEMBERS | INTENT_GUILD_PRESENCES | INTENT_MESSAGE_CONTENT

# view channel, add reactions, send messages, embed links, attach files, read history, use application
# commands, send messages in threads
EVERYONE_PERMISSIONS = str((1 << 10) | (1 << 6) | (1 << 11) | (1 << 14) | (1 << 15) | (1 << 16) | (1 << 31)
                           | (1 << 38))
GUILD_OWNER_ID = 800000000000000099

_DEFAULT_ERRORS: dict[int, tuple[str, int]] = {
    400: ("400: Bad Request", 0), 401: ("401: Unauthorized", 0), 403: ("Missing Access", 50001),
    404: ("Unknown Channel", 10003), 405: ("405: Method Not Allowed", 0), 429: ("You are being rate limited.", 0),
    500: ("500: Internal Server Error", 0), 502: ("502: Bad Gateway", 0), 503: ("503: Service Unavailable", 0),
}
_API_PATH = re.compile(r"^/api/v(?:9|10)(/.*)$")
_USER_MENTION = re.compile(r"<@!?(\d+)>")
_COMMAND_NAME = re.compile(r"^[-_\w]{1,32}$")
_BASE_HEADERS = {"Via": "1.1 google"}


@dataclass(frozen=True)
class Call:
    """One REST request. ``path`` is after ``/api/v10`` (decoded, no query string); ``json`` is the body
    (``payload_json`` for a multipart request, None without a body); ``files`` the uploaded files
    (``{"field", "filename", "size", "content_type", "data"}``); ``at`` is ``time.monotonic()``."""

    method: str
    path: str
    json: Any
    headers: dict[str, str]
    at: float
    query: dict[str, str] = field(default_factory=dict)
    files: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class _Failure:
    method: str
    pattern: re.Pattern[str]
    status: int
    message: str
    code: int
    retry_after: float | None


class DiscordError(Exception):
    """Raised by a handler: answered as Discord's JSON error ``{"message", "code"[, "errors"]}``."""

    def __init__(self, status: int, message: str | None = None, code: int | None = None,
                 errors: dict[str, Any] | None = None) -> None:
        default_message, default_code = _DEFAULT_ERRORS.get(status, (f"{status}: Error", 0))
        self.status = status
        self.message = default_message if message is None else message
        self.code = default_code if code is None else code
        self.errors = errors
        super().__init__(self.message)

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"message": self.message, "code": self.code}
        if self.errors is not None:
            body["errors"] = self.errors
        return body


def _form_error(path: str, code: str, message: str) -> DiscordError:
    errors: dict[str, Any] = {"_errors": [{"code": code, "message": message}]}
    for part in reversed(path.split(".")):
        errors = {part: errors}
    return DiscordError(400, "Invalid Form Body", 50035, errors)


def _json_response(status: int, body: Any = None, headers: dict[str, str] | None = None) -> web.Response:
    all_headers = {**_BASE_HEADERS, **(headers or {})}
    if status == 204:
        return web.Response(status=204, headers=all_headers)
    all_headers["Content-Type"] = "application/json"
    return web.Response(status=status, body=json.dumps(body).encode(), headers=all_headers)


def _now_iso() -> str:
    return datetime.now(UTC).isoformat()


class _Snowflakes:
    """Increasing snowflakes from the clock, like Discord's."""

    def __init__(self) -> None:
        self._last = 0

    def next(self) -> int:
        self._last = max((int(time.time() * 1000) - DISCORD_EPOCH_MS) << 22, self._last + 1)
        return self._last


@dataclass(frozen=True)
class _FileFault:
    status: int | None
    hang: bool
    cut_at: int | None
    chunked: bool = False


@dataclass
class _Close:
    code: int
    reason: str


_READY_MARK = object()


@dataclass(eq=False)
class GatewayConnection:
    """One gateway websocket: its query string, the compression used (``"zlib-stream"`` or None), the
    session it identified or resumed, how it was closed by the fake (``close_code``) and what it was sent."""

    query: dict[str, str]
    compression: str | None
    ws: web.WebSocketResponse = field(repr=False)
    queue: asyncio.Queue[Any] = field(default_factory=asyncio.Queue, repr=False)
    session: _Session | None = None
    ready_sent: bool = False
    closing: bool = False
    close_code: int | None = None
    sent: list[dict[str, Any]] = field(default_factory=list, repr=False)
    done: asyncio.Event = field(default_factory=asyncio.Event, repr=False)
    compressor: Any = field(default=None, repr=False)

    @property
    def open(self) -> bool:
        return not self.ws.closed and not self.closing


@dataclass
class _Session:
    id: str
    intents: int
    shard: list[int] | None
    seq: int = 0
    log: list[dict[str, Any]] = field(default_factory=list)
    conn: GatewayConnection | None = None


@dataclass
class _Interaction:
    id: int
    token: str
    type: int
    channel_id: int
    message_id: int | None
    payload: dict[str, Any]
    responded: bool = False
    original_id: int | None = None


@dataclass
class _Request:
    method: str
    path: str
    params: dict[str, str]
    body: Any
    files: list[dict[str, Any]]
    query: dict[str, str]


Handler = Callable[[_Request], Awaitable[tuple[int, Any]]]


class FakeDiscord:
    def __init__(self, token: str = "fake-discord-token.abc.def", *, bot_id: int = 900000000000000001,
                 bot_name: str = "bruce", application_id: int = 900000000000000002,
                 guild_id: int = 800000000000000001, guild_channel_id: int = 800000000000000010,
                 heartbeat_interval_ms: int = 41250) -> None:
        self.token = token
        self.bot_id = bot_id
        self.bot_name = bot_name
        self.application_id = application_id
        self.guild_id = guild_id
        self.guild_channel_id = guild_channel_id
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.base_url = ""
        self.api_base = ""
        self.gateway_url = ""
        self.calls: list[Call] = []
        self.gateway_events: list[dict[str, Any]] = []
        self.gateway_connections: list[GatewayConnection] = []
        self.dropped: list[dict[str, Any]] = []  # dispatches the session's intents did not allow
        self.intents: int | None = None  # of the last IDENTIFY
        self.presence: dict[str, Any] | None = None  # the last op 3
        self.refuse_privileged_intents = False  # True: IDENTIFY with a privileged intent is closed with 4014
        self.messages: dict[int, dict[str, Any]] = {}
        self.deleted: set[int] = set()
        self.interaction_responses: list[Call] = []
        self.typing: list[int] = []
        self.commands: list[dict[str, Any]] = []
        self.guild_commands: dict[int, list[dict[str, Any]]] = {}
        self.reactions: list[tuple[int, int, str]] = []  # (channel id, message id, emoji) the bot added
        self.dm_closed: set[int] = set()  # users whose DMs refuse the bot (403 50007)
        self.users: dict[int, dict[str, Any]] = {}
        self.channels: dict[int, dict[str, Any]] = {}
        self.all_messages: dict[int, dict[str, Any]] = {}  # everyone's messages, by id
        self.nonce_window_s = 300.0  # how long enforce_nonce remembers an author's nonce
        self._nonces: dict[tuple[str, str], tuple[int, float]] = {}  # (author, nonce) -> (message id, at)
        self._hang: list[tuple[str, re.Pattern[str]]] = []  # requests handled but never answered
        self._revoked = False
        self._ids = _Snowflakes()
        self._dm_by_user: dict[int, int] = {}
        self._members: dict[int, dict[str, Any]] = {}
        self._interactions: dict[int, _Interaction] = {}
        self._tokens: dict[str, _Interaction] = {}
        self._files: dict[str, tuple[bytes, str]] = {}
        self._file_faults: dict[str, _FileFault] = {}
        self.downloads: list[Call] = []  # GET /attachments/... (path with the query, headers)
        self._failures: list[_Failure] = []
        self._sessions: dict[str, _Session] = {}
        self._current: _Session | None = None
        self._pending: list[tuple[str, dict[str, Any], int]] = []
        self._live: set[GatewayConnection] = set()
        self._changed = asyncio.Event()
        self._closing = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self.bot_user: dict[str, Any] = {"id": str(bot_id), "username": bot_name, "discriminator": "0",
                                         "global_name": None, "avatar": None, "bot": True, "public_flags": 0,
                                         "flags": 0}
        self.users[bot_id] = self.bot_user
        self._members[bot_id] = self._member(self.bot_user)
        self.channels[guild_channel_id] = self._text_channel(guild_channel_id, "general")
        self._routes: list[tuple[str, re.Pattern[str], Handler, bool]] = []
        self._add_routes()

    # ---- lifecycle -------------------------------------------------------
    async def start(self) -> None:
        self._closing.clear()
        app = web.Application(client_max_size=50 * 1024 * 1024)
        app.router.add_route("GET", "/gateway", self._gateway)
        app.router.add_route("GET", "/attachments/{channel}/{id}/{filename}", self._attachment)
        app.router.add_route("*", "/api/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=0.5, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.base_url = f"http://127.0.0.1:{port}"
        self.api_base = f"{self.base_url}/api/v10"
        self.gateway_url = f"ws://127.0.0.1:{port}/gateway"

    async def close(self) -> None:
        """Closes every gateway websocket (1001) and stops the server; no task is left behind."""
        self._closing.set()
        for conn in list(self._live):
            self._close_conn(conn, 1001, "Going away")
        waits = [asyncio.ensure_future(conn.done.wait()) for conn in list(self._live)]
        if waits:
            await asyncio.wait(waits, timeout=3)
            for waiter in waits:
                waiter.cancel()
            await asyncio.gather(*waits, return_exceptions=True)
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()
        self._wake()

    async def __aenter__(self) -> FakeDiscord:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ---- inspection ------------------------------------------------------
    def calls_to(self, method: str, path_regex: str) -> list[Call]:
        """Calls whose method matches (case-insensitive, ``"*"`` for any) and whose path ``re.search``es
        ``path_regex`` (anchor it with ``^...$`` for an exact path)."""
        pattern = re.compile(path_regex)
        return [call for call in self.calls if _method_matches(method, call.method) and pattern.search(call.path)]

    async def wait_for(self, method: str, path_regex: str, count: int = 1, timeout: float = 10.0) -> list[Call]:
        try:
            await self._wait_until(lambda: len(self.calls_to(method, path_regex)) >= count, timeout)
        except TimeoutError:
            seen = self.calls_to(method, path_regex)
            raise AssertionError(
                f"waited {timeout}s for {count} {method} {path_regex} call(s), saw {len(seen)}; "
                f"all calls: {[(call.method, call.path) for call in self.calls]}") from None
        return self.calls_to(method, path_regex)

    async def wait_ready(self, timeout: float = 10.0) -> None:
        """Until a client IDENTIFYed and was sent READY and GUILD_CREATE."""
        try:
            await self._wait_until(lambda: any(c.ready_sent and c.open for c in self._live), timeout)
        except TimeoutError:
            raise AssertionError(
                f"no client became ready in {timeout}s; gateway events: {self.gateway_events!r}; "
                f"connections: {self.gateway_connections!r}") from None

    async def wait_gateway(self, op: int, count: int = 1, timeout: float = 10.0) -> list[dict[str, Any]]:
        """Until the client sent ``count`` gateway payloads with this op."""
        def seen() -> list[dict[str, Any]]:
            return [event for event in self.gateway_events if event.get("op") == op]
        try:
            await self._wait_until(lambda: len(seen()) >= count, timeout)
        except TimeoutError:
            raise AssertionError(f"waited {timeout}s for {count} op {op}; saw {self.gateway_events!r}") from None
        return seen()

    @property
    def revoked(self) -> bool:
        return self._revoked

    @revoked.setter
    def revoked(self, value: bool) -> None:
        """True: REST answers 401, IDENTIFY and RESUME are closed with 4004, and so are live sessions."""
        self._revoked = value
        if value:
            for conn in list(self._live):
                if conn.session is not None:
                    self._close_conn(conn, 4004, "Authentication failed.")

    # ---- dispatches to the client ------------------------------------------
    def dm(self, user_id: int, text: str, *, username: str = "ana", attachments: list[dict[str, Any]] | None = None,
           stickers: list[str] | None = None, embeds: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """The user sends the bot a DM (the DM channel is created on first use: ``payload["channel_id"]``).
        An attachment is ``{"filename", "size"?, "content_type"?, "data"?: bytes, ...}`` (other keys go into
        the attachment object as given); with ``data`` its ``url`` serves those bytes. ``stickers`` are sticker
        names, sent as ``sticker_items``; ``embeds`` go in as given."""
        user = self._user(user_id, username)
        channel = self._dm_channel(user_id)
        message = self._message_base(int(channel["id"]), user, text)
        self._add_media(message, attachments, stickers, embeds)
        self.all_messages[int(message["id"])] = message
        self._deliver("MESSAGE_CREATE", message, INTENT_DIRECT_MESSAGES)
        return copy.deepcopy(message)

    def guild_message(self, user_id: int, text: str, *, channel_id: int | None = None, mention_bot: bool = False,
                      reply_to_bot_message: int | None = None, username: str = "ana",
                      reply_ping: bool = True, attachments: list[dict[str, Any]] | None = None,
                      stickers: list[str] | None = None, embeds: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """A message in the guild's text channel (or ``channel_id``: a new one is announced with
        CHANNEL_CREATE). ``mention_bot`` puts ``<@bot_id>`` in the content and the bot in ``mentions``; a
        reply to the bot's message mentions it too unless ``reply_ping`` is false (as Discord's client)."""
        channel_id = channel_id or self.guild_channel_id
        if channel_id not in self.channels:
            self.channels[channel_id] = self._text_channel(channel_id, f"channel-{channel_id}")
            self._deliver("CHANNEL_CREATE", self.channels[channel_id], INTENT_GUILDS)
        user = self._user(user_id, username)
        self._members.setdefault(user_id, self._member(user))
        if mention_bot and not re.search(rf"<@!?{self.bot_id}>", text):
            text = f"<@{self.bot_id}> {text}"
        message = self._message_base(channel_id, user, text)
        message["member"] = self._partial_member(user_id)
        self._add_media(message, attachments, stickers, embeds)
        mentioned = mention_bot
        if reply_to_bot_message is not None:
            self._make_reply(message, reply_to_bot_message)
            mentioned = mentioned or reply_ping
        if mentioned:
            message["mentions"] = [{**self.bot_user, "member": self._partial_member(self.bot_id)}]
        self.all_messages[int(message["id"])] = message
        self._deliver("MESSAGE_CREATE", message, INTENT_GUILD_MESSAGES)
        return copy.deepcopy(message)

    def press_button(self, user_id: int, custom_id: str, message_id: int, *, channel_id: int | None = None,
                     in_dm: bool = True, username: str = "ana", values: list[str] | None = None) -> str:
        """INTERACTION_CREATE type 3 for a button (a string select with ``values``) on ``message_id``;
        returns the interaction id."""
        data: dict[str, Any] = {"custom_id": custom_id, "component_type": 2}
        if values is not None:
            data.update(component_type=3, values=list(values))
        return self._interaction(user_id, 3, data, channel_id=channel_id, in_dm=in_dm, username=username,
                                 message_id=message_id)

    def slash_command(self, user_id: int, name: str, *, channel_id: int | None = None, in_dm: bool = True,
                      username: str = "ana", options: list[dict[str, Any]] | None = None) -> str:
        """INTERACTION_CREATE type 2 for the chat command ``name`` (its id is the registered command's when
        there is one); returns the interaction id."""
        scope = self.commands + self.guild_commands.get(self.guild_id, [])
        registered = next((c for c in scope if c["name"] == name and c.get("type", 1) == 1), None)
        data: dict[str, Any] = {"id": registered["id"] if registered else str(self._ids.next()), "name": name,
                                "type": 1}
        if options:
            data["options"] = options
        if not in_dm:
            data["guild_id"] = str(self.guild_id)
        return self._interaction(user_id, 2, data, channel_id=channel_id, in_dm=in_dm, username=username)

    def dispatch(self, event: str, data: dict[str, Any], *, intent: int = 0) -> None:
        """Any other dispatch (``t`` = ``event``), sent only if the session's intents include ``intent``."""
        self._deliver(event, copy.deepcopy(data), intent)

    def send_reconnect(self) -> None:
        """Op 7 RECONNECT on the live connections: discord.py closes and RESUMEs."""
        for conn in list(self._live):
            if conn.open:
                conn.queue.put_nowait({"op": 7, "d": None, "s": None, "t": None})

    def drop_connections(self, code: int = 4000, reason: str = "Unknown error.") -> None:
        """Close the live gateway websockets with ``code`` (4000: discord.py reconnects and RESUMEs)."""
        for conn in list(self._live):
            self._close_conn(conn, code, reason)

    # ---- failures --------------------------------------------------------
    def fail_next(self, method: str, path_regex: str, *, status: int = 500, message: str | None = None,
                  code: int | None = None, retry_after: float | None = None, times: int = 1) -> None:
        """The next ``times`` matching requests (see ``calls_to``) fail. Bodies default to Discord's for the
        status: 429 ``{"message": "You are being rate limited.", "retry_after", "global": false}`` with
        ``Retry-After`` and ``X-RateLimit-*`` headers (``retry_after`` defaults to 0.05 s), 403 Missing Access
        (50001), 404 Unknown Channel (10003), 401, 500..."""
        default_message, default_code = _DEFAULT_ERRORS.get(status, (f"{status}: Error", 0))
        for _ in range(times):
            self._failures.append(_Failure(method, re.compile(path_regex), status,
                                           default_message if message is None else message,
                                           default_code if code is None else code, retry_after))

    def hang_next(self, method: str, path_regex: str, *, times: int = 1) -> None:
        """The next ``times`` matching requests are handled (a message is created) but their answer never
        comes: the client waits until it gives up (a lost answer, a process killed mid-request)."""
        self._hang.extend((method, re.compile(path_regex)) for _ in range(times))

    def _take_hang(self, method: str, path: str) -> bool:
        for index, (wanted, pattern) in enumerate(self._hang):
            if _method_matches(wanted, method) and pattern.search(path):
                del self._hang[index]
                return True
        return False

    # ---- plumbing: signals -------------------------------------------------
    def _wake(self) -> None:
        event, self._changed = self._changed, asyncio.Event()
        event.set()

    async def _wait_until(self, predicate: Callable[[], bool], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self._closing.is_set():
                raise TimeoutError
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), remaining)

    # ---- plumbing: state -------------------------------------------------
    def _user(self, user_id: int, username: str = "ana") -> dict[str, Any]:
        user = self.users.get(user_id)
        if user is None or user["username"] != username:
            user = {"id": str(user_id), "username": username, "discriminator": "0", "global_name": username.title(),
                    "avatar": None, "public_flags": 0}
            self.users[user_id] = user
        return user

    def _member(self, user: dict[str, Any]) -> dict[str, Any]:
        return {"user": user, "nick": None, "avatar": None, "roles": [], "joined_at": _now_iso(), "deaf": False,
                "mute": False, "flags": 0, "pending": False}

    def _partial_member(self, user_id: int) -> dict[str, Any]:
        member = dict(self._members[user_id])
        member.pop("user", None)
        return member

    def _text_channel(self, channel_id: int, name: str) -> dict[str, Any]:
        return {"id": str(channel_id), "type": 0, "guild_id": str(self.guild_id), "name": name, "position": 0,
                "permission_overwrites": [], "nsfw": False, "parent_id": None, "topic": None, "last_message_id": None,
                "rate_limit_per_user": 0, "flags": 0}

    def _dm_channel(self, user_id: int) -> dict[str, Any]:
        channel_id = self._dm_by_user.get(user_id)
        if channel_id is None:
            channel_id = self._ids.next()
            self._dm_by_user[user_id] = channel_id
            self.channels[channel_id] = {"id": str(channel_id), "type": 1, "last_message_id": None, "flags": 0,
                                         "recipients": [self.users.get(user_id) or self._user(user_id)]}
        return self.channels[channel_id]

    def _dm_recipient(self, channel_id: int) -> int | None:
        return next((user for user, channel in self._dm_by_user.items() if channel == channel_id), None)

    def _guild(self, intents: int) -> dict[str, Any]:
        everyone = {"id": str(self.guild_id), "name": "@everyone", "permissions": EVERYONE_PERMISSIONS, "position": 0,
                    "color": 0, "hoist": False, "managed": False, "mentionable": False, "flags": 0, "icon": None,
                    "unicode_emoji": None}
        members = list(self._members.values()) if intents & INTENT_GUILD_MEMBERS else [self._members[self.bot_id]]
        channels = [{k: v for k, v in c.items() if k != "guild_id"} for c in self.channels.values()
                    if c.get("guild_id") == str(self.guild_id)]
        return {
            "id": str(self.guild_id), "name": "Bruce Test Guild", "icon": None, "splash": None,
            "discovery_splash": None, "banner": None, "description": None, "owner_id": str(GUILD_OWNER_ID),
            "afk_channel_id": None, "afk_timeout": 300, "verification_level": 0, "default_message_notifications": 0,
            "explicit_content_filter": 0, "roles": [everyone], "emojis": [], "stickers": [], "features": [],
            "mfa_level": 0, "application_id": None, "system_channel_id": str(self.guild_channel_id),
            "system_channel_flags": 0, "rules_channel_id": None, "public_updates_channel_id": None,
            "vanity_url_code": None, "premium_tier": 0, "premium_subscription_count": 0, "preferred_locale": "en-US",
            "nsfw_level": 0, "premium_progress_bar_enabled": False, "joined_at": _now_iso(), "large": False,
            "unavailable": False, "member_count": len(self._members), "members": members, "channels": channels,
            "threads": [], "voice_states": [], "presences": [], "stage_instances": [], "guild_scheduled_events": [],
            "soundboard_sounds": [],
        }

    def _message_base(self, channel_id: int, author: dict[str, Any], content: str) -> dict[str, Any]:
        message: dict[str, Any] = {
            "id": str(self._ids.next()), "channel_id": str(channel_id), "author": copy.deepcopy(author),
            "content": content, "timestamp": _now_iso(), "edited_timestamp": None, "tts": False,
            "mention_everyone": False, "mentions": [], "mention_roles": [], "attachments": [], "embeds": [],
            "components": [], "pinned": False, "type": 0, "flags": 0,
        }
        guild_id = self.channels.get(channel_id, {}).get("guild_id")
        if guild_id:
            message["guild_id"] = guild_id
        return message

    def _make_reply(self, message: dict[str, Any], target_id: int) -> None:
        target = self.all_messages.get(target_id) or self.messages.get(target_id)
        if target is None:
            raise AssertionError(f"no message {target_id} to reply to")
        reference = {"type": 0, "message_id": str(target_id), "channel_id": target["channel_id"]}
        if "guild_id" in target:
            reference["guild_id"] = target["guild_id"]
        message.update(type=19, message_reference=reference,
                       referenced_message={k: v for k, v in target.items() if k != "referenced_message"})

    def _add_media(self, message: dict[str, Any], attachments: list[dict[str, Any]] | None,
                   stickers: list[str] | None, embeds: list[dict[str, Any]] | None) -> None:
        channel_id = int(message["channel_id"])
        message["attachments"] = [self._user_attachment(channel_id, item) for item in attachments or []]
        if any("waveform" in a and "duration_secs" in a for a in message["attachments"]):
            message["flags"] |= IS_VOICE_MESSAGE
        if stickers:
            message["sticker_items"] = [{"id": str(self._ids.next()), "name": name, "format_type": 1}
                                        for name in stickers]
        if embeds:
            message["embeds"] = copy.deepcopy(embeds)

    def _attachment_entry(self, channel_id: int, filename: str, size: int, content_type: str | None,
                          data: bytes | None) -> dict[str, Any]:
        attachment_id = self._ids.next()
        expires = int(time.time()) + 86400
        url = (f"{self.base_url}/attachments/{channel_id}/{attachment_id}/{filename}"
               f"?ex={expires:x}&is={expires - 86400:x}&hm={secrets.token_hex(32)}&")
        if data is not None:
            self._files[f"{channel_id}/{attachment_id}/{filename}"] = (data, content_type or "application/octet-stream")
        entry: dict[str, Any] = {"id": str(attachment_id), "filename": filename, "size": size, "url": url,
                                 "proxy_url": url}
        if content_type:
            entry["content_type"] = content_type
        return entry

    def _user_attachment(self, channel_id: int, item: dict[str, Any]) -> dict[str, Any]:
        data = item.get("data")
        size = int(item.get("size", len(data) if data is not None else 0))
        entry = self._attachment_entry(channel_id, str(item.get("filename", "file")), size,
                                       item.get("content_type"), data)
        entry.update({k: v for k, v in item.items() if k not in ("data", "filename", "size", "content_type")})
        return entry

    # ---- plumbing: gateway delivery ------------------------------------------
    def _deliver(self, event: str, data: dict[str, Any], intent: int) -> None:
        session = self._current
        if session is None:
            self._pending.append((event, data, intent))
            return
        if intent and not session.intents & intent:
            self.dropped.append({"t": event, "d": data})
            return
        if event == "MESSAGE_CREATE" and not session.intents & INTENT_MESSAGE_CONTENT:
            data = self._without_content(data)
        self._send_dispatch(session, event, data)

    def _without_content(self, message: dict[str, Any]) -> dict[str, Any]:
        """What an app without the MESSAGE_CONTENT intent receives."""
        mentioned = any(int(m["id"]) == self.bot_id for m in message.get("mentions", []))
        if "guild_id" not in message or mentioned or int(message["author"]["id"]) == self.bot_id:
            return message
        return {**message, "content": "", "attachments": [], "embeds": [], "components": []}

    def _send_dispatch(self, session: _Session, event: str, data: dict[str, Any]) -> None:
        session.seq += 1
        payload = {"op": 0, "t": event, "s": session.seq, "d": data}
        session.log.append(payload)
        if session.conn is not None and session.conn.open:
            session.conn.queue.put_nowait(payload)

    def _close_conn(self, conn: GatewayConnection, code: int, reason: str) -> None:
        if not conn.closing:
            conn.closing = True
            conn.queue.put_nowait(_Close(code, reason))

    # ---- gateway ---------------------------------------------------------
    async def _gateway(self, request: web.Request) -> web.StreamResponse:
        if self._closing.is_set():  # a client reconnecting while close() runs
            return _json_response(503, {"message": "503: Service Unavailable", "code": 0})
        ws = web.WebSocketResponse(max_msg_size=0, timeout=2.0, autoping=True)
        await ws.prepare(request)
        compression = request.query.get("compress")
        conn = GatewayConnection(query=dict(request.query), ws=ws,
                                 compression=compression if compression == "zlib-stream" else None)
        if conn.compression:
            conn.compressor = zlib.compressobj()
        self.gateway_connections.append(conn)
        self._live.add(conn)
        writer = asyncio.ensure_future(self._writer(conn))
        try:
            if request.query.get("encoding", "json") != "json":
                self._close_conn(conn, 4002, "Error while decoding payload.")
            conn.queue.put_nowait({"op": 10, "d": {"heartbeat_interval": self.heartbeat_interval_ms,
                                                   "_trace": ["[\"fake-gateway\"]"]}, "s": None, "t": None})
            async for msg in ws:
                if msg.type in (WSMsgType.TEXT, WSMsgType.BINARY) and not conn.closing:
                    self._on_frame(conn, msg.data)
        finally:
            # aiohttp cancels this handler once the client has gone (handler_cancellation): no step
            # below may be skipped by that.
            conn.closing = True
            if conn.session is not None and conn.session.conn is conn:
                conn.session.conn = None
            conn.queue.put_nowait(None)  # the writer stops there, or after the close it is doing
            try:
                await asyncio.wait_for(asyncio.shield(writer), 3)
            except (TimeoutError, asyncio.CancelledError):
                pass
            finally:
                writer.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.gather(writer, return_exceptions=True)
                self._live.discard(conn)
                conn.done.set()
                self._wake()
        return ws

    async def _writer(self, conn: GatewayConnection) -> None:
        while True:
            item = await conn.queue.get()
            if item is None:
                return
            if isinstance(item, _Close):
                conn.close_code = item.code
                with contextlib.suppress(ConnectionError, RuntimeError):
                    await conn.ws.close(code=item.code, message=item.reason.encode())
                return
            if item is _READY_MARK:
                conn.ready_sent = True
                self._wake()
                continue
            text = json.dumps(item)
            try:
                if conn.compressor is not None:
                    await conn.ws.send_bytes(conn.compressor.compress(text.encode()) +
                                             conn.compressor.flush(zlib.Z_SYNC_FLUSH))
                else:
                    await conn.ws.send_str(text)
            except (ConnectionError, RuntimeError):
                return
            conn.sent.append(item)

    def _on_frame(self, conn: GatewayConnection, data: str | bytes) -> None:
        try:
            payload = json.loads(data)
            if not isinstance(payload, dict):
                raise ValueError("not an object")
        except ValueError:
            self._close_conn(conn, 4002, "Error while decoding payload.")
            return
        self.gateway_events.append(payload)
        self._wake()
        op, d = payload.get("op"), payload.get("d")
        if op == 1:
            conn.queue.put_nowait({"op": 11, "d": None, "s": None, "t": None})
        elif op == 2:
            self._identify(conn, d if isinstance(d, dict) else {})
        elif op == 6:
            self._resume(conn, d if isinstance(d, dict) else {})
        elif conn.session is None:
            self._close_conn(conn, 4003, "Not authenticated.")
        elif op == 3:
            self.presence = d
        elif op == 8:
            self._members_chunk(conn.session, d if isinstance(d, dict) else {})
        elif op not in (4,):
            self._close_conn(conn, 4001, "Unknown opcode.")

    def _identify(self, conn: GatewayConnection, d: dict[str, Any]) -> None:
        intents = d.get("intents")
        if conn.session is not None:
            self._close_conn(conn, 4005, "Already authenticated.")
        elif d.get("token") != self.token or self._revoked:
            self._close_conn(conn, 4004, "Authentication failed.")
        elif not isinstance(intents, int) or intents < 0:
            self._close_conn(conn, 4013, "Invalid intent(s).")
        elif self.refuse_privileged_intents and intents & PRIVILEGED_INTENTS:
            self._close_conn(conn, 4014, "Disallowed intent(s).")
        else:
            self.intents = intents
            shard = d.get("shard")
            session = _Session(id=secrets.token_hex(16), intents=intents, shard=shard, conn=conn)
            self._sessions[session.id] = session
            self._current = conn.session = session
            ready: dict[str, Any] = {
                "v": 10, "user_settings": {}, "user": self.bot_user, "relationships": [], "private_channels": [],
                "presences": [], "guilds": [{"id": str(self.guild_id), "unavailable": True}],
                "guild_join_requests": [], "geo_ordered_rtc_regions": [], "session_id": session.id,
                "session_type": "normal", "resume_gateway_url": self.gateway_url,
                "application": {"id": str(self.application_id), "flags": 0},
                "_trace": ["[\"fake-gateway\"]"]}
            if shard is not None:
                ready["shard"] = shard
            self._send_dispatch(session, "READY", ready)
            self._send_dispatch(session, "GUILD_CREATE", self._guild(intents))
            conn.queue.put_nowait(_READY_MARK)
            pending, self._pending = self._pending, []
            for event, data, intent in pending:
                self._deliver(event, data, intent)

    def _resume(self, conn: GatewayConnection, d: dict[str, Any]) -> None:
        session = self._sessions.get(str(d.get("session_id")))
        if d.get("token") != self.token or self._revoked:
            self._close_conn(conn, 4004, "Authentication failed.")
        elif session is None:
            conn.queue.put_nowait({"op": 9, "d": False, "s": None, "t": None})
        else:
            if session.conn is not None and session.conn is not conn:
                self._close_conn(session.conn, 4000, "Session resumed elsewhere.")
            session.conn, conn.session = conn, session
            seq = d.get("seq") or 0
            for payload in session.log:
                if payload["s"] > seq:
                    conn.queue.put_nowait(payload)
            self._current = session
            self._send_dispatch(session, "RESUMED", {"_trace": ["[\"fake-gateway\"]"]})
            conn.queue.put_nowait(_READY_MARK)

    def _members_chunk(self, session: _Session, d: dict[str, Any]) -> None:
        wanted = d.get("user_ids")
        members = list(self._members.values())
        not_found: list[str] = []
        if wanted is not None:
            ids = [int(x) for x in (wanted if isinstance(wanted, list) else [wanted])]
            members = [self._members[i] for i in ids if i in self._members]
            not_found = [str(i) for i in ids if i not in self._members]
        elif d.get("query"):
            members = [m for m in members if m["user"]["username"].startswith(str(d["query"]))]
        chunk: dict[str, Any] = {"guild_id": str(self.guild_id), "members": members, "chunk_index": 0,
                                 "chunk_count": 1, "not_found": not_found}
        if d.get("nonce") is not None:
            chunk["nonce"] = d["nonce"]
        self._send_dispatch(session, "GUILD_MEMBERS_CHUNK", chunk)

    # ---- interactions ------------------------------------------------------
    def _interaction(self, user_id: int, itype: int, data: dict[str, Any], *, channel_id: int | None, in_dm: bool,
                     username: str, message_id: int | None = None) -> str:
        user = self._user(user_id, username)
        interaction_id = self._ids.next()
        token = f"fake-interaction-{secrets.token_urlsafe(24)}"
        payload: dict[str, Any] = {
            "id": str(interaction_id), "application_id": str(self.application_id), "type": itype, "data": data,
            "token": token, "version": 1, "app_permissions": EVERYONE_PERMISSIONS, "locale": "en-US",
            "entitlements": [], "attachment_size_limit": ATTACHMENT_SIZE_LIMIT,
        }
        if in_dm:
            channel_id = channel_id or int(self._dm_channel(user_id)["id"])
            channel = self.channels.get(channel_id) or {"id": str(channel_id), "type": 1, "recipients": [user]}
            payload.update(user=user, context=1, authorizing_integration_owners={"0": "0"},
                           channel={**channel, "recipients": [user]})
        else:
            channel_id = channel_id or self.guild_channel_id
            self._members.setdefault(user_id, self._member(user))
            channel = self.channels.get(channel_id) or self._text_channel(channel_id, f"channel-{channel_id}")
            payload.update(guild_id=str(self.guild_id), guild={"id": str(self.guild_id), "locale": "en-US",
                                                                "features": []},
                           member={**self._members[user_id], "permissions": EVERYONE_PERMISSIONS},
                           context=0, authorizing_integration_owners={"0": str(self.guild_id)}, guild_locale="en-US",
                           channel={**channel, "permissions": EVERYONE_PERMISSIONS})
        payload["channel_id"] = str(channel_id)
        if message_id is not None:
            message = self.messages.get(message_id) or self.all_messages.get(message_id)
            if message is None:
                message = self._message_base(channel_id, self.bot_user, "")
                message["id"] = str(message_id)
            payload["message"] = copy.deepcopy(message)
        self._interactions[interaction_id] = self._tokens[token] = _Interaction(
            interaction_id, token, itype, channel_id, message_id, payload)
        self._deliver("INTERACTION_CREATE", payload, 0)
        return str(interaction_id)

    # ---- REST plumbing -----------------------------------------------------
    def _add_routes(self) -> None:
        msg = r"/channels/(?P<channel_id>\d+)/messages/(?P<message_id>\d+)"
        hook = r"/webhooks/(?P<app_id>\d+)/(?P<token>[^/]+)"
        commands = r"/applications/(?P<app_id>\d+)(?:/guilds/(?P<guild_id>\d+))?/commands"
        table: list[tuple[str, str, Handler, bool]] = [
            ("GET", r"/users/@me", self._get_me, True),
            ("GET", r"/users/(?P<user_id>\d+)", self._get_user, True),
            ("POST", r"/users/@me/channels", self._create_dm, True),
            ("GET", r"/oauth2/applications/@me", self._app_info, True),
            ("GET", r"/applications/@me", self._app_info, True),
            ("GET", r"/gateway", self._gateway_info, False),
            ("GET", r"/gateway/bot", self._gateway_bot, True),
            ("GET", r"/channels/(?P<channel_id>\d+)", self._get_channel, True),
            ("POST", r"/channels/(?P<channel_id>\d+)/messages", self._post_message, True),
            ("GET", msg, self._get_message, True),
            ("PATCH", msg, self._patch_message, True),
            ("DELETE", msg, self._delete_message, True),
            ("POST", r"/channels/(?P<channel_id>\d+)/typing", self._typing, True),
            ("PUT", msg + r"/reactions/(?P<emoji>[^/]+)/@me", self._add_reaction, True),
            ("DELETE", msg + r"/reactions/(?P<emoji>[^/]+)/@me", self._remove_reaction, True),
            ("POST", r"/interactions/(?P<interaction_id>\d+)/(?P<token>[^/]+)/callback", self._callback, False),
            ("POST", hook, self._followup, False),
            ("GET", hook + r"/messages/(?P<message_id>@original|\d+)", self._get_hook_message, False),
            ("PATCH", hook + r"/messages/(?P<message_id>@original|\d+)", self._patch_hook_message, False),
            ("DELETE", hook + r"/messages/(?P<message_id>@original|\d+)", self._delete_hook_message, False),
            ("GET", commands, self._list_commands, True),
            ("PUT", commands, self._put_commands, True),
            ("POST", commands, self._post_command, True),
            ("GET", commands + r"/(?P<command_id>\d+)", self._get_command, True),
            ("PATCH", commands + r"/(?P<command_id>\d+)", self._patch_command, True),
            ("DELETE", commands + r"/(?P<command_id>\d+)", self._delete_command, True),
        ]
        self._routes = [(method, re.compile(f"^{path}$"), handler, auth) for method, path, handler, auth in table]

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        match = _API_PATH.match(request.path)
        path = match.group(1) if match else request.path
        try:
            body, files = await _read_body(request)
        except ValueError:
            body, files = None, []
            bad_body = True
        else:
            bad_body = False
        call = Call(request.method, path, body, dict(request.headers), time.monotonic(), dict(request.query), files)
        self.calls.append(call)
        self._wake()
        try:
            route = self._route(request.method, path)
            if route is not None and route[2] and (
                    request.headers.get("Authorization") != f"Bot {self.token}" or self._revoked):
                raise DiscordError(401)
            if (failure := self._take_failure(request.method, path)) is not None:
                return _failure_response(failure)
            if bad_body:
                raise DiscordError(400, "The request body contains invalid JSON.", 50109)
            if route is None:
                raise DiscordError(405 if self._path_known(path) else 404,
                                   None if self._path_known(path) else "404: Not Found", 0)
            handler, params = route[0], route[1]
            status, result = await handler(_Request(request.method, path, params, body, files, dict(request.query)))
            if self._take_hang(request.method, path):
                await self._closing.wait()  # aiohttp cancels this handler when the client gives up
            if path.endswith("/callback"):
                self.interaction_responses.append(call)
            return _json_response(status, result)
        except DiscordError as error:
            return _json_response(error.status, error.body())

    def _route(self, method: str, path: str) -> tuple[Handler, dict[str, str], bool] | None:
        for route_method, pattern, handler, auth in self._routes:
            if route_method == method and (m := pattern.match(path)):
                return handler, {k: v for k, v in m.groupdict().items() if v is not None}, auth
        return None

    def _path_known(self, path: str) -> bool:
        return any(pattern.match(path) for _, pattern, _, _ in self._routes)

    def _take_failure(self, method: str, path: str) -> _Failure | None:
        for index, failure in enumerate(self._failures):
            if _method_matches(failure.method, method) and failure.pattern.search(path):
                return self._failures.pop(index)
        return None

    def break_file(self, url: str, *, status: int | None = None, hang: bool = False, cut_at: int | None = None,
                   chunked: bool = False) -> None:
        """The file at ``url`` (an attachment's) answers ``status`` with a short text body (404: Discord's
        expired or deleted file), or never answers (``hang``: the client gives up), or sends its headers
        (the whole ``Content-Length``) and ``cut_at`` bytes, then drops the connection; ``chunked`` sends
        it whole without a ``Content-Length`` (the client learns its size only by reading it)."""
        self._file_faults[self._file_key(url)] = _FileFault(status, hang, cut_at, chunked)

    def _file_key(self, url: str) -> str:
        path = url.split("?", 1)[0].removeprefix(self.base_url)
        return path.removeprefix("/attachments/")

    async def _attachment(self, request: web.Request) -> web.StreamResponse:
        key = f"{request.match_info['channel']}/{request.match_info['id']}/{request.match_info['filename']}"
        self.downloads.append(Call(request.method, request.path_qs, None, dict(request.headers), time.monotonic(),
                                   dict(request.query)))
        self._wake()
        fault = self._file_faults.get(key)
        if key not in self._files or (fault is not None and fault.status is not None):
            status = fault.status if fault is not None and fault.status is not None else 404
            return web.Response(status=status, text="This content is no longer available." if status == 404
                                else f"{status}: Error")
        data, content_type = self._files[key]
        if fault is not None and fault.hang:
            await self._closing.wait()  # aiohttp cancels this handler when the client gives up
        if fault is not None and fault.cut_at is not None:
            response = web.StreamResponse(headers={"Content-Type": content_type})
            response.content_length = len(data)
            await response.prepare(request)
            await response.write(data[:fault.cut_at])
            assert request.transport is not None
            request.transport.close()
            return response
        if fault is not None and fault.chunked:
            response = web.StreamResponse(headers={"Content-Type": content_type})
            response.enable_chunked_encoding()
            await response.prepare(request)
            for start in range(0, len(data), 16 * 1024):
                await response.write(data[start:start + 16 * 1024])
            await response.write_eof()
            return response
        return web.Response(body=data, headers={"Content-Type": content_type})

    # ---- REST: users, application, gateway ---------------------------------
    async def _get_me(self, req: _Request) -> tuple[int, Any]:
        return 200, {**self.bot_user, "verified": True, "mfa_enabled": False, "locale": "en-US", "email": None,
                     "bio": ""}

    async def _get_user(self, req: _Request) -> tuple[int, Any]:
        user = self.users.get(int(req.params["user_id"]))
        if user is None:
            raise DiscordError(404, "Unknown User", 10013)
        return 200, user

    async def _create_dm(self, req: _Request) -> tuple[int, Any]:
        body = req.body if isinstance(req.body, dict) else {}
        try:
            user_id = int(body["recipient_id"])
        except (KeyError, TypeError, ValueError):
            raise _form_error("recipient_id", "BASE_TYPE_REQUIRED", "This field is required") from None
        if user_id not in self.users:
            self._user(user_id, f"user{user_id}")
        return 200, self._dm_channel(user_id)

    async def _app_info(self, req: _Request) -> tuple[int, Any]:
        owner = {"id": str(GUILD_OWNER_ID), "username": "owner", "discriminator": "0", "global_name": "Owner",
                 "avatar": None, "public_flags": 0}
        return 200, {"id": str(self.application_id), "name": self.bot_name, "icon": None, "description": "",
                     "summary": "", "type": None, "bot_public": True, "bot_require_code_grant": False,
                     "owner": owner, "team": None, "verify_key": "0" * 64, "flags": 0, "hook": True,
                     "integration_types_config": {"0": {}}, "redirect_uris": [], "interactions_endpoint_url": None,
                     "approximate_guild_count": 1, "bot": self.bot_user}

    async def _gateway_info(self, req: _Request) -> tuple[int, Any]:
        return 200, {"url": self.gateway_url}

    async def _gateway_bot(self, req: _Request) -> tuple[int, Any]:
        return 200, {"url": self.gateway_url, "shards": 1,
                     "session_start_limit": {"total": 1000, "remaining": 999, "reset_after": 14400000,
                                             "max_concurrency": 1}}

    # ---- REST: channels and messages -----------------------------------------
    def _channel(self, channel_id: int) -> dict[str, Any]:
        channel = self.channels.get(channel_id)
        if channel is None:
            raise DiscordError(404, "Unknown Channel", 10003)
        return channel

    def _message(self, channel_id: int, message_id: int) -> dict[str, Any]:
        self._channel(channel_id)
        message = self.all_messages.get(message_id)
        if message is None or int(message["channel_id"]) != channel_id:
            raise DiscordError(404, "Unknown Message", 10008)
        return message

    async def _get_channel(self, req: _Request) -> tuple[int, Any]:
        return 200, self._channel(int(req.params["channel_id"]))

    async def _get_message(self, req: _Request) -> tuple[int, Any]:
        return 200, self._message(int(req.params["channel_id"]), int(req.params["message_id"]))

    async def _post_message(self, req: _Request) -> tuple[int, Any]:
        channel_id = int(req.params["channel_id"])
        self._channel(channel_id)
        recipient = self._dm_recipient(channel_id)
        if recipient is not None and recipient in self.dm_closed:
            raise DiscordError(403, "Cannot send messages to this user", 50007)
        body = req.body if isinstance(req.body, dict) else {}
        nonce = body.get("nonce")
        if nonce is not None and len(str(nonce)) > 25:
            raise _form_error("nonce", "BASE_TYPE_MAX_LENGTH", "Must be 25 or fewer in length.")
        if nonce is not None and body.get("enforce_nonce") and (earlier := self._nonce_message(str(nonce))):
            return 200, copy.deepcopy(earlier)
        message = self._create_bot_message(channel_id, req.body, req.files)
        if nonce is not None:
            self._nonces[(self.bot_user["id"], str(nonce))] = (int(message["id"]), time.monotonic())
        return 200, message

    def _nonce_message(self, nonce: str) -> dict[str, Any] | None:
        """The bot's message created with this nonce within ``nonce_window_s``, if any."""
        seen = self._nonces.get((self.bot_user["id"], nonce))
        if seen is None or time.monotonic() - seen[1] > self.nonce_window_s:
            return None
        return self.all_messages.get(seen[0])

    def _create_bot_message(self, channel_id: int, body: Any, files: list[dict[str, Any]],
                            extra: dict[str, Any] | None = None) -> dict[str, Any]:
        body = body if isinstance(body, dict) else {}
        message = self._message_base(channel_id, self.bot_user, "")
        message.update(extra or {})
        self._apply_fields(message, body, files, creating=True)
        reference = body.get("message_reference")
        if isinstance(reference, dict) and reference.get("message_id"):
            self._bot_reply(message, reference)
        message["mentions"] = self._mentions(message)
        self._store(message)
        return copy.deepcopy(message)

    def _bot_reply(self, message: dict[str, Any], reference: dict[str, Any]) -> None:
        target_id = int(reference["message_id"])
        if target_id in self.all_messages:
            self._make_reply(message, target_id)
        elif reference.get("fail_if_not_exists", True):
            raise _form_error("message_reference", "MESSAGE_REFERENCE_UNKNOWN_MESSAGE", "Unknown message")

    def _mentions(self, message: dict[str, Any]) -> list[dict[str, Any]]:
        ids = [int(x) for x in _USER_MENTION.findall(message.get("content", ""))]
        allowed = message.get("allowed_mentions") or {}
        referenced = message.get("referenced_message")
        if referenced and allowed.get("replied_user", True):
            ids.append(int(referenced["author"]["id"]))
        seen: list[dict[str, Any]] = []
        for user_id in dict.fromkeys(ids):
            if user_id in self.users:
                seen.append(copy.deepcopy(self.users[user_id]))
        return seen

    def _apply_fields(self, message: dict[str, Any], body: dict[str, Any], files: list[dict[str, Any]], *,
                      creating: bool) -> None:
        """Content, embeds, components, flags, allowed_mentions and attachments from a create or edit body;
        then the checks Discord makes on the result."""
        for key in ("content", "embeds", "components", "allowed_mentions", "tts", "nonce", "poll", "sticker_ids"):
            if key in body:
                value = body[key]
                message[key] = ("" if value is None else str(value)) if key == "content" else value
        if "flags" in body and body["flags"] is not None:
            message["flags"] = int(body["flags"]) | (message.get("flags", 0) & LOADING if not creating else 0)
        message["attachments"] = self._attachments(message, body, files)
        if len(message["content"]) > MAX_CONTENT:
            raise _form_error("content", "BASE_TYPE_MAX_LENGTH", f"Must be {MAX_CONTENT} or fewer in length.")
        if not any(message.get(key) for key in ("content", "embeds", "attachments", "components", "poll",
                                                 "sticker_ids")) and not message.get("flags", 0) & LOADING:
            raise DiscordError(400, "Cannot send an empty message", 50006)

    def _attachments(self, message: dict[str, Any], body: dict[str, Any],
                     files: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Kept attachments (listed in ``attachments`` by a real id) plus the uploaded ``files[n]``."""
        channel_id = int(message["channel_id"])
        existing = {a["id"]: a for a in message.get("attachments", [])}
        listed = body.get("attachments")
        if listed is None:
            kept = list(existing.values())
            listed = []
        else:
            kept = [existing[str(a.get("id"))] for a in listed if isinstance(a, dict) and str(a.get("id")) in existing]
        by_index = {str(a.get("id")): a for a in listed if isinstance(a, dict)}
        uploaded = []
        for index, upload in enumerate(files):
            match = re.fullmatch(r"files\[(\d+)\]", upload["field"])
            meta = by_index.get(match.group(1) if match else str(index), {})
            entry = self._attachment_entry(channel_id, str(meta.get("filename") or upload["filename"] or "file"),
                                           upload["size"], upload.get("content_type"), upload["data"])
            if meta.get("description"):
                entry["description"] = meta["description"]
            uploaded.append(entry)
        return kept + uploaded

    def _store(self, message: dict[str, Any]) -> None:
        message_id = int(message["id"])
        self.messages[message_id] = message
        self.all_messages[message_id] = message

    async def _patch_message(self, req: _Request) -> tuple[int, Any]:
        message = self._message(int(req.params["channel_id"]), int(req.params["message_id"]))
        if int(message["author"]["id"]) != self.bot_id:
            raise DiscordError(403, "Cannot edit a message authored by another user", 50005)
        return 200, self._edit(message, req.body, req.files)

    def _edit(self, message: dict[str, Any], body: Any, files: list[dict[str, Any]]) -> dict[str, Any]:
        edited = copy.deepcopy(message)
        self._apply_fields(edited, body if isinstance(body, dict) else {}, files, creating=False)
        edited["flags"] = edited.get("flags", 0) & ~LOADING
        edited["edited_timestamp"] = _now_iso()
        edited["mentions"] = self._mentions(edited)
        self._store(edited)
        return copy.deepcopy(edited)

    async def _delete_message(self, req: _Request) -> tuple[int, Any]:
        channel_id = int(req.params["channel_id"])
        message = self._message(channel_id, int(req.params["message_id"]))
        if int(message["author"]["id"]) != self.bot_id and "guild_id" not in message:
            raise DiscordError(403, "Cannot execute action on a DM channel", 50003)
        self._forget(int(message["id"]))
        return 204, None

    def _forget(self, message_id: int) -> None:
        self.messages.pop(message_id, None)
        self.all_messages.pop(message_id, None)
        self.deleted.add(message_id)

    async def _typing(self, req: _Request) -> tuple[int, Any]:
        channel_id = int(req.params["channel_id"])
        self._channel(channel_id)
        self.typing.append(channel_id)
        return 204, None

    async def _add_reaction(self, req: _Request) -> tuple[int, Any]:
        channel_id, message_id = int(req.params["channel_id"]), int(req.params["message_id"])
        self._message(channel_id, message_id)
        self.reactions.append((channel_id, message_id, req.params["emoji"]))
        return 204, None

    async def _remove_reaction(self, req: _Request) -> tuple[int, Any]:
        key = (int(req.params["channel_id"]), int(req.params["message_id"]), req.params["emoji"])
        self._message(key[0], key[1])
        if key in self.reactions:
            self.reactions.remove(key)
        return 204, None

    # ---- REST: interaction responses ------------------------------------------
    async def _callback(self, req: _Request) -> tuple[int, Any]:
        interaction = self._interactions.get(int(req.params["interaction_id"]))
        if interaction is None or interaction.token != req.params["token"]:
            raise DiscordError(404, "Unknown interaction", 10062)
        if interaction.responded:
            raise DiscordError(400, "Interaction has already been acknowledged.", 40060)
        body = req.body if isinstance(req.body, dict) else {}
        kind = body.get("type")
        data = body.get("data") if isinstance(body.get("data"), dict) else {}
        message = self._callback_message(interaction, kind, data, req.files)
        interaction.responded = True
        if "with_response" not in req.query or req.query["with_response"] in ("false", "0"):
            return 204, None
        flags = int(message.get("flags", 0)) if message else 0
        summary: dict[str, Any] = {"id": str(interaction.id), "type": interaction.type,
                                   "response_message_loading": kind == 5,
                                   "response_message_ephemeral": bool(flags & EPHEMERAL)}
        result: dict[str, Any] = {"interaction": summary, "resource": {"type": kind}}
        if message is not None:
            summary["response_message_id"] = message["id"]
            result["resource"]["message"] = message
        return 200, result

    def _callback_message(self, interaction: _Interaction, kind: Any, data: dict[str, Any],
                          files: list[dict[str, Any]]) -> dict[str, Any] | None:
        if kind in (4, 5):
            extra = {"webhook_id": str(self.application_id), "application_id": str(self.application_id),
                     "interaction_metadata": {"id": str(interaction.id), "type": interaction.type,
                                              "user": interaction.payload.get("user")
                                              or interaction.payload["member"]["user"],
                                              "authorizing_integration_owners":
                                                  interaction.payload["authorizing_integration_owners"]}}
            if kind == 5:
                data = {"flags": (int(data.get("flags") or 0) & EPHEMERAL) | LOADING}
            message = self._create_bot_message(interaction.channel_id, data, files, extra)
            interaction.original_id = int(message["id"])
            return message
        if kind in (6, 7):
            if interaction.message_id is None:
                raise DiscordError(400, "Interaction has no message to update", 40060)
            interaction.original_id = interaction.message_id
            if kind == 7:
                return self._edit(self._component_message(interaction), data, files)
            return None
        if kind in (1, 8, 9, 10, 12):
            return None
        raise _form_error("type", "BASE_TYPE_CHOICES", f"Value must be one of (1, 4, 5, 6, 7, 8, 9, 12), not {kind}")

    def _component_message(self, interaction: _Interaction) -> dict[str, Any]:
        assert interaction.message_id is not None
        message = self.all_messages.get(interaction.message_id)
        if message is None:
            message = copy.deepcopy(interaction.payload["message"])
            self._store(message)
        return message

    def _hook_interaction(self, req: _Request) -> _Interaction:
        interaction = self._tokens.get(req.params["token"])
        if int(req.params["app_id"]) != self.application_id or interaction is None:
            raise DiscordError(404, "Unknown Webhook", 10015)
        return interaction

    def _hook_message(self, req: _Request) -> dict[str, Any]:
        interaction = self._hook_interaction(req)
        wanted = req.params["message_id"]
        message_id = interaction.original_id if wanted == "@original" else int(wanted)
        message = self.all_messages.get(message_id) if message_id is not None else None
        if message is None:
            raise DiscordError(404, "Unknown Message", 10008)
        return message

    async def _followup(self, req: _Request) -> tuple[int, Any]:
        interaction = self._hook_interaction(req)
        extra = {"webhook_id": str(self.application_id), "application_id": str(self.application_id)}
        message = self._create_bot_message(interaction.channel_id, req.body, req.files, extra)
        return (200, message) if req.query.get("wait") in ("true", "True", "1") else (204, None)

    async def _get_hook_message(self, req: _Request) -> tuple[int, Any]:
        return 200, self._hook_message(req)

    async def _patch_hook_message(self, req: _Request) -> tuple[int, Any]:
        return 200, self._edit(self._hook_message(req), req.body, req.files)

    async def _delete_hook_message(self, req: _Request) -> tuple[int, Any]:
        self._forget(int(self._hook_message(req)["id"]))
        return 204, None

    # ---- REST: application commands --------------------------------------------
    def _command_scope(self, req: _Request) -> list[dict[str, Any]]:
        if int(req.params["app_id"]) != self.application_id:
            raise DiscordError(403, "Missing Access", 50001)
        if "guild_id" not in req.params:
            return self.commands
        if int(req.params["guild_id"]) != self.guild_id:
            raise DiscordError(403, "Missing Access", 50001)
        return self.guild_commands.setdefault(self.guild_id, [])

    def _make_command(self, body: Any, req: _Request, existing: dict[str, Any] | None, prefix: str = ""
                      ) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise _form_error(prefix.rstrip(".") or "_", "DICT_TYPE_CONVERT", "Only dictionaries may be used")
        kind = body.get("type", existing.get("type", 1) if existing else 1)
        name = body.get("name", existing.get("name") if existing else None)
        description = body.get("description", existing.get("description", "") if existing else "")
        if not isinstance(name, str) or not name:
            raise _form_error(f"{prefix}name", "BASE_TYPE_REQUIRED", "This field is required")
        if kind == 1 and (not _COMMAND_NAME.match(name) or name != name.lower()):
            raise _form_error(f"{prefix}name", "APPLICATION_COMMAND_INVALID_NAME", "Command name is invalid")
        if kind == 1 and not 1 <= len(description or "") <= 100:
            raise _form_error(f"{prefix}description", "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 100 in length.")
        command = {**(existing or {}), **body, "type": kind, "name": name, "description": description or "",
                   "id": existing["id"] if existing else str(self._ids.next()),
                   "application_id": str(self.application_id), "version": str(self._ids.next())}
        command.setdefault("default_member_permissions", None)
        command.setdefault("nsfw", False)
        if "guild_id" in req.params:
            command["guild_id"] = req.params["guild_id"]
        return command

    async def _list_commands(self, req: _Request) -> tuple[int, Any]:
        return 200, self._command_scope(req)

    async def _put_commands(self, req: _Request) -> tuple[int, Any]:
        scope = self._command_scope(req)
        if not isinstance(req.body, list):
            raise _form_error("_", "LIST_TYPE_CONVERT", "Only iterables may be used in a ListType")
        by_name = {(c["name"], c.get("type", 1)): c for c in scope}
        made = [self._make_command(item, req, by_name.get((item.get("name"), item.get("type", 1)))
                                   if isinstance(item, dict) else None, f"{index}.")
                for index, item in enumerate(req.body)]
        scope[:] = made
        return 200, made

    async def _post_command(self, req: _Request) -> tuple[int, Any]:
        scope = self._command_scope(req)
        body = req.body if isinstance(req.body, dict) else {}
        key = (body.get("name"), body.get("type", 1))
        existing = next((c for c in scope if (c["name"], c.get("type", 1)) == key), None)
        command = self._make_command(req.body, req, existing)
        if existing is None:
            scope.append(command)
            return 201, command
        scope[scope.index(existing)] = command
        return 200, command

    def _find_command(self, req: _Request) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        scope = self._command_scope(req)
        command = next((c for c in scope if c["id"] == req.params["command_id"]), None)
        if command is None:
            raise DiscordError(404, "Unknown application command", 10063)
        return scope, command

    async def _get_command(self, req: _Request) -> tuple[int, Any]:
        return 200, self._find_command(req)[1]

    async def _patch_command(self, req: _Request) -> tuple[int, Any]:
        scope, command = self._find_command(req)
        updated = self._make_command(req.body, req, command)
        scope[scope.index(command)] = updated
        return 200, updated

    async def _delete_command(self, req: _Request) -> tuple[int, Any]:
        scope, command = self._find_command(req)
        scope.remove(command)
        return 204, None


def _method_matches(wanted: str, method: str) -> bool:
    return wanted == "*" or wanted.upper() == method.upper()


def _failure_response(failure: _Failure) -> web.Response:
    if failure.status != 429:
        return _json_response(failure.status, {"message": failure.message, "code": failure.code})
    retry_after = 0.05 if failure.retry_after is None else failure.retry_after
    headers = {"Retry-After": str(max(1, int(-(-retry_after // 1)))), "X-RateLimit-Limit": "5",
               "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": f"{time.time() + retry_after:.3f}",
               "X-RateLimit-Reset-After": f"{retry_after:.3f}", "X-RateLimit-Bucket": "fakebucket0000",
               "X-RateLimit-Scope": "user"}
    body: dict[str, Any] = {"message": failure.message, "retry_after": retry_after, "global": False}
    if failure.code:
        body["code"] = failure.code
    return _json_response(429, body, headers)


async def _read_body(request: web.Request) -> tuple[Any, list[dict[str, Any]]]:
    """The JSON body (``payload_json`` of a multipart one) and the uploaded files; ValueError: bad JSON."""
    if not request.body_exists:
        return None, []
    if request.content_type == "multipart/form-data":
        form = await request.post()
        payload: Any = None
        files: list[dict[str, Any]] = []
        for name, value in form.items():
            if isinstance(value, web.FileField):
                data = value.file.read()
                files.append({"field": name, "filename": value.filename, "size": len(data),
                              "content_type": value.content_type, "data": data})
            elif name == "payload_json":
                payload = json.loads(value if isinstance(value, str) else bytes(value))
        return payload, files
    raw = await request.read()
    if not raw:
        return None, []
    if request.content_type == "application/json":
        return json.loads(raw), []
    return raw.decode("utf-8", "replace"), []


def voice_attachment(data: bytes, seconds: float, *, filename: str = "voice-message.ogg") -> dict[str, Any]:
    """An attachment as Discord's app records a voice message: Ogg Opus, its length and a waveform."""
    waveform = base64.b64encode(bytes(range(0, 256, 4))).decode()
    return {"filename": filename, "content_type": "audio/ogg", "data": data, "duration_secs": seconds,
            "waveform": waveform}


@contextlib.contextmanager
def patch_discord_py(fake: FakeDiscord) -> Iterator[None]:
    """Point discord.py's REST base and default gateway at ``fake`` (restored on exit)."""
    import discord.gateway
    import discord.http
    import yarl

    old_base, old_gateway = discord.http.Route.BASE, discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY
    discord.http.Route.BASE = fake.api_base
    discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(fake.gateway_url)
    try:
        yield
    finally:
        discord.http.Route.BASE = old_base
        discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = old_gateway
