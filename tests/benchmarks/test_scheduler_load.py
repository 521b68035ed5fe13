"""The scheduler benchmark's stored jobs, written straight into ``proactive_jobs``, still fit the
schema: ``make bench`` runs outside ``make test``, so a migration that adds a column must not
break it unseen (v12 and v13 once did)."""

from __future__ import annotations

from benchmarks.scheduler_load import store_jobs
from bruce.records import JobRecord
from bruce.store import Store
from bruce.values import JobStatus
from tests.fakes.clock import FakeClock


async def test_the_stored_jobs_fit_todays_schema_and_read_back_as_the_scheduler_sees_them(tmp_path):
    path = tmp_path / "startup.db"
    store = await Store.open(path, FakeClock())  # the schema at its latest version
    await store.close()

    store_jobs(path, 30)

    store = await Store.open(path, FakeClock())
    try:
        jobs = await store.jobs.active()
    finally:
        await store.close()
    assert len(jobs) == 30
    assert all(isinstance(j, JobRecord) and j.status is JobStatus.ACTIVE and j.next_run_at for j in jobs)
    assert {j.schedule_kind for j in jobs} == {"cron", "every", "at"}
    # the columns later migrations added take their defaults: the owner's, trusted
    assert {(j.person, j.untrusted) for j in jobs} == {("owner", False)}
