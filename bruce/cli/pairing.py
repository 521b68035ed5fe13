"""The owner's ``bruce pairing`` command (the codes themselves: ``bruce.runtime.pairing``).

``bruce pairing list | approve [CHANNEL] CODE | deny [CHANNEL] CODE | revoke CHANNEL
USER_ID`` work on the config's database (never a new one); with a channel (``bruce pairing approve
discord CODE``) the code must be one given on that channel. An approved sender is answered from their next
message on (a running daemon looks a sender it does not know up in the database); a revoked
one is a stranger again within ``AccessSettings.paired_refresh_s``.
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

from bruce.cli.existing_store import open_existing
from bruce.clock import SystemClock, local_time, parse_iso
from bruce.config.schema import Config
from bruce.records import PairingRequestRecord
from bruce.runtime.access import AccessSettings
from bruce.runtime.pairing import normalized_code
from bruce.safe_text import visible
from bruce.store import Store
from bruce.values import DecisionOutcome

__all__ = ["add_arguments", "pairing_command"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="pairing_command", required=True)
    sub.add_parser("list", help="pending pairing requests")
    for verb, text in (("approve", "let the sender of this code talk to Bruce"), ("deny", "refuse this code")):
        decide = sub.add_parser(verb, help=text)
        decide.add_argument("channel", nargs="?", help="telegram, discord, ...: the code must be from there")
        decide.add_argument("code", help="the 8-character code the sender was given")
    revoke = sub.add_parser("revoke", help="make a paired user a stranger again")
    revoke.add_argument("channel", help="telegram, discord, ...")
    revoke.add_argument("user_id", help="their user id on that platform")


async def pairing_command(config: Config, args: argparse.Namespace, config_path: Path | None = None) -> int:
    store = await open_existing(config, config_path, SystemClock())
    if store is None:
        return 1
    try:
        if args.pairing_command == "list":
            return _list(await store.pairing.pending(), config.assistant.zone, SystemClock().now())
        if args.pairing_command == "revoke":
            return await _revoke(config, store, args.channel, args.user_id)
        return await _decide(store, args.code, approve=args.pairing_command == "approve", channel=args.channel)
    finally:
        await store.close()


def _list(requests: list[PairingRequestRecord], zone: ZoneInfo, now: datetime) -> int:
    if not requests:
        print("no pending pairing requests")
        return 0
    rows = [["CODE", "CHANNEL", "SENDER ID", "NAME", "EXPIRES"]]
    for r in requests:
        expires = parse_iso(r.expires_at)
        minutes = max(int((expires - now).total_seconds() // 60), 0)
        rows.append([visible(r.code), visible(r.channel), visible(r.sender_id), visible(r.display_name or "-"),
                     f"{local_time(expires, zone)} (in {minutes} min)"])
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    return 0


async def _decide(store: Store, typed: str, *, approve: bool, channel: str | None = None) -> int:
    code = normalized_code(typed)
    if channel is not None:  # only a pending code can change; one from elsewhere is left alone
        found = next((r for r in await store.pairing.pending() if r.code == code), None)
        if found is not None and found.channel != channel.lower():
            print(f"bruce: pairing code {code} was given on {found.channel}, not {channel}; nothing changed",
                  file=sys.stderr)
            return 1
    outcome, request = await store.pairing.decide(code, approve=approve)
    who = visible(f"{request.channel} user {request.sender_id}") if request else ""
    if request is not None and request.display_name:
        who += f" ({visible(request.display_name)})"
    if outcome is DecisionOutcome.APPROVED:
        print(f"paired: {who}; Bruce answers their next message")
        return 0
    if outcome is DecisionOutcome.DENIED:
        print(f"denied: {who} is not paired (and gets no new code before this one would have expired)")
        return 0
    problems = {
        DecisionOutcome.NOT_FOUND: f"no pairing code {code}",
        DecisionOutcome.EXPIRED: f"pairing code {code} has expired; nothing changed (a new message from them "
                                 "gets a new code)",
        DecisionOutcome.ALREADY_DECIDED: f"pairing code {code} was already handled ("
                                         f"{request.status if request else ''})",
    }
    print(f"bruce: {problems.get(outcome, str(outcome))}", file=sys.stderr)
    return 1


async def _revoke(config: Config, store: Store, channel: str, user_id: str) -> int:
    if not await store.pairing.revoke(channel, user_id):
        print(f"bruce: {channel} user {user_id} is not paired", file=sys.stderr)
        return 1
    section = config.channels.sections().get(channel)
    if section is not None and user_id in section.allowed_users:
        print(f"revoked the pairing of {channel} user {user_id}, but channels.{channel}.allowed_users still "
              "lets them in")
    else:
        print(f"revoked: {channel} user {user_id} is a stranger again (a running Bruce notices within "
              f"{AccessSettings().paired_refresh_s:g} s)")
    return 0
