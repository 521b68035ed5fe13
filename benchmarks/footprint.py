"""What does Bruce weigh, and how soon does it answer after a start?

1. Imports (``--imports``): each dependency imported alone in a fresh interpreter: the VmRSS it
   adds (``/proc/self/status``) and the time it takes; then ``build_app`` with the default
   config and Telegram on, and which of the optional libraries that loaded.
2. The daemon (the default): the real ``bruce run`` process (``python -m bruce.cli run``) per
   configuration, against ``tests.fakes.telegram_api.FakeTelegramAPI`` and
   ``tests.fakes.llm_server.FakeLLMServer`` in this process (and ``FakeDiscord`` and the MCP
   test server for "everything"):

   * ``telegram``: the shared side-by-side bench's config (Telegram polling, admin page off);
   * ``default``: the default config with Telegram on (admin page on a free port);
   * ``everything``: ``default`` plus Discord and one stdio MCP server.

   Measured from outside: the first ``getUpdates`` after the launch; ``app.ready`` in its log;
   ``/healthz`` (where the admin page runs) ``starting`` then ``ok``; one message injected
   ``--inject-after`` s after the first ``getUpdates``: its reply's latency minus the model's
   delay (the first answer after a start); VmRSS of the daemon and its process tree at idle
   (``--idle-s`` after that answer), then ``--chats`` chats at once with a 1 s model: all
   answered, the peak (sampled every 50 ms), and the VmRSS once that burst is over.

``--check`` compares each configuration's idle VmRSS with ``benchmarks/footprint.json`` and
exits 1, loudly, when one has grown by more than 10 %; ``--record`` writes the figures there.

Usage (from the repo root)::

    .venv/bin/python benchmarks/footprint.py [--imports] [--configs telegram,default,everything]
        [--chats 50] [--idle-s 5] [--inject-after 1] [--check | --record] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

RECORDED = ROOT / "benchmarks" / "footprint.json"
GROWTH = 1.10  # idle VmRSS above the recorded figure times this fails --check
# imported alone; "channels.telegram.bot" is aiogram as Bruce imports it (its types deferred)
DEPENDENCIES = ("aiogram", "channels.telegram.bot", "litellm", "discord", "mcp", "uvicorn", "trafilatura", "jinja2",
                "prometheus_client", "apscheduler", "aiohttp", "pydantic", "openai", "bruce.admin")
OPTIONAL = ("aiogram", "litellm", "discord", "mcp", "uvicorn", "trafilatura", "jinja2", "prometheus_client",
            "apscheduler", "bruce.eval", "openai", "tiktoken")
USERS = list(range(1000, 1051))
MODEL_S = 0.05  # the model's delay for the first answer
BURST_MODEL_S = 1.0

_IMPORT_ONE = """
import os, sys, time, json
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
def rss():
    return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmRSS")) / 1024
base, t = rss(), time.perf_counter()
__import__(sys.argv[1])
print(json.dumps({"mib": rss() - base, "s": time.perf_counter() - t, "modules": len(sys.modules)}))
"""

_BUILD_APP = """
import asyncio, json, sys
from bruce.app import build_app
from bruce.config.loader import parse_config
def rss():
    return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmRSS")) / 1024
async def main():
    config = parse_config(json.loads(sys.argv[1]))
    app = await build_app(config)
    found = {"mib": rss(), "loaded": sorted(m for m in json.loads(sys.argv[2]) if m in sys.modules)}
    await app.stop()
    print(json.dumps(found))
asyncio.run(main())
"""


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


def imports_table(folder: Path) -> list[dict[str, Any]]:
    rows = []
    for name in DEPENDENCIES:
        done = subprocess.run([sys.executable, "-c", _IMPORT_ONE, name], capture_output=True, text=True,
                              env=_env(), cwd=ROOT, check=True)
        rows.append({"import": name, **json.loads(done.stdout)})
    config = _config("default", folder / "imports", tg="http://127.0.0.1:9", llm="http://127.0.0.1:9/v1")
    done = subprocess.run([sys.executable, "-c", _BUILD_APP, json.dumps(config), json.dumps(OPTIONAL)],
                          capture_output=True, text=True, env=_env(), cwd=ROOT, check=True)
    rows.append({"import": "build_app (default config + Telegram): VmRSS", **json.loads(done.stdout.splitlines()[-1])})
    return rows


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _config(name: str, run: Path, *, tg: str, llm: str, discord: dict[str, str] | None = None) -> dict[str, Any]:
    run.mkdir(parents=True, exist_ok=True)
    config: dict[str, Any] = {
        "assistant": {"name": "Bruce", "timezone": "UTC"},
        "llm": {"model": "openai/fake-model", "api_base": llm, "api_key": "sk-bench", "num_retries": 0},
        "storage": {"path": str(run / "bruce.db")},
        "console": {"socket_path": str(run / "bruce.sock")},
        "channels": {"telegram": {"enabled": True, "token": "123456:BENCH-token-abcdefghij", "api_base": tg,
                                  "mode": "polling", "allowed_users": USERS}},
        "limits": {"messages_per_minute": 10000, "messages_per_hour": 100000},
        "logging": {"level": "info", "format": "json"},
    }
    if name == "telegram":
        config["admin"] = {"enabled": False}
    else:
        config["admin"] = {"enabled": True, "port": _free_port(), "token": "bench-admin-token-0123456789-abcdefghij"}
    if name == "everything":
        config["channels"]["discord"] = {"enabled": True, "token": "fake-discord-token.abc.def",
                                         "allowed_users": USERS, **(discord or {})}
        config["mcp_servers"] = {"fake": {"command": sys.executable, "args": ["-m", "tests.fakes.mcp_server"],
                                          "cwd": str(ROOT), "risk": "low"}}
    return config


def _rss_mib(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("VmRSS")) / 1024
    except (OSError, StopIteration):
        return 0.0


def _tree(pid: int) -> list[int]:
    found = [pid]
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as children:
                for child in children.read().split():
                    found.extend(_tree(int(child)))
    return found


class _Watch:
    """The daemon's memory every 50 ms, and when its log says what we wait for."""

    def __init__(self, pid: int, log: Path) -> None:
        self.pid, self.log = pid, log
        self.peak = self.tree_peak = 0.0
        self.seen: dict[str, float] = {}
        self._offset = 0

    def own(self) -> float:
        return _rss_mib(self.pid)

    def tree(self) -> float:
        return sum(_rss_mib(p) for p in _tree(self.pid))

    async def run(self) -> None:
        while True:
            self.peak = max(self.peak, self.own())
            self.tree_peak = max(self.tree_peak, self.tree())
            with contextlib.suppress(OSError), open(self.log, "rb") as log:
                log.seek(self._offset)
                for line in log.read().decode(errors="replace").splitlines():
                    for event in ("app.started", "app.ready", "llm.ready"):
                        if f'"{event}"' in line:
                            self.seen.setdefault(event, time.monotonic())
                self._offset = log.tell()
            await asyncio.sleep(0.05)


async def _health(port: int | None) -> str | None:
    if port is None:
        return None
    import aiohttp

    try:
        async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{port}/healthz") as response:
            return str((await response.json()).get("status"))
    except (aiohttp.ClientError, OSError, ValueError):
        return None


async def _first_poll(api: Any, launched: float, port: int | None, watch: _Watch,
                      health: dict[str, float]) -> float:
    while not api.calls_to("getUpdates"):
        status = await _health(port)
        if status is not None:
            health.setdefault(status, time.monotonic() - launched)
        if time.monotonic() - launched > 120:
            raise RuntimeError(f"no getUpdates within 120 s; see {watch.log}")
        await asyncio.sleep(0.05)
    return next(c.at for c in api.calls if c.method == "getUpdates")


async def _reply(api: Any, chat_id: int, after: int) -> float:
    while True:
        sent = [c for c in api.calls if c.method == "sendMessage" and c.params.get("chat_id") == chat_id]
        if len(sent) > after:
            return float(sent[after].at)
        await asyncio.sleep(0.005)


async def run_daemon(name: str, folder: Path, *, chats: int, idle_s: float, inject_after: float) -> dict[str, Any]:
    from tests.fakes.llm_server import FakeLLMServer
    from tests.fakes.telegram_api import FakeTelegramAPI

    async with contextlib.AsyncExitStack() as stack:
        api = await stack.enter_async_context(FakeTelegramAPI("123456:BENCH-token-abcdefghij"))
        llm = await stack.enter_async_context(FakeLLMServer())
        llm.latency_s = MODEL_S
        discord = None
        if name == "everything":
            from tests.fakes.discord_api import FakeDiscord

            fake = await stack.enter_async_context(FakeDiscord())
            discord = {"api_base": fake.api_base, "gateway_url": fake.gateway_url}
        run = folder / name
        config = _config(name, run, tg=api.base_url, llm=llm.base_url, discord=discord)
        (run / "config.json").write_text(json.dumps(config))
        port = config["admin"].get("port") if config["admin"]["enabled"] else None
        log_path = run / "bruce.log"
        with open(log_path, "wb") as log:
            launched = time.monotonic()
            proc = subprocess.Popen([sys.executable, "-m", "bruce.cli", "--config", str(run / "config.json"), "run"],
                                    cwd=ROOT, env=_env(), stdout=log, stderr=subprocess.STDOUT)
        watch = _Watch(proc.pid, log_path)
        sampler = asyncio.create_task(watch.run())
        try:
            return await _measure(api, llm, proc, watch, launched, port, chats=chats, idle_s=idle_s,
                                  inject_after=inject_after)
        finally:
            sampler.cancel()
            proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.to_thread(proc.wait, 60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


async def _measure(api: Any, llm: Any, proc: subprocess.Popen[bytes], watch: _Watch, launched: float,
                   port: int | None, *, chats: int, idle_s: float, inject_after: float) -> dict[str, Any]:
    health: dict[str, float] = {}
    first_poll = await _first_poll(api, launched, port, watch, health)
    await asyncio.sleep(inject_after)
    pushed = time.monotonic()
    api.push_message(chat_id=USERS[0], user_id=USERS[0], text="hello, are you there?")
    first = await asyncio.wait_for(_reply(api, USERS[0], 0), 120) - pushed - MODEL_S
    for _ in range(40):  # until the daemon says it is ready (or 2 s)
        if "app.ready" in watch.seen:
            break
        await asyncio.sleep(0.05)
    ok = await _health(port)
    if ok is not None:
        health.setdefault(ok, time.monotonic() - launched)
    await asyncio.sleep(idle_s)
    idle, idle_tree = watch.own(), watch.tree()
    watch.peak = watch.tree_peak = 0.0
    llm.latency_s = BURST_MODEL_S
    burst_users = USERS[1:chats + 1]
    start = time.monotonic()
    for user in burst_users:
        api.push_message(chat_id=user, user_id=user, text="what time is it?")
    answered = await asyncio.wait_for(asyncio.gather(*(_reply(api, u, 0) for u in burst_users)), 300)
    all_answered = max(answered) - start
    await asyncio.sleep(3)
    return {
        "first_getupdates_s": round(first_poll - launched, 2),
        "app_ready_s": round(watch.seen["app.ready"] - launched, 2) if "app.ready" in watch.seen else None,
        "healthz": {k: round(v, 2) for k, v in health.items()},
        "first_answer_beyond_model_s": round(first, 3),
        "idle_rss_mib": round(idle, 1), "idle_tree_rss_mib": round(idle_tree, 1),
        "burst_chats": len(burst_users), "burst_all_answered_s": round(all_answered, 2),
        "peak_rss_mib": round(watch.peak, 1), "peak_tree_rss_mib": round(watch.tree_peak, 1),
        "after_burst_rss_mib": round(watch.own(), 1),
        "exit": proc.poll(),
    }


def check(results: dict[str, dict[str, Any]]) -> list[str]:
    """The configurations whose idle VmRSS grew by more than 10 % over the recorded figure."""
    recorded = json.loads(RECORDED.read_text()) if RECORDED.exists() else {}
    grown = []
    for name, found in results.items():
        figure = recorded.get(name, {}).get("idle_rss_mib")
        if figure and found["idle_rss_mib"] > figure * GROWTH:
            grown.append(f"{name}: idle VmRSS {found['idle_rss_mib']} MiB > {figure} MiB recorded + 10 %")
    return grown


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--imports", action="store_true", help="the per-dependency table only")
    parser.add_argument("--configs", default="telegram,default,everything")
    parser.add_argument("--chats", type=int, default=50)
    parser.add_argument("--idle-s", type=float, default=5.0)
    parser.add_argument("--inject-after", type=float, default=1.0)
    parser.add_argument("--check", action="store_true", help="fail when idle VmRSS grew > 10 %% over the record")
    parser.add_argument("--record", action="store_true", help="write the idle and peak VmRSS to footprint.json")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--keep", type=Path, default=None, help="run in this folder and keep it (logs, databases)")
    args = parser.parse_args()
    load = os.getloadavg()
    with contextlib.nullcontext(str(args.keep)) if args.keep else tempfile.TemporaryDirectory(
            prefix="bruce-footprint-") as tmp:
        if args.imports:
            rows = imports_table(Path(tmp))
            print(json.dumps(rows, indent=1) if args.json else "\n".join(
                f"{r['import']:40s} {r['mib']:7.1f} MiB  {r.get('s', 0):5.2f} s  {r.get('loaded', '')}" for r in rows))
            return 0
        results = {name: asyncio.run(run_daemon(name, Path(tmp), chats=args.chats, idle_s=args.idle_s,
                                                inject_after=args.inject_after))
                   for name in args.configs.split(",")}
    report = {"load_average": [round(x, 2) for x in load], "configs": results}
    print(json.dumps(report, indent=1) if args.json else "\n".join(
        f"{name:11s} " + "  ".join(f"{k}={v}" for k, v in found.items()) for name, found in results.items()))
    if not args.json:
        print(f"load average at the start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    if args.record:
        RECORDED.write_text(json.dumps({name: {"idle_rss_mib": found["idle_rss_mib"],
                                               "peak_rss_mib": found["peak_rss_mib"]}
                                        for name, found in results.items()}, indent=1) + "\n")
    if args.check:
        grown = check(results)
        if grown:
            print("\n!!! FOOTPRINT REGRESSION: idle memory grew by more than 10 %\n  " + "\n  ".join(grown)
                  + f"\n  (recorded in {RECORDED.relative_to(ROOT)}; re-record with --record once explained)",
                  file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
