"""Kept photos: where, how, and cleaned after keep_days by the injected clock."""

from __future__ import annotations

import stat
from pathlib import Path

from bruce.media.keep import KeptMedia
from tests.fakes.clock import FakeClock
from tests.fakes.media_files import jpeg


def test_saved_atomically_owner_only_under_the_month(tmp_path: Path, clock: FakeClock) -> None:
    keep = KeptMedia(data_dir=tmp_path, clock=clock, keep_days=30)
    relative = keep.save(123, 0, jpeg(), "jpg")
    assert relative == "media/2026-12/123-0.jpg"
    path = tmp_path / relative
    assert path.read_bytes() == jpeg()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in path.parent.iterdir()] == ["123-0.jpg"]  # no temporary file left
    assert keep.read(relative) == jpeg() and keep.read("../bruce.db") is None


def test_clean_deletes_what_is_older_than_keep_days(tmp_path: Path, clock: FakeClock) -> None:
    keep = KeptMedia(data_dir=tmp_path, clock=clock, keep_days=30)
    old = keep.save(1, 0, jpeg(), "jpg")
    clock.advance(days=20)
    young = keep.save(2, 0, jpeg(), "jpg")
    clock.advance(days=11)
    assert keep.clean() == 1
    assert not (tmp_path / old).exists() and (tmp_path / young).exists()
    clock.advance(days=30)
    assert keep.clean() == 1
    assert not (tmp_path / "media" / "2026-12").exists()  # the empty month folder went too


async def test_start_cleans_at_once(tmp_path: Path, clock: FakeClock) -> None:
    keep = KeptMedia(data_dir=tmp_path, clock=clock, keep_days=1)
    old = keep.save(1, 0, jpeg(), "jpg")
    clock.advance(days=2)
    await keep.start()
    try:
        assert not (tmp_path / old).exists()
    finally:
        await keep.stop()
