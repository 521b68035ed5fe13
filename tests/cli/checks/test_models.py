"""The doctor's model check: one call per model against the fake LLM server, with a fix per failure."""

from __future__ import annotations

from bruce.cli.checks.models import check_models
from tests.fakes.llm_server import Step, closed_base_url


async def test_each_model_is_called_once_and_answers(make_config, fake_llm):
    fake_llm.add(Step.text("ok"), model="primary")
    config = make_config(llm={"fallbacks": ["openai/backup"]})
    fake_llm.add(Step.text("ok"), model="backup")
    found = await check_models(config, {}, {}, 5)
    assert [f.mark for f in found] == ["✓", "✓"]
    assert found[0].text.startswith("llm openai/primary: answered in ")
    assert found[1].text.startswith("llm fallback 1 openai/backup: answered in ")
    assert sorted(r["model"] for r in fake_llm.requests) == ["backup", "primary"]  # asked concurrently


async def test_a_refused_connection_says_where_to_look(make_config):
    closed = closed_base_url()
    config = make_config(llm={"api_base": closed})
    (finding,) = await check_models(config, {"llm": {"api_key": "${MY_KEY}"}}, {}, 5)
    assert finding.line().startswith("✗ llm openai/primary: did not answer (connection refused)")
    assert finding.fix == f"check llm.api_base ({closed}) and that the server there is running"


async def test_a_rejected_key_names_the_variable_to_fix(make_config, fake_llm):
    fake_llm.add(Step.error(401, "bad key"), model="primary")
    (finding,) = await check_models(make_config(), {"llm": {"api_key": "${MY_KEY}"}}, {}, 5)
    assert finding.mark == "✗" and finding.fix == "put a valid key in $MY_KEY"


async def test_no_key_at_all_is_not_configured(make_config):
    config = make_config(llm={"api_base": None, "api_key": None})
    (finding,) = await check_models(config, {}, {}, 5)
    assert finding.text == "llm openai/primary: no API key or endpoint configured" and "OPENAI_API_KEY" in finding.fix
