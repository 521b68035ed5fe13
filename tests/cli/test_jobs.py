"""``bruce jobs``: the owner sees every conversation's jobs and pauses, resumes, cancels or runs
one now from the machine; a running daemon is told at once, and delivers a run-now job."""

from __future__ import annotations

import asyncio
import json
import sys

import pytest
import yaml

from bruce.app import build_app, socket_console
from bruce.cli.daemon import jobs_changed_on_daemon, jobs_changed_over_socket
from bruce.cli.main import main
from bruce.values import ConversationId, JobStatus


@pytest.fixture
def config_file(tmp_path):
    path = tmp_path / "config.yml"
    path.write_text(yaml.safe_dump({"assistant": {"timezone": "America/Sao_Paulo"},
                                    "storage": {"path": str(tmp_path / "bruce.db")},
                                    "console": {"socket_path": str(tmp_path / "bruce.sock")}}))
    return path


@pytest.fixture
def bruce(config_file, clock, monkeypatch):
    """`bruce --config <tmp>/config.yml jobs ...` in-process, on the test's clock: (exit code, out, err)."""
    monkeypatch.setattr("bruce.cli.jobs.SystemClock", lambda: clock)

    async def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = await asyncio.to_thread(main, ["--config", str(config_file), "jobs", *argv])
        out, err = capsys.readouterr()
        return code, out, err

    return run


async def two_jobs(app):
    reminder = (await app.jobs.create(ConversationId("test", "c1"), {"execution_mode": "message", "content": "Call Ana",
                                                  "in_seconds": 120})).job
    briefing = (await app.jobs.create(ConversationId("test", "c2"), {"execution_mode": "agent", "content": "Brief me on my day.",
                                                  "cron": "0 8 * * 1-5"})).job
    return reminder, briefing


async def test_list_shows_every_conversations_jobs_with_the_next_run_in_local_time(app, bruce, capsys):
    reminder, briefing = await two_jobs(app)
    code, out, _ = await bruce(capsys, "list")
    assert code == 0
    assert "ID" in out and "NEXT RUN" in out
    assert reminder.id in out and "test:c1" in out and "Call Ana" in out and "Wed 2026-12-02 09:02 -03" in out
    assert briefing.id in out and "test:c2" in out and "Thu 2026-12-03 08:00 -03" in out
    code, out, _ = await bruce(capsys, "list", "--json")
    listed = {j["job_id"]: j for j in json.loads(out)}
    assert listed[reminder.id]["conversation_id"] == "test:c1"
    assert listed[reminder.id]["next_run"] == "Wed 2026-12-02 09:02 -03 (America/Sao_Paulo)"
    assert listed[briefing.id]["execution_mode"] == "agent" and listed[briefing.id]["status"] == "active"


async def test_a_job_in_another_zone_is_listed_in_the_owners_with_its_own_zone_in_the_schedule(app, bruce, capsys):
    lisbon = (await app.jobs.create(ConversationId("test", "c1"), {"execution_mode": "message", "content": "Call Rui",
                                                                  "cron": "0 9 * * *", "timezone": "Europe/Lisbon"})).job
    await app.store.jobs.claim_run(lisbon.id, "2026-12-01T09:00:00.000000+00:00", lateness_ms=0)
    code, out, _ = await bruce(capsys, "list")
    assert code == 0 and "Thu 2026-12-03 06:00 -03 (America/Sao_Paulo)" in out  # 09:00 in Lisbon is 09:00 UTC
    code, out, _ = await bruce(capsys, "show", lisbon.id)
    shown = dict(line.split(":", 1) for line in out.splitlines() if not line.startswith(" ") and ":" in line)
    assert shown["next run"].strip() == "Thu 2026-12-03 06:00 -03 (America/Sao_Paulo)"
    assert shown["created"].strip() == "Wed 2026-12-02 09:00 -03 (America/Sao_Paulo)"
    assert "(Europe/Lisbon)" in shown["schedule"]  # the job's own zone, where its schedule is read
    assert "  Tue 2026-12-01 06:00 -03 (America/Sao_Paulo)  running" in out  # a run, in the owner's zone too


async def test_list_shows_whose_each_job_is(app, bruce, capsys):
    reminder, _ = await two_jobs(app)
    guests = (await app.jobs.create(ConversationId("test", "c1"), {"execution_mode": "message", "content": "Feed cat",
                                                                    "in_seconds": 60}, person="telegram:222")).job
    code, out, _ = await bruce(capsys, "list")
    header, *lines = out.splitlines()
    assert "PERSON" in header
    whose = {line.split()[0]: line.split()[2] for line in lines}
    assert whose[reminder.id] == "owner" and whose[guests.id] == "telegram:222"
    code, out, _ = await bruce(capsys, "list", "--json")
    assert {j["job_id"]: j["person"] for j in json.loads(out)}[guests.id] == "telegram:222"


async def test_pause_resume_cancel_change_the_job_and_say_so(app, bruce, capsys):
    reminder, briefing = await two_jobs(app)
    code, out, _ = await bruce(capsys, "pause", briefing.id)
    assert code == 0 and out.startswith(f"paused: {briefing.id} [paused]")
    assert "Bruce is not running; the change applies when it starts" in out  # this app serves no console socket
    assert (await app.store.jobs.get(briefing.id)).status is JobStatus.PAUSED
    code, out, _ = await bruce(capsys, "resume", briefing.id)
    assert code == 0 and (await app.store.jobs.get(briefing.id)).status is JobStatus.ACTIVE
    code, out, _ = await bruce(capsys, "cancel", reminder.id)
    assert code == 0 and (await app.store.jobs.get(reminder.id)).status is JobStatus.CANCELLED
    code, out, _ = await bruce(capsys, "list")
    assert reminder.id not in out and briefing.id in out
    code, out, _ = await bruce(capsys, "list", "--all")
    assert reminder.id in out and "cancelled" in out


async def test_show_has_the_job_and_its_runs(app, bruce, capsys, clock, channel):
    reminder, _ = await two_jobs(app)
    clock.advance(seconds=120)
    await app.scheduler.sync()
    await app.scheduler.wait_idle()
    code, out, _ = await bruce(capsys, "show", reminder.id)
    assert code == 0
    fields = dict(line.split(":", 1) for line in out.splitlines() if not line.startswith(" ") and ":" in line)
    assert fields["job"].strip() == reminder.id and fields["status"].strip() == "done"
    assert "runs (last 1):" in out and "delivered" in out and "0 ms late" in out
    code, out, _ = await bruce(capsys, "show", reminder.id, "--json")
    shown = json.loads(out)
    assert shown["runs"][0]["status"] == "delivered" and shown["runs"][0]["delivered_text"] == "Call Ana"


async def test_an_unknown_id_or_an_impossible_change_is_an_error_and_changes_nothing(app, bruce, capsys):
    reminder, _ = await two_jobs(app)
    code, out, err = await bruce(capsys, "pause", "nosuchjob")
    assert code == 1 and out == ""
    assert err == "bruce: there is no job 'nosuchjob' (`bruce jobs list --all` shows every job); nothing changed\n"
    await bruce(capsys, "cancel", reminder.id)
    code, _, err = await bruce(capsys, "resume", reminder.id)
    assert code == 1 and f"job {reminder.id} is cancelled and cannot be resumed" in err
    code, _, err = await bruce(capsys, "show", "nosuchjob")
    assert code == 1 and err == "bruce: there is no job 'nosuchjob' (`bruce jobs list --all` shows every job)\n"
    code, _, err = await bruce(capsys, "run-now", reminder.id)  # a cancelled job stays cancelled
    assert code == 1 and f"job {reminder.id} is cancelled and cannot be run now" in err
    assert (await app.store.jobs.get(reminder.id)).status is JobStatus.CANCELLED
    code, _, err = await bruce(capsys, "pause", reminder.id.upper())  # ids are not case-sensitive
    assert code == 1 and f"job {reminder.id} is cancelled and cannot be paused" in err


def test_a_missing_database_is_named_and_not_created(tmp_path, capsys):
    config = tmp_path / "config.yml"
    config.write_text(yaml.safe_dump({"storage": {"path": "data/bruce.db"}}))
    assert main(["--config", str(config), "jobs", "list"]) == 1
    err = capsys.readouterr().err
    assert f"no database at {tmp_path / 'data' / 'bruce.db'}" in err and "bruce run" in err
    assert not (tmp_path / "data" / "bruce.db").exists()


async def test_run_now_reaches_the_running_daemon_which_sends_the_reminder_at_once(
        make_config, tmp_path, clock, channel, bruce, capsys):
    config = make_config(console={"socket_path": str(tmp_path / "bruce.sock")})
    app = await build_app(config, clock=clock, environ={}, extra_channels=[channel, socket_console(config, clock)])
    await app.start()
    try:
        job = (await app.jobs.create(ConversationId("test", "c1"), {"execution_mode": "message", "content": "Stretch",
                                                 "every_seconds": 3600})).job
        code, out, _ = await bruce(capsys, "run-now", job.id)
        # the daemon runs in this process: its log lines may come before the command's own line
        assert code == 0 and any(line.startswith(f"due now: {job.id}") for line in out.splitlines())
        assert "the daemon runs it now" in out
        await app.scheduler.wait_idle()
        assert channel.texts() == ["Stretch"]
        (run,) = await app.store.jobs.runs(job.id)
        assert run.status.value == "delivered"
        stored = await app.store.jobs.get(job.id)
        assert stored.status is JobStatus.ACTIVE and stored.next_run_at == "2026-12-02T13:00:00.000000+00:00"
    finally:
        await app.stop()


async def test_the_table_has_aligned_columns_one_line_per_job_and_needs_no_table_library(
        app, bruce, capsys, monkeypatch):
    for name in [m for m in sys.modules if m == "rich" or m.startswith("rich.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "rich", None)  # a plain install has no rich: importing it fails
    code, out, _ = await bruce(capsys, "list")
    assert (code, out) == (0, "no scheduled jobs (--all shows finished ones)\n")
    long = (await app.jobs.create(ConversationId("test", "c1"), {"execution_mode": "message", "every_seconds": 3600,
                                              "content": "Line one\nline two, and a good deal more after it"})).job
    code, out, _ = await bruce(capsys, "list")
    header, row = out.splitlines()
    assert header.split() == ["ID", "CONVERSATION", "PERSON", "MODE", "STATUS", "NEXT", "RUN", "SCHEDULE", "CONTENT"]
    assert row.startswith(long.id) and header.index("CONTENT") == row.index("Line one line two")
    assert row.endswith("Line one line two, and a good deal mo...")  # cut to 40 characters
    assert header.index("NEXT RUN") == row.index("Wed 2026-12-02 10:00 -03")


async def test_run_now_without_a_daemon_says_it_runs_when_bruce_starts(app, bruce, capsys):
    job = (await app.jobs.create(ConversationId("test", "c1"), {"execution_mode": "message", "content": "Stretch",
                                             "every_seconds": 3600})).job
    await app.jobs.pause("test:c1", job.id)
    code, out, _ = await bruce(capsys, "run-now", job.id)
    assert code == 0 and "Bruce is not running; it runs when Bruce starts" in out
    stored = await app.store.jobs.get(job.id)
    assert stored.status is JobStatus.ACTIVE and stored.next_run_at == "2026-12-02T12:00:00.000000+00:00"


async def test_with_the_scheduler_disabled_the_owner_is_told_nothing_fires(app, tmp_path, clock, capsys, monkeypatch):
    monkeypatch.setattr("bruce.cli.jobs.SystemClock", lambda: clock)
    config = tmp_path / "off.yml"
    config.write_text(yaml.safe_dump({"storage": {"path": str(tmp_path / "bruce.db")}, "scheduler": {"enabled": False},
                                      "console": {"socket_path": str(tmp_path / "bruce.sock")}}))
    job = (await app.jobs.create(ConversationId("test", "c1"), {"execution_mode": "message", "content": "Stretch", "in_seconds": 60})).job
    code = await asyncio.to_thread(main, ["--config", str(config), "jobs", "pause", job.id])
    assert code == 0 and "scheduler.enabled is false" in capsys.readouterr().out


async def test_no_daemon_at_the_socket_means_the_change_waits(make_config, tmp_path):
    assert await jobs_changed_over_socket(tmp_path / "nobody.sock") is False
    assert await jobs_changed_on_daemon(make_config(console={"socket_path": str(tmp_path / "nobody.sock")})) is False


async def test_a_sync_that_fails_in_the_daemon_still_answers_the_terminal(make_config, tmp_path, clock, channel):
    config = make_config(console={"socket_path": str(tmp_path / "bruce.sock")})
    app = await build_app(config, clock=clock, environ={}, extra_channels=[channel, socket_console(config, clock)])
    await app.start()
    try:
        async def broken() -> None:
            raise RuntimeError("database is locked")

        app.scheduler.sync = broken  # the daemon's re-read of the jobs fails
        assert await jobs_changed_on_daemon(config) is True  # the daemon is there; its own sync retries
        assert await jobs_changed_on_daemon(config) is True  # and the socket still serves
    finally:
        await app.stop()


async def test_an_untrusted_job_says_so_in_list_and_show_and_stays_so_when_resumed_here(app, bruce, capsys):
    reminder, briefing = await two_jobs(app)
    steered = (await app.jobs.create(ConversationId("test", "c1"), {"execution_mode": "agent", "content": "Remember it.",
                                     "every_seconds": 600}, untrusted=True)).job
    code, out, _ = await bruce(capsys, "list")
    lines = {line.split()[0]: line for line in out.splitlines()[1:]}
    assert "untrusted" in lines[steered.id] and "untrusted" not in lines[briefing.id]
    code, out, _ = await bruce(capsys, "list", "--json")
    assert {j["job_id"]: j["untrusted"] for j in json.loads(out)} == {reminder.id: False, briefing.id: False,
                                                                       steered.id: True}
    code, out, _ = await bruce(capsys, "show", steered.id)
    assert code == 0 and "trust:              untrusted: made or changed after untrusted text" in out
    code, out, _ = await bruce(capsys, "show", briefing.id)
    assert "trust:              trusted" in out
    await bruce(capsys, "pause", steered.id)
    code, out, _ = await bruce(capsys, "resume", steered.id)
    assert code == 0 and f"{steered.id} [untrusted]" in out
    assert (await app.store.jobs.get(steered.id)).untrusted
