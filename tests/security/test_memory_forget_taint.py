"""Issue 30, point 7: after untrusted text entered a turn, ``memory.forget`` by id asks the owner
first, as forgetting by query always does; a page cannot make Bruce drop what it knows."""

from __future__ import annotations

import pytest

from tests.fakes.llm_server import Step
from tests.helpers import rows, say
from tests.memory.test_long_term import MEMORY, facts_answer, page  # noqa: F401  (page is a fixture)


@pytest.fixture
async def mem_app(app_factory):
    return await app_factory(memory=MEMORY, tools={"web": {"allow_private": True}})


async def kept(app, fake_llm) -> int:
    fake_llm.add(facts_answer(), model="memory")
    fake_llm.add(Step.tool_calls(("memory_remember", {"type": "fact", "content": "Allergic to penicillin"})),
                 Step.text("Kept."))
    await say(app, "remember that I am allergic to penicillin")
    (fact,) = await rows(app, "SELECT id FROM memory_facts")
    return int(fact["id"])


async def test_after_a_web_page_entered_the_turn_forget_by_id_becomes_a_confirmation(mem_app, fake_llm, channel, page):  # noqa: F811
    fact_id = await kept(mem_app, fake_llm)
    fake_llm.add(facts_answer(), model="memory")
    fake_llm.add(Step.tool_calls(("web_read_url", {"url": page})),
                 Step.tool_calls(("memory_forget", {"id": fact_id})),
                 Step.text("I asked before forgetting."))
    await say(mem_app, "read my page")
    ((_, request),) = channel.confirmations
    assert request.tool_name == "memory.forget" and "penicillin" in (request.preview or "")  # the fact is shown
    assert [r["id"] for r in await rows(mem_app, "SELECT id FROM memory_facts")] == [fact_id]
    await say(mem_app, f"/approve {request.id}")
    assert await rows(mem_app, "SELECT id FROM memory_facts") == []


async def test_without_untrusted_text_forget_by_id_runs_at_once(mem_app, fake_llm, channel):
    fact_id = await kept(mem_app, fake_llm)
    fake_llm.add(facts_answer(), model="memory")
    fake_llm.add(Step.tool_calls(("memory_forget", {"id": fact_id})), Step.text("Forgotten."))
    await say(mem_app, "forget my allergy")
    assert channel.confirmations == []
    assert await rows(mem_app, "SELECT id FROM memory_facts") == []
