"""Prove FakeLLMServer works end-to-end through the real litellm client."""

from __future__ import annotations

import os

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import litellm
import openai
import pytest

from tests.fakes.llm_server import FakeLLMServer, Step, closed_base_url

MESSAGES = [{"role": "user", "content": "hello"}]
NO_RETRY: dict[str, Any] = {"num_retries": 0, "max_retries": 0}


@pytest.fixture
async def fake() -> AsyncIterator[FakeLLMServer]:
    async with FakeLLMServer() as server:
        yield server


async def complete(fake: FakeLLMServer, model: str = "primary", **kwargs: Any) -> Any:
    params: dict[str, Any] = {**NO_RETRY, **kwargs}
    return await litellm.acompletion(
        model=f"openai/{model}", api_base=fake.base_url, api_key="sk-test",
        messages=MESSAGES, **params,
    )


async def test_text_reply(fake: FakeLLMServer) -> None:
    fake.add(Step.text("hi there", prompt_tokens=7, completion_tokens=3))
    resp = await complete(fake)
    assert resp.choices[0].message.content == "hi there"
    assert resp.choices[0].finish_reason == "stop"
    assert resp.usage.prompt_tokens == 7
    assert resp.usage.completion_tokens == 3
    assert resp.usage.total_tokens == 10


async def test_default_reply_and_none_default(fake: FakeLLMServer) -> None:
    resp = await complete(fake)
    assert resp.choices[0].message.content == "ok"
    fake.default = None
    with pytest.raises(litellm.InternalServerError, match="script ran out"):
        await complete(fake)


async def test_tool_call_reply(fake: FakeLLMServer) -> None:
    fake.add(Step.tool_calls(("get_weather", {"city": "Oslo"}), ("lookup", "{not json", "my_id")))
    resp = await complete(fake)
    msg = resp.choices[0].message
    assert resp.choices[0].finish_reason == "tool_calls"
    assert msg.content is None
    calls = msg.tool_calls
    assert [c.function.name for c in calls] == ["get_weather", "lookup"]
    assert json.loads(calls[0].function.arguments) == {"city": "Oslo"}
    assert calls[0].id.startswith("call_")
    assert calls[1].id == "my_id"
    assert calls[1].function.arguments == "{not json"


async def test_streaming_text(fake: FakeLLMServer) -> None:
    fake.add(Step.text("The quick brown fox jumps", prompt_tokens=4, completion_tokens=6))
    stream = await complete(fake, stream=True, stream_options={"include_usage": True})
    parts: list[str] = []
    finish: list[str] = []
    usage = None
    async for chunk in stream:
        if chunk.choices:
            parts.append(chunk.choices[0].delta.content or "")
            if chunk.choices[0].finish_reason:
                finish.append(chunk.choices[0].finish_reason)
        usage = getattr(chunk, "usage", None) or usage
    assert "".join(parts) == "The quick brown fox jumps"
    assert len([p for p in parts if p]) > 1  # really arrived in pieces
    assert finish == ["stop"]
    assert usage is not None and usage.total_tokens == 10
    assert fake.requests[0]["stream"] is True


async def test_streaming_tool_calls(fake: FakeLLMServer) -> None:
    fake.add(Step.tool_calls(("search", {"q": "bruce wayne"})))
    stream = await complete(fake, stream=True)
    chunks = [c async for c in stream]
    resp = litellm.stream_chunk_builder(chunks, messages=MESSAGES)
    calls = resp.choices[0].message.tool_calls
    assert len(calls) == 1
    assert calls[0].function.name == "search"
    assert json.loads(calls[0].function.arguments) == {"q": "bruce wayne"}
    assert resp.choices[0].finish_reason == "tool_calls"


async def test_429_is_rate_limit_error(fake: FakeLLMServer) -> None:
    fake.add(Step.error(429, "slow down", retry_after=0.01))
    with pytest.raises(litellm.RateLimitError, match="slow down") as info:
        await complete(fake)
    assert info.value.status_code == 429
    assert len(fake.requests) == 1  # no hidden retries


async def test_500_is_internal_server_error(fake: FakeLLMServer) -> None:
    fake.add(Step.error(500))
    with pytest.raises(litellm.InternalServerError) as info:
        await complete(fake)
    assert info.value.status_code == 500
    assert len(fake.requests) == 1


async def test_503_is_service_unavailable(fake: FakeLLMServer) -> None:
    fake.add(Step.error(503))
    with pytest.raises(litellm.ServiceUnavailableError) as info:
        await complete(fake)
    assert info.value.status_code == 503
    # Note: none of these subclass litellm.APIError; the common base is openai.APIError.
    assert isinstance(info.value, openai.APIError)
    assert not isinstance(info.value, litellm.APIError)


async def test_client_timeout(fake: FakeLLMServer) -> None:
    fake.add(Step.delay(1, Step.text("too late")))
    start = time.monotonic()
    with pytest.raises(litellm.Timeout):
        await complete(fake, timeout=0.2)
    assert time.monotonic() - start < 0.9
    assert len(fake.requests) == 1


async def test_without_retry_kwargs_the_openai_sdk_retries(fake: FakeLLMServer) -> None:
    fake.add(Step.error(500, retry_after=0.01), Step.error(500, retry_after=0.01), Step.text("third time"))
    resp = await litellm.acompletion(model="openai/primary", api_base=fake.base_url,
                                     api_key="sk-test", messages=MESSAGES)
    assert resp.choices[0].message.content == "third time"
    assert len(fake.requests) == 3


async def test_num_retries_alone_disables_sdk_retries(fake: FakeLLMServer) -> None:
    fake.add(Step.error(500, retry_after=0.01), Step.text("never reached"))
    with pytest.raises(litellm.InternalServerError):
        await litellm.acompletion(model="openai/primary", api_base=fake.base_url,
                                  api_key="sk-test", messages=MESSAGES, num_retries=0)
    assert len(fake.requests) == 1


async def test_per_model_queues_and_wildcard(fake: FakeLLMServer) -> None:
    fake.add(Step.text("p1"), Step.text("p2"), model="primary")
    fake.add(Step.text("s1"), model="secondary")
    fake.add(Step.text("any1"), Step.text("any2"))
    replies = [
        (await complete(fake, model=m)).choices[0].message.content
        for m in ["secondary", "primary", "secondary", "primary", "primary", "other"]
    ]
    assert replies == ["s1", "p1", "any1", "p2", "any2", "ok"]


async def test_requests_recorded(fake: FakeLLMServer) -> None:
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    await complete(fake, model="primary", tools=tools, temperature=0.3)
    await complete(fake, model="secondary")
    assert [r["model"] for r in fake.requests] == ["primary", "secondary"]
    first = fake.requests_for("primary")
    assert len(first) == 1
    assert first[0]["messages"] == MESSAGES
    assert first[0]["tools"][0]["function"]["name"] == "f"
    assert first[0]["temperature"] == 0.3
    assert fake.requests_for("nope") == []


async def test_responder_and_latency(fake: FakeLLMServer) -> None:
    fake.latency_s = 0.05
    fake.responder = lambda body: Step.text(f"echo:{body['messages'][-1]['content']}")
    start = time.monotonic()
    resp = await complete(fake)
    assert time.monotonic() - start >= 0.05
    assert resp.choices[0].message.content == "echo:hello"


async def test_models_endpoint(fake: FakeLLMServer) -> None:
    fake.add(Step.text("x"), model="primary")
    async with aiohttp.ClientSession() as session:
        async with session.get(f"{fake.base_url}/models") as r:
            data = await r.json()
    assert [m["id"] for m in data["data"]] == ["primary"]


async def test_stop_releases_port_quickly_even_with_pending_delay() -> None:
    fake = FakeLLMServer()
    await fake.start()
    fake.add(Step.delay(30, Step.text("never")))
    with pytest.raises(litellm.Timeout):
        await complete(fake, timeout=0.1)
    start = time.monotonic()
    await fake.stop()
    assert time.monotonic() - start < 2
    host_port = fake.base_url.removeprefix("http://").removesuffix("/v1")
    host, port = host_port.split(":")
    with pytest.raises(OSError):
        _, writer = await asyncio.open_connection(host, int(port))
        writer.close()


def _chain(exc: BaseException) -> list[type[BaseException]]:
    found: list[type[BaseException]] = []
    item: BaseException | None = exc
    while item is not None:
        found.append(type(item))
        item = item.__cause__ or item.__context__
    return found


async def test_no_choices_comes_back_from_litellm_as_an_empty_list(fake: FakeLLMServer) -> None:
    # litellm does not complain: whoever reads choices[0] must
    fake.add(Step.no_choices(prompt_tokens=3))
    resp = await complete(fake)
    assert resp.choices == []
    assert resp.usage.prompt_tokens == 3


async def test_no_choices_streamed_is_only_the_usage_chunk(fake: FakeLLMServer) -> None:
    fake.add(Step.no_choices())
    async with aiohttp.ClientSession() as session:
        body = {"model": "primary", "messages": MESSAGES, "stream": True, "stream_options": {"include_usage": True}}
        async with session.post(f"{fake.base_url}/chat/completions", json=body) as r:
            events = [line for line in (await r.text()).splitlines() if line.startswith("data: ")]
    assert len(events) == 2 and events[-1] == "data: [DONE]"
    assert json.loads(events[0].removeprefix("data: "))["choices"] == []


@pytest.mark.parametrize("body", ["<html>502 Bad Gateway</html>", '{"id": "x", "choi', ""])
async def test_a_raw_200_body_is_a_500_litellm_made_up(fake: FakeLLMServer, body: str) -> None:
    fake.add(Step.raw(body, content_type="text/html" if body.startswith("<") else "application/json"))
    with pytest.raises(litellm.InternalServerError) as info:
        await complete(fake)
    assert info.value.status_code == 500  # although the server said 200
    import httpx

    assert httpx.HTTPStatusError not in _chain(info.value)  # no HTTP error underneath


async def test_a_raw_body_is_sent_as_given(fake: FakeLLMServer) -> None:
    fake.add(Step.raw("not json", status=202, content_type="text/plain"))
    async with aiohttp.ClientSession() as session:
        async with session.post(f"{fake.base_url}/chat/completions", json={"model": "m"}) as r:
            assert (r.status, r.content_type, await r.text()) == (202, "text/plain", "not json")


async def test_a_real_500_has_its_http_error_underneath(fake: FakeLLMServer) -> None:
    import httpx

    fake.add(Step.error(500))
    with pytest.raises(litellm.InternalServerError) as info:
        await complete(fake)
    assert httpx.HTTPStatusError in _chain(info.value)


async def test_retry_after_reaches_litellm_as_a_header(fake: FakeLLMServer) -> None:
    fake.add(Step.error(503, retry_after=12), Step.error(429, retry_after="Wed, 21 Oct 2026 07:28:00 GMT"))
    with pytest.raises(litellm.ServiceUnavailableError) as first:
        await complete(fake)
    with pytest.raises(litellm.RateLimitError) as second:
        await complete(fake)
    assert first.value.litellm_response_headers["retry-after"] == "12"
    assert second.value.response.headers["retry-after"] == "Wed, 21 Oct 2026 07:28:00 GMT"


async def test_a_closed_port_is_a_refused_connection_that_litellm_calls_a_500() -> None:
    with pytest.raises(litellm.InternalServerError) as info:
        await litellm.acompletion(model="openai/primary", api_base=closed_base_url(), api_key="sk-test",
                                  messages=MESSAGES, timeout=5, **NO_RETRY)
    assert info.value.status_code == 500
    assert ConnectionRefusedError in _chain(info.value)


async def test_image_parts_arrive_intact_and_are_read_back(fake: FakeLLMServer) -> None:
    import base64

    from tests.fakes.llm_server import images_in
    from tests.fakes.media_files import jpeg

    photo = jpeg(5000)
    parts = [{"type": "text", "text": "what is this?"},
             {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64," + base64.b64encode(photo).decode()}}]
    await litellm.acompletion(model="openai/gpt-4o-mini", api_base=fake.base_url, api_key="sk-test",
                              messages=[{"role": "user", "content": parts}], **NO_RETRY)
    assert images_in(fake.requests[0]) == [("image/jpeg", photo)]
    with pytest.raises(AssertionError):
        images_in({"messages": [{"role": "user", "content": [{"type": "image_url",
                                                             "image_url": {"url": "https://x/y.jpg"}}]}]})


async def test_transcription_route_takes_the_openai_multipart_form(fake: FakeLLMServer) -> None:
    fake.add_transcript("first", Step.error(429))
    first = await litellm.atranscription(model="openai/whisper-1", file=("a.ogg", b"OggS-audio", "audio/ogg"),
                                         api_base=fake.base_url, api_key="sk-test", max_retries=0)
    assert first.text == "first"
    with pytest.raises(litellm.RateLimitError):
        await litellm.atranscription(model="openai/whisper-1", file=("b.ogg", b"x", "audio/ogg"),
                                     api_base=fake.base_url, api_key="sk-test", max_retries=0)
    assert [(t.file_name, t.data, t.model) for t in fake.transcriptions] == [("a.ogg", b"OggS-audio", "whisper-1"),
                                                                            ("b.ogg", b"x", "whisper-1")]
