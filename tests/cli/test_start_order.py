"""``bruce run``'s start-up as a user (and a supervisor polling ``/healthz``) sees it: no channel
reads before the model client is ready; ``/healthz`` says "starting" (503) until then and "ok"
after ``app.ready`` is logged. A real daemon process against the fake Bot API and fake model."""

from __future__ import annotations

import asyncio
import json
import signal

import aiohttp
import yaml

from tests.cli.test_main import BRUCE, clean_env
from tests.fakes.telegram_api import FakeTelegramAPI

TOKEN = "123456:TEST-token-abcdefghij"


async def _health(session: aiohttp.ClientSession, url: str) -> tuple[int, str]:
    async with session.get(f"{url}/healthz") as response:
        return response.status, (await response.json())["status"]


async def test_healthz_says_starting_until_the_model_client_is_ready_and_no_update_is_read_before(tmp_path, fake_llm):
    async with FakeTelegramAPI(TOKEN) as api:
        config = tmp_path / "config.yml"
        config.write_text(yaml.safe_dump({
            "llm": {"model": "openai/primary", "api_base": fake_llm.base_url, "api_key": "sk-test-123456"},
            "storage": {"path": str(tmp_path / "bruce.db")}, "memory": {"enabled": False},
            "admin": {"port": 0, "token": "t" * 40}, "logging": {"format": "json"},
            "channels": {"telegram": {"enabled": True, "token": TOKEN, "api_base": api.base_url,
                                      "allowed_users": [42]}}}))
        proc = await asyncio.create_subprocess_exec(*BRUCE, "--config", str(config), "run", cwd=tmp_path,
                                                    stderr=asyncio.subprocess.PIPE, env=clean_env())
        seen: list[tuple[int, str, int, bool]] = []  # (HTTP status, health, getUpdates so far, llm.ready logged)
        try:
            events: list[dict] = []

            async def read_log() -> None:
                while raw := await proc.stderr.readline():
                    if raw.startswith(b"{"):  # a library's warning may be printed as plain text
                        events.append(json.loads(raw))

            reader = asyncio.create_task(read_log())
            async with aiohttp.ClientSession() as session:
                async with asyncio.timeout(60):
                    while not any(e["event"] == "admin.listening" for e in events):
                        await asyncio.sleep(0.02)
                    url = next(e["url"] for e in events if e["event"] == "admin.listening")
                    while not seen or seen[-1][1] != "ok":
                        polled = len(api.calls_to("getUpdates"))  # counted before the answer: never late
                        status, said = await _health(session, url)
                        warm = any(e["event"] == "llm.ready" for e in events)  # logged before any reading starts
                        seen.append((status, said, polled, warm))
                        await asyncio.sleep(0.02)
                api.push_message(chat_id=42, user_id=42, text="hello")
                (sent,) = await api.wait_for("sendMessage", timeout=30)
            proc.send_signal(signal.SIGTERM)
            await asyncio.wait_for(proc.wait(), 60)
            await reader
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    assert proc.returncode == 0
    assert sent["text"] == "ok"  # the fake model's answer
    names = [e["event"] for e in events]
    assert names.index("llm.ready") < names.index("app.started") < names.index("app.ready")
    starting = [s for s in seen if s[1] == "starting"]
    assert starting, "the admin page served before the model client was ready"  # litellm imports for seconds
    assert all(status == 503 for status, _, _, _ in starting)
    # nothing is read before the model client is ready; while the channels start (a few ms) it still says starting
    assert all(polled == 0 or warm for _, _, polled, warm in starting)
    assert any(polled == 0 for _, _, polled, _ in starting)
    assert [said for _, said, _, _ in seen] == ["starting"] * len(starting) + ["ok"]  # starting, then ok for good
    assert seen[-1][0] == 200


async def test_healthz_is_503_starting_while_the_app_is_not_ready(app, admin):
    app.ready = False
    response = await admin.get("/healthz")
    assert (response.status, (await response.json())["status"]) == (503, "starting")
    app.ready = True
    response = await admin.get("/healthz")
    assert (response.status, (await response.json())["status"]) == (200, "ok")
