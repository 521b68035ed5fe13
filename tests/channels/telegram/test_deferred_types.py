"""aiogram's types built on first use (``channels/telegram/deferred_types.py``), in a fresh
interpreter: the tests' own process has aiogram imported already."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

PROBE = r"""
import json, sys
import channels.telegram  # installs the hook, imports no aiogram
assert "aiogram" not in sys.modules
import channels.telegram.bot  # aiogram, its types deferred, then what Bruce uses built
from channels.telegram import deferred_types
from aiogram import types
update = types.Update.model_validate({"update_id": 7, "message": {
    "message_id": 5, "date": 1700000000, "chat": {"id": 42, "type": "private"},
    "from": {"id": 1000, "is_bot": False, "first_name": "Ann"}, "text": "hello",
    "reply_to_message": {"message_id": 4, "date": 1700000000, "chat": {"id": 42, "type": "private"},
                         "voice": {"file_id": "v", "file_unique_id": "u", "duration": 3}}}})
poll = types.Update.model_validate({"update_id": 8, "poll_answer": {
    "poll_id": "p", "option_ids": [2], "option_persistent_ids": ["c"], "user": {"id": 1000, "is_bot": False, "first_name": "Ann"}}})
never_used = sum(not getattr(types, name).__pydantic_complete__ for name in types.__all__
                 if hasattr(getattr(types, name), "__pydantic_complete__"))
print(json.dumps({"deferred": deferred_types.deferred_count(), "never_used": never_used,
                  "text": update.message.text, "voice": update.message.reply_to_message.voice.duration,
                  "poll": poll.poll_answer.option_ids[0]}))
"""


def test_the_types_are_deferred_and_still_read_every_update():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, cwd=ROOT, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["deferred"] > 300  # aiogram still has the loop this relies on (a new minor: check it)
    assert found["never_used"] > 200  # most of the Bot API is never built
    assert (found["text"], found["voice"], found["poll"]) == ("hello", 3, 2)


EVERY_TYPE = r"""
import json
import channels.telegram.bot
from aiogram import methods, types
failed = []
for group in (types, methods):
    for name in group.__all__:
        entity = getattr(group, name)
        if hasattr(entity, "model_rebuild"):
            try:
                entity.model_rebuild()
                if not entity.__pydantic_complete__:
                    failed.append(f"{name}: not complete")
            except Exception as exc:
                failed.append(f"{name}: {type(exc).__name__}: {str(exc)[:200]}")
print(json.dumps({"failed": failed}))
"""


def test_every_bot_api_type_and_method_still_builds_when_deferred():
    """Not only what Bruce uses today: a type first met in an update (a new kind of message) or a
    method added later builds from the names the hook put in its module."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", EVERY_TYPE], env=env, cwd=ROOT, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"failed": []}


FIRST_REPLY = r"""
import json
from pydantic import BaseModel
import channels.telegram.bot as telegram_bot
from aiogram.methods import SendChatAction, SendMessage

def models():
    seen, todo = set(), [BaseModel]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub not in seen:
                seen.add(sub)
                todo.append(sub)
    return seen

bot = telegram_bot.TelegramBot("123456:probe", "http://127.0.0.1:9")._bot
before = models()
message = {"message_id": 9, "date": 1700000000, "chat": {"id": 42, "type": "private"}, "text": "Hello."}
sent = bot.session.check_response(bot, SendMessage(chat_id=42, text="Hello."), 200,
                                  json.dumps({"ok": True, "result": message}))
typed = bot.session.check_response(bot, SendChatAction(chat_id=42, action="typing"), 200,
                                   json.dumps({"ok": True, "result": True}))
print(json.dumps({"new": sorted(c.__qualname__ for c in models() - before), "id": sent.result.message_id,
                  "typed": typed.result}))
"""


def test_the_first_reply_builds_no_response_model():
    """aiogram parses each answer with ``Response[T]``, a generic pydantic builds on first use (about
    9 ms for ``sendMessage``'s, in a profile of the daemon's first answer); ``channels.telegram.bot``
    builds those of the calls Bruce makes when it is imported, in the import thread."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", FIRST_REPLY], env=env, cwd=ROOT, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"new": [], "id": 9, "typed": True}
