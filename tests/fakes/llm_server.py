"""Fake OpenAI-compatible chat-completions server for tests and benchmarks.

Drive the real ``litellm`` against it::

    async with FakeLLMServer() as fake:
        fake.add(Step.text("hi"), model="primary")
        await litellm.acompletion(model="openai/primary", api_base=fake.base_url,
                                  api_key="sk-test", messages=[...],
                                  num_retries=0, max_retries=0)

Faults to script: ``Step.error(status, retry_after=...)`` (the header, in seconds or as an HTTP
date), ``Step.delay`` (a hang), ``Step.cut`` (a stream dropped mid-answer), ``Step.raw`` (any
body, e.g. a proxy's HTML page with a 200), ``Step.no_choices`` (a 200 with ``choices: []``);
``closed_base_url()`` is an address where the connection is refused.

Speech to text: ``POST /v1/audio/transcriptions`` takes the OpenAI API's multipart form (``file``,
``model``, ...), records each request in ``transcriptions`` (the model, the file's name, content
type and exact bytes) and answers from ``add_transcript`` (a text, or a ``Step.error``/``Step.delay``),
else ``default_transcript``. Images sent in chat requests can be read back, decoded, with
``images_in(request)``.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import socket
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from aiohttp import BodyPartReader, web

_ERROR_TYPES: dict[int, tuple[str, str]] = {
    400: ("invalid_request_error", "invalid_request"),
    401: ("authentication_error", "invalid_api_key"),
    403: ("permission_error", "permission_denied"),
    404: ("invalid_request_error", "model_not_found"),
    429: ("rate_limit_error", "rate_limit_exceeded"),
    503: ("server_error", "service_unavailable"),
}


@dataclass(frozen=True)
class Step:
    """One scripted reply. Build with the static constructors."""

    kind: Literal["text", "tool_calls", "error", "delay", "cut", "raw", "no_choices"]
    content: str = ""
    # (function_name, arguments JSON string, call id or None)
    calls: tuple[tuple[str, str, str | None], ...] = ()
    prompt_tokens: int = 10
    completion_tokens: int = 5
    status: int = 200
    message: str = ""
    retry_after: float | str | None = None  # seconds, or the header's text as is (an HTTP date)
    seconds: float = 0.0
    then: Step | None = None
    content_type: str = "application/json"

    @staticmethod
    def text(content: str, *, prompt_tokens: int = 10, completion_tokens: int = 5) -> Step:
        return Step("text", content=content, prompt_tokens=prompt_tokens,
                    completion_tokens=completion_tokens)

    @staticmethod
    def tool_calls(*calls: tuple[str, dict[str, Any]] | tuple[str, dict[str, Any] | str, str]) -> Step:
        norm: list[tuple[str, str, str | None]] = []
        for call in calls:
            name, args = call[0], call[1]
            call_id = call[2] if len(call) > 2 else None  # type: ignore[misc]
            raw = args if isinstance(args, str) else json.dumps(args)
            norm.append((name, raw, call_id))
        return Step("tool_calls", calls=tuple(norm))

    @staticmethod
    def error(status: int, message: str = "fake error", *, retry_after: float | str | None = None) -> Step:
        return Step("error", status=status, message=message, retry_after=retry_after)

    @staticmethod
    def cut(content: str) -> Step:
        """Streamed: send ``content`` in pieces, then drop the connection without finishing."""
        return Step("cut", content=content)

    @staticmethod
    def delay(seconds: float, then: Step) -> Step:
        return Step("delay", seconds=seconds, then=then)

    @staticmethod
    def raw(body: str, *, status: int = 200, content_type: str = "application/json") -> Step:
        """Send ``body`` exactly as given (a broken proxy, a truncated reply), streamed or not."""
        return Step("raw", content=body, status=status, content_type=content_type)

    @staticmethod
    def no_choices(*, prompt_tokens: int = 10, completion_tokens: int = 0) -> Step:
        """A well-formed 200 whose ``choices`` list is empty (streamed: only a usage chunk)."""
        return Step("no_choices", prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)


def _chunks(text: str, n: int = 3) -> list[str]:
    """Split text into up to n non-empty pieces."""
    if not text:
        return []
    size = max(1, -(-len(text) // n))
    return [text[i:i + size] for i in range(0, len(text), size)]


class FakeLLMServer:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.default: Step | None = Step.text("ok")
        self.latency_s: float = 0.0
        self.responder: Callable[[dict[str, Any]], Step] | None = None
        self.base_url: str = ""
        self._queues: dict[str | None, deque[Step]] = {}
        self._runner: web.AppRunner | None = None
        self._seq = 0
        self.transcriptions: list[Transcription] = []
        self.default_transcript: str | Step = "hello from the voice note"
        self._transcripts: deque[str | Step] = deque()

    # ---- lifecycle -------------------------------------------------------
    async def start(self) -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)  # requests carry photos, as real ones do
        app.router.add_post("/v1/chat/completions", self._handle_chat)
        app.router.add_get("/v1/models", self._handle_models)
        app.router.add_post("/v1/audio/transcriptions", self._handle_transcription)
        # handler_cancellation: a client that times out and disconnects cancels
        # the handler, so delayed steps never hold up stop().
        self._runner = web.AppRunner(app, handler_cancellation=True,
                                     shutdown_timeout=1.0, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.base_url = f"http://127.0.0.1:{port}/v1"

    async def stop(self) -> None:
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    async def __aenter__(self) -> FakeLLMServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # ---- scripting -------------------------------------------------------
    def add(self, *steps: Step, model: str | None = None) -> None:
        self._queues.setdefault(model, deque()).extend(steps)

    def add_transcript(self, *answers: str | Step) -> None:
        """What the next transcription requests answer: a text, or a fault step."""
        self._transcripts.extend(answers)

    def requests_for(self, model: str) -> list[dict[str, Any]]:
        return [r for r in self.requests if r.get("model") == model]

    def _next_step(self, body: dict[str, Any]) -> Step | None:
        if self.responder is not None:
            return self.responder(body)
        for key in (body.get("model"), None):
            queue = self._queues.get(key)
            if queue:
                return queue.popleft()
        return self.default

    def _next_id(self, prefix: str) -> str:
        self._seq += 1
        return f"{prefix}_{self._seq}"

    # ---- handlers --------------------------------------------------------
    async def _handle_models(self, _request: web.Request) -> web.Response:
        names = {k for k in self._queues if k} | {str(r.get("model")) for r in self.requests}
        data = [{"id": n, "object": "model", "created": 0, "owned_by": "fake"} for n in sorted(names)]
        return web.json_response({"object": "list", "data": data})

    async def _handle_chat(self, request: web.Request) -> web.StreamResponse:
        body: dict[str, Any] = await request.json()
        self.requests.append(body)
        step = self._next_step(body)
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        while step is not None and step.kind == "delay":
            await asyncio.sleep(step.seconds)
            step = step.then
        if step is None:
            return _error_response(500, "FakeLLMServer: script ran out (no step queued and default is None)")
        if step.kind == "error":
            return _error_response(step.status, step.message, step.retry_after)
        if step.kind == "raw":
            return web.Response(body=step.content.encode(), status=step.status,
                                headers={"Content-Type": step.content_type})
        model = str(body.get("model", "fake"))
        if body.get("stream"):
            return await self._stream(request, body, model, step)
        return web.json_response(self._completion(model, step))

    async def _handle_transcription(self, request: web.Request) -> web.Response:
        """The OpenAI audio API: a multipart form with the audio ``file`` and the ``model``."""
        fields: dict[str, str] = {}
        audio = Transcription(model="", file_name="", content_type="", data=b"")
        reader = await request.multipart()
        async for part in reader:
            if not isinstance(part, BodyPartReader):
                continue
            if part.name == "file":
                audio.file_name = part.filename or ""
                audio.content_type = part.headers.get("Content-Type", "")
                audio.data = bytes(await part.read())
            elif part.name:
                fields[part.name] = await part.text()
        audio.model = fields.get("model", "")
        audio.fields = fields
        self.transcriptions.append(audio)
        answer = self._transcripts.popleft() if self._transcripts else self.default_transcript
        while isinstance(answer, Step) and answer.kind == "delay":
            await asyncio.sleep(answer.seconds)
            answer = answer.then if answer.then is not None else self.default_transcript
        if isinstance(answer, Step):
            if answer.kind == "error":
                return _error_response(answer.status, answer.message, answer.retry_after)
            return web.Response(body=answer.content.encode(), status=answer.status,
                                headers={"Content-Type": answer.content_type})
        if not audio.data:
            return _error_response(400, "no audio file in the request")
        return web.json_response({"text": answer, "task": "transcribe", "language": "english", "duration": 1.0})

    def _tool_calls(self, step: Step) -> list[dict[str, Any]]:
        return [{"id": cid or self._next_id("call"), "type": "function",
                 "function": {"name": name, "arguments": args}}
                for name, args, cid in step.calls]

    @staticmethod
    def _usage(step: Step) -> dict[str, int]:
        return {"prompt_tokens": step.prompt_tokens, "completion_tokens": step.completion_tokens,
                "total_tokens": step.prompt_tokens + step.completion_tokens}

    def _completion(self, model: str, step: Step) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": step.content}
        finish = "stop"
        if step.kind == "tool_calls":
            message = {"role": "assistant", "content": None, "tool_calls": self._tool_calls(step)}
            finish = "tool_calls"
        choices = [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}]
        return {"id": self._next_id("chatcmpl"), "object": "chat.completion",
                "created": int(time.time()), "model": model,
                "choices": [] if step.kind == "no_choices" else choices,
                "usage": self._usage(step)}

    async def _stream(self, request: web.Request, body: dict[str, Any], model: str,
                      step: Step) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                           "Cache-Control": "no-cache"})
        await resp.prepare(request)
        base = {"id": self._next_id("chatcmpl"), "object": "chat.completion.chunk",
                "created": int(time.time()), "model": model}

        async def send(delta: dict[str, Any], finish: str | None = None) -> None:
            chunk = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
            await resp.write(f"data: {json.dumps(chunk)}\n\n".encode())

        if step.kind == "no_choices":
            pass  # no choice at all: only the usage chunk (when asked for) and [DONE]
        elif step.kind == "tool_calls":
            await send({"role": "assistant", "content": None})
            for idx, call in enumerate(self._tool_calls(step)):
                fn = call["function"]
                await send({"tool_calls": [{"index": idx, "id": call["id"], "type": "function",
                                            "function": {"name": fn["name"], "arguments": ""}}]})
                for frag in _chunks(fn["arguments"]):
                    await send({"tool_calls": [{"index": idx, "function": {"arguments": frag}}]})
            await send({}, "tool_calls")
        else:
            await send({"role": "assistant", "content": ""})
            for piece in _chunks(step.content):
                await send({"content": piece})
            if step.kind == "cut":
                assert request.transport is not None
                request.transport.close()  # mid-stream: no finish, no [DONE]
                return resp
            await send({}, "stop")
        if (body.get("stream_options") or {}).get("include_usage"):
            usage_chunk = {**base, "choices": [], "usage": self._usage(step)}
            await resp.write(f"data: {json.dumps(usage_chunk)}\n\n".encode())
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp


@dataclass
class Transcription:
    """One transcription request as it arrived."""

    model: str
    file_name: str
    content_type: str
    data: bytes
    fields: dict[str, str] = field(default_factory=dict)


def images_in(request: dict[str, Any]) -> list[tuple[str, bytes]]:
    """Every image of a chat request's messages, as (MIME type, decoded bytes): each
    ``image_url`` part must be a ``data:<type>;base64,<data>`` URL that decodes cleanly."""
    found: list[tuple[str, bytes]] = []
    for message in request.get("messages", []):
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for part in content:
            if part.get("type") != "image_url":
                continue
            url = part["image_url"]["url"] if isinstance(part["image_url"], dict) else part["image_url"]
            head, _, data = url.partition(",")
            if not head.startswith("data:") or not head.endswith(";base64"):
                raise AssertionError(f"an image part that is not a base64 data URL: {url[:60]!r}")
            try:
                found.append((head[5:-7], base64.b64decode(data, validate=True)))
            except binascii.Error as exc:
                raise AssertionError(f"an image part whose base64 does not decode: {exc}") from exc
    return found


def _error_response(status: int, message: str, retry_after: float | str | None = None) -> web.Response:
    err_type, code = _ERROR_TYPES.get(status, ("server_error", "internal_error"))
    headers = None
    if retry_after is not None:
        headers = {"Retry-After": retry_after if isinstance(retry_after, str) else f"{retry_after:g}"}
    return web.json_response({"error": {"message": message, "type": err_type, "code": code,
                                        "param": None}}, status=status, headers=headers)


def closed_base_url() -> str:
    """An OpenAI-style base URL on 127.0.0.1 where nothing listens: connecting is refused."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"
