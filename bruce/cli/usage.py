"""``bruce usage`` (model calls, tokens and cost per day and model) and ``bruce budget``
(today's spend against ``llm.budget``; ``allow`` raises it once a day). What they count is
``bruce.llm.usage`` and ``bruce.llm.budget``; this module reads the arguments and prints.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

from bruce.cli.existing_store import open_existing
from bruce.clock import SystemClock, local_time
from bruce.config.schema import Config
from bruce.llm.budget import Budget
from bruce.llm.usage import usage_by_day
from bruce.safe_text import visible

__all__ = ["add_usage_arguments", "add_budget_arguments", "usage_command", "budget_command"]


def add_usage_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--days", type=int, default=7, help="how many local days, today included (default 7)")
    parser.add_argument("--json", action="store_true", help="machine-readable")


def add_budget_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="budget_command", required=True)
    sub.add_parser("status", help="today's spend against llm.budget")
    allow = sub.add_parser("allow", help="raise today's budget, once a day")
    allow.add_argument("--usd", type=float, default=0.0, help="dollars to add to today's daily_usd")
    allow.add_argument("--tokens", type=int, default=0, help="tokens to add to today's daily_tokens")


async def usage_command(config: Config, args: argparse.Namespace, config_path: Path | None = None) -> int:
    if not 1 <= args.days <= 3660:
        print("bruce: --days must be between 1 and 3660", file=sys.stderr)
        return 2
    store = await open_existing(config, config_path, SystemClock())
    if store is None:
        return 1
    try:
        rows, hits = await usage_by_day(store, SystemClock(), config.assistant.zone, args.days)
    finally:
        await store.close()
    if args.json:
        print(json.dumps({"days": args.days, "timezone": config.assistant.timezone,
                          "usage": [asdict(r) for r in rows], "cache_hits": hits}, indent=2))
        return 0
    if not rows and not hits:
        print(f"no model calls in the last {args.days} days")
        return 0
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(box=None, pad_edge=False)
    for column in ("DAY", "MODEL", "CALLS", "FAILED", "PROMPT", "COMPLETION", "COST USD"):
        table.add_column(column, justify="left" if column in ("DAY", "MODEL") else "right")
    for r in rows:
        table.add_row(r.day, Text(visible(r.model)), str(r.calls), str(r.failed), f"{r.prompt_tokens:,}", f"{r.completion_tokens:,}",
                      f"{r.cost_usd:.4f}")
    Console(width=160).print(table)
    print("cache hits: " + (", ".join(f"{day} {n}" for day, n in sorted(hits.items())) or "none"))
    return 0


async def budget_command(config: Config, args: argparse.Namespace, config_path: Path | None = None) -> int:
    b = config.llm.budget
    store = await open_existing(config, config_path, SystemClock())
    if store is None:
        return 1
    try:
        budget = Budget(store=store, clock=SystemClock(), zone=config.assistant.zone, daily_usd=b.daily_usd,
                        daily_tokens=b.daily_tokens)
        if args.budget_command == "allow":
            if args.usd < 0 or args.tokens < 0 or (args.usd == 0 and args.tokens == 0):
                print("bruce: give --usd N and/or --tokens N, more than 0", file=sys.stderr)
                return 2
            if not budget.enabled:
                print("bruce: llm.budget sets no daily limit; there is nothing to raise", file=sys.stderr)
                return 1
            unset = [name for name, given, limit in (("--usd", args.usd, b.daily_usd), ("--tokens", args.tokens,
                                                                                         b.daily_tokens))
                     if given and limit is None]
            if unset:  # the allowance is once a day: never spend it on a limit that is not there
                key = "daily_usd" if unset[0] == "--usd" else "daily_tokens"
                print(f"bruce: {unset[0]}: llm.budget.{key} is null (no such limit); nothing changed", file=sys.stderr)
                return 2
            if not await budget.allow(usd=args.usd, tokens=args.tokens):
                print("bruce: today's budget was raised already (once a day); nothing changed", file=sys.stderr)
                return 1
        spend = await budget.spend()
    finally:
        await store.close()
    zone = config.assistant.zone
    limits = []
    if spend.limit_usd is not None:
        limits.append(f"${spend.usd:.4f} of ${spend.limit_usd:.2f}")
    if spend.limit_tokens is not None:
        limits.append(f"{spend.tokens:,} of {spend.limit_tokens:,} tokens")
    if args.budget_command == "allow":
        print(f"raised today's budget: {', '.join(limits)}")
        return 0
    print(f"today ({spend.day}, {zone.key}): {spend.calls} model calls, {spend.tokens:,} tokens, ${spend.usd:.4f}")
    if not limits:
        print("no daily budget (llm.budget.daily_usd and daily_tokens are null)")
        return 0
    state = "spent: chat turns and agent jobs wait" if spend.fraction >= 1 else (
        "background calls stopped" if spend.fraction >= 0.9 else "ok")
    print(f"budget: {', '.join(limits)} ({spend.fraction:.0%}; {state}); resets {local_time(spend.resets_at, zone)}")
    return 0
