"""The owner's ``bruce jobs`` command: every conversation's proactive jobs, from the machine.

``bruce jobs list [--all] [--json]`` (live jobs; ``--all`` adds done, missed and cancelled ones),
``show ID [--json]`` (a job and its last runs), and ``pause``, ``resume``, ``cancel``, ``run-now``,
each with a job id. An untrusted job (made or changed after untrusted text entered a turn, or by an
MCP client) says so in both; a change from here keeps it untrusted. Changes go through ``JobBook`` on the config's database (never a new one),
then a running daemon is told over the console socket so it re-arms at once; with no daemon
running the change waits in the database for the next start.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from bruce.cli.existing_store import open_existing
from bruce.clock import SystemClock, local_time
from bruce.config.schema import Config
from bruce.jobs.book import JobBook, JobError, JobView
from bruce.safe_text import visible, visible_json
from bruce.store import Store

__all__ = ["add_arguments", "jobs_command"]

_CHANGES = {"pause": "paused", "resume": "resumed", "cancel": "cancelled", "run-now": "due now"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="jobs_command", required=True)
    listing = sub.add_parser("list", help="scheduled jobs of every conversation")
    listing.add_argument("--all", action="store_true", help="also done, missed and cancelled jobs")
    listing.add_argument("--json", action="store_true", help="machine-readable")
    show = sub.add_parser("show", help="one job and its last runs")
    show.add_argument("id")
    show.add_argument("--json", action="store_true", help="machine-readable")
    for verb, text in (("pause", "stop a job from running until it is resumed"), ("resume", "run a paused job again"),
                       ("cancel", "cancel a job for good"), ("run-now", "run a job now (then it keeps its schedule)")):
        sub.add_parser(verb, help=text).add_argument("id")


async def jobs_command(config: Config, args: argparse.Namespace, config_path: Path | None = None) -> int:
    store = await open_existing(config, config_path, SystemClock())
    if store is None:
        return 1
    try:
        book = JobBook(store=store, clock=SystemClock(), zone=config.assistant.zone,
                       admin_base_url=config.admin.base_url, max_live_jobs=config.scheduler.max_active_jobs)
        if args.jobs_command == "list":
            return await _list(store, all_jobs=args.all, as_json=args.json, zone=config.assistant.zone)
        if not await _exists(store, args.id, changing=args.jobs_command != "show"):
            return 1
        if args.jobs_command == "show":
            return await _show(store, book, args.id, as_json=args.json, zone=config.assistant.zone)
        return await _change(config, book, args.jobs_command, args.id)
    finally:
        await store.close()


def _record(view: JobView) -> dict[str, Any]:
    j = view.job
    return {**view.as_dict(), "conversation_id": j.conversation_id, "person": j.person,
            "schedule_kind": j.schedule_kind, "schedule_value": j.schedule_value, "timezone": j.timezone, "failures": j.failures,
            "created_at": j.created_at, "held_told_at": j.held_told_at}


async def _list(store: Store, *, all_jobs: bool, as_json: bool, zone: ZoneInfo) -> int:
    """Times in the owner's zone (``assistant.timezone``), as every page and table; a job's own zone is in its schedule."""
    views = [JobView(j) for j in await store.jobs.all(live_only=not all_jobs)]
    if as_json:
        print(visible_json([_record(v) for v in views]))
        return 0
    if not views:
        print("no scheduled jobs" + ("" if all_jobs else " (--all shows finished ones)"))
        return 0
    rows = [["ID", "CONVERSATION", "PERSON", "MODE", "STATUS", "NEXT RUN", "SCHEDULE", "CONTENT"]]
    for v in views:
        j = v.job
        rows.append([visible(cell) for cell in (
            j.id, str(j.conversation_id), j.person, str(j.execution_mode),
            str(j.status) + (" untrusted" if j.untrusted else "") + (" (flagged)" if j.flagged else ""),
            _when(j.next_run_at, zone))] + [_cut(j.description, 40), _cut(j.content, 40)])
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:  # plain columns, like ``bruce pairing list`` (no table library to install)
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    return 0


def _when(moment: str | None, zone: ZoneInfo) -> str:
    return "-" if moment is None else local_time(moment, zone, weekday=True)


def _trust(untrusted: bool) -> str:
    if not untrusted:
        return "trusted"
    return ("untrusted: made or changed after untrusted text entered a turn (or by an MCP client); its runs start "
            "tainted and stop at a tool that needs your yes")


def _cut(text: str, limit: int) -> str:
    """One line of at most ``limit`` characters (a line break would break the columns), with
    what a terminal would act on written out."""
    flat = " ".join(visible(text).split())
    return flat if len(flat) <= limit else flat[:limit - 3] + "..."


async def _exists(store: Store, job_id: str, *, changing: bool) -> bool:
    """Whether the job exists; if not, says so in the owner's terms (JobBook's text is the model's)."""
    typed = job_id.strip()
    if typed and await store.jobs.get(typed.lower()) is not None:
        return True
    print(f"bruce: there is no job {typed[:40]!r} (`bruce jobs list --all` shows every job)"
          + ("; nothing changed" if changing else ""), file=sys.stderr)
    return False


async def _show(store: Store, book: JobBook, job_id: str, *, as_json: bool, zone: ZoneInfo) -> int:
    try:
        job = await book.get(None, job_id)
    except JobError as exc:
        print(f"bruce: {visible(str(exc))}", file=sys.stderr)
        return 1
    runs = await store.jobs.runs(job.id)
    if as_json:
        print(visible_json({**_record(JobView(job)), "runs": [
            {"scheduled_for": r.scheduled_for, "status": str(r.status), "lateness_ms": r.lateness_ms,
             "error": r.error, "delivered_text": r.delivered_text, "turn_id": r.turn_id} for r in runs]}))
        return 0
    for label, value in (("job", job.id), ("conversation", str(job.conversation_id)), ("person", job.person),
                         ("mode", str(job.execution_mode)),
                         ("status", str(job.status)), ("trust", _trust(job.untrusted)), ("schedule", job.description),
                         ("next run", _when(job.next_run_at, zone)), ("notify", str(job.notify)),
                         ("failures in a row", str(job.failures)), ("flagged", job.flagged or "-"),
                         ("created", _when(job.created_at, zone)), ("content", job.content)):
        print(f"{label + ':':<19} {visible(value)}")
    print(f"runs (last {len(runs)}):" if runs else "runs: none yet")
    for r in runs:
        detail = r.error or (r.delivered_text or "")
        detail = _cut(detail, 60)
        late = f"{r.lateness_ms} ms late" if r.lateness_ms is not None else ""
        print(f"  {_when(r.scheduled_for, zone)}  {r.status}  {late}  {detail}".rstrip())
    return 0


async def _change(config: Config, book: JobBook, verb: str, job_id: str) -> int:
    try:
        if verb == "pause":
            view = await book.pause(None, job_id)
        elif verb == "resume":
            view = await book.resume(None, job_id)
        elif verb == "cancel":
            view = await book.cancel(None, job_id)
        else:
            view = await book.run_now(job_id)
    except JobError as exc:
        print(f"bruce: {visible(str(exc))}; nothing changed", file=sys.stderr)
        return 1
    from bruce.cli.daemon import jobs_changed_on_daemon

    told = await jobs_changed_on_daemon(config)
    print(f"{_CHANGES[verb]}: {visible(view.line())}")
    run_now = verb == "run-now"
    if told:
        print("the daemon runs it now" if run_now else "the running daemon has the change now")
    else:
        print("Bruce is not running; " + ("it runs when Bruce starts" if run_now else "the change applies when it starts"))
    if not config.scheduler.enabled:
        print("note: scheduler.enabled is false in this config: Bruce stores jobs but fires none")
    return 0
