"""The world ``crash_soak.py`` runs Bruce in: the fake Bot API and the fake model (both in the
soak's own event loop, so they outlive every kill of the daemon), the daemon as a child process
in its own process group, and the tally of what the chats saw.

Every user message carries a tag ``q<chat>-<n>`` (``n`` counts up per chat). The fake model
answers from the newest tagged user message of its request:

* ``plain q3-7``: text ``ANSWER q3-7.``;
* ``artifact q3-7``: an ``artifact_save`` of ``q3-7.txt``, then ``ANSWER q3-7: done.``;
* ``note q3-7``: a ``files_write`` appending ``line q3-7`` to ``q3-7.md`` (the owner's yes is
  pressed by the soak as soon as the request reaches the chat), then ``ANSWER q3-7: ...``;
* ``remind q3-7 in N s``: a ``proactive_create`` (message mode) of ``REMINDER q3-7``.

So every answer names the message it is about, every text Bruce sends is unique (a repeat is
the same message sent twice), and a repeated side effect is visible on disk and in the database
(``tally``).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "123456:SOAK-token-abcdefghij"
MODEL = "openai/gpt-4o-mini"
TAG = re.compile(r"\bq(\d+)-(\d+)\b")
KINDS = ("plain", "artifact", "note", "remind")


def _tags(text: str) -> list[tuple[int, int]]:
    return [(int(c), int(n)) for c, n in TAG.findall(text)]


def _text_of(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return content if isinstance(content, str) else ""


@dataclass
class ModelLog:
    """What the fake model saw: requests, the ones in flight, and contexts that held the reply to
    a later message of the chat (the history a recovered turn must not have)."""

    requests: int = 0
    in_flight: int = 0
    later_in_context: list[str] = field(default_factory=list)


class SoakModel:
    """The responder of ``tests.fakes.llm_server.FakeLLMServer`` (see the module docstring)."""

    def __init__(self, log: ModelLog) -> None:
        self.log = log

    def __call__(self, body: dict[str, Any]) -> Any:
        from tests.fakes.llm_server import Step

        self.log.requests += 1
        messages = body.get("messages") or []
        if not body.get("tools"):  # a summary, or the sentence after an approved action
            return Step.text(f"Noted ({self.log.requests}).", prompt_tokens=200, completion_tokens=4)
        tag, text, index = None, "", -1
        for index in range(len(messages) - 1, -1, -1):
            if messages[index].get("role") == "user" and (found := _tags(_text_of(messages[index]))):
                tag, text = found[-1], _text_of(messages[index])
                break
        if tag is None:
            return Step.text("ANSWER none.")
        name = f"q{tag[0]}-{tag[1]}"
        self._check_context(messages[:index], tag, name)
        last = messages[-1]
        if last.get("role") == "tool":
            waiting = "confirm" in _text_of(last).lower() or "approv" in _text_of(last).lower()
            return Step.text(f"ANSWER {name}: " + ("waiting for your approval." if waiting else "done."))
        if text.lstrip().startswith("artifact") or f"artifact {name}" in text:
            return Step.tool_calls(("artifact_save", {"filename": f"{name}.txt", "content": f"artifact {name}\n",
                                                      "format": "text", "title": name}))
        if f"note {name}" in text:
            return Step.tool_calls(("files_write", {"path": f"{name}.md", "content": f"line {name}\n",
                                                    "mode": "append"}))
        if match := re.search(rf"remind {name} in (\d+) s", text):
            return Step.tool_calls(("proactive_create", {"execution_mode": "message", "content": f"REMINDER {name}",
                                                         "in_seconds": int(match.group(1))}))
        return Step.text(f"ANSWER {name}.", prompt_tokens=300, completion_tokens=10)

    def _check_context(self, before: list[dict[str, Any]], tag: tuple[int, int], name: str) -> None:
        for message in before:
            if message.get("role") == "assistant":
                for chat, n in _tags(_text_of(message)):
                    if chat == tag[0] and n > tag[1] and "ANSWER" in _text_of(message):
                        self.log.later_in_context.append(name)
                        return


def make_model(log: ModelLog, latency_s: float) -> Any:
    from tests.fakes.llm_server import FakeLLMServer

    class CountingLLM(FakeLLMServer):
        async def _handle_chat(self, request: Any) -> Any:
            log.in_flight += 1
            try:
                return await super()._handle_chat(request)
            finally:
                log.in_flight -= 1

    server = CountingLLM()
    server.latency_s = latency_s
    server.responder = SoakModel(log)
    return server


def make_telegram() -> Any:
    """The fake Bot API; it notes each ``getUpdates`` (the daemon polls again) and presses Approve
    on every approval request the moment it is sent, as a quick owner would."""
    from tests.fakes.telegram_api import ApiError, FakeTelegramAPI

    class SoakAPI(FakeTelegramAPI):
        def __init__(self) -> None:
            super().__init__(TOKEN)
            self.last_poll = 0.0
            self.conflicts = 0  # polls ended by another one: two processes poll the bot
            self.pressed: set[str] = set()

        async def _get_updates(self, params: dict[str, Any]) -> list[dict[str, Any]]:
            try:
                return await super()._get_updates(params)
            except ApiError as exc:
                self.conflicts += exc.status == 409
                raise

        def _record(self, method: str, params: dict[str, Any]) -> None:
            super()._record(method, params)
            if method == "getUpdates":
                self.last_poll = time.monotonic()

        async def _send_message(self, params: dict[str, Any]) -> dict[str, Any]:
            sent = await super()._send_message(params)
            for row in (params.get("reply_markup") or {}).get("inline_keyboard") or []:
                for button in row:
                    data = str(button.get("callback_data") or "")
                    if data.startswith("approve:") and data not in self.pressed:
                        self.pressed.add(data)
                        chat = int(params["chat_id"])
                        asyncio.get_running_loop().call_later(
                            0.2, self.push_callback, chat, chat, data, sent["message_id"])
            return sent

    return SoakAPI()


def write_config(folder: Path, *, db: Path, api_base: str, llm_base: str, users: list[int], shared: Path) -> Path:
    config = {
        "assistant": {"shutdown_timeout_s": 5, "recovery_max_age_s": 3600, "timezone": "UTC"},
        "llm": {"model": MODEL, "api_base": llm_base, "api_key": "sk-soak-key-123456", "num_retries": 0,
                "timeout_s": 30, "turn_deadline_s": 60, "circuit_failures": 0},
        "limits": {"messages_per_minute": 10000, "messages_per_hour": 100000},
        "storage": {"path": str(db)},
        "channels": {"resend_interval_s": 5, "send_retries": 3, "send_backoff_s": 0.2,
                     "telegram": {"enabled": True, "token": TOKEN, "api_base": api_base, "allowed_users": users,
                                  "poll_timeout_s": 1}},
        "admin": {"enabled": False},
        "tools": {"approval_poll_s": 1, "artifacts": {"dir": str(shared / "artifacts")},
                  "files": {"notes_dir": str(shared / "notes")}},
        "memory": {"enabled": False},
        "console": {"socket_path": str(folder / "bruce.sock")},
        "logging": {"level": "info", "format": "json"},
        "mcp_servers": {},
    }
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "config.yml"
    path.write_text(json.dumps(config, indent=1))
    return path


class Daemon:
    """``python -m bruce.cli.main --config X run`` (as the ``bruce`` script) in its own process group; its log in ``folder``."""

    def __init__(self, config: Path, name: str) -> None:
        self.config, self.name = config, name
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.sdk_loads_before = 0

    def start(self) -> None:
        self.starts += 1
        self.sdk_loads_before = self.log_count("telegram.sdk_ready")
        env = {**os.environ, "PYTHONPATH": str(ROOT), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        log = (self.config.parent / f"{self.name}.log").open("ab")
        self.proc = subprocess.Popen([sys.executable, "-m", "bruce.cli.main", "--config", str(self.config), "run"],
                                     cwd=str(self.config.parent), env=env, stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()

    def kill(self) -> None:
        """SIGKILL to the whole process group (the daemon and anything it started)."""
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()
            self.proc = None

    def stop(self, timeout: float = 20.0) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                pass
            self.kill()

    def sdk_loaded(self) -> bool:
        """This start has loaded the Telegram library (it can answer, not only poll)."""
        return self.log_count("telegram.sdk_ready") > self.sdk_loads_before

    def log_count(self, event: str) -> int:
        path = self.config.parent / f"{self.name}.log"
        return path.read_text(errors="replace").count(f'"{event}"') if path.exists() else 0


def db_rows(db: Path, sql: str) -> list[tuple[Any, ...]]:
    """A read-only query (the daemon may be dead, alive or two)."""
    if not db.exists():
        return []
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        return conn.execute(sql).fetchall()
    except sqlite3.OperationalError:
        return []
    finally:
        conn.close()


def open_turns(db: Path) -> int:
    rows = db_rows(db, "SELECT count(*) FROM turns WHERE status = 'running' AND source != 'summary'")
    return int(rows[0][0]) if rows else 0


@dataclass
class Pushed:
    chat: int
    n: int
    kind: str
    due_at: float = 0.0  # a reminder: when it is due (monotonic)

    @property
    def name(self) -> str:
        return f"q{self.chat}-{self.n}"


def keep_calls(api: Any, path: Path) -> None:
    """Every send the fake Bot API received, one JSON line each, for reading a failure."""
    with path.open("w") as out:
        for call in api.calls:
            if call.method in ("sendMessage", "sendDocument", "editMessageText"):
                params = {k: v for k, v in call.params.items() if k in ("chat_id", "text", "caption", "reply_markup")}
                out.write(json.dumps({"at": round(call.at, 3), "method": call.method, **params}, default=str) + "\n")


def tally(api: Any, pushed: list[Pushed], db: Path, shared: Path, model: ModelLog) -> dict[str, int]:
    """What the chats saw and what is on disk, by the goals' names (docs/benchmarks.md)."""
    keep_calls(api, db.parent.parent / "platform_calls.jsonl")
    answers: dict[str, int] = Counter()
    fired: dict[str, int] = Counter()
    order: dict[int, list[int]] = defaultdict(list)
    seen: Counter[tuple[Any, str]] = Counter()
    for call in api.calls:
        if call.method not in ("sendMessage", "sendDocument"):
            continue
        text = str(call.params.get("text") or call.params.get("caption") or "")
        seen[(call.params.get("chat_id"), text)] += 1
        tags = _tags(text)
        if not tags or call.method != "sendMessage":  # a document's caption names its file, not an answer
            continue
        name = f"q{tags[0][0]}-{tags[0][1]}"
        if "REMINDER" in text:
            fired[name] += 1
        elif not call.params.get("reply_markup"):
            if answers[name] == 0:
                order[tags[0][0]].append(tags[0][1])
            answers[name] += 1
    stored = {str(r[0]) for r in db_rows(db, "SELECT text FROM messages WHERE direction = 'in'")}
    stored_tags = {f"q{c}-{n}" for text in stored for c, n in _tags(text)}
    arts = Counter(str(r[0]) for r in db_rows(db, "SELECT title FROM artifacts"))
    files = Counter(p.name.split(".")[0] for p in (shared / "artifacts").rglob("*.txt"))
    jobs = Counter(str(r[0]).removeprefix("REMINDER ") for r in db_rows(db, "SELECT content FROM proactive_jobs"))
    repeated = 0
    for p in pushed:
        if p.kind == "artifact":
            repeated += arts[p.name] > 1 or files[p.name] > 1
        elif p.kind == "note":
            note = shared / "notes" / f"{p.name}.md"
            repeated += note.exists() and note.read_text().count(f"line {p.name}") > 1
        elif p.kind == "remind":
            repeated += jobs[p.name] > 1
    reminders = [p.name for p in pushed if p.kind == "remind" and jobs[p.name] > 0]
    out_of_order = sum(1 for ns in order.values() for i, n in enumerate(ns) if i and n < max(ns[:i]))
    return {
        "messages": len(pushed),
        "stored": sum(p.name in stored_tags for p in pushed),
        "answered_0": sum(answers[p.name] == 0 for p in pushed),
        "answered_2plus": sum(answers[p.name] >= 2 for p in pushed),
        "side_effects_repeated": repeated,
        "out_of_order": out_of_order,
        "later_replies_in_context": len(model.later_in_context),
        "extra_sends": sum(n - 1 for n in seen.values() if n > 1),
        "reminders": len(reminders),
        "reminders_stored_twice": sum(jobs[name] > 1 for name in reminders),
        "fired_0": sum(fired[name] == 0 for name in reminders),
        "fired_1": sum(fired[name] == 1 for name in reminders),
        "fired_2plus": sum(fired[name] >= 2 for name in reminders),
        "turns_left_running": open_turns(db),
        "poll_conflicts": int(api.conflicts),
    }
