"""An MCP tool's result as the model reads it."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from bruce.errors import ToolFailed
from tools.mcp.results import MAX_OUTPUT_CHARS, tool_output


def result(*blocks: SimpleNamespace, structured: object = None, error: bool = False) -> SimpleNamespace:
    return SimpleNamespace(content=list(blocks), structured_content=structured, is_error=error)


def test_text_resources_and_links_are_read_and_anything_else_is_named():
    out = tool_output("srv", result(
        SimpleNamespace(type="text", text="hello"),
        SimpleNamespace(type="resource", resource=SimpleNamespace(text="inside")),
        SimpleNamespace(type="resource_link", uri="file:///a"),
        SimpleNamespace(type="image", mime_type="image/png"),
        structured={"n": 1},
    ))
    assert out == {"content": "hello\ninside\n[link: file:///a]\n[image: image/png, not shown]", "structured": {"n": 1}}


def test_long_text_and_large_structured_content_are_cut():
    out = tool_output("srv", result(SimpleNamespace(type="text", text="a" * (MAX_OUTPUT_CHARS + 5)),
                                    structured={"big": "b" * MAX_OUTPUT_CHARS}))
    assert out["content"] == "a" * MAX_OUTPUT_CHARS + "… [5 more characters cut]"
    assert out["structured"].startswith("[structured content of ") and out["structured"].endswith(" not shown]")


def test_a_tool_error_is_a_tool_error_with_the_servers_words():
    with pytest.raises(ToolFailed) as err:
        tool_output("srv", result(SimpleNamespace(type="text", text="disk full"), error=True))
    assert err.value.code == "tool_error" and str(err.value) == "the MCP server srv reported an error: disk full"
