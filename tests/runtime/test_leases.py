"""One scheduler and one poller per channel for a database, however its path is spelled: a second
daemon reaching the same file through a symlink runs no scheduler and cannot serve the
same channel; ten reminders due fire once each; a run claimed by a live process is never
released by another; a lease (and a run) of a dead owner is taken over."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from bruce.app import build_app
from bruce.clock import utc_iso
from bruce.errors import BruceError
from bruce.jobs.scheduler import Scheduler, SchedulerSettings
from bruce.runtime.leases import SCHEDULER, Leases
from bruce.store import Store
from bruce.values import ConversationId, JobRunStatus, JobStatus
from tests.fakes.channel import RecordingChannel
from tests.helpers import rows

CID = "test:c1"


def alias_of(db: Path) -> Path:
    """The same database through a symlink in another folder: another spelling of the same file."""
    link = db.parent / "elsewhere" / "alias.db"
    if not link.is_symlink():
        link.parent.mkdir(exist_ok=True)
        link.symlink_to(db)
    return link


async def remind(app, content: str, **schedule):
    view = await app.jobs.create(ConversationId.parse(CID), {"execution_mode": "message", "content": content, **schedule})
    await asyncio.sleep(0)  # the change reaches the scheduler
    return view.job


@pytest.fixture
async def second(make_config, clock):
    """Build (and afterwards stop) a second daemon on the first one's database, through a symlink."""
    apps = []

    async def build(db: Path, channel_name: str = "other"):
        config = make_config(storage={"path": str(alias_of(db))})
        app = await build_app(config, clock=clock, environ={}, extra_channels=[RecordingChannel(channel_name)])
        apps.append(app)
        await app.start()
        return app

    yield build
    for app in apps:
        await app.stop()


async def test_a_second_daemon_through_a_symlink_runs_no_scheduler_and_ten_reminders_fire_once_each(
        app, second, channel, clock):
    other = await second(app.config.storage.path)
    assert app.scheduler.running and not other.scheduler.running
    jobs = [await remind(other, f"reminder {i}", in_seconds=60) for i in range(10)]  # made by the second process
    clock.advance(seconds=60)
    for _ in range(3):  # both look at the clock, again and again
        await asyncio.gather(app.scheduler.sync(), other.scheduler.sync())
        await asyncio.gather(app.scheduler.wait_idle(), other.scheduler.wait_idle())
    assert sorted(channel.texts()) == sorted(f"reminder {i}" for i in range(10))
    stored = await rows(app, "SELECT text, count(*) AS n FROM messages WHERE direction = 'out' GROUP BY text")
    assert {r["text"]: r["n"] for r in stored} == {f"reminder {i}": 1 for i in range(10)}
    for job in jobs:
        (run,) = await app.store.jobs.runs(job.id)
        assert run.status is JobRunStatus.DELIVERED


async def test_a_second_daemon_through_a_symlink_cannot_serve_the_same_channel(app, second):
    with pytest.raises(BruceError, match="already serving the test channel"):
        await second(app.config.storage.path, "test")


async def test_a_run_claimed_by_a_live_process_is_not_released_by_another(app, channel, clock):
    job = await remind(app, "Call Ana", in_seconds=60)
    await app.scheduler.stop()  # the first process is busy with the run (its claim below), not firing more
    clock.advance(seconds=60)
    run_id = await app.store.jobs.claim_run(job.id, job.next_run_at, lateness_ms=0, owner=app.leases.owner,
                                            lease=SCHEDULER)
    assert run_id is not None
    # a second scheduler that the locks did not stop (as a lock beside the configured path did not)
    other_store = await Store.open(alias_of(app.config.storage.path), clock)
    other = Scheduler(store=other_store, clock=clock, book=app.jobs, doors=app.worker, notices=app.outbox,
                      settings=SchedulerSettings())
    try:
        await other.start()
        await other.sync()
        await other.wait_idle()
    finally:
        await other.stop()
        await other_store.close()
    assert channel.texts() == []
    (run,) = await app.store.jobs.runs(job.id)
    assert (run.id, run.status, run.owner) == (run_id, JobRunStatus.RUNNING, app.leases.owner)


async def test_a_claim_needs_the_scheduler_lease(app, clock):
    job = await remind(app, "Call Ana", in_seconds=60)
    late = Leases(store=app.store.leases, clock=clock)  # a process whose lease was taken over
    assert await app.store.jobs.claim_run(job.id, job.next_run_at, lateness_ms=0, owner=late.owner,
                                          lease=SCHEDULER) is None
    assert await app.store.jobs.runs(job.id) == []


async def _hand_over_to(app, clock, dead: str, *, expires_in_s: float):
    """The state a killed process leaves: it claimed the due reminder's run and held the scheduler
    lease (``dead``); this app then stops without giving the lease back (it is not its own)."""
    job = await remind(app, "Call Ana", in_seconds=60)
    await app.scheduler.stop()
    clock.advance(seconds=60)
    await app.store.jobs.claim_run(job.id, job.next_run_at, lateness_ms=0, owner=dead)
    now = clock.now()
    assert await app.store.leases.take(SCHEDULER, dead, now=utc_iso(now),
                                       expires_at=utc_iso(now + timedelta(seconds=expires_in_s)),
                                       replacing=app.leases.owner)
    await app.stop()
    return job


async def test_a_lease_whose_heartbeat_expired_is_taken_over_and_its_run_fires_once(
        app_factory, make_config, channel, clock):
    config = make_config()
    job = await _hand_over_to(await app_factory(config), clock, "elsewhere:4242:1:abc", expires_in_s=30)
    clock.advance(seconds=31)  # its heartbeat stopped: the lease expired
    restarted = await app_factory(config)
    await restarted.scheduler.wait_idle()
    assert restarted.scheduler.running
    assert channel.texts() == ["Call Ana"]
    (run,) = await restarted.store.jobs.runs(job.id)
    assert (run.status, run.owner) == (JobRunStatus.DELIVERED, restarted.leases.owner)
    assert (await restarted.store.jobs.get(job.id)).status is JobStatus.DONE


async def test_a_lease_held_elsewhere_and_not_expired_is_not_taken(app_factory, make_config, channel, clock):
    config = make_config()
    await _hand_over_to(await app_factory(config), clock, "elsewhere:4242:1:abc", expires_in_s=30)
    clock.advance(seconds=29)
    restarted = await app_factory(config)
    assert not restarted.scheduler.running
    assert channel.texts() == []


async def test_a_lease_of_a_killed_process_on_this_machine_is_taken_at_once(app_factory, make_config, channel, clock):
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                           check=True)
    dead = f"{socket.gethostname()}:{ended.stdout.strip()}:1:abc"  # its process has ended (kill -9)
    config = make_config()
    await _hand_over_to(await app_factory(config), clock, dead, expires_in_s=60)
    restarted = await app_factory(config)  # well within the expiry
    await restarted.scheduler.wait_idle()
    assert restarted.scheduler.running
    assert channel.texts() == ["Call Ana"]


async def test_a_process_that_lost_its_lease_stops_firing(app, channel, clock):
    await remind(app, "Call Ana", in_seconds=120)
    clock.advance(seconds=61)  # this process stalled past its lease's expiry
    other = Leases(store=app.store.leases, clock=clock)
    assert await other.take(SCHEDULER) is None  # another process took the scheduler over
    assert await app.leases.renew() == [SCHEDULER]
    clock.advance(seconds=60)
    await app.scheduler.sync()
    await app.scheduler.wait_idle()
    assert not app.scheduler.running and channel.texts() == []
    await other.close()


async def test_a_process_that_lost_a_channel_lease_stops_polling_that_channel(app, channel, clock):
    assert channel.inbound is not None  # receiving
    clock.advance(seconds=61)  # this process stalled past its lease's expiry
    other = Leases(store=app.store.leases, clock=clock)
    assert await other.take("channel:test") is None  # another process serves the channel now
    assert await app.leases.renew() == ["channel:test"]
    for _ in range(50):
        if channel.inbound is None:
            break
        await asyncio.sleep(0.01)
    assert channel.inbound is None  # this one no longer receives from it
    await other.close()
