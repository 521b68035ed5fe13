"""The <tool_execution_guidelines> layer knows only what exists: it is made from the tools the
real registry offers in the turn (built-in set, config overrides, policy, the turn's filter),
each tool's ``guideline`` once, in the order of the tool names."""

from __future__ import annotations

import pytest

from bruce.contracts import Risk
from bruce.errors import ContractError
from bruce.turns.prompt import DOMAIN_GUIDELINES, tool_execution_guidelines
from bruce.values import ConversationId
from tests.actions.test_registry import contract, nothing
from tests.fakes.llm_server import Step
from tests.helpers import say

SCHEDULING = DOMAIN_GUIDELINES["proactive"]
BUILTIN_NAMES = ["artifact.save", "clock.now", "files.write", "http.post", "math.calculate", "memory.forget",
                 "memory.remember", "memory.search", "proactive.cancel",
                 "proactive.create", "proactive.list", "proactive.update", "web.read_url", "web.search"]
NO_PROACTIVE = {"overrides": {name: {"enabled": False} for name in BUILTIN_NAMES if name.startswith("proactive.")}}


def layer(app, scope=None) -> str:
    return tool_execution_guidelines(app.registry.offered(scope))


def system_prompt(request: dict) -> str:
    first = request["messages"][0]
    assert first["role"] == "system"
    return first["content"]


async def test_the_builtin_layer_says_nothing_about_reminders_without_the_proactive_tools(app_factory):
    app = await app_factory(tools=NO_PROACTIVE)
    assert [c.name for c in app.registry.offered()] == [n for n in BUILTIN_NAMES if not n.startswith("proactive.")]
    text = layer(app).lower()
    for word in ("remind", "schedule", "proactive", '"message"', '"agent"'):
        assert word not in text


async def test_each_builtin_guideline_appears_once_in_name_order(app):
    offered = app.registry.offered()
    assert [c.name for c in offered] == BUILTIN_NAMES
    text = tool_execution_guidelines(offered)
    guidelines = [c.guideline for c in offered if c.name not in ("proactive.list", "proactive.cancel",
                                                                  "memory.search", "memory.forget")]
    assert all(guidelines) and all(text.count(g) == 1 for g in guidelines)
    assert [text.index(g) for g in guidelines] == sorted(text.index(g) for g in guidelines)
    assert tool_execution_guidelines(reversed(offered)) == text  # the caller's order does not matter
    # the general rules frame them: chaining first, honesty rules last
    assert text.index("Chaining:") < text.index(guidelines[0]) < text.index(guidelines[-1]) < text.index("Honesty")


async def test_a_tool_disabled_by_config_brings_no_guidance(app_factory, fake_llm):
    app = await app_factory(tools={"overrides": {"artifact.save": {"enabled": False}}})
    fake_llm.add(Step.text("Hi."))
    await say(app, "hello")
    sent = system_prompt(fake_llm.requests[0])
    assert "artifact_save" not in sent and "Documents:" not in sent
    assert "math_calculate" in sent and "Honesty rules" in sent  # the other tools and the general rules stay


async def test_a_proactive_tool_brings_the_scheduling_guidance_once(app, fake_llm):
    app.registry.register(contract("proactive.remind", guideline="Reminders: say when it will fire."), nothing)
    app.registry.register(contract("proactive.schedule"), nothing)
    text = layer(app)
    assert text.count(SCHEDULING) == 1 and '"message"' in text and '"agent"' in text
    assert text.count("Reminders: say when it will fire.") == 1
    assert text.index("Documents:") < text.index(SCHEDULING) < text.index("Web:")  # in its place by name
    fake_llm.add(Step.text("Hi."))
    await say(app, "remind me")
    assert SCHEDULING in system_prompt(fake_llm.requests[0])


async def test_a_proactive_tool_the_model_cannot_see_brings_nothing(app_factory, fake_llm):
    app = await app_factory(tools=NO_PROACTIVE)
    app.registry.register(contract("proactive.remind", Risk.FORBIDDEN), nothing)
    assert SCHEDULING not in layer(app)
    app.registry.register(contract("proactive.schedule"), nothing)
    fake_llm.add(Step.text("Done."))
    await app.worker.run_proactive(ConversationId("test", "c1"), "briefing", tools=lambda c: not c.name.startswith("proactive."))
    sent = system_prompt(fake_llm.requests[0])
    assert "<scheduled_run>" in sent  # the run's own note; the tools' guidance is absent from the rest
    sent = sent[:sent.index("<scheduled_run>")]
    assert "remind" not in sent.lower() and "schedule" not in sent.lower()


async def test_an_unattended_turn_gets_no_guidance_for_tools_needing_approval(app, fake_llm):
    fake_llm.add(Step.text("Done."))
    await app.worker.run_proactive(ConversationId("test", "c1"), "briefing")
    sent = system_prompt(fake_llm.requests[0])
    assert "files_write" not in sent and "http_post" not in sent
    assert "artifact_save" in sent


async def test_a_tool_with_an_empty_guideline_adds_nothing(app):
    before = layer(app)
    app.registry.register(contract("test.quiet"), nothing)
    assert "test.quiet" in [c.name for c in app.registry.offered()]
    assert layer(app) == before


async def test_no_tools_in_a_turn_says_so(app, fake_llm):
    fake_llm.add(Step.text("Nothing to do."))
    await app.worker.run_proactive(ConversationId("test", "c1"), "briefing", tools=lambda c: False)
    sent = system_prompt(fake_llm.requests[0])
    assert "No tools are available in this turn" in sent
    assert "Chaining" not in sent and "artifact_save" not in sent and "remind" not in sent.lower()
    assert "tools" not in fake_llm.requests[0] or not fake_llm.requests[0]["tools"]


@pytest.mark.parametrize("guideline", [" Lead.", "Trail.\n"])
async def test_a_guideline_with_stray_whitespace_is_rejected(app, guideline):
    with pytest.raises(ContractError) as info:
        app.registry.register(contract("test.sloppy", guideline=guideline), nothing)
    assert str(info.value) == "tool test.sloppy: guideline must be text without leading or trailing whitespace"
