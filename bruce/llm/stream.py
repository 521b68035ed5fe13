"""Reading a streamed model reply: emit the text as it arrives, assemble the reply.

Part of the LLM edge (``bruce/llm/service.py`` passes the lazily imported ``litellm`` in). litellm's
stream wrapper costs about as much client time again as a whole plain call, so an OpenAI-format
stream (OpenAI and every OpenAI-compatible server) is read straight from the openai SDK's
stream under the wrapper, and the deltas are assembled here as ``litellm.stream_chunk_builder``
would. Other providers' streams are read through the wrapper. Measured in docs/benchmarks.md.
"""

from __future__ import annotations

import importlib
from typing import Any

from bruce.turns.progress import TextDelta
from bruce.turns.scope import TurnScope

__all__ = ["collect_stream", "StreamParts", "MalformedReply", "prepare_first_stream", "FIRST_STREAM_IMPORTS"]

# What the first streamed answer imports on its way (about 17 ms in all): anyio's asyncio backend (the openai
# client closes a stream through it), and what litellm's success path loads on its first real call. A name a
# later release no longer has is skipped: the first answer then imports whatever it imports.
FIRST_STREAM_IMPORTS = ("anyio._backends._asyncio", "litellm._service_logger", "litellm.proxy.spend_tracking.savings")


def prepare_first_stream() -> None:
    """Load and build now what the first streamed answer would (about 20 ms of it, measured against the
    fake model): ``FIRST_STREAM_IMPORTS``, and openai's chunk models, which it defers until a chunk is read.
    Called with litellm loaded (``LLMService.warm_up``, in its loading thread)."""
    for name in FIRST_STREAM_IMPORTS:
        try:
            importlib.import_module(name)
        except ImportError:
            continue
    from openai.types.chat import ChatCompletionChunk

    ChatCompletionChunk.model_validate({"id": "warm-up", "object": "chat.completion.chunk", "created": 0,
                                        "model": "warm-up",
                                        "choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": None}]})


class MalformedReply(ValueError):
    """The provider answered, but not with a usable completion (no choices, an empty stream, a
    stream that stopped without saying it was finished). ``what`` is the short label for the
    audit row: ``malformed response (<what>)``."""

    def __init__(self, what: str, message: str) -> None:
        self.what = what
        super().__init__(message)


async def collect_stream(litellm: Any, stream: Any, scope: TurnScope) -> Any:
    """Emit the text as it arrives; return the reply assembled from the deltas, shaped like a plain
    call's response (what ``_parse`` and ``_cost`` read).

    litellm's stream wrapper costs about as much client time again as the whole plain call: per chunk
    it rebuilds each delta, and at the end it rebuilds the whole response in a worker thread, prices
    it, deep-copies it and schedules its logging. So when the provider's stream is already in OpenAI's
    chat-chunk format (OpenAI and the OpenAI-compatible servers litellm drives through the openai SDK)
    the chunks are read straight from it; any other stream is read through the wrapper. Either way
    the deltas are assembled here, as ``litellm.stream_chunk_builder`` would, not by it."""
    parts = StreamParts()
    raw = _openai_chunk_stream(stream)
    if raw is None:
        async for chunk in stream:
            text = parts.add(chunk)
            if text:
                await scope.progress.emit(TextDelta(text))
    else:
        await _read_openai_chunks(stream, raw, parts, scope)
    return parts.response(litellm, getattr(stream, "custom_llm_provider", None))


# Providers whose chunks litellm's wrapper converts in its own way even when they arrive via the openai SDK.
_WRAPPER_CONVERTED = frozenset({"text-completion-openai", "text-completion-codestral", "azure_text", "cached_response"})


def _openai_chunk_stream(stream: Any) -> Any:
    """The provider stream under litellm's wrapper when it yields OpenAI chat chunks as they are, else None."""
    from openai import AsyncStream

    raw = getattr(stream, "completion_stream", None)
    if not isinstance(raw, AsyncStream) or getattr(stream, "custom_llm_provider", None) in _WRAPPER_CONVERTED:
        return None
    if hasattr(raw, "_cast_to"):
        # The SDK then yields each chunk's JSON as it is rather than building a pydantic model of it
        # (~0.2 ms a chunk); its own error and end-of-stream handling is unchanged.
        raw._cast_to = object
    return raw


async def _read_openai_chunks(stream: Any, raw: Any, parts: StreamParts, scope: TurnScope) -> None:
    """Read the chunks from ``raw``, with the end-of-stream checks litellm's wrapper makes; a failure
    is raised as the wrapper would raise it, so ``bruce.llm.faults.classify`` sees the same exception."""
    import httpx

    try:
        async for chunk in raw:
            text = parts.add(chunk)
            if text:
                await scope.progress.emit(TextDelta(text))
            if parts.finish_reason in ("error", "abort"):
                raise RuntimeError(f"the provider ended the stream with finish_reason={parts.finish_reason}")
        if parts.finish_reason is None:  # the stream ended cleanly, but the reply never said it was done
            raise parts.unfinished()
    except MalformedReply:
        raise  # ours, and already says what was wrong
    except (httpx.ReadError, httpx.RemoteProtocolError) as exc:
        if parts.finish_reason is None:  # a connection lost after the finish counts as the end, as in the wrapper
            raise _as_wrapper_error(stream, exc)  # noqa: B904 - chained to exc implicitly, as the wrapper's are
    except Exception as exc:
        raise _as_wrapper_error(stream, exc)  # noqa: B904
    finally:
        await stream.aclose()  # releases the connection and litellm's per-call logging context


def _as_wrapper_error(stream: Any, exc: Exception) -> Exception:
    """What iterating litellm's wrapper raises for ``exc`` (mapped to litellm's exception types)."""
    handle = getattr(stream, "_handle_stream_fallback_error", None)
    if callable(handle):
        try:
            handle(exc)
        except Exception as mapped:
            return mapped
    return exc


class _ToolCallParts:
    __slots__ = ("id", "name", "arguments")

    def __init__(self) -> None:
        self.id: str | None = None
        self.name: str | None = None
        self.arguments: list[str] = []


class StreamParts:
    """The pieces of one streamed reply (first choice only), combined the way litellm's
    ``stream_chunk_builder`` combines them: text and arguments concatenated, a tool call's id and
    name from its last fragment carrying one, calls ordered by index, the last usage reported; the
    content is None only when tool calls came and no delta carried content."""

    __slots__ = ("chunks", "choices", "id", "created", "model", "text", "has_content", "has_tool_calls", "calls",
                 "finish_reason", "usage")

    def __init__(self) -> None:
        self.chunks = 0
        self.choices = 0  # chunks that carried the first choice
        self.id: str | None = None
        self.created: int | None = None
        self.model: str | None = None
        self.text: list[str] = []
        self.has_content = False
        self.has_tool_calls = False
        self.calls: dict[Any, _ToolCallParts] = {}
        self.finish_reason: str | None = None
        self.usage: Any = None

    def add(self, chunk: Any) -> str | None:
        """Take one chunk (a litellm chunk, an openai SDK chunk or its JSON: same fields); return its
        text, if any."""
        if not self.model:  # from the first chunk naming the model (Azure's first one names none)
            self.id, self.created, self.model = (_field(chunk, k) for k in ("id", "created", "model"))
        self.chunks += 1
        usage = _field(chunk, "usage")
        if usage is not None:
            self.usage = usage
        text = None
        for choice in _field(chunk, "choices") or ():
            delta = _field(choice, "delta")
            if _field(choice, "index") or delta is None:
                continue
            self.choices += 1
            finish_reason = _field(choice, "finish_reason")
            if finish_reason:
                self.finish_reason = finish_reason
            text = self._add_delta(delta) or text
        return text

    def _add_delta(self, delta: Any) -> str | None:
        calls = _field(delta, "tool_calls")
        if calls is not None:
            self.has_tool_calls = True
            for call in calls:
                self._add_call(call)
        content = _field(delta, "content")
        if content is None:
            return None
        self.has_content = True
        text = str(content)
        if text:
            self.text.append(text)
        return text

    def _add_call(self, call: Any) -> None:
        parts = self.calls.setdefault(_field(call, "index"), _ToolCallParts())
        parts.id = _field(call, "id") or parts.id
        function = _field(call, "function")
        if function is not None:
            parts.name = _field(function, "name") or parts.name
            arguments = _field(function, "arguments")
            if arguments:
                parts.arguments.append(arguments)

    def unfinished(self) -> MalformedReply:
        """What is wrong with a stream that ended before a chunk gave a finish_reason."""
        if not self.chunks:
            return MalformedReply("empty stream", "the stream carried no response")
        if not self.choices:
            return MalformedReply("no choices", "the stream carried no choices")
        return MalformedReply("stream ended without a finish_reason", "Stream ended before a finish_reason was received")

    def response(self, litellm: Any, provider: str | None) -> Any:
        if not self.chunks or not self.choices:
            raise self.unfinished()
        content = None if self.has_tool_calls and not self.has_content else "".join(self.text)
        message: dict[str, Any] = {"role": "assistant", "content": content}
        calls = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": "".join(c.arguments) or "{}"}}
            for _, c in sorted(self.calls.items(), key=lambda item: (item[0] is None, item[0] or 0))
            if c.id and c.name
        ]
        if calls:
            message["tool_calls"] = calls
        response = litellm.ModelResponse(
            id=self.id, created=self.created, model=self.model,
            choices=[{"index": 0, "finish_reason": self.finish_reason or "stop", "message": message}],
        )
        if self.usage is None:  # the provider ignored include_usage: the tokens stay unknown
            response.usage = None
        elif isinstance(self.usage, litellm.Usage):
            response.usage = self.usage
        else:
            response.usage = litellm.Usage(**(self.usage if isinstance(self.usage, dict) else self.usage.model_dump()))
        response._hidden_params.update(custom_llm_provider=provider, provider_response_model=self.model)
        return response


def _field(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)
