"""files.write: writes inside the notes folder only, overwrite/append, a dry-run diff that shows the whole
change or refuses."""

from __future__ import annotations

import asyncio
import json
import os
import random
import threading
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from bruce.actions.checks import check_contract
from bruce.contracts import DryRun, Risk, ToolContext
from bruce.errors import ToolFailed
from tests.fakes.clock import FakeClock
from tests.fakes.llm_server import Step
from tests.helpers import rows, say
from tools import files
from tools.files import DIFF_MAX_CHARS, files_write_tool


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    folder = tmp_path / "notes"
    folder.mkdir()
    return folder


@pytest.fixture
def handler(notes: Path):
    return files_write_tool(notes_dir=notes, max_bytes=100)[1]


def ctx(*, dry_run: bool = False) -> ToolContext:
    return ToolContext(clock=FakeClock(), zone=ZoneInfo("UTC"), conversation_id=None, turn_id=None, dry_run=dry_run)


def tree(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*"))


def test_contract_declares_its_policy(tmp_path: Path):
    contract, handler = files_write_tool(notes_dir=tmp_path / "notes")
    assert check_contract(contract) == []
    assert contract.name == "files.write" and contract.risk is Risk.HIGH and contract.dry_run is DryRun.REQUIRED
    assert contract.confirmation and not contract.autonomous and not contract.step_up and not contract.idempotent
    assert contract.permissions == ("notes_dir:write",)


async def test_overwrite_creates_folders_then_replaces(handler, notes: Path):
    out = await handler({"path": "journal/2026/dec.md", "content": "first\n"}, ctx())
    assert out == {"path": "journal/2026/dec.md", "bytes_written": 6, "created": True, "mode": "overwrite",
                   "file_bytes": 6}
    again = await handler({"path": "./journal//2026/dec.md", "content": "second\n", "mode": "overwrite"}, ctx())
    assert again["created"] is False and again["path"] == "journal/2026/dec.md"
    assert (notes / "journal/2026/dec.md").read_text() == "second\n"
    assert tree(notes) == ["journal", "journal/2026", "journal/2026/dec.md"]  # no temp files left behind


async def test_append_adds_to_the_end_each_time(handler, notes: Path):
    (notes / "todo.txt").write_text("milk\n")
    os.chmod(notes / "todo.txt", 0o640)
    await handler({"path": "todo.txt", "content": "eggs\n", "mode": "append"}, ctx())
    out = await handler({"path": "todo.txt", "content": "eggs\n", "mode": "append"}, ctx())
    assert out == {"path": "todo.txt", "bytes_written": 5, "created": False, "mode": "append", "file_bytes": 15}
    assert (notes / "todo.txt").read_text() == "milk\neggs\neggs\n"
    assert (notes / "todo.txt").stat().st_mode & 0o777 == 0o640  # the replaced file keeps its permissions
    created = await handler({"path": "new.md", "content": "x", "mode": "append"}, ctx())
    assert created["created"] is True and (notes / "new.md").read_text() == "x"


@pytest.mark.parametrize(
    "path",
    ["../escape.md", "a/../../escape.md", "a/../b.md", "/etc/passwd.md", "\\server\\share.md", "C:\\x.md",
     "..\\escape.md", "", "   ", "./", "a\x00.md"],
)
async def test_paths_outside_or_odd_are_refused(handler, notes: Path, path: str):
    with pytest.raises(ToolFailed) as info:
        await handler({"path": path, "content": "x"}, ctx())
    assert info.value.code == "path_not_allowed"
    assert tree(notes) == [] and not (notes.parent / "escape.md").exists()


async def test_symlink_escape_is_refused(handler, notes: Path, tmp_path: Path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("keep me")
    (notes / "link").symlink_to(outside, target_is_directory=True)
    (notes / "alias.md").symlink_to(outside / "secret.md")
    for path in ("link/secret.md", "link/new.md", "alias.md"):
        for dry_run in (False, True):
            with pytest.raises(ToolFailed) as info:
                await handler({"path": path, "content": "pwned", "mode": "append"}, ctx(dry_run=dry_run))
            assert info.value.code == "path_not_allowed" and "outside the notes folder" in str(info.value)
    assert (outside / "secret.md").read_text() == "keep me" and tree(outside) == ["secret.md"]


async def test_symlink_loop_is_refused(handler, notes: Path):
    (notes / "loop.md").symlink_to(notes / "loop.md")
    with pytest.raises(ToolFailed) as info:
        await handler({"path": "loop.md", "content": "x"}, ctx())
    assert info.value.code == "path_not_allowed"


async def test_symlink_inside_the_folder_is_followed(handler, notes: Path):
    (notes / "real.md").write_text("a\n")
    (notes / "current.md").symlink_to(notes / "real.md")
    await handler({"path": "current.md", "content": "b\n", "mode": "append"}, ctx())
    assert (notes / "real.md").read_text() == "a\nb\n" and (notes / "current.md").is_symlink()


@pytest.mark.parametrize("path", ["script.py", "notes.md.sh", "README", "photo.PNG", "dir.md/x.html"])
async def test_other_extensions_are_refused(handler, notes: Path, path: str):
    with pytest.raises(ToolFailed) as info:
        await handler({"path": path, "content": "x"}, ctx())
    assert info.value.code == "extension_not_allowed"
    assert tree(notes) == []


async def test_upper_case_extension_is_fine(handler, notes: Path):
    await handler({"path": "Plan.MD", "content": "x"}, ctx())
    assert (notes / "Plan.MD").read_text() == "x"


async def test_too_large_counts_the_whole_file(handler, notes: Path):
    with pytest.raises(ToolFailed) as info:
        await handler({"path": "big.md", "content": "é" * 51}, ctx())  # 102 bytes
    assert info.value.code == "too_large" and "102 bytes" in str(info.value)
    (notes / "log.md").write_text("x" * 90)
    with pytest.raises(ToolFailed) as info:
        await handler({"path": "log.md", "content": "y" * 20, "mode": "append"}, ctx())
    assert info.value.code == "too_large"
    assert (notes / "log.md").read_text() == "x" * 90


async def test_a_folder_or_binary_file_is_not_overwritten(handler, notes: Path):
    (notes / "dir.md").mkdir()
    with pytest.raises(ToolFailed) as info:
        await handler({"path": "dir.md", "content": "x"}, ctx())
    assert info.value.code == "path_not_allowed"
    (notes / "bin.txt").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ToolFailed) as info:
        await handler({"path": "bin.txt", "content": "x", "mode": "append"}, ctx())
    assert info.value.code == "not_text"


async def test_dry_run_shows_a_diff_and_writes_nothing(handler, notes: Path):
    (notes / "list.md").write_text("apples\npears\n")
    out = await handler({"path": "list.md", "content": "apples\nplums\n"}, ctx(dry_run=True))
    assert out["path"] == "list.md" and out["exists"] is True and out["mode"] == "overwrite"
    assert out["bytes_after"] == 13
    assert out["diff"].splitlines() == ["--- a/list.md", "+++ b/list.md", "@@ -1,2 +1,2 @@",
                                        " apples", "-pears", "+plums"]
    appended = await handler({"path": "list.md", "content": "figs\n", "mode": "append"}, ctx(dry_run=True))
    assert "+figs" in appended["diff"] and "-pears" not in appended["diff"] and appended["bytes_after"] == 18
    assert (notes / "list.md").read_text() == "apples\npears\n"

    new = await handler({"path": "sub/dir/new.txt", "content": "hello"}, ctx(dry_run=True))
    assert new["exists"] is False and "+hello" in new["diff"]
    same = await handler({"path": "list.md", "content": "apples\npears\n"}, ctx(dry_run=True))
    assert same["diff"] == "(no changes)"
    assert tree(notes) == ["list.md"]  # not even the folders


async def test_a_change_the_preview_cannot_show_whole_is_refused_not_cut(tmp_path: Path):
    notes = tmp_path / "notes"
    handler = files_write_tool(notes_dir=notes)[1]
    content = "".join(f"line {i}\n" for i in range(2000))  # a diff of about 18,000 characters
    with pytest.raises(ToolFailed) as info:
        await handler({"path": "long.md", "content": content}, ctx(dry_run=True))
    assert info.value.code == "preview_too_long"
    message = str(info.value)
    assert "more than the 4000 a preview shows" in message and "mode 'append'" in message
    assert not notes.exists()


async def test_a_change_that_fits_is_shown_whole(tmp_path: Path):
    handler = files_write_tool(notes_dir=tmp_path / "notes")[1]
    content = "".join(f"line {i}\n" for i in range(400))  # just under the cap
    out = await handler({"path": "long.md", "content": content}, ctx(dry_run=True))
    assert len(out["diff"]) <= DIFF_MAX_CHARS
    assert [line[1:] for line in out["diff"].splitlines()[3:]] == content.splitlines()  # every line, none cut


async def test_a_diff_too_costly_to_find_is_refused_before_it_is_computed(tmp_path: Path):
    # 50,000 lines drawn from 101 values (each just under difflib's "popular" cut-off): difflib took
    # about 5 s for this, on the event loop; the preview is refused long before that work is done
    notes = tmp_path / "notes"
    notes.mkdir()
    rnd = random.Random(1)
    vocab = [f"{i:03d}" for i in range(101)]
    (notes / "n.md").write_text("".join(rnd.choice(vocab) + "\n" for _ in range(50_000)))
    handler = files_write_tool(notes_dir=notes)[1]
    new = "".join(rnd.choice(vocab) + "\n" for _ in range(50_000))
    with pytest.raises(ToolFailed) as info:
        await handler({"path": "n.md", "content": new}, ctx(dry_run=True))
    assert info.value.code == "preview_too_long" and "too large or too scattered" in str(info.value)


async def test_the_dry_run_works_off_the_event_loop(handler, notes: Path, monkeypatch):
    diffing, release = threading.Event(), threading.Event()
    real_diff = files._diff

    def slow_diff(*args):
        diffing.set()
        release.wait(5)  # until the test has seen the loop free (never, if the diff ran on it)
        return real_diff(*args)

    monkeypatch.setattr(files, "_diff", slow_diff)
    preview = asyncio.create_task(handler({"path": "a.md", "content": "x\n"}, ctx(dry_run=True)))
    while not diffing.is_set():
        await asyncio.sleep(0.01)
    assert not preview.done()  # the loop is running this test while the diff is being made
    release.set()
    assert "+x" in (await preview)["diff"]


async def test_an_existing_file_over_the_limit_is_refused_before_it_is_read(handler, notes: Path):
    (notes / "huge.md").write_text("x" * 150)  # the handler's limit is 100 bytes
    for mode in ("overwrite", "append"):
        with pytest.raises(ToolFailed) as info:
            await handler({"path": "huge.md", "content": "short", "mode": mode}, ctx())
        assert info.value.code == "too_large" and "'huge.md' is already 150 bytes" in str(info.value)
    assert (notes / "huge.md").read_text() == "x" * 150


async def test_content_that_is_not_text_is_refused(handler, notes: Path):
    with pytest.raises(ToolFailed) as info:
        await handler({"path": "a.md", "content": "bad \ud800 surrogate"}, ctx())
    assert info.value.code == "invalid_args" and "not valid text" in str(info.value)
    assert tree(notes) == []


# --- through the registry, as the model and the user see it ---------------------------------------


async def test_a_write_the_preview_cannot_show_whole_asks_nothing_and_splitting_it_works(
        app_factory, fake_llm, channel, tmp_path: Path):
    notes = tmp_path / "notes"
    notes.mkdir()
    app = await app_factory(tools={"files": {"notes_dir": str(notes)}})
    parts = ["".join(f"first {i}\n" for i in range(300)), "".join(f"second {i}\n" for i in range(300))]

    fake_llm.add(Step.tool_calls(("files_write", {"path": "log.md", "content": parts[0] + parts[1]})),
                 Step.text("It is too long for one approval."))
    await say(app, "save my log")
    (feedback,) = [json.loads(m["content"]) for m in fake_llm.requests[1]["messages"] if m["role"] == "tool"]
    assert feedback["status"] == "error" and feedback["error"].startswith("preview_too_long: the change to 'log.md'")
    assert channel.confirmations == [] and await rows(app, "SELECT id FROM pending_confirmations") == []
    assert not (notes / "log.md").exists()

    for i, (part, mode) in enumerate(zip(parts, ("overwrite", "append"), strict=True)):
        fake_llm.add(Step.tool_calls(("files_write", {"path": "log.md", "content": part, "mode": mode})),
                     Step.text("Asked."))
        await say(app, f"save part {i + 1}")
        _, request = channel.confirmations[-1]
        assert all(f"+{line}" in request.preview for line in part.splitlines())  # the user sees every line
        fake_llm.add(Step.text("Saved."))
        await say(app, f"/approve {request.id}")
    assert (notes / "log.md").read_text() == parts[0] + parts[1]
