"""The taint a turn inherits from its session (``bruce.turns.carried``), judged from the audit: a
turn that called a tool from outside taints the session, and its outputs from outside vouch."""

from __future__ import annotations

from bruce.store import Store
from bruce.turns.carried import Carried, carried_taint
from bruce.values import ToolStatus, TurnSource
from tests.store.test_audit import execution

OURS = frozenset({"clock.now", "memory.search"})  # the registry's tools whose output is not from outside


async def a_turn_with(store: Store, turn_id: str, *calls: tuple[str, object]) -> None:
    """A chat turn in test:1 that made ``calls`` (tool name, output) and answered."""
    await store.messages.ensure_conversation("test:1", "test", "1")
    inbound, _ = await store.messages.add_inbound("test:1", sender_id="u", text="hi", platform_message_id=turn_id)
    await store.messages.start_turn(turn_id, "test:1", source=TurnSource.CHAT, inbound_message_id=inbound)
    for name, output in calls:
        await store.audit.record_tool_execution(execution(turn_id, name, output=output, input={"url": "https://a.example/"}))
    await store.messages.complete_turn(turn_id, conversation_id="test:1", reply="ok", llm_calls=1,
                                       tool_calls=len(calls), inbound_id=inbound)


async def test_a_session_of_our_own_tools_carries_nothing(tmp_path, clock):
    store = await Store.open(tmp_path / "bruce.db", clock)
    try:
        await a_turn_with(store, "t1", ("clock.now", "12:00"), ("memory.search", {"facts": []}))
        assert await carried_taint(store, "test:1", ours=OURS) == Carried()
    finally:
        await store.close()


async def test_a_page_read_earlier_taints_and_vouches_and_a_tool_gone_still_counts(tmp_path, clock):
    store = await Store.open(tmp_path / "bruce.db", clock)
    try:
        await a_turn_with(store, "t1", ("clock.now", "12:00"), ("web.read_url", {"text": "see https://b.example/2"}))
        await a_turn_with(store, "t2", ("mcp.gone.fetch", "from a server no longer configured"))
        carried = await carried_taint(store, "test:1", ours=OURS)
        assert carried.tainted
        assert [(r.name, r.status, r.output, r.arguments) for r in carried.sources] == [
            ("web.read_url", ToolStatus.OK, {"text": "see https://b.example/2"}, {"url": "https://a.example/"}),
            ("mcp.gone.fetch", ToolStatus.OK, "from a server no longer configured", {"url": "https://a.example/"})]
    finally:
        await store.close()


async def test_only_the_latest_pages_vouch_but_the_first_still_taints(tmp_path, clock):
    """A session of many page reads: each turn's start reads the outputs of the last ``SOURCE_TURNS`` of
    them (what the history can still show), not all; the session stays tainted by the first."""
    from bruce.turns.carried import SOURCE_TURNS  # noqa: PLC0415

    store = await Store.open(tmp_path / "bruce.db", clock)
    try:
        for n in range(SOURCE_TURNS + 5):
            await a_turn_with(store, f"t{n:02d}", ("web.read_url", f"page {n}"), ("clock.now", "12:00"))
        carried = await carried_taint(store, "test:1", ours=OURS)
        assert carried.tainted
        assert [r.output for r in carried.sources] == [f"page {n}" for n in range(5, SOURCE_TURNS + 5)]
    finally:
        await store.close()
