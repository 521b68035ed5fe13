"""What Bruce lets go of after litellm's import: only on the litellm version it was checked with,
and every call Bruce makes still works through the real litellm afterwards."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
import types
from importlib.metadata import version
from pathlib import Path

import pytest

from bruce.llm import lean
from tests.fakes.llm_server import FakeLLMServer, Step

ROOT = Path(__file__).resolve().parents[2]

# A fresh interpreter, so that litellm's import is the one ``load_litellm`` makes (the test
# session may have imported it already). It chats (plain and streamed, with a tool call),
# prices the reply, asks for vision support, and builds litellm's own Anthropic tokenizer.
_SCRIPT = textwrap.dedent("""
    import asyncio, json, sys
    from bruce.llm.service import load_litellm

    litellm = load_litellm()
    import litellm.utils as utils
    from litellm.rust_bridge import tokenizer

    async def main(base):
        kw = dict(model="openai/gpt-4o-mini", api_base=base, api_key="sk-test", num_retries=0, max_retries=0,
                  messages=[{"role": "user", "content": "hi"}])
        plain = await litellm.acompletion(**kw)
        tools = [{"type": "function", "function": {"name": "math_calculate", "parameters": {"type": "object"}}}]
        called = await litellm.acompletion(tools=tools, **kw)
        chunks = [c async for c in await litellm.acompletion(stream=True, **kw)]
        return {
            "plain": plain.choices[0].message.content,
            "cost": litellm.completion_cost(completion_response=plain),
            "tool": called.choices[0].message.tool_calls[0].function.name,
            "stream": "".join(c.choices[0].delta.content or "" for c in chunks if c.choices),
        }

    out = asyncio.run(main(sys.argv[1]))
    out["vision"] = litellm.supports_vision(model="openai/gpt-4o-mini")
    out["json_data"] = utils.json_data is None
    out["tokens"] = len(tokenizer.anthropic().encode("hello world").ids)
    print(json.dumps(out))
""")


@pytest.mark.skipif(not version("litellm").startswith(lean.CHECKED_VERSION + "."),
                    reason="the release is only made on the litellm version it was checked with")
async def test_after_the_release_every_call_bruce_makes_still_works() -> None:
    async with FakeLLMServer() as fake:
        fake.add(Step.text("Plain answer.", prompt_tokens=400, completion_tokens=8),
                 Step.tool_calls(("math_calculate", {"expression": "2+2"})),
                 Step.text("Streamed answer."), model="gpt-4o-mini")
        proc = await _run(_SCRIPT, fake.base_url)

    out = json.loads(proc.splitlines()[-1])
    assert out["json_data"] is True  # the parsed tokenizer tree is gone
    assert out["plain"] == "Plain answer."
    assert out["cost"] > 0
    assert out["tool"] == "math_calculate"
    assert out["stream"] == "Streamed answer."
    assert out["vision"] is True
    assert out["tokens"] > 0  # litellm's tokenizer reads the string it kept


def test_nothing_is_touched_on_another_litellm_version(monkeypatch: pytest.MonkeyPatch) -> None:
    utils = _fake_utils(monkeypatch)
    monkeypatch.setattr(lean, "version", lambda _name: "1.111.0")

    assert lean.release_unused() is False
    assert utils.json_data == {"model": {}}


def test_on_the_checked_version_the_tree_goes_and_the_string_stays(monkeypatch: pytest.MonkeyPatch) -> None:
    utils = _fake_utils(monkeypatch)
    monkeypatch.setattr(lean, "version", lambda _name: lean.CHECKED_VERSION + ".7")

    assert lean.release_unused() is True
    assert utils.json_data is None
    assert utils.claude_json_str == '{"model": {}}'
    assert lean.release_unused() is False  # once is enough


def test_a_layout_it_does_not_know_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    utils = _fake_utils(monkeypatch)
    del utils.claude_json_str  # the string moved: the tree may be what the tokenizer reads now
    monkeypatch.setattr(lean, "version", lambda _name: lean.CHECKED_VERSION + ".2")

    assert lean.release_unused() is False
    assert utils.json_data == {"model": {}}


def _fake_utils(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    utils = types.ModuleType("litellm.utils")
    utils.json_data = {"model": {}}  # type: ignore[attr-defined]
    utils.claude_json_str = '{"model": {}}'  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "litellm.utils", utils)
    return utils


async def _run(script: str, base_url: str) -> str:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", script, base_url, cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PATH": "/usr/bin:/bin"},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=120)
    assert proc.returncode == 0, err.decode()[-2000:]
    return out.decode()
