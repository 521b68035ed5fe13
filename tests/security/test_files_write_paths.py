"""files.write's path check as a table: each row is a path the model gives and where the note ends
up: refused (the code the model sees: ``path_not_allowed``, or ``extension_not_allowed`` when
what would be written is not a .md/.txt file; nothing is written anywhere) or the file, relative
to the notes folder, that now holds the text. A new trick is one more row.

``setup`` rows first plant a symlink inside the notes folder, the way a local process could.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from bruce.contracts import ToolContext
from bruce.errors import ToolFailed
from tests.fakes.clock import FakeClock
from tools.files import files_write_tool

REFUSED, WRONG_KIND = "path_not_allowed", "extension_not_allowed"


def no_setup(notes: Path, outside: Path) -> None:
    pass


def link_folder_outside(notes: Path, outside: Path) -> None:
    (notes / "out").symlink_to(outside, target_is_directory=True)


def link_file_outside(notes: Path, outside: Path) -> None:
    (outside / "victim.md").write_text("keep me\n")
    (notes / "note.md").symlink_to(outside / "victim.md")


def link_to_other_extension(notes: Path, outside: Path) -> None:
    (notes / "script.sh").write_text("#!/bin/sh\n")
    (notes / "innocent.md").symlink_to(notes / "script.sh")


def link_loop(notes: Path, outside: Path) -> None:
    (notes / "a.md").symlink_to(notes / "b.md")
    (notes / "b.md").symlink_to(notes / "a.md")


def link_folder_inside(notes: Path, outside: Path) -> None:
    (notes / "real").mkdir()
    (notes / "alias").symlink_to(notes / "real", target_is_directory=True)


ROWS: list[tuple[str, Callable[[Path, Path], None], str]] = [
    # plain relative paths are written where they say
    ("todo.md", no_setup, "todo.md"),
    ("journal/2026/dec.txt", no_setup, "journal/2026/dec.txt"),
    ("./journal//dec.md", no_setup, "journal/dec.md"),
    ("journal\\dec.md", no_setup, "journal/dec.md"),
    ("  spaced.md  ", no_setup, "spaced.md"),
    # what only looks like a way out is a name inside the folder
    ("%2e%2e/escape.md", no_setup, "%2e%2e/escape.md"),
    ("..%2fescape.md", no_setup, "..%2fescape.md"),
    ("\uff0e\uff0e/escape.md", no_setup, "\uff0e\uff0e/escape.md"),
    ("...md", no_setup, "...md"),
    ("~/escape.md", no_setup, "~/escape.md"),
    ("$HOME/escape.md", no_setup, "$HOME/escape.md"),
    ("alias/x.md", link_folder_inside, "real/x.md"),
    # parent segments, in every spelling of the separator
    ("../escape.md", no_setup, REFUSED),
    ("..", no_setup, REFUSED),
    ("a/../../escape.md", no_setup, REFUSED),
    ("a/../b.md", no_setup, REFUSED),
    ("..\\escape.md", no_setup, REFUSED),
    ("a\\..\\..\\escape.md", no_setup, REFUSED),
    ("a/..\\../escape.md", no_setup, REFUSED),
    ("./../escape.md", no_setup, REFUSED),
    (" ../escape.md", no_setup, REFUSED),
    # absolute paths and drives
    ("/etc/passwd.md", no_setup, REFUSED),
    ("//server/share/x.md", no_setup, REFUSED),
    ("\\\\server\\share\\x.md", no_setup, REFUSED),
    ("\\escape.md", no_setup, REFUSED),
    ("C:\\escape.md", no_setup, REFUSED),
    ("C:escape.md", no_setup, REFUSED),
    ("c:/escape.md", no_setup, REFUSED),
    # empty, folder-only and odd characters
    ("", no_setup, REFUSED),
    ("   ", no_setup, REFUSED),
    (".", no_setup, REFUSED),
    ("./", no_setup, REFUSED),
    ("a/./", no_setup, WRONG_KIND),
    ("a\x00.md", no_setup, REFUSED),
    ("a.md\x00.sh", no_setup, REFUSED),
    # symlinks planted inside the folder
    ("out/escape.md", link_folder_outside, REFUSED),
    ("note.md", link_file_outside, REFUSED),
    ("innocent.md", link_to_other_extension, WRONG_KIND),
    ("a.md", link_loop, REFUSED),
]


@pytest.mark.parametrize(("path", "setup", "verdict"), ROWS, ids=[repr(row[0]) for row in ROWS])
async def test_notes_path(tmp_path: Path, path: str, setup: Callable[[Path, Path], None], verdict: str) -> None:
    notes, outside = tmp_path / "notes", tmp_path / "outside"
    notes.mkdir()
    outside.mkdir()
    setup(notes, outside)
    before = {p: p.stat(follow_symlinks=False).st_mtime_ns for p in tmp_path.rglob("*")}
    handler = files_write_tool(notes_dir=notes, max_bytes=1000)[1]
    ctx = ToolContext(clock=FakeClock(), zone=ZoneInfo("UTC"), conversation_id=None, turn_id=None, dry_run=False)

    if verdict in (REFUSED, WRONG_KIND):
        with pytest.raises(ToolFailed) as refused:
            await handler({"path": path, "content": "hello\n"}, ctx)
        assert refused.value.code == verdict
        after = {p: p.stat(follow_symlinks=False).st_mtime_ns for p in tmp_path.rglob("*")}
        assert after == before  # nothing written, inside or outside
        assert not (tmp_path / "escape.md").exists()
    else:
        out = await handler({"path": path, "content": "hello\n"}, ctx)
        written = notes / verdict
        assert written.read_text() == "hello\n" and not written.is_symlink()
        assert out["created"] is True and os.path.commonpath([written.resolve(), notes]) == str(notes)
        assert list(outside.iterdir()) == []
