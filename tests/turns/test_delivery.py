"""Delivery after the reply: each saved document sent once as a file, only from the artifacts
folder; a file that cannot be sent leaves the reply standing."""

from __future__ import annotations

from tests.fakes.llm_server import Step
from tests.helpers import rows, say


def save(filename: str, content: str = "<h1>Report</h1>", **more):
    return ("artifact_save", {"filename": filename, "content": content, **more})


async def test_each_saved_artifact_is_sent_once_as_a_file_after_the_reply(app_factory, fake_llm, channel, tmp_path):
    art = tmp_path / "artifacts"
    app = await app_factory(tools={"artifacts": {"dir": str(art)}})
    fake_llm.add(Step.tool_calls(save("report.html", title="Monthly report"),
                                 save("report.html", title="Monthly report", dry_run=False),
                                 save("notes.md", "# Notes", format="markdown"), save("draft.html", dry_run=True),
                                 save("")),  # the same artifact twice, a dry run, an invalid call
                 Step.text("Here are your documents."))
    await say(app, "write the report and the notes")
    artifacts = await rows(app, "SELECT id, filename FROM artifacts")
    stored = {r["filename"]: r["id"] for r in artifacts}
    assert len(artifacts) == 2 and set(stored) == {"report.html", "notes.md"}
    assert channel.texts() == ["Here are your documents."]
    root = art.resolve()
    assert sorted(channel.files) == sorted([("c1", root / stored["notes.md"] / "notes.md", None),
                                            ("c1", root / stored["report.html"] / "report.html", "Monthly report")])
    assert channel.texts_before_file == [1, 1]  # after the reply


async def test_a_file_that_cannot_be_sent_is_logged_and_the_reply_stands(app_factory, fake_llm, channel, tmp_path):
    from bruce.errors import ChannelSendError

    app = await app_factory(tools={"artifacts": {"dir": str(tmp_path / "artifacts")}})
    channel.file_failures = [ChannelSendError("file refused", retryable=False), OSError("gone")]
    fake_llm.add(Step.tool_calls(save("a.html")), Step.text("Saved a."))
    await say(app, "save a")
    fake_llm.add(Step.tool_calls(save("b.html")), Step.text("Saved b."))
    await say(app, "save b")
    assert channel.texts() == ["Saved a.", "Saved b."] and channel.files == []
    assert [t["status"] for t in await rows(app, "SELECT status FROM turns WHERE source = 'chat'")] == ["ok", "ok"]
    assert [m["status"] for m in await rows(app, "SELECT status FROM messages WHERE direction = 'in'")] == [
        "done", "done"]


async def test_only_files_inside_the_artifacts_folder_are_sent(app_factory, fake_llm, channel, tmp_path):
    art = tmp_path / "artifacts"
    app = await app_factory(tools={"artifacts": {"dir": str(art)}})
    outside = tmp_path / "secret.txt"
    outside.write_text("not for the chat")

    def respond(body):
        if any(m["role"] == "tool" for m in body["messages"]):  # the tool ran: its file now leads elsewhere
            (saved,) = art.glob("*/r.html")
            saved.unlink()
            saved.symlink_to(outside)
            return Step.text("Saved it.")
        return Step.tool_calls(save("r.html"))

    fake_llm.responder = respond
    await say(app, "save it")
    assert channel.texts() == ["Saved it."] and channel.files == []
