"""Cached read tools: a repeated search within its TTL costs no request and is audited as
``cached``; the model sees the same ok result; tools with side effects can never be cached."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from bruce.actions.checks import check_contract
from bruce.actions.tool_cache import ToolCache
from bruce.contracts import Risk, contract_from_dict
from bruce.errors import ContractError
from tests.actions.test_registry import contract
from tests.fakes.llm_server import Step
from tests.helpers import rows, say
from tests.tools.test_web_tools import site  # noqa: F401  (the local search backend fixture)
from tools.clock import CLOCK_NOW
from tools.files import files_write_tool


def tool_results(request: dict) -> list[dict]:
    return [json.loads(m["content"]) for m in request["messages"] if m["role"] == "tool"]


async def search_twice(app, fake_llm, query: str = "tides recife", again: str = "tides recife") -> None:
    fake_llm.add(Step.tool_calls(("web_search", {"query": query})), Step.text("Found it."))
    await say(app, "search tides")
    fake_llm.add(Step.tool_calls(("web_search", {"query": again})), Step.text("Found it again."))
    await say(app, "search tides again")


async def test_a_repeated_search_within_the_ttl_hits_the_cache(app_factory, fake_llm, site, clock):  # noqa: F811
    base, hits = site
    app = await app_factory(tools={"web": {"search_backend": "searxng", "searxng_url": base}})
    await search_twice(app, fake_llm)
    assert hits == ["search:tides recife"]  # the backend saw one request
    first, second = tool_results(fake_llm.requests[1])[0], tool_results(fake_llm.requests[3])[0]
    assert second == first and second["ok"] is True  # a normal result for the model
    audits = await rows(app, "SELECT tool_name, status, latency_ms FROM tool_executions ORDER BY id")
    assert [(a["tool_name"], a["status"]) for a in audits] == [("web.search", "ok"), ("web.search", "cached")]
    assert audits[1]["latency_ms"] >= 0
    clock.advance(seconds=301)  # past the TTL: asked again
    fake_llm.add(Step.tool_calls(("web_search", {"query": "tides recife"})), Step.text("Fresh."))
    await say(app, "and now?")
    assert hits == ["search:tides recife"] * 2


async def test_other_arguments_are_another_entry(app_factory, fake_llm, site):  # noqa: F811
    base, hits = site
    app = await app_factory(tools={"web": {"search_backend": "searxng", "searxng_url": base}})
    await search_twice(app, fake_llm, "tides recife", "tides olinda")
    assert hits == ["search:tides recife", "search:tides olinda"]


async def test_the_cache_can_be_turned_off(app_factory, fake_llm, site):  # noqa: F811
    base, hits = site
    app = await app_factory(tools={"web": {"search_backend": "searxng", "searxng_url": base, "cache_ttl_s": 0}})
    await search_twice(app, fake_llm)
    assert hits == ["search:tides recife"] * 2


async def test_a_failed_read_is_not_cached(app_factory, fake_llm):
    app = await app_factory(tools={"web": {"search_backend": "searxng", "searxng_url": "http://127.0.0.1:9"}})
    await search_twice(app, fake_llm)
    statuses = [r["status"] for r in await rows(app, "SELECT status FROM tool_executions ORDER BY id")]
    assert statuses == ["error", "error"]


async def test_clock_now_is_never_cached(app, fake_llm):
    assert CLOCK_NOW.cache_ttl_s == 0
    for _ in range(2):
        fake_llm.add(Step.tool_calls(("clock_now", {})), Step.text("It is noon."))
        await say(app, "what time is it?")
    assert [r["status"] for r in await rows(app, "SELECT status FROM tool_executions")] == ["ok", "ok"]


def test_cache_ttl_on_a_tool_with_side_effects_is_refused(tmp_path):
    (files_write, _), = [files_write_tool(notes_dir=tmp_path, max_bytes=1000)]
    problems = check_contract(replace(files_write, cache_ttl_s=60))
    assert any("cache_ttl_s is only for low-risk, read-only tools" in p for p in problems)
    problems = check_contract(contract("mail.send", Risk.LOW, side_effects="sends an email", cache_ttl_s=60))
    assert any("cache_ttl_s" in p for p in problems)
    assert check_contract(contract("weather.read", Risk.LOW, side_effects="none: reads", cache_ttl_s=60)) == []
    assert any("negative" in p for p in check_contract(contract("x.y", cache_ttl_s=-1)))


async def test_a_cached_side_effect_tool_stops_start_up(app):
    (files_write, handler), = [files_write_tool(notes_dir=app.config.storage.path.parent, max_bytes=1000)]
    with pytest.raises(ContractError, match="cache_ttl_s"):
        app.registry.register(replace(files_write, name="files.write_again", cache_ttl_s=60), handler)
    data = {f: getattr(files_write, f) for f in files_write.__dataclass_fields__}
    data.update(name="plugin.write", cache_ttl_s=30, risk="medium", dry_run=str(files_write.dry_run),
                permissions=list(files_write.permissions), failure_modes=list(files_write.failure_modes))
    with pytest.raises(ContractError, match="cache_ttl_s"):
        app.registry.register(contract_from_dict(data), handler)


def test_the_cache_keeps_at_most_its_cap_and_drops_the_least_recently_used():
    now = [0.0]
    cache = ToolCache(monotonic=lambda: now[0], max_entries=2, max_entry_chars=100)
    a, b, c = (ToolCache.key("web.search", {"query": q}) for q in "abc")
    cache.put(a, {"r": 1}, 60)
    cache.put(b, {"r": 2}, 60)
    assert cache.get(a) == {"r": 1}  # a is now the most recent
    cache.put(c, {"r": 3}, 60)
    assert cache.get(b) is None and cache.get(a) == {"r": 1} and cache.get(c) == {"r": 3}
    cache.put(ToolCache.key("web.search", {"query": "big"}), {"r": "x" * 200}, 60)
    assert len(cache) == 2  # too large to keep
    got = cache.get(a)
    got["r"] = "changed"
    assert cache.get(a) == {"r": 1}  # a copy: the caller cannot change what is kept
    now[0] = 61.0
    assert cache.get(a) is None and len(cache) == 1
    assert ToolCache.key("t", {"a": 1, "b": 2}) == ToolCache.key("t", {"b": 2, "a": 1})
