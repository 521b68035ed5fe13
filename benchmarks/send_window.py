"""How wide is Telegram's at-least-once window: from the Bot API taking a reply to the outbox
recording it as sent?

The Bot API has no idempotency key: a process killed after Telegram took a ``sendMessage`` and
before the outbox committed ``status = 'sent'`` (or ``parts_sent``) sends that piece again at the
next start, and the chat sees it twice. This measures how long that window stays open.

Runs the real sending path: ``Store`` (SQLite in WAL mode, in a temporary folder), the ``Outbox``
and the ``TelegramChannel`` (aiogram loaded as the daemon loads it), against
``tests.fakes.telegram_api.FakeTelegramAPI`` running on its own event loop in another thread,
so that it does not share Bruce's loop and both read the same ``time.monotonic()``. For each
reply (``Outbox.post``, one piece):

* accepted: the fake recorded the ``sendMessage`` request (it stores the message at once after);
* marked: the outbox's write of the row as sent returned (the commit has happened).

The window is marked - accepted. Two runs: ``--messages`` replies one after another in one chat,
then a burst of ``--chats`` replies at once, one per chat (the outbox sends chats concurrently,
so each commit waits its turn on the one connection). p50, p95, p99 and max.

Usage (from the repo root)::

    .venv/bin/python benchmarks/send_window.py [--messages 300] [--chats 50] [--json]
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
import threading  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

import structlog  # noqa: E402

from bruce.channel import IncomingMessage  # noqa: E402
from bruce.clock import SystemClock  # noqa: E402
from bruce.config.schema import TelegramConfig  # noqa: E402
from bruce.runtime.outbox import Outbox  # noqa: E402
from bruce.store import Store  # noqa: E402
from bruce.store.outbound import OutboundStore  # noqa: E402
from bruce.values import ConversationId, MessageStatus  # noqa: E402
from channels.telegram.channel import TelegramChannel  # noqa: E402
from tests.fakes.telegram_api import FakeTelegramAPI  # noqa: E402


class _TimedOutbound(OutboundStore):
    """The outbox's rows, noting when each write that marks a row sent has committed."""

    def __init__(self, store: Store) -> None:
        super().__init__(store.database)
        self.marked: dict[int, float] = {}

    async def record_send(self, message_id: int, *, status: MessageStatus, parts_sent: int, attempts: int,
                          error: str | None, retry_at: str | None = None) -> None:
        await super().record_send(message_id, status=status, parts_sent=parts_sent, attempts=attempts, error=error,
                                  retry_at=retry_at)
        if status is MessageStatus.SENT:
            self.marked[message_id] = time.monotonic()


class _Quiet:
    """No inbound message is pushed: the channel polls and hands nothing over."""

    async def deliver(self, message: IncomingMessage) -> None:
        return None

    async def decide(self, conversation_id: ConversationId, user_id: str, confirmation_id: str,
                     approve: bool) -> None:
        return None


class _FakeInThread:
    """The fake Bot API on its own event loop in a thread."""

    def __init__(self) -> None:
        self.api = FakeTelegramAPI()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="fake-bot-api", daemon=True)

    def start(self) -> None:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.api.start(), self._loop).result(10)

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.api.close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def accepted(self) -> list[tuple[int, str, float]]:
        """(chat, text, time the request was recorded) of every sendMessage."""
        return [(int(c.params["chat_id"]), str(c.params["text"]), c.at) for c in list(self.api.calls)
                if c.method == "sendMessage"]


async def _measure(messages: int, chats: int) -> dict[str, Any]:
    fake = _FakeInThread()
    fake.start()
    clock = SystemClock()
    with tempfile.TemporaryDirectory() as folder:
        store = await Store.open(Path(folder) / "bruce.db", clock)
        timed = _TimedOutbound(store)
        store.outbound = timed
        section = TelegramConfig(enabled=True, token=fake.api.token, api_base=fake.api.base_url, poll_timeout_s=1)
        channel = TelegramChannel(section, clock=clock)
        await channel.start(_Quiet())
        outbox = Outbox(store=store, channels={"telegram": channel}, clock=clock)
        try:
            ids: dict[tuple[int, str], int] = {}
            for chat in range(1, chats + 1):
                await store.messages.ensure_conversation(f"telegram:{chat}", "telegram", str(chat))
            await outbox.post(ConversationId("telegram", "1"), "warm-up")  # aiogram loaded, connection open
            for n in range(messages):
                text = f"sequential {n}"
                ids[(1, text)] = await outbox.post(ConversationId("telegram", "1"), text)
            sequential = _windows(fake.accepted(), timed.marked, ids)

            async def one(chat: int) -> None:
                text = f"burst {chat}"
                ids[(chat, text)] = await outbox.post(ConversationId("telegram", str(chat)), text)

            await asyncio.gather(*(one(chat) for chat in range(1, chats + 1)))
            burst = _windows(fake.accepted(), timed.marked, {k: v for k, v in ids.items() if k[1].startswith("burst")})
        finally:
            await channel.stop()
            await store.close()
            fake.stop()
    return {"sequential": _summary(sequential), "burst": _summary(burst), "messages": messages, "chats": chats,
            "python": platform.python_version(), "machine": platform.machine()}


def _windows(accepted: list[tuple[int, str, float]], marked: dict[int, float],
             ids: dict[tuple[int, str], int]) -> list[float]:
    at = {(chat, text): moment for chat, text, moment in accepted}
    return [(marked[row] - at[key]) * 1000 for key, row in ids.items() if key in at and row in marked]


def _summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)

    def pick(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)

    return {"count": len(ordered), "p50_ms": round(statistics.median(ordered), 2), "p95_ms": pick(0.95),
            "p99_ms": pick(0.99), "max_ms": round(ordered[-1], 2)}


def _print(result: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="Telegram: from the Bot API taking a reply to the outbox marking it sent")
    for column in ("run", "replies", "p50 ms", "p95 ms", "p99 ms", "max ms"):
        table.add_column(column)
    for run in ("sequential", "burst"):
        s = result[run]
        table.add_row(run, str(s["count"]), str(s["p50_ms"]), str(s["p95_ms"]), str(s["p99_ms"]), str(s["max_ms"]))
    Console().print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--messages", type=int, default=300)
    parser.add_argument("--chats", type=int, default=50)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(40))  # errors only
    result = asyncio.run(_measure(args.messages, args.chats))
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        _print(result)


if __name__ == "__main__":
    main()
