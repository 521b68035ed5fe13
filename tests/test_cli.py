"""The `bruce` command as a user runs it: a subprocess, real stdin/stdout, real signals."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

import yaml

from tests.fakes.llm_server import Step
from tests.helpers import db_rows

BRUCE = [sys.executable, "-m", "bruce.cli"]


def write_config(tmp_path: Path, llm: dict) -> Path:
    path = tmp_path / "config.yml"
    path.write_text(yaml.safe_dump({
        "llm": {"retry_backoff_s": 0, "timeout_s": 10, **llm},
        "storage": {"path": str(tmp_path / "bruce.db")},
    }))
    return path


def clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k != "BRUCE_CONFIG"}
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    return env


async def test_chat_runs_a_two_step_chain_from_piped_stdin(tmp_path, fake_llm):
    config = write_config(tmp_path, {"model": "openai/primary", "api_base": fake_llm.base_url, "api_key": "sk-test-123456"})
    fake_llm.add(
        Step.tool_calls(("math_calculate", {"expression": "19*23"})),
        Step.text("19 times 23 is 437."),
    )
    proc = await asyncio.create_subprocess_exec(
        *BRUCE, "--config", str(config), "chat",
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env=clean_env(), cwd=tmp_path,
    )
    out, err = await asyncio.wait_for(proc.communicate(b"what is 19*23?\n/quit\n"), 60)
    assert proc.returncode == 0, err.decode()
    assert out.decode().strip().splitlines() == ["Bruce> 19 times 23 is 437."]
    db = tmp_path / "bruce.db"
    assert [r["status"] for r in db_rows(db, "SELECT status FROM llm_calls ORDER BY seq")] == ["ok", "ok"]
    (execution,) = db_rows(db, "SELECT tool_name, status FROM tool_executions")
    assert execution == {"tool_name": "math.calculate", "status": "ok"}
    assert [m["text"] for m in db_rows(db, "SELECT text FROM messages ORDER BY id")] == [
        "what is 19*23?", "19 times 23 is 437."]


async def test_chat_without_a_key_explains_what_to_set(tmp_path):
    config = write_config(tmp_path, {"api_key": "${OPENAI_API_KEY}"})
    proc = await asyncio.create_subprocess_exec(
        *BRUCE, "--config", str(config), "chat",
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env=clean_env(), cwd=tmp_path,
    )
    out, err = await asyncio.wait_for(proc.communicate(b"hello\n"), 60)
    assert proc.returncode == 0, err.decode()
    assert "OPENAI_API_KEY" in out.decode() and "llm.api_base" in out.decode()


async def test_run_starts_without_keys_says_what_is_missing_and_stops_on_sigterm(tmp_path):
    config = write_config(tmp_path, {"api_key": "${OPENAI_API_KEY}"})
    config.write_text(config.read_text() + "channels: {telegram: {enabled: true}}\n")
    proc = await asyncio.create_subprocess_exec(
        *BRUCE, "--config", str(config), "run",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=clean_env(), cwd=tmp_path,
    )
    try:
        events: list[dict] = []
        while not any(e.get("event") == "app.started" for e in events):
            raw = await asyncio.wait_for(proc.stderr.readline(), 60)
            assert raw, "bruce run exited early"
            events.append(json.loads(raw))
        await asyncio.sleep(0.3)
        assert proc.returncode is None, "the daemon must keep running without keys"
        proc.send_signal(signal.SIGTERM)
        _, rest = await asyncio.wait_for(proc.communicate(), 60)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0
    events += [json.loads(line) for line in rest.splitlines()]
    hints = [e["hint"] for e in events if e["event"] == "app.setup_incomplete"]
    assert any("OPENAI_API_KEY" in h for h in hints)
    assert any("bruce chat" in h for h in hints)
    assert any("channels.telegram.enabled is true, but this version of Bruce has no telegram adapter" in h
               for h in hints)
    assert "llm.ready" in [e["event"] for e in events]  # litellm was imported off the loop at start
    assert events[-1]["event"] == "app.stopped"
