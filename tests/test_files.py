"""Writing a file whole or not at all (bruce/files.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bruce.files import write_atomic


def test_a_new_file_gets_the_mode_and_time_asked_for(tmp_path: Path) -> None:
    target = tmp_path / "photo.jpg"
    write_atomic(target, b"bytes", mode=0o600, mtime=1_700_000_000.0)
    assert target.read_bytes() == b"bytes"
    assert target.stat().st_mode & 0o777 == 0o600 and target.stat().st_mtime == 1_700_000_000.0
    assert [p.name for p in tmp_path.iterdir()] == ["photo.jpg"]


def test_a_replaced_file_keeps_its_permission_bits(tmp_path: Path) -> None:
    target = tmp_path / "note.md"
    target.write_text("old")
    os.chmod(target, 0o640)
    write_atomic(target, b"new")
    assert target.read_bytes() == b"new" and target.stat().st_mode & 0o777 == 0o640


def test_a_failed_write_leaves_the_target_as_it_was_and_no_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "taken"
    target.mkdir()  # a folder where the file should go: the final rename fails
    (target / "inside").write_text("kept")
    with pytest.raises(OSError):
        write_atomic(target, b"data")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"] and (target / "inside").read_text() == "kept"
