"""check_contract: every problem of a tool's contract, named word for word, all at once."""

from __future__ import annotations

import pytest

from bruce.actions.checks import check_contract
from bruce.contracts import Risk
from tests.helpers import contract

# every contract problem, word for word (docs/tools.md, "Tool contract") -------------------------

CRITICAL_OK = dict(autonomous=False, confirmation=True, step_up=True, side_effects="deletes the file")


@pytest.mark.parametrize("overrides, problems", [
    (dict(name="a.b.c"), ["name must be 'domain.verb' in lower case"]),
    (dict(name="clock.n-w"), ["name must be 'domain.verb' in lower case"]),
    (dict(name="Clock.now"), ["name must be 'domain.verb' in lower case"]),
    (dict(name="clock.time_now"), []),
    (dict(description=" ", category="", audit_event="\n"),
     ["description must not be empty", "category must not be empty", "audit_event must not be empty"]),
    (dict(side_effects=""), ["side_effects must not be empty"]),
    (dict(failure_modes=()), ["failure_modes must list at least one failure code"]),
    (dict(input_schema={"type": "object", "properties": 3}),
     ["input_schema is not a valid JSON Schema: 3 is not of type 'object'"]),
    (dict(output_schema={"type": "nothing"}),
     ["output_schema is not a valid JSON Schema: 'nothing' is not valid under any of the given schemas"]),
    (dict(input_schema={"type": "array"}), ["input_schema must describe an object"]),
    (dict(input_schema={"type": "object", "properties": {"dry_run": {"type": "boolean"}}}),
     ["input_schema must not define dry_run (the registry adds it)"]),
    (dict(idempotent=True, idempotency_window_s=0), ["an idempotent tool needs a positive idempotency_window_s"]),
    (dict(idempotent=True, idempotency_window_s=1), []),
    (dict(input_schema={"type": "object", "properties": {"url": {"type": "string"}}}, url_args=("url", "link")),
     ["url_args names 'link', which is not a property of input_schema"]),
    (dict(input_schema={"type": "object", "properties": {"url": {"type": "string"}}}, url_args=("url",)), []),
])
def test_each_contract_problem_is_named(overrides, problems):
    overrides = dict(overrides)
    assert check_contract(contract(overrides.pop("name", "test.act"), **overrides)) == problems


@pytest.mark.parametrize("risk, overrides, problems", [
    (Risk.HIGH, dict(side_effects="n/a"), ["a high tool must describe its side effects"]),
    (Risk.HIGH, dict(side_effects=" - "), ["a high tool must describe its side effects"]),
    (Risk.HIGH, dict(side_effects="None"), ["a high tool must describe its side effects"]),
    (Risk.HIGH, dict(side_effects="writes a file", autonomous=True, confirmation=False),
     ["a high tool cannot be autonomous", "a high tool must require confirmation"]),
    (Risk.CRITICAL, dict(CRITICAL_OK, step_up=False), ["a critical tool must require step-up approval"]),
    (Risk.CRITICAL, CRITICAL_OK, []),
    (Risk.FORBIDDEN, dict(autonomous=True), ["a forbidden tool cannot be autonomous"]),
])
def test_each_risk_problem_is_named(risk, overrides, problems):
    assert check_contract(contract("test.act", risk, **overrides)) == problems


@pytest.mark.parametrize("name, server, wire, problems", [
    ("mcp.cal.list", "cal", "mcp_cal_list", []),
    ("cal.list", "cal", "mcp_cal_list", ["a remote tool's name must be 'mcp.<server>.<tool>'"]),
    ("mcp.cal.", "cal", "mcp_cal_", ["a remote tool's name must be 'mcp.<server>.<tool>'"]),
    ("mcp.cal.list", "cal", "mcp cal list", ["a remote tool's wire name must match [a-zA-Z0-9_-]{1,64}"]),
])
def test_a_remote_tool_is_named_after_its_server(name, server, wire, problems):
    assert check_contract(contract(name, server=server, wire=wire)) == problems


def test_every_problem_is_reported_together():
    bad = contract("Bad", Risk.HIGH, description="", side_effects="none", autonomous=True, confirmation=False)
    assert check_contract(bad) == [
        "name must be 'domain.verb' in lower case", "description must not be empty",
        "a high tool must describe its side effects", "a high tool cannot be autonomous",
        "a high tool must require confirmation",
    ]
