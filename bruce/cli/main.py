"""The ``bruce`` command: run, chat, init, doctor, tools, approve / deny, pairing, jobs, usage, budget,
memory, mcp, eval, backup, restore, config check.

``run`` serves the console socket; ``chat`` attaches to it when a daemon answers there (else
it runs Bruce in-process), and ``approve`` / ``deny`` are delivered over it (else written to
the database). ``init`` runs before any config exists (``bruce.cli.init``); ``doctor``
reports on a setup (``bruce.cli.doctor``).

Errors a user can cause (a bad config, a locked database) end with one clear message and a
non-zero exit, never a traceback: 2 for a configuration error, 1 for anything else. Every
command validates the config the same way (``bruce.cli.check.check_config``); ``run``, ``chat`` and
``config check`` add the channels' tokens (``check_start``), so ``bruce config check`` refuses
exactly what ``bruce run`` would refuse at start-up, without opening the database.

``run`` and ``chat`` stop the same way: the first SIGTERM or SIGINT stops taking messages and
lets turns in flight finish (``App.stop()``, up to ``assistant.shutdown_timeout_s``); a second
one cancels them at once (exit 130). Either way the database is closed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import time
import warnings
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

import structlog

from bruce.channel import LocalDecision
from bruce.cli.check import check_config, check_start, config_warnings
from bruce.config.loader import default_config_path, load_config
from bruce.config.schema import Config
from bruce.errors import BruceError, ConfigError
from bruce.log import Redactor, configure_logging
from bruce.runtime.event_loop import run as run_loop

if TYPE_CHECKING:
    from bruce.runtime.daemon import App

__all__ = ["main"]

FORCED_EXIT = 130  # a second signal: turns in flight were cancelled
CLOSED_PIPE_EXIT = 141  # 128 + SIGPIPE: stdout's reader closed the pipe (`bruce ... | head`)

log = structlog.get_logger(__name__)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bruce", description="Bruce, a self-hosted personal assistant.")
    parser.add_argument("--config", type=Path, default=None, help="config file (default: $BRUCE_CONFIG or ./config.yml)")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("run", help="start the daemon")
    sub.add_parser("chat", help="chat with Bruce in this terminal")
    tools = sub.add_parser("tools", help="list the registered tool contracts")
    tools_sub = tools.add_subparsers(dest="tools_command")
    show = tools_sub.add_parser("show", help="print one tool contract as JSON")
    show.add_argument("name")
    for verb, text in (("approve", "approve a pending request (the owner's local step-up path)"),
                       ("deny", "deny a pending request")):
        decide = sub.add_parser(verb, help=text)
        decide.add_argument("id", help="the 8-character request id shown in the chat")
    config = sub.add_parser("config", help="configuration commands")
    config_sub = config.add_subparsers(dest="config_command", required=True)
    config_sub.add_parser("check", help="validate the config and exit")
    from bruce.cli import backup, doctor, pairing, usage
    from bruce.cli import eval as eval_cli
    from bruce.cli import init as onboarding
    from bruce.cli import jobs as jobs_cli
    from bruce.cli import mcp as mcp_cli
    from bruce.cli import memory as memory_cli

    pairing.add_arguments(sub.add_parser("pairing", help="strangers asking to talk to Bruce: list, approve, deny, revoke"))
    usage.add_usage_arguments(sub.add_parser("usage", help="model calls, tokens and cost per day and model"))
    usage.add_budget_arguments(sub.add_parser("budget", help="the daily LLM budget: status, allow --usd N"))
    jobs_cli.add_arguments(sub.add_parser("jobs", help="reminders and scheduled jobs: list, show, pause, resume, "
                                                       "cancel, run-now"))

    memory_cli.add_arguments(sub.add_parser("memory", help="what Bruce remembers about you: list, export, forget"))
    mcp_cli.add_arguments(sub.add_parser("mcp", help="MCP: status of the configured servers; serve Bruce's tools"))
    eval_cli.add_arguments(sub.add_parser("eval", help="evaluate a model and prompt on replayable cases: run, compare"))
    backup.add_backup_arguments(sub.add_parser("backup", help="copy the database safely, even while Bruce runs"))
    backup.add_restore_arguments(sub.add_parser("restore", help="put a backup in place of the database (Bruce stopped)"))
    onboarding.add_arguments(sub.add_parser("init", help="write a first config.yml and .env (asks, or --non-interactive)"))
    doctor.add_arguments(sub.add_parser("doctor", help="check that this setup is ready to start"))
    return parser


def _load(args: argparse.Namespace) -> Config:
    path = args.config or default_config_path()
    config = load_config(path)
    starts = args.command in ("run", "chat", "config")  # what builds the channels, and the check of it
    (check_start if starts else check_config)(config, source=str(path))
    return config


class _Signals:
    """SIGTERM and SIGINT: the first one asks to stop (``stop``), a second one to stop now (``now``)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.stop = asyncio.Event()
        self.now = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._received)

    def _received(self) -> None:
        (self.now if self.stop.is_set() else self.stop).set()


async def _shut_down(app: App, signals: _Signals) -> int:
    """``App.stop()``: drain the turns in flight, close the database. A second signal while it
    drains cancels those turns at once (what completed is kept, see docs/operations.md)."""
    stopping = asyncio.create_task(app.stop(), name="app.stop")
    forced = asyncio.create_task(signals.now.wait(), name="second-signal")
    try:
        await asyncio.wait({stopping, forced}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        forced.cancel()
    cut_short = signals.now.is_set() and not stopping.done()
    if cut_short:
        log.warning("app.stopping_now")
        # a model call cut at the wrong moment leaves litellm an un-awaited coroutine in its
        # executor; the warning it prints at exit says nothing the user needs
        warnings.filterwarnings("ignore", message="coroutine .* was never awaited", category=RuntimeWarning)
        await app.worker.close(0)  # the drain under way sees its turns end and finishes
    await stopping
    return FORCED_EXIT if signals.now.is_set() else 0


async def _serve(config: Config, redactor: Redactor) -> int:
    """Start-up, ordered so that the first message waits for no import: litellm and the channels'
    SDKs load in a thread while the app is built; the admin page (``/healthz``: "starting")
    serves meanwhile; the channels start reading once the model client is warm (``app.ready``)."""
    from bruce.app import build_app, load_libraries, socket_console, web_chat
    from bruce.clock import SystemClock

    started = time.monotonic()
    signals = _Signals(asyncio.get_running_loop())  # before anything starts: no signal is lost
    loading = asyncio.create_task(load_libraries(config), name="app.load_libraries")
    for warning in config_warnings(config):  # what `bruce config check` prints after "config ok"
        log.warning("config.warning", warning=warning)
    clock = SystemClock()
    extra = [socket_console(config, clock)] + ([web_chat(config, clock)] if config.admin.enabled else [])
    try:
        app = await build_app(config, clock=clock, redactor=redactor, extra_channels=extra)
    except BaseException:
        loading.cancel()  # its thread ends on its own
        raise
    app.ready = False
    try:
        await app.start_admin()  # first: a host beyond loopback without a token is refused before anything runs
        await loading
        await app.llm.warm_up()
        log.info("llm.ready", model=config.llm.model)
        await app.start()
        app.ready = True
        log.info("app.ready", model=config.llm.model, seconds=round(time.monotonic() - started, 2))
        await signals.stop.wait()
        log.info("app.stopping")
    finally:
        code = await _shut_down(app, signals)
    return code


async def _chat(config: Config, redactor: Redactor) -> int:
    from bruce.app import build_app, console_channel
    from bruce.cli.daemon import attach_console
    from bruce.clock import SystemClock

    signals = _Signals(asyncio.get_running_loop())
    clock = SystemClock()
    attached = await attach_console(config, console_channel(config, clock), signals.stop)
    if attached is not None:
        return attached
    print(f"bruce: no daemon answers at {config.console.socket_path}; chatting in this process "
          "(start `bruce run` to share one Bruce between terminals and platforms)", file=sys.stderr)
    console = console_channel(config, clock)
    app = await build_app(config, clock=clock, redactor=redactor, extra_channels=[console], fire_jobs=False)
    try:
        await app.start()
        hint = app.llm.missing_configuration()
        if hint:
            print(f"Note: {hint}", file=sys.stderr)
        session = asyncio.create_task(console.interact(), name="console")
        stop = asyncio.create_task(signals.stop.wait(), name="first-signal")
        try:
            await asyncio.wait({session, stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
        if session.done():
            session.result()  # /quit or end of input (or what interact raised)
        else:
            busy = console.busy
            session.cancel()  # stop reading; the turn in flight is not cancelled with it
            await asyncio.gather(session, return_exceptions=True)
            if busy:
                print(f"bruce: stopping once the reply in progress is out (at most "
                      f"{config.assistant.shutdown_timeout_s:g}s); press Ctrl-C again to quit now",
                      file=sys.stderr, flush=True)
    finally:
        code = await _shut_down(app, signals)
    return code


def _tools_table(config: Config) -> list[dict[str, object]]:
    """Each contract with its effective policy (config overrides applied)."""
    from bruce.actions.policy import effective_policy
    from bruce.app import tool_set

    rows = []
    for c, _ in sorted(tool_set(config, None), key=lambda t: t[0].name):
        policy = effective_policy(c, config.tools.overrides.get(c.name))
        rows.append({
            "name": c.name,
            "risk": str(c.risk),
            "enabled": policy.refusal is None,
            "autonomous": c.autonomous and not policy.needs_confirmation,
            "confirmation": "local" if policy.step_up and policy.refusal is None else policy.needs_confirmation,
            "dry_run": str(c.dry_run),
            "idempotent": c.idempotent,
        })
    return rows


def _print_tools(config: Config, name: str | None) -> int:
    from bruce.app import tool_set

    if name:
        for contract, _ in tool_set(config, None):
            if name in (contract.name, contract.wire_name):
                print(json.dumps(asdict(contract), indent=2, default=str))
                return 0
        print(f"bruce: no tool named {name!r}", file=sys.stderr)
        return 1
    rows = _tools_table(config)
    headers = list(rows[0]) if rows else []
    widths = {h: max(len(h), *(len(str(r[h]).lower()) for r in rows)) for h in headers}
    print("  ".join(h.upper().ljust(widths[h]) for h in headers))
    for row in rows:
        print("  ".join(str(row[h]).lower().ljust(widths[h]) for h in headers))
    return 0


async def _decide_locally(config: Config, confirmation_id: str, approve: bool, config_path: Path | None = None) -> int:
    """``bruce approve`` / ``deny``: delivered to the running daemon over its console socket (it
    runs the action at once); with no daemon, written to the database, where the daemon serving
    the conversation picks it up within ``tools.approval_poll_s`` of starting."""
    from bruce.cli.daemon import decide_on_daemon

    decision = await decide_on_daemon(config, confirmation_id.lower(), approve)
    if decision is None:
        decision = await _decide_in_database(config, confirmation_id, approve, config_path)
        if decision is None:
            return 1
    ok, text = _decision_line(config, confirmation_id, decision)
    print(text, file=sys.stdout if ok else sys.stderr)
    return 0 if ok else 1


async def _decide_in_database(config: Config, confirmation_id: str, approve: bool,
                              config_path: Path | None) -> LocalDecision | None:
    from bruce.actions.confirmations import Confirmations
    from bruce.cli.existing_store import open_existing
    from bruce.clock import SystemClock

    clock = SystemClock()
    store = await open_existing(config, config_path, clock)
    if store is None:
        return None
    try:
        decision = await Confirmations(store, clock, ttl_s=config.tools.confirmation_ttl_s).decide_locally(
            confirmation_id.lower(), approve=approve)
    finally:
        await store.close()
    action = decision.action
    if action is None:
        return LocalDecision(decision.outcome)
    return LocalDecision(decision.outcome, action.tool_name, action.conversation_id, str(action.status))


def _decision_line(config: Config, confirmation_id: str, decision: LocalDecision) -> tuple[bool, str]:
    """What the owner is told, and whether the decision took effect."""
    from bruce.safe_text import visible
    from bruce.values import ConversationId, DecisionOutcome

    tool = visible(decision.tool_name or "")
    channel = ConversationId.parse(decision.conversation_id).channel if decision.conversation_id else "that"
    if decision.outcome is DecisionOutcome.QUEUED and decision.runs_here:
        return True, f"approved: {tool} runs now in the running Bruce; the user is told the outcome"
    messages = {
        DecisionOutcome.QUEUED: f"approved: {tool} runs within {config.tools.approval_poll_s:g}s once the Bruce "
                                f"process serving {channel} conversations is running (or expires if none picks it "
                                "up in time); the user is told the outcome",
        DecisionOutcome.DENIED: f"denied: {tool} will not run",
        DecisionOutcome.NOT_FOUND: f"no request {confirmation_id}",
        DecisionOutcome.EXPIRED: f"request {confirmation_id} has expired; nothing will run",
        DecisionOutcome.ALREADY_DECIDED: f"request {confirmation_id} was already handled ({decision.status or ''})",
    }
    ok = decision.outcome in (DecisionOutcome.QUEUED, DecisionOutcome.DENIED)
    return ok, messages.get(decision.outcome, decision.outcome.value)


def _store_command(config: Config, args: argparse.Namespace) -> int:
    """A command that reads or changes the database: pairing, jobs, usage, budget, memory, backup, restore."""
    from bruce.cli.backup import backup_command, restore_command
    from bruce.cli.jobs import jobs_command
    from bruce.cli.memory import memory_command
    from bruce.cli.pairing import pairing_command
    from bruce.cli.usage import budget_command, usage_command

    command = {"pairing": pairing_command, "jobs": jobs_command, "usage": usage_command,
               "budget": budget_command, "memory": memory_command, "backup": backup_command,
               "restore": restore_command}[args.command]
    try:
        return asyncio.run(command(config, args, (args.config or default_config_path()).resolve()))
    except BruceError as exc:
        print(f"bruce: {exc}", file=sys.stderr)
        return 1


def _decide(config: Config, args: argparse.Namespace) -> int:
    try:
        return asyncio.run(_decide_locally(config, args.id, args.command == "approve",
                                           (args.config or default_config_path()).resolve()))
    except BruceError as exc:
        print(f"bruce: {exc}", file=sys.stderr)
        return 1


def _mcp(config: Config, args: argparse.Namespace) -> int:
    """``bruce mcp``: logs go to stderr (stdout is the protocol for ``serve --transport stdio``)."""
    from bruce.cli.mcp import mcp_command

    configure_logging(level="error" if args.mcp_command == "status" else config.logging.level,
                      fmt=config.logging.format, redactor=Redactor(config.secrets()))
    try:
        return asyncio.run(mcp_command(config, args))
    except BruceError as exc:
        print(f"bruce: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0


def _eval(config: Config, args: argparse.Namespace) -> int:
    """``bruce eval``: quiet logs (the progress bar and the results are the output)."""
    from bruce.cli.eval import eval_command

    configure_logging(level="error", fmt=config.logging.format, redactor=Redactor(config.secrets()))
    try:
        return eval_command(config, args)
    except BruceError as exc:
        print(f"bruce: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # the cases in flight were cancelled; their folders are removed
        print("bruce: eval interrupted; no run was written", file=sys.stderr)
        return FORCED_EXIT


def main(argv: Sequence[str] | None = None) -> int:
    try:
        code = _main(argv)
        sys.stdout.flush()  # here, not at exit, so a closed pipe is seen while it can be handled
        return code
    except KeyboardInterrupt:  # Ctrl-C before the signal handlers are in place (loading, importing)
        return FORCED_EXIT
    except BrokenPipeError:
        return _closed_pipe()


def _closed_pipe() -> int:
    """The reader of stdout went away (``bruce tools show X | head``): stop quietly, as a command
    killed by SIGPIPE would, with no traceback and no error at interpreter exit."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())  # what is still buffered is dropped, not flushed into the pipe
    os.close(devnull)
    return CLOSED_PIPE_EXIT


def _config_ok(config: Config, path: Path) -> int:
    """``bruce config check`` on a config start-up accepts: say so, then what deserves a look."""
    print(f"config ok: {path}")
    for warning in config_warnings(config):
        print(f"warning: {warning}")
    return 0


def _main(argv: Sequence[str] | None) -> int:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    args = _parser().parse_args(argv)
    if args.command in ("init", "doctor"):  # before loading: there may be no (valid) config yet
        from bruce.cli import doctor
        from bruce.cli import init as onboarding

        command = onboarding.init_command if args.command == "init" else doctor.doctor_command
        return command(args.config or default_config_path(), args)
    try:
        config = _load(args)
    except ConfigError as exc:
        print(f"bruce: {exc}", file=sys.stderr)
        return 2
    if args.command == "config":
        return _config_ok(config, args.config or default_config_path())
    if args.command == "tools":
        return _print_tools(config, getattr(args, "name", None))
    if args.command in ("pairing", "jobs", "usage", "budget", "memory", "backup", "restore"):
        return _store_command(config, args)
    if args.command in ("mcp", "eval"):  # each sets up its own logging
        return (_mcp if args.command == "mcp" else _eval)(config, args)
    if args.command in ("approve", "deny"):
        return _decide(config, args)
    chat = args.command == "chat"
    redactor = configure_logging(
        level="error" if chat else config.logging.level,
        fmt=config.logging.format,
        redactor=Redactor(config.secrets()),
    )
    try:
        return run_loop(_chat(config, redactor) if chat else _serve(config, redactor), config.runtime.event_loop)
    except ConfigError as exc:
        print(f"bruce: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # stdout's reader is gone: main() stops quietly
        raise
    except (BruceError, OSError) as exc:  # OSError: a lock file or folder we may not write, a full disk
        print(f"bruce: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return FORCED_EXIT


if __name__ == "__main__":
    sys.exit(main())
