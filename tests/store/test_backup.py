"""Backups of the database file (bruce/store/backup.py): whole or nothing, checked before they
count; rotation; restore keeping what it replaces; the automatic backup before a migration."""

from __future__ import annotations

import os
import socket
import sqlite3
from datetime import timedelta
from pathlib import Path

import pytest

from bruce.errors import StoreError
from bruce.store import Store
from bruce.store.backup import check, folder_of, leases, restore, rotate, stamped, take
from bruce.store.migrations import MIGRATIONS
from tests.helpers import db_rows


def old_database(path, version: int, conversations: int = 1) -> None:
    """A database as schema ``version`` left it (the migrations up to it), with some conversations."""
    con = sqlite3.connect(path)
    for script in MIGRATIONS[:version]:
        con.executescript(script)
    con.execute(f"PRAGMA user_version = {version}")
    con.executemany("INSERT INTO conversations (id, channel, chat_id, created_at) VALUES (?, 'test', ?, 'now')",
                    [(f"test:{i}", str(i)) for i in range(conversations)])
    con.commit()
    con.close()


async def test_opening_an_older_database_backs_it_up_first_named_for_its_version(tmp_path, clock):
    path = tmp_path / "bruce.db"
    old_database(path, len(MIGRATIONS) - 1, conversations=3)
    store = await Store.open(path, clock)
    await store.close()
    [kept] = folder_of(path).iterdir()
    assert kept.name == f"bruce-v{len(MIGRATIONS) - 1:02d}-20261202T120000Z.db"
    assert db_rows(kept, "PRAGMA user_version") == [{"user_version": len(MIGRATIONS) - 1}]
    assert len(db_rows(kept, "SELECT id FROM conversations")) == 3
    assert db_rows(kept, "PRAGMA journal_mode") == [{"journal_mode": "delete"}]  # one file, no -wal to forget
    assert db_rows(path, "PRAGMA user_version") == [{"user_version": len(MIGRATIONS)}]
    assert oct(kept.stat().st_mode & 0o777) == "0o600"


async def test_a_new_or_current_database_is_not_backed_up(tmp_path, clock):
    path = tmp_path / "bruce.db"
    for _ in range(2):  # made, then opened again at the current version
        store = await Store.open(path, clock)
        await store.close()
    assert not folder_of(path).exists()


async def test_a_migration_whose_backup_cannot_be_written_changes_nothing(tmp_path, clock):
    path = tmp_path / "bruce.db"
    old_database(path, len(MIGRATIONS) - 1)
    folder_of(path).write_text("a file where the backups folder should be")
    with pytest.raises(StoreError, match="cannot back up .* before migrating it from schema version "
                                         f"{len(MIGRATIONS) - 1}.*nothing was changed"):
        await Store.open(path, clock)
    assert db_rows(path, "PRAGMA user_version") == [{"user_version": len(MIGRATIONS) - 1}]
    assert [p.name for p in tmp_path.iterdir() if ".partial" in p.name] == []


async def test_a_backup_is_a_checked_copy_and_never_overwrites(store, tmp_path, clock):
    await store.messages.ensure_conversation("test:1", "test", "1")
    path = store.database.path
    copy = take(path, tmp_path / "out" / "copy.db")
    assert (copy.path, copy.version) == (tmp_path / "out" / "copy.db", len(MIGRATIONS))
    assert copy.size == copy.path.stat().st_size > 0
    assert db_rows(copy.path, "SELECT id FROM conversations") == [{"id": "test:1"}]
    assert check(copy.path) == len(MIGRATIONS)
    with pytest.raises(StoreError, match="exists"):
        take(path, copy.path)
    assert sorted(p.name for p in copy.path.parent.iterdir()) == ["copy.db"]  # no partial file left behind


def test_stamped_names_are_unique_within_a_second(tmp_path, clock):
    first = stamped(tmp_path, "bruce", clock.now())
    first.touch()
    second = stamped(tmp_path, "bruce", clock.now())
    assert (first.name, second.name) == ("bruce-20261202T120000Z.db", "bruce-20261202T120000Z-1.db")
    assert stamped(tmp_path, "bruce", clock.now(), label="v15").name == "bruce-v15-20261202T120000Z.db"


def test_rotation_keeps_the_newest_and_only_touches_its_own_series(tmp_path, clock):
    made = []
    for minutes in (0, 0, 1, 2, 3):  # two in one second: the -1 one is the newer
        path = stamped(tmp_path, "bruce", clock.now() + timedelta(minutes=minutes))
        path.touch()
        made.append(path)
    others = [tmp_path / "bruce-v14-20261201T000000Z.db", tmp_path / "bruce-before-restore-20261201T000000Z.db",
              tmp_path / "notes.db", tmp_path / "other-20261201T000000Z.db"]
    for path in others:
        path.touch()
    removed = rotate(tmp_path, "bruce", keep=3)
    assert sorted(removed) == sorted(made[:2])
    assert sorted(tmp_path.iterdir()) == sorted(made[2:] + others)


def damaged(path) -> None:
    """Scribble over the file's pages after the first: SQLite reads a header it trusts, then nonsense."""
    data = bytearray(path.read_bytes())
    for offset in range(4096, len(data) - 64, 4096):
        data[offset + 8:offset + 64] = os.urandom(56)
    path.write_bytes(bytes(data))


async def test_check_refuses_a_damaged_a_foreign_and_a_newer_file(store, tmp_path):
    good = take(store.database.path, tmp_path / "good.db").path
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database at all" * 100)
    with pytest.raises(StoreError, match="junk.db is not a usable database: file is not a database"):
        check(junk)
    broken = take(store.database.path, tmp_path / "broken.db").path
    damaged(broken)
    with pytest.raises(StoreError, match="broken.db (failed the integrity check|is not a usable database)"):
        check(broken)
    foreign = tmp_path / "foreign.db"
    sqlite3.connect(foreign).executescript("CREATE TABLE notes (x); PRAGMA user_version = 3;")
    with pytest.raises(StoreError, match="foreign.db is not a Bruce database"):
        check(foreign)
    newer = take(store.database.path, tmp_path / "newer.db").path
    con = sqlite3.connect(newer)
    con.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 1}")
    con.close()
    with pytest.raises(StoreError, match=f"schema version {len(MIGRATIONS) + 1}, newer than this Bruce knows "
                                         f"\\({len(MIGRATIONS)}\\)"):
        check(newer)
    assert check(good) == len(MIGRATIONS)


async def test_restore_keeps_the_database_it_replaces_with_what_its_wal_holds(tmp_path, clock):
    path = tmp_path / "data" / "bruce.db"
    store = await Store.open(path, clock)
    await store.messages.ensure_conversation("test:old", "test", "old")
    saved = take(path, tmp_path / "saved.db").path
    await store.close()
    con = sqlite3.connect(path)  # a commit still in the WAL, as a kill -9 leaves it
    con.execute("PRAGMA wal_autocheckpoint=0")
    con.execute("INSERT INTO conversations (id, channel, chat_id, created_at) VALUES ('test:wal', 'test', 'wal', 'now')")
    con.commit()
    main, wal = path.read_bytes(), Path(f"{path}-wal").read_bytes()
    con.close()  # (checkpoints: put the files back as they were before it)
    path.write_bytes(main)
    Path(f"{path}-wal").write_bytes(wal)
    Path(f"{path}-shm").unlink(missing_ok=True)
    assert len(wal) > 0
    kept = tmp_path / "data" / "backups" / "kept.db"
    restored, replaced = restore(saved, path, kept)
    assert (restored.path, restored.version, replaced) == (path, len(MIGRATIONS), kept)
    assert db_rows(path, "SELECT id FROM conversations") == [{"id": "test:old"}]  # the old WAL not replayed
    assert {r["id"] for r in db_rows(kept, "SELECT id FROM conversations")} == {"test:old", "test:wal"}


def test_restore_into_a_fresh_place_and_refusals_leave_the_database_alone(tmp_path):
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"\0" * 8192)
    target = tmp_path / "fresh" / "bruce.db"
    with pytest.raises(StoreError, match="no backup at"):
        restore(tmp_path / "missing.db", target, tmp_path / "kept.db")
    with pytest.raises(StoreError):
        restore(junk, target, tmp_path / "kept.db")
    assert not target.exists() and not (tmp_path / "kept.db").exists()
    assert [p.name for p in (tmp_path / "fresh").iterdir()] == []  # no staged copy left behind


async def test_leases_are_read_without_migrating(tmp_path, clock):
    path = tmp_path / "bruce.db"
    assert leases(path) == []  # no database
    old_database(path, 14)  # before leases existed
    assert leases(path) == []
    assert db_rows(path, "PRAGMA user_version") == [{"user_version": 14}]
    store = await Store.open(path, clock)
    owner = f"{socket.gethostname()}:{os.getpid()}:-:abc"
    await store.leases.take("scheduler", owner, now="2026-12-02T12:00:00Z", expires_at="2026-12-02T12:01:00Z",
                            replacing=None)
    await store.close()
    assert leases(path) == [("scheduler", owner, "2026-12-02T12:01:00Z")]


def test_a_name_freed_by_rotation_is_not_reused(tmp_path, clock):
    """Four backups in one second with two kept: the fourth must sort after the third."""
    names = []
    for _ in range(4):
        path = stamped(tmp_path, "bruce", clock.now())
        path.touch()
        names.append(path.name)
        rotate(tmp_path, "bruce", keep=2)
    assert names == ["bruce-20261202T120000Z.db", "bruce-20261202T120000Z-1.db", "bruce-20261202T120000Z-2.db",
                     "bruce-20261202T120000Z-3.db"]
    assert sorted(p.name for p in tmp_path.iterdir()) == names[2:]
