"""Crash soak: does Bruce keep its promises across ``kill -9``?

Runs the real daemon (``python -m bruce.cli.main --config ... run``, a child process in its own process
group) on the fake Bot API (``tests/fakes/telegram_api.py``) and the fake model
(``tests/fakes/llm_server.py``, answering after ``--llm-delay-s`` so that kills land mid-turn). Both
fakes live in this process, so they see every call across every kill. See
``benchmarks/_soak_world.py`` for the workload's messages and how each send is attributed.

Phase 1, kills: 8 chats send plain messages, artifact saves, notes (``files.write``, approved by
pressing the button) and reminders. ``--kills`` times: wait until the daemon polls Telegram again
(a ``getUpdates`` after its start, and its log says the Telegram library has loaded), let it work a random while (``--min-s`` .. ``--max-s``), send
SIGKILL to its process group; a kill after which the database holds a running turn landed
mid-turn. Then one last start, drain, tally.

Phase 2, two daemons on one database: the second reaches it through a symlink to the file; both
poll the same bot. Reminders are asked for while the second daemon is killed and restarted.

Prints both tables (``rich``) and PASS/FAIL per goal of issue 31; exits 1 when a goal fails.

    .venv/bin/python benchmarks/crash_soak.py [--kills 32] [--messages 300] [--seed N]
        [--llm-delay-s 1.0] [--phase2-reminders 40] [--skip-phase2] [--json]
"""

from __future__ import annotations

import sys
from pathlib import Path

if str(Path(__file__).resolve().parent.parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import argparse  # noqa: E402
import asyncio  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

from benchmarks._soak_world import (  # noqa: E402
    TAG,
    Daemon,
    ModelLog,
    Pushed,
    make_model,
    make_telegram,
    open_turns,
    tally,
    write_config,
)

CHAT_BASE = 1001
WEIGHTS = {"plain": 0.55, "artifact": 0.2, "note": 0.1, "remind": 0.15}


class Soak:
    def __init__(self, args: argparse.Namespace, rng: random.Random, api: Any, folder: Path) -> None:
        self.args, self.rng, self.api, self.folder = args, rng, api, folder
        self.chats = [CHAT_BASE + i for i in range(args.chats)]
        self.next_n = dict.fromkeys(self.chats, 0)
        self.pushed: list[Pushed] = []

    def push(self, kind: str | None = None, chat: int | None = None) -> Pushed:
        chat = chat if chat is not None else self.rng.choice(self.chats)
        kind = kind or self.rng.choices(list(WEIGHTS), weights=list(WEIGHTS.values()))[0]
        self.next_n[chat] += 1
        p = Pushed(chat, self.next_n[chat], kind)
        text = f"{kind} {p.name}"
        if kind == "remind":
            delay = self.rng.randint(3, 20)
            text = f"remind {p.name} in {delay} s"
            p.due_at = time.monotonic() + delay  # at the earliest
        self.api.push_message(chat, chat, text)
        self.pushed.append(p)
        return p

    async def pushing(self, count: int, seconds: float) -> None:
        """``count`` messages at random moments in the first 80 % of ``seconds``; returns after ``seconds``."""
        moments = sorted(self.rng.uniform(0, seconds * 0.8) for _ in range(count))
        start = time.monotonic()
        for at in moments:
            await asyncio.sleep(max(0.0, start + at - time.monotonic()))
            self.push()
        await asyncio.sleep(max(0.0, start + seconds - time.monotonic()))

    async def polling(self, daemon: Daemon, since: float, timeout: float = 90.0) -> float:
        """Wait for a getUpdates after ``since`` and for the Telegram library to have loaded (the
        daemon polls before it has, and answers only once it has); the seconds it took."""
        while self.api.last_poll <= since or not daemon.sdk_loaded():
            if daemon.proc is not None and daemon.proc.poll() is not None:
                raise RuntimeError(f"the daemon exited with {daemon.proc.returncode}; see {daemon.config.parent}")
            if time.monotonic() - since > timeout:
                raise RuntimeError(f"the daemon did not poll within {timeout:.0f} s; see {daemon.config.parent}")
            await asyncio.sleep(0.05)
        return time.monotonic() - since

    def answered(self) -> set[str]:
        names: set[str] = set()
        for call in self.api.calls:
            text = str(call.params.get("text") or "")
            if call.method == "sendMessage" and not call.params.get("reply_markup") and "REMINDER" not in text:
                names.update(f"q{c}-{n}" for c, n in TAG.findall(text)[:1])
        return names

    async def drain(self, db: Path, timeout: float) -> None:
        """Until every message has an answer, every reminder is due (plus a margin), no turn runs,
        and the chats have been quiet for a few seconds; at most ``timeout``."""
        end = time.monotonic() + timeout
        last_due = max((p.due_at for p in self.pushed if p.kind == "remind"), default=0.0)
        quiet_since, sends = time.monotonic(), len(self.api.calls)
        while time.monotonic() < end:
            await asyncio.sleep(1.0)
            if len(self.api.calls) != sends:
                quiet_since, sends = time.monotonic(), len(self.api.calls)
            done = {p.name for p in self.pushed} <= self.answered()
            if (done and time.monotonic() > last_due + 10 and time.monotonic() - quiet_since > 5
                    and open_turns(db) == 0):
                return


async def phase_kills(args: argparse.Namespace, rng: random.Random, api: Any, model: ModelLog,
                      llm_base: str, folder: Path) -> dict[str, Any]:
    shared = folder / "shared"
    db = folder / "db" / "bruce.db"
    db.parent.mkdir(parents=True)
    soak = Soak(args, rng, api, folder)
    config = write_config(folder / "daemon", db=db, api_base=api.base_url, llm_base=llm_base, users=soak.chats,
                          shared=shared)
    daemon = Daemon(config, "daemon")
    per_kill = max(1, args.messages // max(1, args.kills))
    mid_turn, in_flight, ready_s = 0, 0, []
    try:
        for i in range(args.kills):
            started = time.monotonic()
            daemon.start()
            ready_s.append(await soak.polling(daemon, started))
            wait = rng.uniform(args.min_s, args.max_s)
            await soak.pushing(per_kill, wait)  # then the kill
            in_flight += model.in_flight > 0
            daemon.kill()
            opened = open_turns(db)
            mid_turn += opened > 0
            print(f"kill {i + 1:>3}/{args.kills}: after {wait:4.1f} s of polling, turns left running {opened}, "
                  f"model calls in flight {model.in_flight}", flush=True)
        for _ in range(args.messages - len(soak.pushed)):
            soak.push()
        started = time.monotonic()
        daemon.start()
        ready_s.append(await soak.polling(daemon, started))
        await soak.drain(db, args.drain_s)
        result = tally(api, soak.pushed, db, shared, model)
    finally:
        daemon.stop()
    return {**result, "kills": args.kills, "kills_mid_turn": mid_turn, "kills_model_in_flight": in_flight,
            "restart_to_ready_s_max": round(max(ready_s), 2), "folder": str(folder)}


async def phase_two_daemons(args: argparse.Namespace, rng: random.Random, api: Any, model: ModelLog,
                            llm_base: str, folder: Path) -> dict[str, Any]:
    shared = folder / "shared"
    db = folder / "db" / "bruce.db"
    alias = folder / "alias" / "bruce.db"
    db.parent.mkdir(parents=True)
    alias.parent.mkdir(parents=True)
    alias.symlink_to(db)
    soak = Soak(args, rng, api, folder)
    first = Daemon(write_config(folder / "first", db=db, api_base=api.base_url, llm_base=llm_base,
                                users=soak.chats, shared=shared), "first")
    second = Daemon(write_config(folder / "second", db=alias, api_base=api.base_url, llm_base=llm_base,
                                 users=soak.chats, shared=shared), "second")
    try:
        started = time.monotonic()
        first.start()
        await soak.polling(first, started)
        second.start()
        await asyncio.sleep(3)  # its start-up; it may not poll at all (the bot is the first's)
        for round_ in range(args.phase2_restarts + 1):
            for _ in range(args.phase2_reminders // (args.phase2_restarts + 1)):
                soak.push("remind")
                soak.push("plain")
                await asyncio.sleep(rng.uniform(0.05, 0.4))
            await asyncio.sleep(rng.uniform(args.min_s, args.max_s))
            if round_ < args.phase2_restarts:
                second.kill()
                second.start()
                await asyncio.sleep(3)
        await soak.drain(db, args.drain_s)
        result = tally(api, soak.pushed, db, shared, model)
        schedulers = [d.log_count("scheduler.started") for d in (first, second)]
    finally:
        second.stop()
        first.stop()
    return {**result, "scheduler_starts_first": schedulers[0], "scheduler_starts_second": schedulers[1],
            "second_starts": second.starts, "folder": str(folder)}


def goals(one: dict[str, Any], two: dict[str, Any] | None) -> list[tuple[str, bool, str]]:
    checks = [
        ("kills after polling, >= 30 (a full run)", one["kills"] >= 30, f"{one['kills']}"),
        ("0 lost (every message stored and answered)",
         one["stored"] == one["messages"] and one["answered_0"] == 0, f"{one['answered_0']} unanswered"),
        ("0 doubled (answered 2+ times)", one["answered_2plus"] == 0, f"{one['answered_2plus']}"),
        ("0 side effects repeated", one["side_effects_repeated"] == 0, f"{one['side_effects_repeated']}"),
        ("0 out of order", one["out_of_order"] == 0 and one["later_replies_in_context"] == 0,
         f"{one['out_of_order']} replies, {one['later_replies_in_context']} contexts"),
        ("extra Telegram sends <= 1 per 100 messages", one["extra_sends"] * 100 <= one["messages"],
         f"{one['extra_sends']} for {one['messages']}"),
        ("0 reminders lost (fired 0 times, nor reported missed)", one["fired_0"] == 0, f"{one['fired_0']}"),
        ("0 doubled reminders", one["fired_2plus"] == 0 and one["reminders_stored_twice"] == 0,
         f"{one['fired_2plus']} fired 2+, {one['reminders_stored_twice']} stored twice"),
        ("0 turns left running", one["turns_left_running"] == 0, f"{one['turns_left_running']}"),
    ]
    if two is not None:
        checks += [
            ("two daemons: 0 doubled reminders", two["fired_2plus"] == 0 and two["reminders_stored_twice"] == 0,
             f"{two['fired_2plus']} fired 2+, {two['reminders_stored_twice']} stored twice"),
            ("two daemons: 0 lost, 0 doubled answers", two["answered_0"] == 0 and two["answered_2plus"] == 0,
             f"{two['answered_0']} unanswered, {two['answered_2plus']} doubled"),
            ("two daemons: one scheduler", two["scheduler_starts_second"] == 0,
             f"second daemon started its scheduler {two['scheduler_starts_second']} times"),
            ("two daemons: one poller", two["poll_conflicts"] == 0,
             f"{two['poll_conflicts']} polls ended by the other daemon's"),
        ]
    return checks


ROWS = [("messages sent / stored", lambda r: f"{r['messages']} / {r['stored']}"),
        ("answered 0 times", lambda r: r["answered_0"]),
        ("answered 2 or more times", lambda r: r["answered_2plus"]),
        ("side effects repeated", lambda r: r["side_effects_repeated"]),
        ("replies out of order (all chats)", lambda r: r["out_of_order"]),
        ("model contexts holding a later reply", lambda r: r["later_replies_in_context"]),
        ("extra platform sends", lambda r: r["extra_sends"]),
        ("reminders stored (stored twice)", lambda r: f"{r['reminders']} ({r['reminders_stored_twice']})"),
        ("reminders fired 0 / 1 / 2+ times", lambda r: f"{r['fired_0']} / {r['fired_1']} / {r['fired_2plus']}"),
        ("turns left running", lambda r: r["turns_left_running"]),
        ("polls ended by a conflict (409)", lambda r: r["poll_conflicts"])]


def render(seed: int, one: dict[str, Any], two: dict[str, Any] | None, checks: list[tuple[str, bool, str]]) -> None:
    from rich.console import Console
    from rich.table import Table

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=Path(__file__).resolve().parent.parent).stdout.strip()
    table = Table(title=f"crash soak, seed {seed}, commit {commit}")
    table.add_column("measure")
    table.add_column("phase 1: kill -9")
    table.add_column("phase 2: two daemons")
    table.add_row("kills (landed mid-turn; a model call in flight)",
                  f"{one['kills']} ({one['kills_mid_turn']}; {one['kills_model_in_flight']})",
                  f"second daemon started {two['second_starts']}x" if two else "-")
    table.add_row("start to polling with Telegram loaded, slowest", f"{one['restart_to_ready_s_max']} s", "-")
    for label, value in ROWS:
        table.add_row(label, str(value(one)), str(value(two)) if two else "-")
    if two:
        table.add_row("scheduler started: first / second daemon", "-",
                      f"{two['scheduler_starts_first']} / {two['scheduler_starts_second']}")
    console = Console()
    console.print(table)
    goal_table = Table(title="goals (issue 31)")
    for col in ("goal", "result", "measured"):
        goal_table.add_column(col)
    for name, ok, measured in checks:
        goal_table.add_row(name, "[green]PASS[/]" if ok else "[red]FAIL[/]", measured)
    console.print(goal_table)


async def run(args: argparse.Namespace) -> int:
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1, 10**6)
    print(f"seed {seed} (rerun with --seed {seed})", flush=True)
    rng = random.Random(seed)
    model = ModelLog()
    llm = make_model(model, args.llm_delay_s)
    api = make_telegram()
    await llm.start()
    await api.start()
    tmp = tempfile.mkdtemp(prefix="bruce-soak-")
    try:
        one = await phase_kills(args, rng, api, model, llm.base_url, Path(tmp) / "kills")
        two = None
        if not args.skip_phase2:
            api2 = make_telegram()
            await api2.start()
            try:
                two = await phase_two_daemons(args, rng, api2, ModelLog(), llm.base_url, Path(tmp) / "two")
            finally:
                await api2.close()
    finally:
        await api.close()
        await llm.stop()
    checks = goals(one, two)
    if args.json:
        print(json.dumps({"seed": seed, "kills": one, "two_daemons": two,
                          "goals": {name: ok for name, ok, _ in checks}}, indent=1))
    render(seed, one, two, checks)
    print(f"files kept in {tmp}")
    return 0 if all(ok for _, ok, _ in checks) else 1


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kills", type=int, default=32, help="SIGKILLs in phase 1 (default 32; a short run: 5)")
    p.add_argument("--messages", type=int, default=300, help="user messages in phase 1 (default 300)")
    p.add_argument("--chats", type=int, default=8)
    p.add_argument("--seed", type=int, default=None, help="for the kill points and the workload (default: random)")
    p.add_argument("--llm-delay-s", type=float, default=1.0, help="the fake model's delay per call (default 1.0)")
    p.add_argument("--min-s", type=float, default=1.5, help="least time between polling again and the kill")
    p.add_argument("--max-s", type=float, default=8.0, help="most time between polling again and the kill")
    p.add_argument("--drain-s", type=float, default=240.0, help="longest wait for the last answers")
    p.add_argument("--phase2-reminders", type=int, default=40, help="reminders asked for in phase 2 (default 40)")
    p.add_argument("--phase2-restarts", type=int, default=3, help="kills and restarts of the second daemon")
    p.add_argument("--skip-phase2", action="store_true")
    p.add_argument("--json", action="store_true")
    return p


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so that the daemons are stopped too
    sys.exit(asyncio.run(run(parser().parse_args())))
