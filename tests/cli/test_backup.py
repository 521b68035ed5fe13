"""``bruce backup`` and ``bruce restore`` as the owner runs them: a backup taken while Bruce writes
restores whole; a restore is refused while a Bruce process uses the database, and for a damaged,
foreign or newer file; ``backups/`` keeps ``storage.backups_keep`` files."""

from __future__ import annotations

import asyncio
import os
import re
import socket
import sqlite3
import subprocess
from pathlib import Path

import pytest
import yaml

from bruce.app import build_app, socket_console
from bruce.cli.main import main
from bruce.runtime.leases import Leases
from bruce.store import Store
from bruce.store.migrations import MIGRATIONS
from tests.helpers import db_rows

TABLES = ("conversations", "messages", "turns", "tool_executions", "llm_calls", "leases")


def config_file(folder: Path, **storage: object) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "config.yml"
    path.write_text(yaml.safe_dump({"storage": {"path": str(folder / "data" / "bruce.db"), **storage},
                                    "console": {"socket_path": str(folder / "bruce.sock")}}))
    return path


async def bruce(capsys: pytest.CaptureFixture[str], config: Path, *argv: str) -> tuple[int, str, str]:
    """``bruce --config CONFIG ...`` in-process (in a thread, as a second process would run beside
    this one's event loop): (exit code, stdout, stderr)."""
    capsys.readouterr()
    code = await asyncio.to_thread(main, ["--config", str(config), *argv])
    out, err = capsys.readouterr()
    return code, out, err


def written(out: str) -> Path:
    """The file a ``bruce backup`` said it wrote (the test's own store may log lines around it)."""
    match = re.search(r"^backup written: (.+) \((\d+(?:\.\d)? [KM]iB), schema version (\d+)\)$", out, re.M)
    assert match, out
    assert int(match.group(3)) == len(MIGRATIONS)
    return Path(match.group(1))


def counts(path: Path) -> dict[str, int]:
    return {table: db_rows(path, f"SELECT count(*) AS n FROM {table}")[0]["n"] for table in TABLES}


def integrity(path: Path) -> list[dict[str, str]]:
    return db_rows(path, "PRAGMA integrity_check")


@pytest.fixture
async def store(tmp_path, clock):
    """The database of ``tmp_path/config.yml``, open and seeded with a few MB of messages."""
    opened = await Store.open(tmp_path / "data" / "bruce.db", clock)
    try:
        await opened.messages.ensure_conversation("test:seed", "test", "seed")
        await opened.database.write(lambda conn: conn.executemany(
            "INSERT INTO messages (conversation_id, direction, role, text, status, created_at, updated_at)"
            " VALUES ('test:seed', 'in', 'user', ?, 'done', 'now', 'now')",
            [(f"message {i} " + "x" * 400,) for i in range(6000)]))
        yield opened
    finally:
        await opened.close()


async def test_a_backup_taken_while_bruce_writes_restores_whole_elsewhere(store, tmp_path, capsys):
    config = config_file(tmp_path)
    written_ids: list[int] = []
    stop = asyncio.Event()

    async def writer() -> None:  # each row committed through the real store while the backup runs
        while not stop.is_set():
            n = len(written_ids)
            await store.messages.ensure_conversation(f"test:w{n}", "test", f"w{n}")
            written_ids.append(n)
            await asyncio.sleep(0)

    writing = asyncio.create_task(writer())
    try:
        await asyncio.sleep(0.05)
        before = len(written_ids)
        code, out, _ = await bruce(capsys, config, "backup")
        after = len(written_ids)
    finally:
        stop.set()
        await writing
    assert code == 0 and after > before > 0  # the writes went on around the backup
    backup = written(out)
    assert backup.parent == tmp_path / "data" / "backups" and backup.name.startswith("bruce-")

    fresh = config_file(tmp_path / "fresh")
    code, out, _ = await bruce(capsys, fresh, "restore", str(backup))
    assert code == 0, out
    restored = tmp_path / "fresh" / "data" / "bruce.db"
    assert f"restored {backup} into {restored}" in out and "there was no database at storage.path before" in out
    assert integrity(restored) == [{"integrity_check": "ok"}]
    ids = [r["id"] for r in db_rows(restored, "SELECT id FROM conversations WHERE id LIKE 'test:w%'")]
    assert before <= len(ids) <= after  # one moment of the database: every write before it, none half
    assert sorted(ids) == sorted(f"test:w{n}" for n in range(len(ids)))
    assert counts(restored)["messages"] == 6000

    code, out, _ = await bruce(capsys, config, "backup")  # once the writes have stopped: the same rows
    again = tmp_path / "again"
    code, out, _ = await bruce(capsys, config_file(again), "restore", str(written(out)))
    assert code == 0
    assert counts(again / "data" / "bruce.db") == counts(tmp_path / "data" / "bruce.db")
    assert integrity(again / "data" / "bruce.db") == [{"integrity_check": "ok"}]


async def test_restore_is_refused_while_the_daemon_runs(make_config, tmp_path, clock, channel, capsys):
    config = config_file(tmp_path)
    app_config = make_config(storage={"path": str(tmp_path / "data" / "bruce.db")},
                             console={"socket_path": str(tmp_path / "bruce.sock")})
    app = await build_app(app_config, clock=clock, environ={},
                          extra_channels=[channel, socket_console(app_config, clock)])
    await app.start()
    try:
        await app.store.messages.ensure_conversation("test:live", "test", "live")
        code, out, _ = await bruce(capsys, config, "backup")  # safe while it runs
        assert code == 0
        backup = written(out)
        code, out, err = await bruce(capsys, config, "restore", str(backup))
        assert code == 1
        assert f"not restored: a Bruce daemon is running (it answers at {tmp_path / 'bruce.sock'}); stop it first" in err
        assert not list((tmp_path / "data" / "backups").glob("*before-restore*"))
        assert {"id": "test:live"} in db_rows(tmp_path / "data" / "bruce.db", "SELECT id FROM conversations")
    finally:
        await app.stop()


async def test_restore_is_refused_while_a_live_process_holds_a_lease(store, tmp_path, clock, capsys):
    """No console socket (another config's, or a `bruce chat` in-process): the lease tells."""
    config = config_file(tmp_path)
    code, out, _ = await bruce(capsys, config, "backup")
    backup = written(out)
    leases = Leases(store=store.leases, clock=clock)  # this process: alive, whatever the lease's expiry says
    assert await leases.take("scheduler") is None
    try:
        code, _, err = await bruce(capsys, config, "restore", str(backup))
        assert code == 1
        assert f"not restored: a Bruce process ({leases.owner}) is using {tmp_path / 'data' / 'bruce.db'}" in err
        assert "(it holds the scheduler lease)" in err
    finally:
        await leases.close()


async def test_a_lease_left_by_a_killed_process_does_not_block_a_restore(store, tmp_path, clock, capsys):
    config = config_file(tmp_path)
    code, out, _ = await bruce(capsys, config, "backup")
    backup = written(out)
    gone = subprocess.Popen(["true"])  # noqa: S603,S607
    gone.wait()
    await store.leases.take("scheduler", f"{socket.gethostname()}:{gone.pid}:-:dead", now="2026-12-02T12:00:00Z",
                            expires_at="2999-01-01T00:00:00Z", replacing=None)
    await store.close()
    code, out, err = await bruce(capsys, config, "restore", str(backup))
    assert code == 0, err
    kept = re.search(r"^the database it replaced is kept as (.+)$", out, re.M)
    assert kept and Path(kept.group(1)).name.startswith("bruce-before-restore-")
    assert db_rows(Path(kept.group(1)), "SELECT owner FROM leases") == [
        {"owner": f"{socket.gethostname()}:{gone.pid}:-:dead"}]


async def test_a_lease_held_on_another_machine_blocks_until_it_expires(store, tmp_path, clock, capsys):
    config = config_file(tmp_path)
    code, out, _ = await bruce(capsys, config, "backup")
    backup = written(out)
    await store.leases.take("channel:telegram", "elsewhere:4242:-:x", now="2026-12-02T12:00:00Z",
                            expires_at="2999-01-01T00:00:00Z", replacing=None)
    code, _, err = await bruce(capsys, config, "restore", str(backup))
    assert code == 1 and "(it holds the channel:telegram lease)" in err
    await store.leases.take("channel:telegram", "elsewhere:4242:-:x", now="2026-12-02T12:00:00Z",
                            expires_at="2000-01-01T00:00:00Z", replacing=None)
    await store.close()
    code, _, err = await bruce(capsys, config, "restore", str(backup))
    assert code == 0, err


def scribble(path: Path) -> None:
    data = bytearray(path.read_bytes())
    for offset in range(4096, len(data) - 64, 4096):
        data[offset + 8:offset + 64] = os.urandom(56)
    path.write_bytes(bytes(data))


async def test_restore_refuses_a_damaged_a_foreign_and_a_newer_backup(store, tmp_path, capsys):
    config = config_file(tmp_path)
    await store.messages.ensure_conversation("test:current", "test", "current")
    await store.close()
    before = counts(tmp_path / "data" / "bruce.db")
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"hello" * 2000)
    code, _, err = await bruce(capsys, config, "restore", str(junk))
    assert (code, err.strip()) == (1, f"bruce: cannot restore {junk}: file is not a database")

    code, out, _ = await bruce(capsys, config, "backup", str(tmp_path / "damaged.db"))
    assert code == 0 and written(out) == tmp_path / "damaged.db"
    scribble(tmp_path / "damaged.db")
    code, _, err = await bruce(capsys, config, "restore", str(tmp_path / "damaged.db"))
    assert code == 1 and str(tmp_path / "damaged.db") in err
    assert "integrity check" in err or "malformed" in err or "not a database" in err

    code, out, _ = await bruce(capsys, config, "backup", str(tmp_path / "newer.db"))
    con = sqlite3.connect(tmp_path / "newer.db")
    con.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 1}")
    con.close()
    code, _, err = await bruce(capsys, config, "restore", str(tmp_path / "newer.db"))
    assert code == 1
    assert (f"has schema version {len(MIGRATIONS) + 1}, newer than this Bruce knows ({len(MIGRATIONS)}): use the "
            "Bruce version that wrote it, or update Bruce first") in err

    code, _, err = await bruce(capsys, config, "restore", str(tmp_path / "data" / "bruce.db"))
    assert code == 1 and "is the database itself" in err
    assert counts(tmp_path / "data" / "bruce.db") == before  # untouched
    assert not list((tmp_path / "data").rglob("*before-restore*"))
    assert [p.name for p in (tmp_path / "data").iterdir() if p.name.startswith(".")] == []


async def test_restoring_an_older_backup_says_it_is_migrated_at_the_next_start(tmp_path, capsys):
    config = config_file(tmp_path)
    old = tmp_path / "old.db"
    con = sqlite3.connect(old)
    for script in MIGRATIONS[:-1]:
        con.executescript(script)
    con.execute(f"PRAGMA user_version = {len(MIGRATIONS) - 1}")
    con.close()
    code, out, _ = await bruce(capsys, config, "restore", str(old))
    assert code == 0
    assert f"schema version {len(MIGRATIONS) - 1})" in out
    assert f"Bruce migrates it to schema version {len(MIGRATIONS)} at its next start (backing it up first)" in out


async def test_backups_are_rotated_to_backups_keep(store, tmp_path, capsys):
    config = config_file(tmp_path, backups_keep=2)
    made = []
    for _ in range(4):  # within a second or two: stamped -1, -2... and still in order
        code, out, _ = await bruce(capsys, config, "backup")
        assert code == 0
        made.append(written(out))
    assert "removed 1 older backup: the newest 2 are kept (storage.backups_keep)" in out
    assert sorted((tmp_path / "data" / "backups").iterdir()) == sorted(made[-2:])


async def test_backup_path_is_a_folder_or_a_new_file(store, tmp_path, capsys):
    config = config_file(tmp_path)
    (tmp_path / "usb").mkdir()
    code, out, _ = await bruce(capsys, config, "backup", str(tmp_path / "usb"))
    assert code == 0 and written(out).parent == tmp_path / "usb"
    code, out, _ = await bruce(capsys, config, "backup", str(tmp_path / "usb" / "before-update.db"))
    assert code == 0 and written(out) == tmp_path / "usb" / "before-update.db"
    code, _, err = await bruce(capsys, config, "backup", str(tmp_path / "usb" / "before-update.db"))
    assert code == 1 and "before-update.db exists: name a new file" in err
    code, _, err = await bruce(capsys, config, "backup", str(tmp_path / "nowhere" / "x.db"))
    assert code == 1 and f"no folder {tmp_path / 'nowhere'}" in err
    assert not (tmp_path / "nowhere").exists()


async def test_backup_with_no_database_says_where_it_looked(tmp_path, capsys):
    config = config_file(tmp_path)
    code, _, err = await bruce(capsys, config, "backup")
    assert code == 1
    assert err.strip() == (f"bruce: no database at {tmp_path / 'data' / 'bruce.db'} (storage.path in {config}): "
                           "nothing to back up")
    assert not (tmp_path / "data").exists()


def test_backups_keep_is_validated(tmp_path, capsys):
    code = main(["--config", str(config_file(tmp_path, backups_keep=0)), "config", "check"])
    assert code == 2
    assert "storage.backups_keep: must be at least 1 (got 0)" in capsys.readouterr().err


@pytest.mark.skipif(os.geteuid() != 0, reason="only root may give a file away")
async def test_a_backup_run_as_root_leaves_files_the_daemons_user_can_use(store, tmp_path, capsys):
    """`sudo bruce backup`: the backups folder is the data folder owner's, or the next migration
    (run as that user) could not write its backup there."""
    config = config_file(tmp_path)
    data = tmp_path / "data"
    os.chown(data, 65534, 65534)  # nobody: the daemon's user
    code, out, _ = await bruce(capsys, config, "backup")
    assert code == 0
    backup = written(out)
    assert (data / "backups").stat().st_uid == backup.stat().st_uid == 65534
    assert oct(backup.stat().st_mode & 0o777) == "0o600"
