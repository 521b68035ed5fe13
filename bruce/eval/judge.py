"""The judge: a second model scores each reply on a fixed rubric, after the code checks.

The rubric is a versioned YAML file (``evals/rubric.yml``): ``version``, ``instructions`` and
one sentence per criterion, for exactly the six criteria in ``CRITERIA``. Each reply is scored
1-5 with a one-line reason per criterion; the run records the judge's model, the rubric's
version and hash, and the exact system prompt. The judge is asked through Bruce's own LLM
layer (retries, time-outs; its calls go to an in-memory store of their own, so they never mix
with a case's telemetry). An answer that is not the JSON asked for, or a judge that does not
answer, is recorded as that reply's judge error; it never stops the run.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from bruce.clock import Clock, SystemClock
from bruce.config.reader import parse_yaml
from bruce.config.schema import Config, LLMConfig, ModelEndpoint
from bruce.errors import BruceError, ConfigError, LLMError
from bruce.eval.observed import CallStats, TurnRecord, call_stats
from bruce.llm.service import LLMService
from bruce.store import Store
from bruce.turns.scope import TurnScope, new_turn_id
from bruce.values import ConversationId, TurnSource

__all__ = ["CRITERIA", "Rubric", "RubricError", "Score", "Verdict", "Judge", "load_rubric", "parse_verdict",
           "judge_endpoint"]

log = structlog.get_logger(__name__)

CRITERIA = ("naturalness", "continuity", "grounded_actions", "no_premature_advice", "tone_concision", "follows_user")
MAX_REASON_CHARS = 200
_CONVERSATION = ConversationId("eval", "judge")
_FENCE = re.compile(r"^```[a-zA-Z]*\s*|\s*```$")


class RubricError(BruceError):
    """A rubric file that cannot be used; the text names the file and the key."""


@dataclass(frozen=True, slots=True)
class Rubric:
    version: int
    instructions: str
    criteria: dict[str, str]
    path: str
    sha256: str

    def system_prompt(self) -> str:
        lines = [self.instructions.strip(), "", "The criteria:"]
        lines += [f"- {name}: {self.criteria[name].strip()}" for name in CRITERIA]
        shape = ", ".join(f'"{name}": {{"score": 1-5, "reason": "one line"}}' for name in CRITERIA)
        lines += ["", f"Answer with one JSON object and nothing else: {{{shape}}}"]
        return "\n".join(lines)


def load_rubric(path: Path) -> Rubric:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise RubricError(f"{path}: cannot read the rubric ({exc.strerror or exc})") from None
    try:
        data = parse_yaml(raw.decode("utf-8"))
    except (UnicodeDecodeError, ConfigError) as exc:
        raise RubricError(f"{path}: {exc}") from None
    if not isinstance(data, dict) or set(data) != {"version", "instructions", "criteria"}:
        raise RubricError(f"{path}: a rubric has exactly the keys version, instructions and criteria")
    version, instructions, criteria = data["version"], data["instructions"], data["criteria"]
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise RubricError(f"{path}: version: a whole number from 1, raised with every change of wording")
    if not isinstance(instructions, str) or not instructions.strip():
        raise RubricError(f"{path}: instructions: the judge's instructions, as text")
    if not isinstance(criteria, dict) or set(criteria) != set(CRITERIA) \
            or not all(isinstance(v, str) and v.strip() for v in criteria.values()):
        raise RubricError(f"{path}: criteria: one sentence for each of {', '.join(CRITERIA)} (no others)")
    return Rubric(version, instructions, dict(criteria), str(path), hashlib.sha256(raw).hexdigest())


@dataclass(frozen=True, slots=True)
class Score:
    criterion: str
    score: int
    reason: str


@dataclass(frozen=True, slots=True)
class Verdict:
    """The judge's scores for one reply (turn), or why there are none."""

    turn: int
    scores: tuple[Score, ...] = ()
    error: str | None = None
    raw: str | None = None  # the judge's answer, when it could not be read
    llm: CallStats = field(default_factory=CallStats)

    def as_dict(self) -> dict[str, Any]:
        return {"turn": self.turn, "scores": {s.criterion: {"score": s.score, "reason": s.reason} for s in self.scores},
                "error": self.error, "raw": self.raw, "llm": self.llm.as_dict()}


def _json_object(text: str) -> Any:
    body = _FENCE.sub("", text.strip())
    start, end = body.find("{"), body.rfind("}")
    if start < 0 or end <= start:
        raise ValueError("no JSON object in the answer")
    return json.loads(body[start:end + 1])


def _score(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return value if isinstance(value, int) and 1 <= value <= 5 else None


def parse_verdict(turn: int, text: str | None) -> Verdict:
    """The judge's answer as scores, or a Verdict with the error and the raw answer."""
    raw = (text or "")[:2000]
    try:
        data = _json_object(text or "")
    except (ValueError, RecursionError) as exc:
        return Verdict(turn, error=f"the judge's answer is not JSON ({exc})", raw=raw)
    if not isinstance(data, dict):
        return Verdict(turn, error="the judge's answer is not a JSON object", raw=raw)
    scores = []
    for name in CRITERIA:
        item = data.get(name)
        value, reason = (item.get("score"), item.get("reason")) if isinstance(item, dict) else (item, "")
        score = _score(value)
        if score is None:
            problem = "is missing" if item is None else f"has no score from 1 to 5 (got {str(value)[:40]!r})"
            return Verdict(turn, error=f"criterion {name} {problem}", raw=raw)
        line = " ".join(str(reason or "").split())
        scores.append(Score(name, score, line[:MAX_REASON_CHARS]))
    return Verdict(turn, tuple(scores))


def judge_endpoint(model: str, config: Config, agent_model: str) -> ModelEndpoint:
    """Where the judge is asked: ``eval.judge_api_base`` / ``judge_api_key`` when set; else the
    ``llm`` endpoint when the judge has the agent's provider (``openai/...`` and ``openai/...``);
    else litellm's default for its provider (the key from the provider's usual variable)."""
    given = config.eval
    if given.judge_api_base or given.judge_api_key:
        return ModelEndpoint(model=model, api_base=given.judge_api_base, api_key=given.judge_api_key)
    if model.split("/", 1)[0] == agent_model.split("/", 1)[0]:
        return ModelEndpoint(model=model, api_base=config.llm.api_base, api_key=config.llm.api_key)
    return ModelEndpoint(model=model)


def _transcript(turns: Sequence[TurnRecord], upto: int) -> str:
    lines = []
    for record in turns[: upto - 1]:
        lines += [f"USER: {record.user}", f"BRUCE: {record.reply}"]
    record = turns[upto - 1]
    ran = ", ".join(f"{t.name} ({t.status})" for t in record.tools) or "none"
    waiting = ", ".join(record.confirmations) or "none"
    earlier = "\n".join(lines) if lines else "(this is the first message)"
    return (f"The conversation so far:\n{earlier}\n\nThe reply to grade:\nUSER: {record.user}\nBRUCE: {record.reply}\n\n"
            f"Tools that ran for this reply (status): {ran}\nActions waiting for the user's approval: {waiting}")


class Judge:
    def __init__(self, rubric: Rubric, endpoint: ModelEndpoint, llm: LLMConfig, store: Store, clock: Clock) -> None:
        self.rubric = rubric
        self.endpoint = endpoint
        self._store = store
        self._service = LLMService(llm, store=store, clock=clock)

    @staticmethod
    def llm_config(endpoint: ModelEndpoint, config: Config) -> LLMConfig:
        """How the judge asks ``endpoint``: the ``llm`` section's time-outs and retries, no fallbacks."""
        base = config.llm
        return LLMConfig(model=endpoint.model, api_base=endpoint.api_base, api_key=endpoint.api_key,
                         timeout_s=base.timeout_s, num_retries=base.num_retries, retry_backoff_s=base.retry_backoff_s,
                         turn_deadline_s=base.turn_deadline_s, circuit_failures=0, stream=False)

    @classmethod
    async def open(cls, rubric: Rubric, endpoint: ModelEndpoint, config: Config) -> Judge:
        """A judge asking ``endpoint`` (``llm_config``)."""
        llm = cls.llm_config(endpoint, config)
        clock = SystemClock()
        store = await Store.open(":memory:", clock)
        await store.messages.ensure_conversation(str(_CONVERSATION), _CONVERSATION.channel, _CONVERSATION.chat_id)
        return cls(rubric, endpoint, llm, store, clock)

    async def close(self) -> None:
        await self._store.close()

    def record(self) -> dict[str, Any]:
        """What the run keeps about its judge."""
        return {"model": self.endpoint.model, "api_base": self.endpoint.api_base, "rubric_version": self.rubric.version,
                "rubric_path": self.rubric.path, "rubric_sha256": self.rubric.sha256,
                "prompt": self.rubric.system_prompt(), "criteria": list(CRITERIA)}

    async def score(self, turns: Sequence[TurnRecord]) -> list[Verdict]:
        """A verdict per reply of a case, in order (the judge sees the conversation up to it)."""
        return [await self._one(turns, index) for index in range(1, len(turns) + 1)]

    async def _one(self, turns: Sequence[TurnRecord], index: int) -> Verdict:
        scope = TurnScope(turn_id=new_turn_id(), conversation_id=_CONVERSATION, user_id=None)
        await self._store.messages.start_turn(scope.turn_id, str(_CONVERSATION), source=TurnSource.CHAT,
                                              inbound_message_id=None)
        messages = [{"role": "system", "content": self.rubric.system_prompt()},
                    {"role": "user", "content": _transcript(turns, index)}]
        try:
            reply = await self._service.complete(messages, scope=scope)
        except LLMError as exc:
            log.warning("eval.judge_failed", turn=index, error=str(exc)[:300])
            return Verdict(index, error=f"the judge did not answer ({exc})",
                           llm=await call_stats(self._store, [scope.turn_id]))
        verdict = parse_verdict(index, reply.text)
        if verdict.error:
            log.warning("eval.judge_malformed", turn=index, error=verdict.error)
        return Verdict(verdict.turn, verdict.scores, verdict.error, verdict.raw,
                       await call_stats(self._store, [scope.turn_id]))
