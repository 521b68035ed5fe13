"""FileLock: one holder per file, freed by release, by closing, and by the holder's death."""

from __future__ import annotations

import signal
import subprocess
import sys

from bruce.runtime.locks import FileLock


def test_a_second_holder_is_refused_until_the_first_releases(tmp_path):
    first, second = FileLock(tmp_path / "db.scheduler.lock"), FileLock(tmp_path / "db.scheduler.lock")
    assert first.take() and first.held
    assert first.take()  # taking again what one holds is not a refusal
    assert not second.take() and not second.held
    first.release()
    assert not first.held
    assert second.take()
    second.release()
    second.release()  # releasing twice does nothing


def test_a_holder_killed_with_sigkill_leaves_no_stale_lock(tmp_path):
    path = tmp_path / "db.telegram.lock"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom pathlib import Path\nfrom bruce.runtime.locks import FileLock\n"
         f"lock = FileLock(Path({str(path)!r}))\nassert lock.take()\nprint('held', flush=True)\ntime.sleep(60)\n"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        assert not FileLock(path).take()
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=10)
    lock = FileLock(path)
    assert lock.take()
    lock.release()
