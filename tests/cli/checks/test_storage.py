"""The doctor's checks of the database, the disk and the clock (the whole command: tests/cli/test_doctor.py)."""

from __future__ import annotations

import os
from collections import namedtuple

from bruce.cli.checks import storage
from bruce.cli.checks.storage import check_database, check_disk, check_timezone, existing_folder
from bruce.store import Store
from bruce.store.migrations import MIGRATIONS
from tests.fakes.clock import FakeClock


async def test_no_database_yet_is_fine_when_its_folder_can_be_made(make_config, tmp_path):
    config = make_config(storage={"path": str(tmp_path / "new" / "deeper" / "bruce.db")})
    (finding,) = await check_database(config)
    assert finding.line() == f"✓ database: no database yet, it will be created at {config.storage.path} on first run"
    assert not (tmp_path / "new").exists()


async def test_a_folder_that_cannot_be_written_blocks_start_up(make_config, tmp_path, monkeypatch):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    real_access = os.access
    # the suite may run as root, whom the kernel lets write anywhere: answer as it does for any other user
    monkeypatch.setattr(storage.os, "access", lambda path, mode: real_access(path, mode) and path != locked)
    try:
        (finding,) = await check_database(make_config(storage={"path": str(locked / "bruce.db")}))
    finally:
        locked.chmod(0o700)
    assert finding.line().startswith(f"✗ database: {locked} is not writable") and "fix: make" in finding.line()


async def test_an_existing_database_is_migrated_and_its_version_shown(make_config, tmp_path):
    path = tmp_path / "bruce.db"
    await (await Store.open(path, FakeClock())).close()
    (finding,) = await check_database(make_config())
    assert finding.line() == f"✓ database {path}: writable, schema version {len(MIGRATIONS)}"


def test_little_free_space_is_a_warning(make_config, monkeypatch):
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(storage.shutil, "disk_usage", lambda folder: usage(0, 0, 5 * 1024**2))
    (finding,) = check_disk(make_config())
    assert finding.mark == "!" and "5 MB free" in finding.text and "below 100 MB" in (finding.fix or "")


def test_the_timezone_line_names_the_zone_and_its_offset(make_config):
    (finding,) = check_timezone(make_config(assistant={"timezone": "Asia/Tokyo"}))
    assert finding.text.startswith("timezone: Asia/Tokyo (now ") and finding.text.endswith("UTC+0900)")


def test_the_nearest_existing_folder_is_found(tmp_path):
    assert existing_folder(tmp_path / "a" / "b" / "c") == tmp_path
