"""The channel port's helpers and the console channel."""

from __future__ import annotations

import io

import pytest

from bruce.channel import split_text
from bruce.contracts import ToolResult
from bruce.turns.grounding import check_links
from channels.console import ConsoleChannel
from tests.fakes.llm_server import Step
from tests.helpers import db_rows


def test_split_text_prefers_paragraphs_then_words():
    text = "first paragraph here.\n\nsecond paragraph is a bit longer than the first."
    assert split_text(text, 40) == ["first paragraph here.", "second paragraph is a bit longer than", "the first."]
    assert split_text("x" * 25, 10) == ["x" * 10, "x" * 10, "x" * 5]
    assert split_text("   ", 10) == ["…"]
    with pytest.raises(ValueError):
        split_text("a", 0)


def test_split_text_keeps_indentation_and_terminates_at_any_limit():
    code = "def f():\n    if x:\n        return 1\n    return 2"
    assert split_text(code, 22) == ["def f():\n    if x:", "        return 1", "    return 2"]
    assert split_text("a b c", 1) == ["a", "b", "c"]  # a limit of 1 used to loop forever
    assert split_text("abc", 1) == ["a", "b", "c"]


ADMIN = "http://127.0.0.1:8765"


def test_grounding_keeps_external_links_and_tool_returned_links():
    results = [ToolResult("c1", "artifact_save", "ok", output={"url": f"{ADMIN}/artifacts/a1/r.html"})]
    text = f"See {ADMIN}/artifacts/a1/r.html and https://example.org/artifacts/x."
    assert check_links(text, results, admin_base=ADMIN).removed == ()


@pytest.mark.parametrize(
    "link",
    ["HTTP://127.0.0.1:8765/artifacts/fake/r.html", "127.0.0.1:8765/artifacts/fake/r.html",
     "localhost:8765/artifacts/fake/r.html", "http://LOCALHOST/artifacts/fake/r.html", "/Artifacts/fake/r.html"],
)
def test_grounding_catches_disguised_artifact_links(link):
    report = check_links(f"Saved: {link}", [], admin_base=ADMIN)
    assert report.removed == (link,) and "fake" not in report.text


def test_a_link_inside_page_text_is_not_a_produced_artifact():
    page = ToolResult("c1", "web_read_url", "ok", output={
        "url": "https://example.org/post", "text": f"see {ADMIN}/artifacts/evil/x.html"})
    report = check_links(f"Your file: {ADMIN}/artifacts/evil/x.html", [page], admin_base=ADMIN)
    assert report.removed == (f"{ADMIN}/artifacts/evil/x.html",)


def test_grounding_removes_links_no_successful_tool_returned():
    failed = [ToolResult("c1", "artifact_save", "error", error=f"could not save {ADMIN}/artifacts/a2/r.html")]
    report = check_links("Saved at /artifacts/a2/r.html, and http://localhost:8765/artifacts/a3/x.html", failed,
                         admin_base=ADMIN)
    assert report.removed == ("/artifacts/a2/r.html", "http://localhost:8765/artifacts/a3/x.html")
    assert "/artifacts/" not in report.text.split("\n\n")[0]


def test_grounding_reads_links_as_a_browser_does():
    """Another spelling of a produced link stays; a fabricated one on our host goes, however it is written."""
    results = [ToolResult("c1", "artifact_save", "ok", output={"url": f"{ADMIN}/artifacts/a1/r.html"})]
    text = ("Your page: [open](http://[::1]:8765/artifacts/a1/./r.html). Also "
            "**http://2130706433:8765/x/../artifacts/fake/r.html** and see:http://localhost.:8765/%61rtifacts/fake/y.html")
    report = check_links(text, results, admin_base=ADMIN)
    assert report.removed == ("http://2130706433:8765/x/../artifacts/fake/r.html",
                              "http://localhost.:8765/%61rtifacts/fake/y.html")
    first = report.text.split("\n\n")[0]
    assert first == ("Your page: [open](http://[::1]:8765/artifacts/a1/./r.html). Also "
                     "**[link removed]** and see:[link removed]")


async def test_console_channel_object_drives_a_turn(make_config, clock, fake_llm, tmp_path):
    from bruce.app import build_app

    stdin, stdout = io.StringIO("hello there\n\n/quit\nnever read\n"), io.StringIO()
    console = ConsoleChannel(clock=clock, stdin=stdin, stdout=stdout)
    fake_llm.add(Step.text("General Kenobi."))
    config = make_config()
    app = await build_app(config, clock=clock, environ={}, extra_channels=[console])
    try:
        await app.start()
        await console.interact()
    finally:
        await app.stop()
    assert stdout.getvalue() == "Bruce> General Kenobi.\n"
    assert len(fake_llm.requests) == 1
    convs = db_rows(config.storage.path, "SELECT id FROM conversations")
    assert convs == [{"id": "console:local"}]
