"""How fast does Bruce answer on Discord, and what does a message cost it?

The Discord twin of ``telegram_load.py`` (same scenarios, options and output; the machinery is
in ``_channel_load.py``). It runs the daemon's real wiring (``build_app`` from a config with
``channels.discord`` enabled: ``token``, ``api_base`` and ``gateway_url`` at the fake,
``allowed_users`` for the benchmark's users, ``ready_timeout_s``; plus the console socket
``bruce run`` adds) with discord.py connected over a real websocket to two fakes on 127.0.0.1:

* ``tests.fakes.discord_api.FakeDiscord``: Discord's REST API and gateway; every user writes
  to the bot in their own DM channel (``FakeDiscord.dm``);
* ``tests.fakes.llm_server.FakeLLMServer``: the model, answering after a fixed latency.

Both run in child processes by default; ``--discord inproc`` / ``--server inproc`` run them in
Bruce's event loop instead. Measured:

1. start-up: from ``build_app`` to the gateway IDENTIFY reaching the fake, and to ``App.start``
   returning (the channel waits for READY), with ``LLMService.warm_up`` right after
   ``App.start`` as ``bruce run`` does;
2. memory: VmRSS and ``ru_maxrss`` at idle after start, peak at the end;
3. sequential: 30 DMs from one user, each sent once the previous reply has arrived (plus
   ``--gap-ms``), LLM latency 50 ms; reply time = from ``dm()`` to the fake receiving the
   ``POST /channels/{dm}/messages``; overhead = reply - the turn's ``llm_calls.latency_ms``;
   CPU per message = process user+sys over the run, background summaries included;
4. burst: 50 users each send one DM at once, LLM latency 1 s: the time from the first DM until
   the last of the 50 replies reaches the fake (a few rounds, median).

Usage (from the repo root)::

    .venv/bin/python benchmarks/discord_load.py [--messages 30] [--chats 50] [--rounds 3]
        [--latency-ms 50] [--burst-latency-ms 1000] [--gap-ms 100] [--warmup 3]
        [--discord subprocess|inproc] [--server subprocess|inproc] [--log-level info]
        [--ready-timeout-s 30] [--profile out.pstats] [--json]
"""

from __future__ import annotations

import sys
from pathlib import Path

if str(Path(__file__).resolve().parent.parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import argparse  # noqa: E402
import re  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

from benchmarks._channel_load import FakeChannel, OnCall, main, parser  # noqa: E402

TOKEN = "bench-discord-token.abc.def"
_EVENTS = [  # (method, path) -> event name; group 1 of the path is the channel
    ("POST", re.compile(r"^/channels/(\d+)/messages$"), "POST message"),
    ("POST", re.compile(r"^/channels/(\d+)/typing$"), "typing"),
    ("PATCH", re.compile(r"^/channels/(\d+)/messages/\d+$"), "edit"),
    ("GET", re.compile(r"^/users/@me$"), "GET /users/@me"),
]


class _ReportingCalls(list[Any]):
    """FakeDiscord.calls that reports the REST calls of ``_EVENTS`` as they arrive."""

    def __init__(self, on_call: OnCall) -> None:
        super().__init__()
        self.on_call = on_call

    def append(self, call: Any) -> None:
        super().append(call)
        for method, pattern, name in _EVENTS:
            if call.method == method and (m := pattern.match(call.path)):
                self.on_call(name, int(m.group(1)) if m.groups() else None, call.at)


class Discord(FakeChannel):
    """``tests.fakes.discord_api.FakeDiscord``; each user has a DM channel, made on the first DM."""

    kind, fake_name = "discord", "fake Discord"
    reply, ready_event, get_me_event, ready_key = "POST message", "IDENTIFY", "GET /users/@me", "identify"
    counted = {"typing_sent": "typing", "edits_sent": "edit"}

    @staticmethod
    def make_fake(on_call: OnCall) -> Any:
        from tests.fakes.discord_api import FakeDiscord

        class ReportingDiscord(FakeDiscord):
            def _identify(self, conn: Any, d: dict[str, Any]) -> None:
                on_call("IDENTIFY", None, time.monotonic())
                super()._identify(conn, d)

        fake = ReportingDiscord(TOKEN)
        fake.calls = _ReportingCalls(on_call)
        return fake

    @staticmethod
    def push_to(api: Any, messages: list[list[Any]]) -> list[dict[str, Any]]:
        pushed = []
        for user, text in messages:
            at = time.monotonic()
            message = api.dm(int(user), str(text), username=f"user{user}")
            pushed.append({"chat": int(message["channel_id"]), "user": int(user), "message_id": int(message["id"]),
                           "at": at})
        return pushed

    @staticmethod
    def urls_of(api: Any) -> dict[str, str]:
        return {"api_base": api.api_base, "gateway_url": api.gateway_url}

    @staticmethod
    def platform_id(pushed: dict[str, Any]) -> str:
        return str(pushed["message_id"])

    def section(self, users: list[int], args: argparse.Namespace) -> dict[str, Any]:
        return {"enabled": True, "token": TOKEN, **self.endpoints, "allowed_users": users,
                "ready_timeout_s": args.ready_timeout_s}

    def meta(self, args: argparse.Namespace) -> dict[str, Any]:
        return {"ready_timeout_s": args.ready_timeout_s}


def _parser() -> argparse.ArgumentParser:
    p = parser(__doc__.split("\n\n")[0], Discord)
    p.add_argument("--ready-timeout-s", type=float, default=30.0,
                   help="channels.discord.ready_timeout_s (default 30)")
    return p


if __name__ == "__main__":
    sys.exit(main(_parser(), Discord, __file__))
