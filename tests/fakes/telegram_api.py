"""Fake Telegram Bot API for tests: an aiohttp server on 127.0.0.1 that a real aiogram 3 bot talks to.

Drive a real ``aiogram.Bot`` against it::

    async with FakeTelegramAPI() as api:
        session = AiohttpSession(api=TelegramAPIServer.from_base(api.base_url))
        bot = Bot(api.token, session=session)
        api.push_message(chat_id=42, user_id=42, text="hello")
        updates = await bot.get_updates(timeout=5)
        await bot.send_message(42, "hi")
        assert (await api.wait_for("sendMessage"))[0]["text"] == "hi"
        await bot.session.close()

Requests are ``/bot{token}/{method}`` (GET or POST, JSON, url-encoded or multipart bodies; aiogram's
``AiohttpSession`` sends url-encoded forms, multipart when a file is attached). Parameters are decoded
the way the real server reads them: JSON text (``reply_markup``, ``entities``, ``allowed_updates``...)
into objects, ``"123"`` into ints and ``"true"`` into bools, except for the text fields (``text``,
``caption``, ``parse_mode``...), which stay strings. An uploaded file becomes
``{"filename", "size", "content_type", "data"}`` in place of its ``attach://`` reference.

Behaviour kept from the real server, so that an adapter that works here works there:

* ``getUpdates``: ``offset`` confirms (forgets) the updates below it, a negative one keeps the last
  ``-offset``; ``timeout`` long-polls; ``allowed_updates`` is remembered across calls and filters
  what is delivered (by default, like Telegram, everything but ``chat_member``,
  ``message_reaction`` and ``message_reaction_count``); a second ``getUpdates`` while one is waiting
  ends the first with 409 "Conflict: terminated by other getUpdates request"; ``getUpdates`` while
  a webhook is set is a 409 too.
* ``sendMessage``: 400 for an empty text or one longer than 4096 characters (HTML tags not counted),
  400 "message to be replied not found" for a reply to an unknown message (unless
  ``allow_sending_without_reply``); only an inline keyboard is echoed in the returned Message.
  The text is kept as sent: ``parse_mode`` is not rendered, except where Telegram hands a message
  back to the bot: a message quoted in a callback query (or a reply) carries, as on Telegram, the
  visible text and its ``entities`` (``render_html``), so a bot that edits it sees what Telegram sends.
* ``editMessageText`` / ``editMessageReplyMarkup``: 400 "message to edit not found", 400 "message is
  not modified" when nothing changes; editing without ``reply_markup`` removes the inline keyboard.
* A chat in ``blocked`` answers 403 "Forbidden: bot was blocked by the user" to sends.
* ``answerCallbackQuery`` with an id never pushed: 400 "query is too old...".
* ``getFile`` and ``GET /file/bot{token}/{file_path}``: files registered with ``add_file`` (its
  ``file_id``), 400 "invalid file_id" for another, 400 "file is too big" over 20 MB (as for bots);
  ``break_file`` makes one's download answer an HTTP error, hang, or stop early (the connection is
  closed after part of the announced length); every download is in ``downloads``.
* Media updates: ``push_media`` with a ``voice``/``audio``/``photo``/``document``/``sticker``/``location``
  builder (each registers its files), or ``push_album`` for several with one ``media_group_id``.
* ``hang_next_answer(method)``: the next call is carried out (a ``sendMessage`` is stored and delivered)
  but its answer never comes; the client waits until it gives up (its time-out), as when Telegram took a
  send and the answer was lost on the way back.

Message ids are per chat and shared by the user's and the bot's messages, as in a private chat.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import html
import itertools
import json
import re
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp import web

Params = dict[str, Any]

# Fields whose values are text even when they look like a number, a bool or JSON.
_STRING_FIELDS = frozenset({
    "text", "caption", "parse_mode", "callback_query_id", "inline_message_id", "url", "secret_token",
    "ip_address", "action", "language_code", "business_connection_id", "message_effect_id", "title",
    "description", "short_description", "name", "emoji", "question", "file_id", "draft_text",
})
_INT_RE = re.compile(r"-?\d+")
_FLOAT_RE = re.compile(r"-?\d+\.\d+")
_COMMAND_RE = re.compile(r"^/[A-Za-z0-9_]+(?:@[A-Za-z0-9_]+)?")
_MENTION_RE = re.compile(r"(?<![\w@])@[A-Za-z0-9_]{5,32}")
_TAG_RE = re.compile(r"<[^>]*>")
_DEFAULT_EXCLUDED = frozenset({"chat_member", "message_reaction", "message_reaction_count"})
MAX_TEXT = 4096

NOT_MODIFIED = ("Bad Request: message is not modified: specified new message content and reply markup "
                "are exactly the same as a current content and reply markup of the message")
CONFLICT_OTHER_POLL = ("Conflict: terminated by other getUpdates request; make sure that only one bot "
                       "instance is running")
CONFLICT_WEBHOOK = ("Conflict: can't use getUpdates method while webhook is active; use deleteWebhook "
                    "to delete the webhook first")
QUERY_TOO_OLD = "Bad Request: query is too old and response timeout expired or query ID is invalid"


@dataclass(frozen=True)
class Call:
    """One request: the method in the Bot API's spelling, its decoded parameters, when (monotonic)."""

    method: str
    params: Params
    at: float


@dataclass(frozen=True)
class _Failure:
    status: int
    description: str
    retry_after: int | None
    having: str | None = None  # only a call with this parameter fails (e.g. reply_markup: a message with buttons)


@dataclass
class StoredFile:
    """A file the fake serves: its bytes, the size getFile reports, and how its download goes."""

    file_id: str
    path: str
    data: bytes
    size: int
    status: int = 200  # another: the download answers this HTTP status
    hang: bool = False  # the download never answers (until close())
    cut_at: int | None = None  # the connection closes after this many bytes of the announced length


MAX_BOT_DOWNLOAD = 20 * 2**20  # the Bot API's getFile limit for bots


class ApiError(Exception):
    """Raised by a method handler: answered as ``{"ok": false, "error_code": status, ...}``."""

    def __init__(self, status: int, description: str, retry_after: int | None = None) -> None:
        super().__init__(description)
        self.status, self.description, self.retry_after = status, description, retry_after


def _error_body(status: int, description: str, retry_after: int | None = None) -> web.Response:
    body: dict[str, Any] = {"ok": False, "error_code": status, "description": description}
    if retry_after is not None:
        body["parameters"] = {"retry_after": retry_after}
    return web.json_response(body, status=status)


def _utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def _auto_entities(text: str) -> list[dict[str, Any]]:
    """The entities Telegram adds on its own: a leading bot command and @mentions (UTF-16 offsets)."""
    found: list[tuple[int, int, str]] = []
    if m := _COMMAND_RE.match(text):
        found.append((0, m.end(), "bot_command"))
    found += [(m.start(), m.end(), "mention") for m in _MENTION_RE.finditer(text)]
    return [{"type": kind, "offset": _utf16_len(text[:start]), "length": _utf16_len(text[start:end])}
            for start, end, kind in sorted(found)]


def _visible_len(text: str, parse_mode: Any) -> int:
    mode = str(parse_mode or "").lower()
    if mode == "html":
        return len(html.unescape(_TAG_RE.sub("", text)))
    if mode.startswith("markdown"):  # lenient: markup characters are not counted
        return len(re.sub(r"\\(.)", r"\1", re.sub(r"(?<!\\)[*_~|`\[\]]", "", text)))
    return len(text)


_ENTITY_TAGS = {"b": "bold", "strong": "bold", "i": "italic", "em": "italic", "u": "underline", "ins": "underline",
                "s": "strikethrough", "strike": "strikethrough", "del": "strikethrough", "code": "code",
                "pre": "pre", "a": "text_link", "tg-spoiler": "spoiler", "blockquote": "blockquote"}


def _utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def render_html(text: str) -> tuple[str, list[dict[str, Any]]]:
    """Telegram HTML as Telegram turns it into a Message: the visible text and its entities
    (offsets and lengths in UTF-16 code units, ordered by offset)."""
    from html.parser import HTMLParser

    visible: list[str] = []
    entities: list[dict[str, Any]] = []
    open_tags: list[tuple[str, int, dict[str, Any]]] = []

    class Parser(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            if tag in _ENTITY_TAGS:
                open_tags.append((tag, _utf16_len("".join(visible)), dict(attrs)))

        def handle_endtag(self, tag: str) -> None:
            if not open_tags or open_tags[-1][0] != tag:
                return
            _, start, attrs = open_tags.pop()
            length = _utf16_len("".join(visible)) - start
            if length:
                entity: dict[str, Any] = {"type": _ENTITY_TAGS[tag], "offset": start, "length": length}
                if tag == "a":
                    entity["url"] = attrs.get("href")
                entities.append(entity)

        def handle_data(self, data: str) -> None:
            visible.append(data)

    parser = Parser(convert_charrefs=True)
    parser.feed(text)
    parser.close()
    return "".join(visible), sorted(entities, key=lambda e: (e["offset"], -e["length"]))


def _inline_markup(value: Any) -> dict[str, Any] | None:
    """Only an inline keyboard is part of a Message; reply keyboards are not echoed."""
    if isinstance(value, dict) and "inline_keyboard" in value:
        return value
    return None


def _update_type(update: dict[str, Any]) -> str:
    return next((key for key in update if key != "update_id"), "")


def _decode_value(key: str, value: Any) -> Any:
    if isinstance(value, web.FileField):
        data = value.file.read()
        return {"filename": value.filename, "size": len(data), "content_type": value.content_type, "data": data}
    if not isinstance(value, str) or key in _STRING_FIELDS:
        return value
    text = value.strip()
    if text[:1] in ("{", "["):
        try:
            return json.loads(text)
        except ValueError:
            return value
    if text in ("true", "false"):
        return text == "true"
    if _INT_RE.fullmatch(text):
        return int(text)
    if _FLOAT_RE.fullmatch(text):
        return float(text)
    return value


def _decode_params(raw: dict[str, Any]) -> Params:
    params = {key: _decode_value(key, value) for key, value in raw.items()}
    attached = set()
    for key, value in list(params.items()):
        if isinstance(value, str) and value.startswith("attach://") and value[9:] in params:
            attached.add(value[9:])
            params[key] = params[value[9:]]
    for name in attached:
        params.pop(name, None)
    return params


class FakeTelegramAPI:
    def __init__(self, token: str = "123456:TEST-token-abcdefghij", *, bot_username: str = "bruce_test_bot",
                 bot_id: int = 999) -> None:
        self.token = token
        self.bot_username = bot_username
        self.bot_id = bot_id
        self.base_url = ""
        self.calls: list[Call] = []
        self.revoked = False
        self.webhook: Params | None = None
        self.sent_messages: dict[int, list[dict[str, Any]]] = {}
        self.allowed_updates: list[str] | None = None  # the last non-empty allowed_updates
        self.commands: list[dict[str, Any]] = []  # the last setMyCommands (any scope)
        self.blocked: set[int] = set()  # chats where the user blocked the bot
        self.messages: dict[tuple[int, int], dict[str, Any]] = {}  # (chat_id, message_id) -> every message
        self.files: dict[str, StoredFile] = {}  # file_id -> a file getFile and /file/ serve
        self.downloads: list[str] = []  # the file_path of every /file/ request, in order
        self._album_seq = itertools.count(1)
        self._pending: list[dict[str, Any]] = []
        self._next_update_id = 1
        self._message_ids: dict[int, int] = {}
        self._chats: dict[int, dict[str, Any]] = {}
        self._users: dict[int, dict[str, Any]] = {}
        self._callback_ids: set[str] = set()
        self._callback_seq = itertools.count(1)
        self._rendered: dict[tuple[int, int], tuple[str, list[dict[str, Any]]]] = {}  # sent as HTML: as Telegram shows it
        self._file_seq = itertools.count(1)
        self._failures: dict[str, deque[_Failure]] = {}
        self._raw: dict[str, deque[tuple[int, str]]] = {}
        self._refused: dict[str, str] = {}
        self._hangs: deque[float] = deque()
        self._answers_lost: dict[str, int] = {}  # method -> how many next calls get no answer
        self._poll_generation = 0
        self._signals: dict[str, asyncio.Event] = {"updates": asyncio.Event(), "calls": asyncio.Event()}
        self._closing = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self._methods: dict[str, tuple[str, Callable[[Params], Awaitable[Any]]]] = {
            name.lower(): (name, handler) for name, handler in {
                "getMe": self._get_me, "getUpdates": self._get_updates, "sendMessage": self._send_message,
                "sendDocument": self._send_document, "sendMessageDraft": self._true,
                "editMessageText": self._edit_message_text, "editMessageReplyMarkup": self._edit_reply_markup,
                "deleteMessage": self._delete_message, "sendChatAction": self._send_chat_action,
                "answerCallbackQuery": self._answer_callback, "setWebhook": self._set_webhook,
                "deleteWebhook": self._delete_webhook, "getWebhookInfo": self._get_webhook_info,
                "setMyCommands": self._set_commands, "deleteMyCommands": self._delete_commands,
                "getMyCommands": self._get_commands, "getFile": self._get_file,
            }.items()}

    # ---- lifecycle -------------------------------------------------------
    async def start(self) -> None:
        self._closing.clear()
        app = web.Application(client_max_size=50 * 1024 * 1024)
        app.router.add_route("*", "/bot{token}/{method}", self._handle)
        app.router.add_get("/file/bot{token}/{path:.+}", self._download)
        # handler_cancellation: a client that gives up (a request time-out) cancels its handler.
        self._runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=0.5, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.base_url = f"http://127.0.0.1:{self._runner.addresses[0][1]}"

    async def close(self) -> None:
        self._closing.set()  # ends long polls and hangs now
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    async def __aenter__(self) -> FakeTelegramAPI:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ---- inspection ------------------------------------------------------
    def calls_to(self, method: str) -> list[Params]:
        wanted = method.lower()
        return [call.params for call in self.calls if call.method.lower() == wanted]

    async def wait_for(self, method: str, count: int = 1, timeout: float = 10.0) -> list[Params]:
        deadline = time.monotonic() + timeout
        while len(seen := self.calls_to(method)) < count:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(
                    f"waited {timeout}s for {count} call(s) to {method}, saw {len(seen)}: {seen!r}; "
                    f"all calls: {[call.method for call in self.calls]}")
            await self._wait_signal("calls", remaining)
        return seen

    @property
    def pending_updates(self) -> list[dict[str, Any]]:
        """Updates not yet confirmed by a getUpdates offset."""
        return list(self._pending)

    # ---- updates ---------------------------------------------------------
    def push_update(self, update: dict[str, Any]) -> int:
        update = copy.deepcopy(update)
        if "update_id" not in update:
            update["update_id"] = self._next_update_id
        self._next_update_id = max(self._next_update_id, int(update["update_id"]) + 1)
        if isinstance(callback := update.get("callback_query"), dict) and "id" in callback:
            self._callback_ids.add(str(callback["id"]))
        self._pending.append(update)
        self._pending.sort(key=lambda u: u["update_id"])
        self._wake("updates")
        return int(update["update_id"])

    def push_message(self, chat_id: int, user_id: int, text: str | None = None, *, chat_type: str = "private",
                     username: str | None = None, first_name: str = "Ana", reply_to_message_id: int | None = None,
                     entities: list[dict[str, Any]] | None = None, photo: bool = False, voice: bool = False,
                     sticker: bool = False, document: bool = False) -> int:
        user = self._user(user_id, first_name, username)
        chat = self._chat(chat_id, chat_type, user)
        message: dict[str, Any] = {"message_id": self._new_message_id(chat_id), "date": int(time.time()),
                                   "chat": chat, "from": user}
        media = self._media(photo=photo, voice=voice, sticker=sticker, document=document)
        message.update(media)
        if text is not None:
            found = _auto_entities(text) if entities is None else entities
            message["caption" if media else "text"] = text
            if found:
                message["caption_entities" if media else "entities"] = found
        if reply_to_message_id is not None:
            message["reply_to_message"] = self._replied(chat_id, reply_to_message_id)
        self.messages[(chat_id, message["message_id"])] = message
        return self.push_update({"message": message})

    def push_edited_message(self, chat_id: int, user_id: int, text: str, *, message_id: int | None = None) -> int:
        """The user edits a message: ``message_id``, or by default their last one in the chat."""
        if message_id is None:
            mine = [m for (c, _), m in self.messages.items() if c == chat_id and m.get("from", {}).get("id") == user_id]
            message_id = mine[-1]["message_id"] if mine else self._new_message_id(chat_id)
        original = self.messages.get((chat_id, message_id)) or {
            "message_id": message_id, "date": int(time.time()), "from": self._user(user_id),
            "chat": self._chats.get(chat_id) or self._chat(chat_id, "private", self._user(user_id))}
        edited = {**original, "text": text, "edit_date": int(time.time())}
        edited.pop("entities", None)
        if found := _auto_entities(text):
            edited["entities"] = found
        self.messages[(chat_id, message_id)] = edited
        return self.push_update({"edited_message": edited})

    def push_callback(self, chat_id: int, user_id: int, data: str, message_id: int, *,
                      first_name: str = "Ana", username: str | None = None) -> int:
        """The user presses an inline button on the bot's message ``message_id``."""
        callback_id = f"{user_id}{next(self._callback_seq):06d}"
        return self.push_update({"callback_query": {
            "id": callback_id, "from": self._user(user_id, first_name, username),
            "chat_instance": f"ci{chat_id}", "message": self._replied(chat_id, message_id), "data": data}})

    # ---- files and media -------------------------------------------------
    def add_file(self, data: bytes, *, folder: str = "documents", name: str = "file", size: int | None = None) -> str:
        """Register a file getFile and /file/ serve; its ``file_id``. ``size``: what getFile
        reports (by default the real length)."""
        n = next(self._file_seq)
        file_id = f"{folder}-{n:04d}-file"
        self.files[file_id] = StoredFile(file_id, f"{folder}/file_{n}_{name}", data, len(data) if size is None else size)
        return file_id

    def break_file(self, file_id: str, *, status: int = 200, hang: bool = False, cut_at: int | None = None) -> None:
        """The file's download answers ``status``, hangs, or stops after ``cut_at`` bytes."""
        stored = self.files[file_id]
        stored.status, stored.hang, stored.cut_at = status, hang, cut_at

    def _file_ref(self, file_id: str) -> dict[str, Any]:
        return {"file_id": file_id, "file_unique_id": f"u{file_id}", "file_size": self.files[file_id].size}

    def voice(self, data: bytes, *, duration: int = 3, mime_type: str | None = "audio/ogg",
              transcript: str | None = None) -> dict[str, Any]:
        voice = {**self._file_ref(self.add_file(data, folder="voice", name="voice.oga")), "duration": duration}
        if mime_type is not None:
            voice["mime_type"] = mime_type
        if transcript is not None:
            voice["transcript"] = transcript
        return {"voice": voice}

    def audio(self, data: bytes, *, file_name: str = "song.mp3", mime_type: str = "audio/mpeg",
              duration: int = 30) -> dict[str, Any]:
        file_id = self.add_file(data, folder="music", name=file_name)
        return {"audio": {**self._file_ref(file_id), "duration": duration, "file_name": file_name, "mime_type": mime_type}}

    def photo(self, *sizes: tuple[int, int, bytes]) -> dict[str, Any]:
        """A photo in the sizes given as (width, height, bytes), smallest first as Telegram sends them."""
        return {"photo": [{**self._file_ref(self.add_file(data, folder="photos", name=f"{w}x{h}.jpg")),
                           "width": w, "height": h} for w, h, data in sizes]}

    def document(self, data: bytes, *, file_name: str = "file.pdf", mime_type: str | None = "application/pdf",
                 size: int | None = None) -> dict[str, Any]:
        document = {**self._file_ref(self.add_file(data, name=file_name, size=size)), "file_name": file_name}
        if mime_type is not None:
            document["mime_type"] = mime_type
        return {"document": document}

    def sticker(self) -> dict[str, Any]:
        return self._media(photo=False, voice=False, sticker=True, document=False)

    @staticmethod
    def location(latitude: float = 48.2, longitude: float = 16.37) -> dict[str, Any]:
        return {"location": {"latitude": latitude, "longitude": longitude}}

    def push_media(self, chat_id: int, user_id: int, media: dict[str, Any], *, caption: str | None = None,
                   chat_type: str = "private", media_group_id: str | None = None,
                   reply_to_message_id: int | None = None) -> int:
        """A message carrying ``media`` (one of the builders above), with an optional caption."""
        user = self._user(user_id)
        message: dict[str, Any] = {"message_id": self._new_message_id(chat_id), "date": int(time.time()),
                                   "chat": self._chat(chat_id, chat_type, user), "from": user, **media}
        if caption is not None:
            message["caption"] = caption
            if found := _auto_entities(caption):
                message["caption_entities"] = found
        if media_group_id is not None:
            message["media_group_id"] = media_group_id
        if reply_to_message_id is not None:
            message["reply_to_message"] = self._replied(chat_id, reply_to_message_id)
        self.messages[(chat_id, message["message_id"])] = message
        return self.push_update({"message": message})

    def push_album(self, chat_id: int, user_id: int, items: list[dict[str, Any]], *, caption: str | None = None,
                   caption_on: int = 0, chat_type: str = "private") -> list[int]:
        """Several media messages sent together (one ``media_group_id``), the caption on one of them."""
        group = f"album{next(self._album_seq):04d}"
        return [self.push_media(chat_id, user_id, media, caption=caption if n == caption_on else None,
                                chat_type=chat_type, media_group_id=group) for n, media in enumerate(items)]

    async def _get_file(self, params: Params) -> dict[str, Any]:
        stored = self.files.get(str(params.get("file_id")))
        if stored is None:
            raise ApiError(400, "Bad Request: invalid file_id")
        if stored.size > MAX_BOT_DOWNLOAD:
            raise ApiError(400, "Bad Request: file is too big")
        return {**self._file_ref(stored.file_id), "file_path": stored.path}

    async def _download(self, request: web.Request) -> web.StreamResponse:
        path = request.match_info["path"]
        self.downloads.append(path)
        self._wake("calls")
        if request.match_info["token"] != self.token or self.revoked:
            return _error_body(401, "Unauthorized")
        stored = next((f for f in self.files.values() if f.path == path), None)
        if stored is None:
            return _error_body(404, "Not Found")
        if stored.hang:
            await self._closing.wait()
        if stored.status != 200:
            return _error_body(stored.status, "Internal Server Error" if stored.status >= 500 else "Not Found")
        if stored.cut_at is None:
            return web.Response(body=stored.data, content_type="application/octet-stream")
        response = web.StreamResponse()
        response.content_length = len(stored.data)
        await response.prepare(request)
        await response.write(stored.data[:stored.cut_at])
        if request.transport is not None:
            request.transport.close()
        return response

    # ---- failures --------------------------------------------------------
    def fail_next(self, method: str, *, status: int = 500, description: str = "Internal Server Error",
                  retry_after: int | None = None, times: int = 1, having: str | None = None) -> None:
        """The next ``times`` calls of ``method`` fail; with ``having``, only calls carrying that
        parameter fail, the others pass."""
        queue = self._failures.setdefault(method.lower(), deque())
        queue.extend(_Failure(status, description, retry_after, having) for _ in range(times))

    def answer_next_raw(self, method: str, body: str, *, status: int = 200) -> None:
        """The next call of ``method`` is answered with ``body`` as it is (a broken proxy)."""
        self._raw.setdefault(method.lower(), deque()).append((status, body))

    def hang_next_get_updates(self, seconds: float) -> None:
        self._hangs.append(seconds)

    def hang_next_answer(self, method: str, *, times: int = 1) -> None:
        """The next ``times`` calls of ``method`` are carried out but never answered (until close())."""
        self._answers_lost[method.lower()] = self._answers_lost.get(method.lower(), 0) + times

    def refuse_method(self, method: str, description: str = "Bad Request: method not found") -> None:
        self._refused[method.lower()] = description

    async def deliver_webhook(self, update: dict[str, Any], *, secret_token: str | None = None) -> tuple[int, str]:
        """POST an update to the webhook set with setWebhook, with its secret token header (or
        ``secret_token`` instead); returns the webhook's status and body."""
        if self.webhook is None:
            raise AssertionError("no webhook is set")
        update = {"update_id": self._next_update_id, **update}
        self._next_update_id = max(self._next_update_id, int(update["update_id"]) + 1)
        secret = secret_token if secret_token is not None else self.webhook.get("secret_token")
        headers = {"X-Telegram-Bot-Api-Secret-Token": str(secret)} if secret else {}
        async with aiohttp.ClientSession() as session, session.post(
                str(self.webhook["url"]), json=update, headers=headers) as resp:
            return resp.status, await resp.text()

    # ---- plumbing --------------------------------------------------------
    def _wake(self, name: str) -> None:
        event, self._signals[name] = self._signals[name], asyncio.Event()
        event.set()

    async def _wait_signal(self, name: str, timeout: float) -> None:
        """Until the signal fires, close() starts, or ``timeout`` passes."""
        waiters = [asyncio.ensure_future(self._signals[name].wait()), asyncio.ensure_future(self._closing.wait())]
        try:
            await asyncio.wait(waiters, timeout=max(timeout, 0), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waiters:
                waiter.cancel()
            await asyncio.gather(*waiters, return_exceptions=True)

    def _record(self, method: str, params: Params) -> None:
        self.calls.append(Call(method, params, time.monotonic()))
        self._wake("calls")

    async def _read_params(self, request: web.Request) -> Params:
        raw: dict[str, Any] = dict(request.query)
        if request.method == "POST" and request.body_exists:
            if request.content_type == "application/json":
                body = await request.json()
                if not isinstance(body, dict):
                    raise ValueError("the JSON body is not an object")
                raw.update(body)
            else:
                raw.update((await request.post()).items())
        return _decode_params(raw)

    async def _handle(self, request: web.Request) -> web.Response:
        name = request.match_info["method"]
        canonical, handler = self._methods.get(name.lower(), (name, None))
        try:
            params = await self._read_params(request)
        except ValueError:
            self._record(canonical, {})
            return _error_body(400, "Bad Request: can't parse request body")
        self._record(canonical, params)
        if refusal := self._refusal(request.match_info["token"], canonical, params):
            return refusal
        if handler is None:
            return _error_body(404, "Not Found")
        try:
            result = await handler(params)
        except ApiError as exc:
            return _error_body(exc.status, exc.description, exc.retry_after)
        if self._answers_lost.get(canonical.lower(), 0) > 0:
            self._answers_lost[canonical.lower()] -= 1
            await self._closing.wait()  # the client gives up first: aiohttp then cancels this handler
        return web.json_response({"ok": True, "result": result})

    def _refusal(self, token: str, method: str, params: Params) -> web.Response | None:
        if token != self.token or self.revoked:
            return _error_body(401, "Unauthorized")
        if (description := self._refused.get(method.lower())) is not None:
            return _error_body(404, description)
        if raw := self._raw.get(method.lower()):
            status, body = raw.popleft()
            return web.Response(status=status, text=body, content_type="application/json")
        if (queue := self._failures.get(method.lower())) and (queue[0].having is None or queue[0].having in params):
            failure = queue.popleft()
            return _error_body(failure.status, failure.description, failure.retry_after)
        return None

    # ---- builders --------------------------------------------------------
    def _bot_user(self) -> dict[str, Any]:
        return {"id": self.bot_id, "is_bot": True, "first_name": "Bruce", "username": self.bot_username}

    def _user(self, user_id: int, first_name: str | None = None, username: str | None = None) -> dict[str, Any]:
        user = self._users.get(user_id) or {"id": user_id, "is_bot": False, "first_name": first_name or "Ana"}
        if first_name is not None:
            user["first_name"] = first_name
        if username is not None:
            user["username"] = username
        self._users[user_id] = user
        return dict(user)

    def _chat(self, chat_id: int, chat_type: str, user: dict[str, Any]) -> dict[str, Any]:
        chat: dict[str, Any] = {"id": chat_id, "type": chat_type}
        if chat_type == "private":
            chat.update({k: user[k] for k in ("first_name", "username") if k in user})
        else:
            chat["title"] = "Test group"
        self._chats[chat_id] = chat
        return dict(chat)

    def _chat_of(self, chat_id: int) -> dict[str, Any]:
        known = self._chats.get(chat_id)
        return dict(known) if known else {"id": chat_id, "type": "private" if chat_id > 0 else "supergroup"}

    def _new_message_id(self, chat_id: int) -> int:
        self._message_ids[chat_id] = self._message_ids.get(chat_id, 0) + 1
        return self._message_ids[chat_id]

    def _file(self, prefix: str) -> dict[str, Any]:
        n = next(self._file_seq)
        return {"file_id": f"{prefix}-{n:04d}-file", "file_unique_id": f"u{prefix}{n:04d}"}

    def _media(self, *, photo: bool, voice: bool, sticker: bool, document: bool) -> dict[str, Any]:
        media: dict[str, Any] = {}
        if photo:
            media["photo"] = [{**self._file("photo"), "width": w, "height": w * 3 // 4, "file_size": w * 40}
                              for w in (90, 1280)]
        if voice:
            media["voice"] = {**self._file("voice"), "duration": 2, "mime_type": "audio/ogg", "file_size": 4096}
        if sticker:
            media["sticker"] = {**self._file("sticker"), "type": "regular", "width": 512, "height": 512,
                                "is_animated": False, "is_video": False, "emoji": "\N{THUMBS UP SIGN}"}
        if document:
            media["document"] = {**self._file("doc"), "file_name": "file.pdf", "mime_type": "application/pdf",
                                 "file_size": 1024}
        return media

    def _replied(self, chat_id: int, message_id: int) -> dict[str, Any]:
        """A message as quoted in reply_to_message or a callback: the stored one, else one from the bot."""
        found = self.messages.get((chat_id, message_id))
        if found is None:
            return {"message_id": message_id, "date": int(time.time()), "chat": self._chat_of(chat_id),
                    "from": self._bot_user()}
        quoted = copy.deepcopy(found)
        quoted.pop("reply_to_message", None)
        if (chat_id, message_id) in self._rendered:  # Telegram hands back the visible text and its entities
            quoted["text"], entities = self._rendered[(chat_id, message_id)]
            self._set_optional(quoted, "entities", entities or None)
        return quoted

    def _bot_message(self, params: Params, content: dict[str, Any]) -> dict[str, Any]:
        chat_id = self._chat_id(params)
        if chat_id in self.blocked:
            raise ApiError(403, "Forbidden: bot was blocked by the user")
        reply = self._reply_target(chat_id, params)
        message: dict[str, Any] = {"message_id": self._new_message_id(chat_id), "date": int(time.time()),
                                   "chat": self._chat_of(chat_id), "from": self._bot_user(), **content}
        if reply is not None:
            message["reply_to_message"] = reply
        if markup := _inline_markup(params.get("reply_markup")):
            message["reply_markup"] = markup
        self.messages[(chat_id, message["message_id"])] = message
        self.sent_messages.setdefault(chat_id, []).append(message)
        return message

    def _reply_target(self, chat_id: int, params: Params) -> dict[str, Any] | None:
        reply = params.get("reply_parameters")
        if isinstance(reply, dict):
            target, lenient = reply.get("message_id"), bool(reply.get("allow_sending_without_reply"))
        else:
            target, lenient = params.get("reply_to_message_id"), bool(params.get("allow_sending_without_reply"))
        if target is None:
            return None
        if (chat_id, target) in self.messages:
            return self._replied(chat_id, int(target))
        if lenient:
            return None
        raise ApiError(400, "Bad Request: message to be replied not found")

    @staticmethod
    def _chat_id(params: Params) -> int:
        chat_id = params.get("chat_id")
        if not isinstance(chat_id, int) or isinstance(chat_id, bool):
            raise ApiError(400, "Bad Request: chat not found")
        return chat_id

    @staticmethod
    def _check_text(text: Any, parse_mode: Any) -> str:
        if not isinstance(text, str) or not text.strip():
            raise ApiError(400, "Bad Request: message text is empty")
        if _visible_len(text, parse_mode) > MAX_TEXT:
            raise ApiError(400, "Bad Request: message is too long")
        return text

    def _editable(self, params: Params) -> dict[str, Any]:
        chat_id, message_id = self._chat_id(params), params.get("message_id")
        message = self.messages.get((chat_id, message_id))  # type: ignore[arg-type]
        if message is None:
            raise ApiError(400, "Bad Request: message to edit not found")
        if message.get("from", {}).get("id") != self.bot_id:
            raise ApiError(400, "Bad Request: message can't be edited")
        return message

    # ---- methods ---------------------------------------------------------
    async def _true(self, _params: Params) -> bool:
        return True

    async def _get_me(self, _params: Params) -> dict[str, Any]:
        return {**self._bot_user(), "can_join_groups": True, "can_read_all_group_messages": False,
                "supports_inline_queries": False}

    def _confirm(self, offset: Any) -> None:
        if isinstance(offset, int) and offset > 0:
            self._pending = [u for u in self._pending if u["update_id"] >= offset]
        elif isinstance(offset, int) and offset < 0:
            self._pending = self._pending[offset:]

    def _deliverable(self, limit: int) -> list[dict[str, Any]]:
        allowed = set(self.allowed_updates or ())
        keep = [u for u in self._pending
                if (_update_type(u) in allowed if allowed else _update_type(u) not in _DEFAULT_EXCLUDED)]
        self._pending = keep  # updates of a type not asked for are never delivered
        return copy.deepcopy(keep[:limit])

    async def _get_updates(self, params: Params) -> list[dict[str, Any]]:
        if self.webhook is not None:
            raise ApiError(409, CONFLICT_WEBHOOK)
        if isinstance(params.get("allowed_updates"), list):
            self.allowed_updates = list(params["allowed_updates"]) or None
        self._confirm(params.get("offset"))
        self._poll_generation += 1
        generation = self._poll_generation
        self._wake("updates")  # an earlier poll still waiting ends with a conflict
        if self._hangs:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._closing.wait(), self._hangs.popleft())
        limit = max(1, min(int(params.get("limit") or 100), 100))
        deadline = time.monotonic() + float(params.get("timeout") or 0)
        while True:
            if generation != self._poll_generation:
                raise ApiError(409, CONFLICT_OTHER_POLL)
            ready = self._deliverable(limit)
            remaining = deadline - time.monotonic()
            if ready or remaining <= 0 or self._closing.is_set():
                return ready
            await self._wait_signal("updates", remaining)

    async def _send_message(self, params: Params) -> dict[str, Any]:
        text = self._check_text(params.get("text"), params.get("parse_mode"))
        content: dict[str, Any] = {"text": text}
        if params.get("entities"):
            content["entities"] = params["entities"]
        message = self._bot_message(params, content)
        self._remember_rendering(message, text, params.get("parse_mode"))
        return message

    def _remember_rendering(self, message: dict[str, Any], text: str, parse_mode: Any) -> None:
        key = (message["chat"]["id"], message["message_id"])
        if str(parse_mode or "").lower() == "html":
            self._rendered[key] = render_html(text)
        else:
            self._rendered.pop(key, None)

    async def _send_document(self, params: Params) -> dict[str, Any]:
        document = params.get("document")
        if isinstance(document, dict):
            if not document.get("size"):
                raise ApiError(400, "Bad Request: file must be non-empty")
            sent = {**self._file("doc"), "file_name": document.get("filename") or "document",
                    "file_size": document["size"]}
            if document.get("content_type") and document["content_type"] != "application/octet-stream":
                sent["mime_type"] = document["content_type"]
        elif isinstance(document, str) and document:
            sent = {"file_id": document, "file_unique_id": f"u{abs(hash(document)) % 10**8}"}
        else:
            raise ApiError(400, "Bad Request: there is no document in the request")
        content: dict[str, Any] = {"document": sent}
        if params.get("caption"):
            content["caption"] = params["caption"]
        return self._bot_message(params, content)

    async def _edit_message_text(self, params: Params) -> dict[str, Any] | bool:
        if params.get("inline_message_id"):
            return True
        message = self._editable(params)
        if "text" not in message:
            raise ApiError(400, "Bad Request: there is no text in the message to edit")
        text = self._check_text(params.get("text"), params.get("parse_mode"))
        markup = _inline_markup(params.get("reply_markup"))
        entities = params.get("entities") or None
        if (message["text"], message.get("reply_markup"), message.get("entities")) == (text, markup, entities):
            raise ApiError(400, NOT_MODIFIED)
        message["text"] = text
        self._set_optional(message, "entities", entities)
        self._set_optional(message, "reply_markup", markup)
        message["edit_date"] = int(time.time())
        self._remember_rendering(message, text, params.get("parse_mode"))
        return message

    async def _edit_reply_markup(self, params: Params) -> dict[str, Any] | bool:
        if params.get("inline_message_id"):
            return True
        message = self._editable(params)
        markup = _inline_markup(params.get("reply_markup"))
        if message.get("reply_markup") == markup:
            raise ApiError(400, NOT_MODIFIED)
        self._set_optional(message, "reply_markup", markup)
        message["edit_date"] = int(time.time())
        return message

    @staticmethod
    def _set_optional(message: dict[str, Any], key: str, value: Any) -> None:
        if value is None:
            message.pop(key, None)
        else:
            message[key] = value

    async def _delete_message(self, params: Params) -> bool:
        chat_id = self._chat_id(params)
        message = self.messages.pop((chat_id, params.get("message_id")), None)  # type: ignore[arg-type]
        if message is None:
            raise ApiError(400, "Bad Request: message to delete not found")
        sent = self.sent_messages.get(chat_id, [])
        self.sent_messages[chat_id] = [m for m in sent if m is not message]
        return True

    async def _send_chat_action(self, params: Params) -> bool:
        if self._chat_id(params) in self.blocked:
            raise ApiError(403, "Forbidden: bot was blocked by the user")
        return True

    async def _answer_callback(self, params: Params) -> bool:
        if str(params.get("callback_query_id")) not in self._callback_ids:
            raise ApiError(400, QUERY_TOO_OLD)
        return True

    async def _set_webhook(self, params: Params) -> bool:
        if params.get("drop_pending_updates"):
            self._pending.clear()
        self.webhook = dict(params) if params.get("url") else None
        return True

    async def _delete_webhook(self, params: Params) -> bool:
        if params.get("drop_pending_updates"):
            self._pending.clear()
        self.webhook = None
        return True

    async def _get_webhook_info(self, _params: Params) -> dict[str, Any]:
        return {"url": (self.webhook or {}).get("url", ""), "has_custom_certificate": False,
                "pending_update_count": len(self._pending)}

    async def _set_commands(self, params: Params) -> bool:
        commands = params.get("commands")
        if not isinstance(commands, list):
            raise ApiError(400, "Bad Request: can't parse commands JSON object")
        self.commands = commands
        return True

    async def _delete_commands(self, _params: Params) -> bool:
        self.commands = []
        return True

    async def _get_commands(self, _params: Params) -> list[dict[str, Any]]:
        return list(self.commands)
