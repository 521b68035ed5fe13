"""What ``LLMService.warm_up`` leaves built, in a fresh interpreter (the tests' own process has
built everything already), so that the first reply after a start does not build it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = r"""
import asyncio, json
from bruce.clock import SystemClock
from bruce.config.schema import LLMConfig
from bruce.llm.service import LLMService
from litellm.types.utils import PromptTokensDetailsWrapper  # (litellm's import is what warm_up waits for)
before = PromptTokensDetailsWrapper.__pydantic_complete__
asyncio.run(LLMService(LLMConfig(model="openai/fake-model"), store=None, clock=SystemClock(), environ={}).warm_up())
print(json.dumps({"before": before, "after": PromptTokensDetailsWrapper.__pydantic_complete__}))
"""


def test_what_pricing_a_reply_builds_is_built_by_the_warm_up():
    """litellm defers its usage-details model until a reply is priced; in the daemon, building it
    was 35 ms of the first answer after a start (a profile of that answer: ``reply_cost`` ->
    ``cost_per_token`` -> ``Usage`` -> ``PromptTokensDetailsWrapper`` -> ``model_rebuild``)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, cwd=ROOT, capture_output=True, text=True,
                          timeout=180, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"before": False, "after": True}


FIRST_STREAM = r"""
import asyncio, json, sys
from bruce.clock import SystemClock
from bruce.config.schema import LLMConfig
from bruce.llm.service import LLMService
from bruce.llm.stream import FIRST_STREAM_IMPORTS
asyncio.run(LLMService(LLMConfig(model="openai/fake-model"), store=None, clock=SystemClock(), environ={}).warm_up())
from openai.types.chat import ChatCompletionChunk
print(json.dumps({"missing": [name for name in FIRST_STREAM_IMPORTS if name not in sys.modules],
                  "chunk_built": ChatCompletionChunk.__pydantic_complete__}))
"""


def test_what_the_first_streamed_answer_loads_is_loaded_by_the_warm_up():
    """The first streamed answer imported anyio's asyncio backend and parts of litellm's success path,
    and built openai's chunk models: about 20 ms of the first answer after a start, now paid by the
    warm-up (a name a later release drops is skipped; this test then says which)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    done = subprocess.run([sys.executable, "-c", FIRST_STREAM], env=env, cwd=ROOT, capture_output=True, text=True,
                          timeout=180, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"missing": [], "chunk_built": True}
