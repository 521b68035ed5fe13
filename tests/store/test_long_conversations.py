"""What a turn reads from the store costs no more in a long conversation than in a short one.

A chat that never sees ``/new`` is one session for months. Every message starts a turn that reads
the history, who wrote in the conversation, the taint its session carries and (once answered) the
turn that answered it; each of those read every message or turn before v18, so a chat of 5,000
exchanges cost 65 ms of CPU a message instead of 16 (docs/benchmarks.md, "Long conversations").
The work is counted in SQLite's virtual-machine steps (a progress handler on the connection), not
timed: the same reads in a conversation ten times longer must take about as many steps.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable
from typing import Any

from bruce.store import Store
from bruce.store._aiosqlite_shim import run_on_connection_thread
from bruce.values import TurnSource
from tests.store.test_audit import execution

CONVERSATION = "test:1"
OURS = frozenset({"clock.now"})


async def exchanges(store: Store, first: int, count: int, *, tools: bool = True) -> int:
    """``count`` answered messages from two people; with ``tools``, every tenth turn asks the clock
    (our own tool) and the first of all reads a page (from outside). Returns the last inbound message's id."""
    inbound = 0
    for n in range(first, first + count):
        turn = f"t{n}"
        inbound, _ = await store.messages.add_inbound(CONVERSATION, sender_id=f"u{n % 2}", text=f"message {n}",
                                                      platform_message_id=f"p{n}")
        await store.messages.start_turn(turn, CONVERSATION, source=TurnSource.CHAT, inbound_message_id=inbound)
        if tools and n == 0:
            await store.audit.record_tool_execution(execution(turn, "web.read_url", output="see https://a.example/"))
        elif tools and n % 10 == 0:
            await store.audit.record_tool_execution(execution(turn, "clock.now", output="12:00"))
        await store.messages.complete_turn(turn, conversation_id=CONVERSATION, reply=f"answer {n}", llm_calls=1,
                                           tool_calls=int(tools and n % 10 == 0), inbound_id=inbound)
    return inbound


async def steps(store: Store, read: Callable[[], Awaitable[Any]]) -> int:
    """The virtual-machine steps SQLite takes for ``read``."""
    counted = [0]

    def tick() -> int:
        counted[0] += 1
        return 0  # go on

    def watch(conn: sqlite3.Connection, handler: Callable[[], int] | None) -> None:
        conn.set_progress_handler(handler, 1)

    connection = store.database._db
    await run_on_connection_thread(connection, lambda conn: watch(conn, tick))
    try:
        await read()
    finally:
        await run_on_connection_thread(connection, lambda conn: watch(conn, None))
    return counted[0]


async def turn_start_steps(store: Store, inbound: int) -> dict[str, int]:
    """What a chat turn reads for the message ``inbound``, read by read. (The taint's read grows with
    the session's tool calls that returned an output, which it has to look at, not with its messages.)"""
    return {
        "turn_view": await steps(store, lambda: store.messages.turn_view(CONVERSATION, limit=22, inbound_id=inbound)),
        "answered_turns": await steps(store, lambda: store.audit.answered_turns(CONVERSATION, ours=OURS)),
        "turn_of": await steps(store, lambda: store.messages.turn_of(inbound)),
        "to_fold": await steps(store, lambda: store.messages.to_fold(CONVERSATION, keep_last=14)),
    }


async def test_a_turn_reads_as_much_in_a_long_conversation_as_in_a_short_one(tmp_path, clock):
    store = await Store.open(tmp_path / "bruce.db", clock)
    try:
        await store.messages.ensure_conversation(CONVERSATION, "test", "1")
        last = await exchanges(store, 0, 100)
        await store.messages.add_summary(CONVERSATION, "so far", up_to_message_id=last - 20)
        short = await turn_start_steps(store, last)
        last = await exchanges(store, 100, 1000, tools=False)  # ten times as many messages, no more tool calls
        await store.messages.add_summary(CONVERSATION, "so far", up_to_message_id=last - 20)
        long = await turn_start_steps(store, last)
        assert {read: long[read] <= 1.5 * short[read] + 50 for read in short} == dict.fromkeys(short, True), (
            short, long)
        # and they still find what they look for: both people, the page read at the start
        view = await store.messages.turn_view(CONVERSATION, limit=22, inbound_id=last)
        assert view.senders == {"u0", "u1"}
        assert [(t.id, t.tools) for t in await store.audit.answered_turns(CONVERSATION, ours=OURS)] == [
            ("t0", ("web.read_url",))]
        assert await store.messages.turn_of(last) == "t1099"
    finally:
        await store.close()
