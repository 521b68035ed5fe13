"""``bruce memory list [--all] [--json] | export [PATH] | forget ID | forget --all``: long-term
memory from the machine, everyone's: each fact shows its person (``owner``, or a guest as
``<channel>:<user id>``). ``export`` writes JSON (facts and summaries; to stdout without PATH).
Forgetting deletes for good: the fact, its search entry, and the summaries that covered it."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from zoneinfo import ZoneInfo

from bruce.cli.existing_store import open_existing
from bruce.clock import SystemClock, local_time
from bruce.config.schema import Config
from bruce.safe_text import visible, visible_json
from bruce.store import Store
from bruce.values import FactStatus

__all__ = ["add_arguments", "memory_command"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="memory_command", required=True)
    listing = sub.add_parser("list", help="what Bruce remembers (active facts; --all: archived too)")
    listing.add_argument("--all", action="store_true")
    listing.add_argument("--json", action="store_true")
    export = sub.add_parser("export", help="every fact and summary as JSON")
    export.add_argument("path", nargs="?", type=Path, help="file to write (default: standard output)")
    forget = sub.add_parser("forget", help="forget one fact by id, or everything with --all")
    forget.add_argument("id", nargs="?", type=int)
    forget.add_argument("--all", action="store_true")


async def memory_command(config: Config, args: argparse.Namespace, config_path: Path | None = None) -> int:
    if args.memory_command == "forget" and (args.id is None) == (not args.all):
        print("bruce: memory forget takes a fact id or --all (not both)", file=sys.stderr)
        return 2
    store = await open_existing(config, config_path, SystemClock())
    if store is None:
        return 1
    try:
        if args.memory_command == "list":
            return await _list(store, include_archived=args.all, as_json=args.json, zone=config.assistant.zone)
        if args.memory_command == "export":
            return await _export(store, args.path)
        return await _forget(store, args.id, everything=args.all)
    finally:
        await store.close()


async def _list(store: Store, *, include_archived: bool, as_json: bool, zone: ZoneInfo) -> int:
    facts = await store.memory.facts(include_archived=include_archived)
    if as_json:
        print(visible_json([f.as_dict() for f in facts]))
        return 0
    if not facts:
        print("Bruce remembers nothing yet.")
        return 0
    width = max(len(visible(f.person)) for f in facts)  # whose: 'owner' or a guest's '<channel>:<user id>'
    for f in facts:
        archived = "  (archived)" if f.status is FactStatus.ARCHIVED else ""
        print(f"{f.id:>5}  {visible(f.person):<{width}}  {local_time(f.last_seen_at, zone)}  [{f.type}] "
              f"{' '.join(visible(f.content).split())}{archived}")
    return 0


async def _export(store: Store, path: Path | None) -> int:
    data = {"facts": [f.as_dict() for f in await store.memory.facts()],
            "summaries": [s.as_dict() for s in await store.memory.summaries()]}
    text = visible_json(data)  # the same data, and safe to `cat`
    if path is None:
        print(text)
        return 0
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(text + "\n", encoding="utf-8")
        tmp.replace(path)  # whole or not at all
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        print(f"bruce: cannot write {path}: {exc.strerror or exc}; nothing was exported", file=sys.stderr)
        return 1
    print(f"wrote {len(data['facts'])} facts and {len(data['summaries'])} summaries to {path}", file=sys.stderr)
    return 0


async def _forget(store: Store, fact_id: int | None, *, everything: bool) -> int:
    if everything:
        print(f"forgot everything ({await store.memory.forget_all()} facts)")
        return 0
    assert fact_id is not None
    fact = await store.memory.get(fact_id)
    if fact is None:
        print(f"bruce: there is no fact {fact_id}; `bruce memory list --all` shows them", file=sys.stderr)
        return 1
    await store.memory.forget([fact_id])
    print(f"forgot {fact_id}: {visible(fact.content)}")
    return 0
