"""The proactive jobs a conversation owns: created, listed, paused, resumed, rescheduled and
cancelled, always through the conversation that asks (a job of another conversation does not
exist for it), and by the person who asks: each job is a person's (``JobRecord.person``), and
in chat a job of another person does not exist for the asker either (``person`` None: the
owner on the machine, who sees every job). The ``proactive.*`` tools, ``/jobs`` and ``bruce jobs`` all come through here;
the scheduler (``bruce.jobs.scheduler``) is told of each change and fires what is due.

Arguments are checked here, with errors the model can act on (``JobError``, ``ScheduleError``):
the schedule by ``bruce.jobs.schedule``, the links of a message's content by ``bruce.jobs.links``
(on create and reschedule; again when it is sent, ``text_to_send``), the rest (mode, content,
notify) below.

Trust: a job made, resumed or rescheduled after untrusted text entered the turn (``untrusted=True``
from the caller) is stored ``untrusted``, and stays so whatever changes it later; its runs start
tainted (``bruce.jobs.scheduler``). A conversation holds at most ``max_live_jobs`` live jobs
(config ``scheduler.max_active_jobs``). Every change resets the job's ``held_told_at``: the owner
acted on it, so a run that stops at a tool needing their yes tells them again."""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import timedelta
from enum import StrEnum
from typing import Any, TypeVar
from zoneinfo import ZoneInfo

from bruce.clock import Clock, parse_iso, utc_iso
from bruce.jobs.links import MessageLinks
from bruce.jobs.schedule import SCHEDULE_FIELDS, Schedule, ScheduleError, local_text, parse_schedule, stored_schedule
from bruce.records import JobRecord, JobRunRecord
from bruce.store import Store
from bruce.values import OWNER, ConversationId, ExecutionMode, JobRunStatus, JobStatus, Notify

__all__ = ["JobBook", "JobError", "JobView", "ScheduleError", "MAX_CONTENT_CHARS", "QUIET_TOKEN", "MAX_LIVE_JOBS", "run_line"]

MAX_CONTENT_CHARS = 4000
MAX_LIVE_JOBS = 50  # per conversation, by default (config ``scheduler.max_active_jobs``)
_PREVIEW_CHARS = 1500  # of a job's content, in the approval request (Telegram shows 2500 of a preview)
_E = TypeVar("_E", bound=StrEnum)
QUIET_TOKEN = "NOTHING_TO_REPORT"  # an agent run with notify if_actionable answers exactly this to send nothing


class JobError(ValueError):
    """A job argument or request that cannot be done; the text says which and what to do."""


@dataclass(frozen=True, slots=True)
class JobView:
    """A job as the model, the chat and the CLI are shown it."""

    job: JobRecord
    created: bool = False

    @property
    def next_run_local(self) -> str | None:
        if self.job.next_run_at is None:
            return None
        return local_text(parse_iso(self.job.next_run_at), ZoneInfo(self.job.timezone))

    def as_dict(self) -> dict[str, Any]:
        j = self.job
        return {"job_id": j.id, "status": str(j.status), "execution_mode": str(j.execution_mode), "content": j.content,
                "description": j.description, "next_run": self.next_run_local, "notify": str(j.notify),
                "flagged": j.flagged, "untrusted": j.untrusted}

    def line(self) -> str:
        j = self.job
        when = f"next {self.next_run_local}" if j.next_run_at else "no next run"
        state = "" if j.status is JobStatus.ACTIVE else f" [{j.status}]"
        trust = " [untrusted]" if j.untrusted else ""
        flag = f" (flagged: {j.flagged})" if j.flagged else ""
        content = j.content if len(j.content) <= 80 else j.content[:77] + "..."
        return f"{j.id}{state}{trust} {j.execution_mode}: {content!r}, {j.description}; {when}{flag}"

    def preview(self, what: str) -> str:
        """The job as an approval request shows it: ``what`` is asked (made, resumed...), then its
        schedule and its whole content (the first ``_PREVIEW_CHARS`` of a long one, saying so)."""
        j = self.job
        content = j.content if len(j.content) <= _PREVIEW_CHARS else (
            f"{j.content[:_PREVIEW_CHARS]}... ({len(j.content) - _PREVIEW_CHARS} more characters)")
        lines = [what,
                 f"mode: {j.execution_mode} (each run carries out the content, with tools)"
                 if j.execution_mode is ExecutionMode.AGENT else f"mode: {j.execution_mode}",
                 f"schedule: {j.description}", f"next run: {self.next_run_local or '-'}"]
        if j.execution_mode is ExecutionMode.AGENT:
            lines.append(f"notify: {j.notify}")
        return "\n".join([*lines, "content:", content])


def run_line(run: JobRunRecord, content: str, zone: ZoneInfo) -> str:
    """A finished run as ``/jobs`` lists it: when, which job, what became of it."""
    when = local_text(parse_iso(run.finished_at or run.started_at), zone)
    shown = content if len(content) <= 60 else content[:57] + "..."
    error = f" ({run.error})" if run.error and run.status is not JobRunStatus.DELIVERED else ""
    return f"{when}: {run.job_id} {shown!r}: {run.status}{error}"


class JobBook:
    def __init__(self, *, store: Store, clock: Clock, zone: ZoneInfo, admin_base_url: str,
                 dedup_window_s: float = 600.0, max_live_jobs: int = MAX_LIVE_JOBS) -> None:
        """``admin_base_url``: the admin page's address, where links to our artifacts point;
        ``max_live_jobs``: live (active or paused) jobs per conversation."""
        self._max_live = max_live_jobs
        self._jobs = store.jobs
        self._links = MessageLinks(artifacts=store.artifacts, admin_base_url=admin_base_url)
        self._messages = store.messages
        self._clock = clock
        self._zone = zone
        self._dedup_window = timedelta(seconds=dedup_window_s)
        self._listeners: list[Callable[[str], None]] = []  # the scheduler's, once it runs (``Scheduler.start``)

    def subscribe(self, listener: Callable[[str], None]) -> Callable[[], None]:
        """Call ``listener(job_id)`` after each stored change of a job (made, paused, resumed,
        rescheduled, cancelled); returns the function that stops it. Listeners are called in the
        order they subscribed."""
        self._listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe

    def _changed(self, job_id: str) -> None:
        for listener in list(self._listeners):
            listener(job_id)

    async def create(self, conversation_id: ConversationId, args: dict[str, Any], *, person: str = OWNER,
                     untrusted: bool = False) -> JobView:
        """A new job of ``person`` for this conversation, or the same one they made in the last ten
        minutes (``untrusted``: asked for after untrusted text entered the turn)."""
        job = replace(await self._draft(conversation_id, args), person=person, untrusted=untrusted)
        await self._messages.ensure_conversation(str(conversation_id), conversation_id.channel, conversation_id.chat_id)
        stored, created = await self._jobs.create(job, dedup_since=utc_iso(self._clock.now() - self._dedup_window),
                                                  max_live=self._max_live)
        if stored is None:
            raise self._too_many(await self._jobs.live_count(str(conversation_id)))
        if created:
            self._changed(stored.id)
        return JobView(stored, created)

    async def draft(self, conversation_id: ConversationId, args: dict[str, Any]) -> JobView:
        """The job ``create`` would make, checked (arguments and the live-job limit) but not
        stored: what the owner is asked to approve."""
        job = await self._draft(conversation_id, args)
        live = await self._jobs.live_count(str(conversation_id))
        if live >= self._max_live:
            raise self._too_many(live)
        return JobView(job)

    def _too_many(self, live: int) -> JobError:
        return JobError(f"this conversation has {live} live jobs (active or paused), and scheduler.max_active_jobs "
                        f"allows {self._max_live}; nothing was scheduled. Cancel one first (proactive_list shows "
                        "them), or the owner can raise scheduler.max_active_jobs in the config")

    async def _draft(self, conversation_id: ConversationId, args: dict[str, Any]) -> JobRecord:
        mode = _choice(args.get("execution_mode"), "execution_mode", ExecutionMode)
        content = _content(args.get("content"))
        if mode is ExecutionMode.MESSAGE:
            await self._refuse_made_up_links(content)
        notify = (_choice(args.get("notify", Notify.ALWAYS) or Notify.ALWAYS, "notify", Notify)
                  if mode is ExecutionMode.AGENT else Notify.ALWAYS)
        now = self._clock.now()
        schedule = parse_schedule(args, now=now, default_zone=self._zone)
        first = schedule.next_after(now)
        stamp = utc_iso(now)
        return JobRecord(
            id=secrets.token_hex(5), conversation_id=str(conversation_id), execution_mode=mode, content=content,
            schedule_kind=schedule.kind, schedule_value=schedule.value, timezone=schedule.zone.key, notify=notify,
            description=schedule.describe(), status=JobStatus.ACTIVE, next_run_at=utc_iso(first) if first else None,
            anchor_at=utc_iso(schedule.anchor), failures=0, flagged=None,
            dedup_key=_dedup_key(str(conversation_id), mode, content, notify, args), created_at=stamp, updated_at=stamp)

    async def list(self, conversation_id: ConversationId, *, person: str | None = None) -> list[JobView]:
        """The conversation's live jobs (``person``'s only, unless None)."""
        return [JobView(j) for j in await self._jobs.for_conversation(str(conversation_id), person=person)]

    async def get(self, conversation_id: ConversationId | None, job_id: Any, *, person: str | None = None) -> JobRecord:
        """The job, if it belongs to ``conversation_id`` and to ``person`` (None for both: the
        owner, on the machine)."""
        if not isinstance(job_id, str) or not job_id.strip():
            raise JobError("job_id: give the id of a job, as proactive_list shows it")
        job = await self._jobs.get(job_id.strip().lower())
        if job is None or (conversation_id is not None and job.conversation_id != str(conversation_id)) \
                or (person is not None and job.person != person):
            raise JobError(f"job_id: there is no job {job_id.strip()[:40]!r} in this conversation; "
                           "proactive_list shows its jobs")
        return job

    async def pause(self, conversation_id: ConversationId | None, job_id: Any, *,
                    person: str | None = None) -> JobView:
        job = await self.get(conversation_id, job_id, person=person)
        if job.status is JobStatus.PAUSED:
            return JobView(job)
        self._live(job, "paused")
        return await self._change(job, expect=(JobStatus.ACTIVE,), status=JobStatus.PAUSED)

    async def resume(self, conversation_id: ConversationId | None, job_id: Any, *, person: str | None = None,
                     untrusted: bool = False) -> JobView:
        job = await self.get(conversation_id, job_id, person=person)
        if job.status is JobStatus.ACTIVE:
            return JobView(job)
        return await self._change(job, expect=(JobStatus.PAUSED,), untrusted=job.untrusted or untrusted,
                                  **self._resumed(job))

    async def planned(self, conversation_id: ConversationId, job_id: Any, action: str, args: dict[str, Any], *,
                      person: str | None = None) -> JobView:
        """The job as ``resume`` or ``reschedule`` (``action``) would leave it, checked but not
        stored: what the owner is asked to approve."""
        job = await self.get(conversation_id, job_id, person=person)
        if action == "resume":
            return JobView(job if job.status is JobStatus.ACTIVE else replace(job, **self._resumed(job)))
        return JobView(replace(job, **await self._rescheduled(job, args)))

    def _resumed(self, job: JobRecord) -> dict[str, Any]:
        """What resuming changes in a paused job (``JobError`` when it cannot be resumed)."""
        self._live(job, "resumed")
        now = self._clock.now()
        schedule = self.schedule_of(job)
        if schedule.recurring:
            nxt = schedule.next_after(now)
        elif job.next_run_at is not None and parse_iso(job.next_run_at) > now:
            nxt = parse_iso(job.next_run_at)
        else:
            raise JobError(f"job {job.id}: its time ({local_text(schedule.anchor, schedule.zone)}) passed while it "
                           "was paused; reschedule it with a new time instead")
        return {"status": JobStatus.ACTIVE, "next_run_at": utc_iso(nxt) if nxt else None}

    async def reschedule(self, conversation_id: ConversationId | None, job_id: Any, args: dict[str, Any], *,
                         person: str | None = None, untrusted: bool = False) -> JobView:
        job = await self.get(conversation_id, job_id, person=person)
        return await self._change(job, untrusted=job.untrusted or untrusted, **await self._rescheduled(job, args))

    async def _rescheduled(self, job: JobRecord, args: dict[str, Any]) -> dict[str, Any]:
        """What a new schedule changes in a live job (``JobError``/``ScheduleError`` when it cannot)."""
        self._live(job, "rescheduled")
        if job.execution_mode is ExecutionMode.MESSAGE:
            await self._refuse_made_up_links(job.content, job_id=job.id)
        if not any(args.get(name) is not None for name in SCHEDULE_FIELDS):
            raise JobError("reschedule: give exactly one of at, in_seconds, cron and every_seconds")
        now = self._clock.now()
        zone_args = {"timezone": job.timezone, **{k: v for k, v in args.items() if v is not None}}
        schedule = parse_schedule(zone_args, now=now, default_zone=self._zone)
        nxt = schedule.next_after(now)
        return {"schedule_kind": schedule.kind, "schedule_value": schedule.value, "timezone": schedule.zone.key,
                "description": schedule.describe(), "anchor_at": utc_iso(schedule.anchor),
                "next_run_at": utc_iso(nxt) if nxt else None, "failures": 0, "flagged": None}

    async def cancel(self, conversation_id: ConversationId | None, job_id: Any, *,
                    person: str | None = None) -> JobView:
        job = await self.get(conversation_id, job_id, person=person)
        if job.status is JobStatus.CANCELLED:
            return JobView(job)
        self._live(job, "cancelled")
        return await self._change(job, status=JobStatus.CANCELLED, next_run_at=None)

    async def run_now(self, job_id: str) -> JobView:
        """The owner's ``bruce jobs run-now``: the job's next run is now (then its schedule goes on)."""
        job = await self.get(None, job_id)
        self._live(job, "run now")
        return await self._change(job, status=JobStatus.ACTIVE, next_run_at=utc_iso(self._clock.now()))

    async def text_to_send(self, job: JobRecord) -> str:
        """A message-mode job's text as it goes out: links to artifacts that do not exist taken out."""
        return await self._links.text_to_send(job.content)

    async def _refuse_made_up_links(self, content: str, *, job_id: str | None = None) -> None:
        made_up = await self._links.made_up(content)
        if not made_up:
            return
        links = ", ".join(repr(link if len(link) <= 80 else link[:77] + "...") for link in made_up)
        one = len(made_up) == 1
        why = (f"the link{'' if one else 's'} {links} {'points' if one else 'point'} at no saved artifact "
               "(no artifact_save returned it)")
        if job_id is None:
            raise JobError(f"content: {why}; a reminder is sent as written, so write it without that link, or save "
                           "the document with artifact_save first and use the url it returns")
        raise JobError(f"job {job_id}: in its content, {why}; a reminder is sent as written, so cancel this job "
                       "and create a new one without that link")

    def schedule_of(self, job: JobRecord) -> Schedule:
        return stored_schedule(job.schedule_kind, job.schedule_value, job.timezone, job.anchor_at)

    @staticmethod
    def _live(job: JobRecord, verb: str) -> None:
        if job.status not in (JobStatus.ACTIVE, JobStatus.PAUSED):
            raise JobError(f"job {job.id} is {job.status} and cannot be {verb}")

    async def _change(self, job: JobRecord, *, expect: tuple[JobStatus, ...] = (JobStatus.ACTIVE, JobStatus.PAUSED),
                      **changes: Any) -> JobView:
        changes["held_told_at"] = None  # the owner acted on the job: a held run tells them again
        if not await self._jobs.update(job.id, expect=tuple(str(s) for s in expect), **changes):
            raise JobError(f"job {job.id} changed meanwhile; look at proactive_list and try again")
        self._changed(job.id)
        fresh = await self._jobs.get(job.id)
        return JobView(fresh if fresh is not None else replace(job, **changes))


def _choice(value: Any, name: str, kind: type[_E]) -> _E:
    allowed = [member.value for member in kind]
    if value not in allowed:
        shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
        raise JobError(f"{name}: must be one of {', '.join(repr(a) for a in allowed)} (got {shown})")
    return kind(value)


def _content(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise JobError("content: give the text to send (message mode) or the instruction to run (agent mode); "
                       "it must not be empty")
    if len(value) > MAX_CONTENT_CHARS:
        raise JobError(f"content: at most {MAX_CONTENT_CHARS} characters (got {len(value)})")
    return value.strip()


def _dedup_key(conversation_id: str, mode: ExecutionMode, content: str, notify: Notify, args: dict[str, Any]) -> str:
    """The same conversation, schedule (as asked) and content: the same job, inside the window."""
    schedule = {name: args.get(name) for name in (*SCHEDULE_FIELDS, "timezone") if args.get(name) is not None}
    text = json.dumps([conversation_id, str(mode), content, str(notify), schedule], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()

