"""How fast does Bruce answer on Telegram, and what does a message cost it?

Runs the daemon's real wiring (``build_app`` from a config with ``channels.telegram`` enabled,
plus the console socket ``bruce run`` adds; store, litellm, tools, worker, outbox, the Telegram
adapter long-polling with ``poll_timeout_s: 1``, aiogram loading in a thread meanwhile) against
two fakes on 127.0.0.1:

* ``tests.fakes.telegram_api.FakeTelegramAPI``: the Bot API the adapter polls and sends to;
* ``tests.fakes.llm_server.FakeLLMServer``: the model, answering after a fixed latency.

Both run in child processes by default (like the real, remote services they stand for, they do
not compete with Bruce for its event loop); ``--telegram inproc`` / ``--server inproc`` run
them in Bruce's event loop instead. Measured:

1. start-up: from ``build_app`` to the first ``getUpdates`` reaching the fake, with
   ``LLMService.warm_up`` (``import litellm`` in a thread, ``gc.freeze``) started right after
   ``App.start`` as ``bruce run`` does; whether litellm was imported on the way;
2. memory: VmRSS (``/proc/self/status``) and ``ru_maxrss`` at idle after start, peak at the end;
3. sequential: N messages (30) from one user in one private chat, each sent once the previous
   reply has arrived (plus ``--gap-ms``), LLM latency 50 ms. Per message: reply time = from
   ``push_message`` to the fake recording the ``sendMessage`` (both on the fake's monotonic
   clock), LLM time = the turn's ``llm_calls.latency_ms`` from the database (litellm end to
   end), overhead = reply - LLM time; and reply - server time (latency x calls). CPU per
   message = process user+sys (``getrusage``) over the run, background summaries included;
4. burst: 50 private chats each send one message at once, LLM latency 1 s: the time from the
   first push until the last of the 50 replies is recorded (a few rounds, median).

Usage (from the repo root)::

    .venv/bin/python benchmarks/telegram_load.py [--messages 30] [--chats 50] [--rounds 3]
        [--latency-ms 50] [--burst-latency-ms 1000] [--gap-ms 100] [--warmup 3]
        [--telegram subprocess|inproc] [--server subprocess|inproc] [--log-level info]
        [--profile out.pstats] [--json]
"""

from __future__ import annotations

import sys
from pathlib import Path

if str(Path(__file__).resolve().parent.parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import argparse  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

from benchmarks._channel_load import FakeChannel, OnCall, main, parser  # noqa: E402

TOKEN = "123456:BENCH-token-abcdefghij"
WATCHED = frozenset({"getMe", "setMyCommands", "deleteWebhook", "getUpdates", "sendMessage", "sendMessageDraft",
                     "sendChatAction"})


class Telegram(FakeChannel):
    """``tests.fakes.telegram_api.FakeTelegramAPI``; a user's private chat has the user's id."""

    kind, fake_name = "telegram", "fake Bot API"
    reply, ready_event, get_me_event, ready_key = "sendMessage", "getUpdates", "getMe", "first_get_updates"
    counted = {"drafts_sent": "sendMessageDraft", "chat_actions_sent": "sendChatAction"}

    @staticmethod
    def conversation_of(user: int) -> str | None:
        return f"telegram:{user}"  # a private chat's id is its user's

    @staticmethod
    def make_fake(on_call: OnCall) -> Any:
        from tests.fakes.telegram_api import FakeTelegramAPI

        class ReportingAPI(FakeTelegramAPI):
            def _record(self, method: str, params: dict[str, Any]) -> None:
                super()._record(method, params)
                if method in WATCHED:
                    on_call(method, params.get("chat_id"), self.calls[-1].at)

        return ReportingAPI(TOKEN)

    @staticmethod
    def push_to(api: Any, messages: list[list[Any]]) -> list[dict[str, Any]]:
        pushed = []
        for user, text in messages:
            at = time.monotonic()
            update_id = api.push_message(int(user), int(user), str(text))
            mid = next(u["message"]["message_id"] for u in reversed(api.pending_updates)
                       if u["update_id"] == update_id)
            pushed.append({"chat": int(user), "user": int(user), "message_id": mid, "at": at})
        return pushed

    @staticmethod
    def urls_of(api: Any) -> dict[str, str]:
        return {"api_base": api.base_url}

    @staticmethod
    def platform_id(pushed: dict[str, Any]) -> str:
        return f"{pushed['chat']}:{pushed['message_id']}"

    def section(self, users: list[int], args: argparse.Namespace) -> dict[str, Any]:
        return {"enabled": True, "token": TOKEN, "api_base": self.endpoints["api_base"], "allowed_users": users,
                "poll_timeout_s": args.poll_timeout_s}

    def meta(self, args: argparse.Namespace) -> dict[str, Any]:
        return {"poll_timeout_s": args.poll_timeout_s}

    @staticmethod
    def table_note(meta: dict[str, Any]) -> str:
        return f", poll_timeout_s={meta['poll_timeout_s']}"


def _parser() -> argparse.ArgumentParser:
    p = parser(__doc__.split("\n\n")[0], Telegram)
    p.add_argument("--poll-timeout-s", type=int, default=1, help="channels.telegram.poll_timeout_s (default 1)")
    return p


if __name__ == "__main__":
    sys.exit(main(_parser(), Telegram, __file__))
