"""How much time does Bruce itself add to a turn that carries a voice note or a photo?

Runs the real app (``build_app``: store, worker, turn runner, ``bruce.media``, the LLM service
through litellm) against ``tests.fakes.llm_server.FakeLLMServer`` in a child process (a remote
provider does not share Bruce's event loop), answering chat and transcription requests after a
fixed latency. The channel downloads each attachment over HTTP from a local file server, as a
platform adapter does (Telegram's ``/file/bot<token>/<path>``, a Discord attachment URL).

Three kinds of turn, sequential, in one conversation:

* ``text``:  a plain message (the baseline);
* ``voice``: a 60 s Ogg Opus voice note: download, check the Ogg pages, transcribe (one call),
  store the transcript, then the chat call;
* ``photo``: a 1 MB JPEG: download, sniff, keep it under the data folder (atomic write), base64
  it into the request's ``image_url`` part, then the chat call.

For each turn: wall time (``deliver`` to the turn's end) minus the time Bruce saw the model
take (the sum of the turn's ``llm_calls.latency_ms``: transcription and chat) = Bruce's own
overhead. ``media extra`` is the media turn's median overhead minus the text turn's. The goals
(issue 32): at most 30 ms for a 1 MB photo, at most 20 ms for a 60 s voice note. Also shown:
the wall time minus only the provider's scripted delay, which counts litellm's request encoding,
the HTTP round trip and the fake's parsing as overhead too (an upper bound).

Usage (from the repo root)::

    .venv/bin/python benchmarks/media_overhead.py [--turns 40] [--latency-ms 50] [--json]
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"

import argparse  # noqa: E402
import asyncio  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from datetime import UTC, datetime  # noqa: E402
from typing import Any  # noqa: E402

import aiohttp  # noqa: E402
from aiohttp import web  # noqa: E402

MODEL = "openai/gpt-4o-mini"  # a priced vision model: litellm's capability and cost data are used as in production
GOALS_MS = {"photo": 30.0, "voice": 20.0}


async def _serve_fake(latency_ms: float) -> None:
    """Child-process mode: the fake provider (chat and audio), its URL printed, stopped by stdin closing."""
    from tests.fakes.llm_server import FakeLLMServer, Step

    server = FakeLLMServer()
    server.latency_s = latency_ms / 1000
    server.default = Step.text("Noted: the plumber at five, and the receipt says 17.50 EUR.",
                               prompt_tokens=400, completion_tokens=20)
    server.default_transcript = "remind me to call the plumber at five"
    original = server._handle_transcription

    async def slow_transcription(request: web.Request) -> web.Response:
        await asyncio.sleep(latency_ms / 1000)
        return await original(request)

    server._handle_transcription = slow_transcription  # type: ignore[method-assign]
    await server.start()
    print(server.base_url, flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    await server.stop()


class _Provider:
    """The fake provider in a child process."""

    def __init__(self, latency_ms: float) -> None:
        self.latency_ms = latency_ms
        self.base_url = ""
        self._proc: asyncio.subprocess.Process | None = None

    async def __aenter__(self) -> _Provider:
        self._proc = await asyncio.create_subprocess_exec(
            sys.executable, str(Path(__file__).resolve()), "--serve-fake", "--latency-ms", str(self.latency_ms),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, cwd=str(ROOT))
        assert self._proc.stdout is not None
        self.base_url = (await asyncio.wait_for(self._proc.stdout.readline(), 30)).decode().strip()
        if not self.base_url.startswith("http://127.0.0.1:"):
            raise RuntimeError(f"the fake provider did not start: {self.base_url!r}")
        return self

    async def __aexit__(self, *exc: object) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), 10)
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()


class _Files:
    """A local file host: what a platform's download endpoint is to an adapter."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.base_url = ""
        self._runner: web.AppRunner | None = None

    async def __aenter__(self) -> _Files:
        app = web.Application()
        app.router.add_get("/file/{name}", self._get)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.base_url = f"http://127.0.0.1:{self._runner.addresses[0][1]}/file/"
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _get(self, request: web.Request) -> web.Response:
        return web.Response(body=self.files[request.match_info["name"]], content_type="application/octet-stream")


def _channel(files: _Files) -> Any:
    """A recording channel whose ``fetch`` downloads over HTTP, reading in chunks up to the limit."""
    from bruce.channel import Attachment
    from bruce.errors import MediaFetchError
    from tests.fakes.channel import RecordingChannel

    class DownloadingChannel(RecordingChannel):
        def __init__(self) -> None:
            super().__init__("bench")
            self.session: aiohttp.ClientSession | None = None

        async def fetch(self, attachment: Attachment, *, max_bytes: int) -> bytes:
            if self.session is None:
                self.session = aiohttp.ClientSession()
            async with self.session.get(files.base_url + attachment.ref) as response:
                body = bytearray()
                async for chunk in response.content.iter_chunked(64 * 1024):
                    body += chunk
                    if len(body) > max_bytes:
                        raise MediaFetchError("the file is larger than allowed")
                return bytes(body)

    return DownloadingChannel()


async def _turn(app: Any, n: int, kind: str, files: _Files, payloads: dict[str, bytes]) -> tuple[float, float, int]:
    """One turn of ``kind``; (wall ms, model ms as Bruce saw it, model calls)."""
    from bruce.channel import Attachment, IncomingMessage
    from bruce.values import AttachmentKind
    from tests.helpers import db_rows

    attachments: tuple[Attachment, ...] = ()
    if kind != "text":
        ref = f"{kind}-{n}"
        files.files[ref] = payloads[kind]
        attachments = (Attachment(AttachmentKind.VOICE, ref, mime="audio/ogg", size=len(payloads[kind]),
                                  name="voice.ogg", duration_s=60.0) if kind == "voice" else
                       Attachment(AttachmentKind.IMAGE, ref, mime="image/jpeg", size=len(payloads[kind]),
                                  name="receipt.jpg"),)
    message = IncomingMessage(channel="bench", chat_id="1", sender_id="1",
                              text="what does this say?" if kind == "photo" else ("" if kind == "voice" else "hello"),
                              platform_message_id=f"{kind}-{n}", timestamp=datetime.now(UTC), attachments=attachments)
    started = time.perf_counter()
    handle = await app.worker.deliver(message)
    assert handle is not None
    await handle
    wall = (time.perf_counter() - started) * 1000
    (row,) = db_rows(app.config.storage.path,
                     "SELECT COALESCE(SUM(c.latency_ms), 0) AS llm, COUNT(c.id) AS calls, t.status AS status"
                     " FROM messages m JOIN turns t ON t.inbound_message_id = m.id"
                     " LEFT JOIN llm_calls c ON c.turn_id = t.id WHERE m.platform_message_id = ? GROUP BY t.id",
                     f"{kind}-{n}")
    expected = 2 if kind == "voice" else 1
    if row["status"] != "ok" or row["calls"] != expected:
        raise RuntimeError(f"{kind} turn {n}: status {row['status']}, {row['calls']} model calls")
    return wall, float(row["llm"]), int(row["calls"])


async def run(turns: int, latency_ms: float) -> dict[str, Any]:
    from bruce.app import build_app
    from bruce.config.loader import parse_config
    from tests.fakes.media_files import jpeg, ogg_opus

    payloads = {"voice": ogg_opus(60.0), "photo": jpeg(1_000_000 - len(jpeg()))}
    with tempfile.TemporaryDirectory() as tmp:
        async with _Provider(latency_ms) as provider, _Files() as files:
            config = parse_config({
                "llm": {"model": MODEL, "api_base": provider.base_url, "api_key": "sk-bench-123456", "stream": False},
                "media": {"transcription_model": "openai/whisper-1"},
                "storage": {"path": str(Path(tmp) / "bruce.db")},
                "memory": {"enabled": False}, "admin": {"enabled": False},
                "limits": {"messages_per_minute": 10_000, "messages_per_hour": 100_000},
                "assistant": {"timezone": "UTC", "history_limit": 6, "summary_batch": 100},
            }, environ={})
            channel = _channel(files)
            app = await build_app(config, environ={}, extra_channels=[channel])
            await app.start()
            await app.llm.warm_up()
            samples: dict[str, list[float]] = {"text": [], "voice": [], "photo": []}
            with_client: dict[str, list[float]] = {"text": [], "voice": [], "photo": []}
            try:
                for kind in samples:  # warm-up: the first of each kind pays for imports and first connections
                    await _turn(app, -1, kind, files, payloads)
                for n in range(turns):
                    for kind in samples:
                        wall, llm, calls = await _turn(app, n, kind, files, payloads)
                        samples[kind].append(wall - llm)
                        with_client[kind].append(wall - calls * latency_ms)
            finally:
                if channel.session is not None:
                    await channel.session.close()
                await app.stop()
    medians = {k: statistics.median(v) for k, v in samples.items()}
    return {
        "meta": {"when": datetime.now(UTC).isoformat(timespec="seconds"), "python": platform.python_version(),
                 "turns_each": turns, "latency_ms": latency_ms, "load_average": os.getloadavg()[0],
                 "photo_bytes": len(payloads["photo"]), "voice_bytes": len(payloads["voice"])},
        "overhead_ms": {k: {"p50": round(medians[k], 2), "p90": round(_pct(v, 90), 2)} for k, v in samples.items()},
        "media_extra_ms": {k: round(medians[k] - medians["text"], 2) for k in ("voice", "photo")},
        # the same, minus only the provider's scripted delay: litellm encoding the request (a 1 MB photo is
        # 1.4 MB of JSON), the HTTP round trip and the fake's own parsing count as overhead too
        "overhead_with_client_ms": {k: round(statistics.median(v), 2) for k, v in with_client.items()},
    }


def _pct(values: list[float], p: float) -> float:
    data = sorted(values)
    k = (len(data) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(data) - 1)
    return data[lo] + (data[hi] - data[lo]) * (k - lo)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--serve-fake", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_fake:
        asyncio.run(_serve_fake(args.latency_ms))
        return 0
    result = asyncio.run(run(args.turns, args.latency_ms))
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"media overhead, {args.turns} turns each, model {args.latency_ms:.0f} ms, "
              f"load {result['meta']['load_average']:.2f}")
        for kind, o in result["overhead_ms"].items():
            print(f"  {kind:6} Bruce's own time per turn: p50 {o['p50']:7.2f} ms  p90 {o['p90']:7.2f} ms;"
                  f"  with litellm and HTTP: p50 {result['overhead_with_client_ms'][kind]:7.2f} ms")
        for kind, extra in result["media_extra_ms"].items():
            verdict = "PASS" if result["overhead_ms"][kind]["p50"] <= GOALS_MS[kind] else "over the goal"
            print(f"  {kind:6} beyond a text turn: {extra:6.2f} ms; whole overhead vs goal "
                  f"{GOALS_MS[kind]:.0f} ms: {verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
