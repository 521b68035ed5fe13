"""The Bot API's control calls as plain JSON requests over aiohttp: what receiving needs before
(and without) aiogram, whose import costs seconds of CPU (``channels/telegram/channel.py`` explains);
and a file's download (``/file/bot<token>/<file_path>``), read no further than a limit.

A call returns its ``result``; it raises ``Refused`` when Telegram says no (with the status, its
description and any ``retry_after``), and one of ``Unreachable`` when no answer came at all.
"""

from __future__ import annotations

from typing import Any

import aiohttp

from bruce.config.rules import telegram_token_problem
from bruce.errors import ConfigError
from bruce.safe_text import read_json

__all__ = ["ALLOWED_UPDATES", "OFFICIAL_API", "BotAPI", "Refused", "TooLarge", "Unreachable", "check_token"]

OFFICIAL_API = "https://api.telegram.org"
CONTROL_TIMEOUT_S = 20.0  # getMe, deleteWebhook, setMyCommands, setWebhook
MAX_ANSWER_BYTES = 32 * 2**20  # a getUpdates answer is at most 100 updates; a proxy gone wrong gets no more
ALLOWED_UPDATES = ["message", "edited_message", "callback_query"]


def check_token(token: str) -> None:
    """The shape of a bot token (``123456:ABC-...``), as aiogram checks it, without importing aiogram."""
    problem = telegram_token_problem(token)
    if problem:
        raise ConfigError(problem)


class Refused(Exception):
    """A Bot API call answered ``ok: false`` (or not with JSON at all)."""

    def __init__(self, method: str, status: int, description: str, retry_after: float | None = None) -> None:
        super().__init__(f"{method}: {status} {description}")
        self.status, self.description, self.retry_after = status, description, retry_after


class TooLarge(Exception):
    """A download that went past its ``max_bytes`` (``size``: the bytes announced or read so far)."""

    def __init__(self, size: int) -> None:
        super().__init__(f"more than the limit ({size} bytes or more)")
        self.size = size


Unreachable = (aiohttp.ClientError, TimeoutError)  # no answer at all: the network, a time-out


class BotAPI:
    """The Bot API's control calls as plain JSON requests: what receiving needs before (and
    without) aiogram."""

    def __init__(self, token: str, api_base: str | None) -> None:
        self._base = f"{(api_base or OFFICIAL_API).rstrip('/')}/bot{token}"
        self._files = f"{(api_base or OFFICIAL_API).rstrip('/')}/file/bot{token}"  # never logged: it holds the token
        self._http: aiohttp.ClientSession | None = None

    def _session(self) -> aiohttp.ClientSession:
        if self._http is None or self._http.closed:
            self._http = aiohttp.ClientSession()
        return self._http

    async def call(self, method: str, params: dict[str, Any], *, timeout: float = CONTROL_TIMEOUT_S) -> Any:
        """The call's ``result``; ``Refused`` when Telegram says no, ``Unreachable`` when it says nothing."""
        async with self._session().post(f"{self._base}/{method}", json=params,
                                   timeout=aiohttp.ClientTimeout(total=timeout)) as response:
            raw = await response.content.read(MAX_ANSWER_BYTES + 1)
            status = response.status
        if len(raw) > MAX_ANSWER_BYTES:
            raise Refused(method, status, f"an answer over {MAX_ANSWER_BYTES // 2**20} MB")
        try:
            body = read_json(raw)
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

    async def download(self, file_path: str, *, max_bytes: int, timeout: float) -> bytes:
        """A file's bytes (``file_path`` from ``getFile``), read no further than ``max_bytes``:
        ``TooLarge`` past it, ``Refused`` for an HTTP error, ``Unreachable`` or ``aiohttp.ClientPayloadError``
        (a body cut short) when it did not all come. No error carries the URL (it holds the token)."""
        async with self._session().get(f"{self._files}/{file_path.lstrip('/')}",
                                       timeout=aiohttp.ClientTimeout(total=timeout)) as response:
            if response.status != 200:
                raise Refused("file", response.status, "the file is gone" if response.status == 404
                              else "the file could not be downloaded")
            if response.content_length is not None and response.content_length > max_bytes:
                raise TooLarge(response.content_length)
            data = bytearray()
            async for chunk in response.content.iter_chunked(64 * 1024):
                data += chunk
                if len(data) > max_bytes:
                    raise TooLarge(len(data))
            if response.content_length is not None and len(data) != response.content_length:
                raise aiohttp.ClientPayloadError("the file ended early")
            return bytes(data)

    async def close(self) -> None:
        if self._http is not None:
            await self._http.close()
            self._http = None
