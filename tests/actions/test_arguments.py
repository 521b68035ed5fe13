"""Arguments in, output out: JSON parsed and bounded, checked against the schema the model was
shown (``dry_run`` only where a tool can preview), and a result that cannot be shown named so."""

from __future__ import annotations

import pytest
from jsonschema import Draft202012Validator

from bruce.actions.arguments import MAX_NESTING, parse_arguments, readable_output, schema_with_dry_run, too_deep
from bruce.contracts import DryRun, Risk, ToolContract
from bruce.errors import ToolInputInvalid


def contract(dry_run: DryRun = DryRun.NONE, **schema_extra) -> ToolContract:
    return ToolContract(
        name="notes.write", description="write a note", category="notes", risk=Risk.LOW,
        input_schema={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"],
                      **schema_extra},
        output_schema={"type": "object"}, autonomous=True, confirmation=False, step_up=False,
        side_effects="writes a note", audit_event="notes.write", failure_modes=("error",), dry_run=dry_run,
    )


def parse(raw: str, tool: ToolContract) -> dict:
    return parse_arguments(raw, Draft202012Validator(schema_with_dry_run(tool)), tool)


def test_dry_run_is_added_to_the_schema_only_for_a_tool_that_can_preview():
    plain = contract()
    assert "dry_run" not in schema_with_dry_run(plain)["properties"]
    previewing = contract(DryRun.OPTIONAL)
    assert schema_with_dry_run(previewing)["properties"]["dry_run"]["type"] == "boolean"
    assert "dry_run" not in previewing.input_schema["properties"]  # the contract's own schema is left alone


def test_valid_arguments_come_back_as_a_dict():
    assert parse('{"text": "hi"}', contract()) == {"text": "hi"}
    assert parse('{"text": "hi", "dry_run": true}', contract(DryRun.OPTIONAL)) == {"text": "hi", "dry_run": True}


@pytest.mark.parametrize("raw, tool, message", [
    ("{nope", contract(), "arguments are not valid JSON: Expecting property name enclosed in double quotes at position 1"),
    ("", contract(), "arguments do not match the schema of notes_write: 'text' is a required property"),
    ('{"text": 3}', contract(), "arguments do not match the schema of notes_write: text: 3 is not of type 'string'"),
    ('{"text": "x", "dry_run": true}', contract(), "notes_write has no dry run; call it without dry_run"),
    ("[" * (MAX_NESTING + 1) + "]" * (MAX_NESTING + 1), contract(type="array"),
     f"arguments are nested too deeply (more than {MAX_NESTING} levels)"),
])
def test_bad_arguments_are_refused_with_a_reason_the_model_can_act_on(raw, tool, message):
    with pytest.raises(ToolInputInvalid) as info:
        parse(raw, tool)
    assert str(info.value) == message


def test_depth_is_measured_without_recursion():
    nested: list = []
    for _ in range(5000):
        nested = [nested]
    assert too_deep(nested, MAX_NESTING)
    assert not too_deep({"a": [1, {"b": 2}]}, 3)
    assert too_deep({"a": [1, {"b": [3]}]}, 3)


def test_an_output_that_cannot_be_shown_is_named_not_dropped():
    assert readable_output({"ok": 1}, "x.y") == {"ok": 1}
    cycle: list = []
    cycle.append(cycle)
    assert readable_output(cycle, "x.y") == {
        "result_unavailable": "x.y ran, but its result cannot be shown (Circular reference detected)."}
    deep: list = []
    for _ in range(MAX_NESTING + 1):
        deep = [deep]
    assert readable_output(deep, "x.y") == {
        "result_unavailable": f"x.y ran, but its result cannot be shown (nested more than {MAX_NESTING} levels)."}
