"""memory.remember, memory.search and memory.forget as handlers over a real store: what the model
gets back, and what is kept or gone afterwards. (Through the model, with the confirmation after
untrusted text and forgetting by query: tests/memory/test_long_term.py.)"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from bruce.config.schema import Config
from bruce.contracts import ToolContext, ToolHandler
from bruce.errors import ToolFailed, ToolInputInvalid
from bruce.memory.long_term import Memory
from bruce.store import Store
from bruce.values import ConversationId
from tests.fakes.clock import FakeClock
from tools.memory_tools import memory_tools


class NoModel:
    """The LLM port for a memory that must not call the model here (no summary is due)."""

    async def complete(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("memory tools made a model call")


@pytest.fixture
async def store(tmp_path: Path, clock: FakeClock) -> AsyncIterator[Store]:
    store = await Store.open(tmp_path / "bruce.db", clock)
    try:
        await store.migrate()
        await store.messages.ensure_conversation("test:c1", "test", "c1")
        yield store
    finally:
        await store.close()


def tools_for(store: Store, clock: FakeClock, config: Config) -> dict[str, ToolHandler]:
    memory = Memory(store=store, llm=NoModel(), clock=clock, settings=config.memory)  # type: ignore[arg-type]
    return {contract.name: handler for contract, handler in memory_tools(memory)}


@pytest.fixture
def tools(store: Store, clock: FakeClock, make_config: Callable[..., Config]) -> dict[str, ToolHandler]:
    return tools_for(store, clock, make_config(memory={"enabled": True, "summarize_after": 1000}))


def ctx(clock: FakeClock, *, dry_run: bool = False) -> ToolContext:
    return ToolContext(clock=clock, zone=ZoneInfo("UTC"), conversation_id=ConversationId("test", "c1"), turn_id=None, dry_run=dry_run)


async def remember(tools: dict[str, ToolHandler], clock: FakeClock, kind: str, content: str) -> dict[str, Any]:
    result: dict[str, Any] = await tools["memory.remember"]({"type": kind, "content": content}, ctx(clock))
    return result


async def test_remember_keeps_a_fact_once(tools: dict[str, ToolHandler], clock: FakeClock) -> None:
    first = await remember(tools, clock, "preference", "Likes   green\ntea")
    assert first["new"] is True
    assert first["fact"] == {"id": first["fact"]["id"], "type": "preference", "content": "Likes green tea"}
    again = await remember(tools, clock, "preference", "Likes green tea")
    assert again == {"fact": first["fact"], "new": False}


async def test_search_finds_what_was_kept(tools: dict[str, ToolHandler], clock: FakeClock) -> None:
    await remember(tools, clock, "preference", "Likes green tea")
    await remember(tools, clock, "fact", "Lives in Porto")
    found = await tools["memory.search"]({"query": "tea"}, ctx(clock))
    assert [(r["kind"], r["content"]) for r in found["results"]] == [("fact", "Likes green tea")]


async def test_forget_by_id_previews_in_a_dry_run_then_forgets(tools: dict[str, ToolHandler], clock: FakeClock) -> None:
    fact = (await remember(tools, clock, "fact", "Owes Marco 50 euros"))["fact"]
    preview = await tools["memory.forget"]({"id": fact["id"]}, ctx(clock, dry_run=True))
    assert preview == {"would_forget": [fact]}
    assert len((await tools["memory.search"]({"query": "Marco"}, ctx(clock)))["results"]) == 1  # still there
    done = await tools["memory.forget"]({"id": fact["id"]}, ctx(clock))
    assert done == {"forgotten": 1, "facts": [fact]}
    assert (await tools["memory.search"]({"query": "Marco"}, ctx(clock)))["results"] == []
    with pytest.raises(ToolFailed) as err:
        await tools["memory.forget"]({"id": fact["id"]}, ctx(clock))
    assert err.value.code == "not_found" and str(err.value) == f"there is no fact {fact['id']} in memory"


async def test_forget_by_query_takes_every_match(tools: dict[str, ToolHandler], clock: FakeClock) -> None:
    await remember(tools, clock, "preference", "Likes green tea")
    await remember(tools, clock, "preference", "Likes black tea")
    await remember(tools, clock, "fact", "Lives in Porto")
    done = await tools["memory.forget"]({"query": "tea"}, ctx(clock))
    assert done["forgotten"] == 2
    assert sorted(f["content"] for f in done["facts"]) == ["Likes black tea", "Likes green tea"]
    assert [r["content"] for r in (await tools["memory.search"]({"query": "Porto"}, ctx(clock)))["results"]] == [
        "Lives in Porto"]


@pytest.mark.parametrize("args", [{}, {"id": 1, "query": "tea"}])
async def test_forget_needs_exactly_one_of_id_and_query(tools: dict[str, ToolHandler], clock: FakeClock,
                                                        args: dict[str, Any]) -> None:
    with pytest.raises(ToolInputInvalid, match="exactly one of id and query"):
        await tools["memory.forget"](args, ctx(clock))


async def test_remember_is_refused_when_the_owner_turned_memory_off(
        store: Store, clock: FakeClock, make_config: Callable[..., Config]) -> None:
    tools = tools_for(store, clock, make_config(memory={"enabled": False}))
    with pytest.raises(ToolFailed) as err:
        await remember(tools, clock, "fact", "Lives in Porto")
    assert err.value.code == "unavailable" and "memory.enabled is false" in str(err.value)


@pytest.mark.parametrize(("name", "args"), [("memory.remember", {"type": "fact", "content": "x"}),
                                            ("memory.search", {"query": "x"}), ("memory.forget", {"id": 1})])
async def test_without_a_memory_every_tool_says_it_is_unavailable(clock: FakeClock, name: str,
                                                                  args: dict[str, Any]) -> None:
    handlers = {contract.name: handler for contract, handler in memory_tools(None)}
    with pytest.raises(ToolFailed) as err:
        await handlers[name](args, ctx(clock))
    assert err.value.code == "unavailable"
