"""proactive.create / list / update / cancel: the model's hands on the conversation's reminders
and scheduled jobs.

Every call is bound to the conversation it comes from (``ctx.conversation_id``) and to the
person making it (``ctx.person``): a job of another conversation, or another person's job in a
group chat, does not exist for it (its id is reported as unknown). The work, and the
checking of every argument, is ``JobBook``'s (``bruce/jobs/book.py``, ``bruce/jobs/schedule.py``); its
``JobError`` and ``ScheduleError`` become ``ToolInputInvalid`` here, so the model gets an
``invalid_args`` result whose text names the argument and what to do. The JSON schemas only
give types (and the fixed choices), so that those messages are the ones the model reads.

``proactive.create`` is not idempotent at the registry: ``JobBook`` itself returns the job
made in the last ten minutes for the same request (``created: false``), but only while that
job is live. A registry replay would hand back the first result even after the job was
cancelled or had fired ("remind me again in 2 minutes"), saying a reminder exists that does not.

Trust (issue 30): once untrusted text entered the turn (``ctx.untrusted``: a web page, a search
result, an MCP result, or an MCP client's call), a job made, resumed or rescheduled is stored
``untrusted`` and its runs start tainted; making, resuming or rescheduling an *agent-mode* job then
needs the owner's yes first (``NeedsConfirmation``, with the job's content and schedule as the
preview). Message-mode jobs do not ask: their text is sent as written, no tool runs. Pausing or
cancelling a job made in a clean turn (not ``untrusted``) asks too, showing the job: a page must
not silently stop the owner's own reminder (as ``memory.forget`` asks, so it cannot drop a fact).

Failure codes: ``invalid_args``; ``unavailable`` (no scheduler in this process, e.g. the tool
list of ``bruce tools``, or a call outside a conversation).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from bruce.contracts import Risk, ToolContext, ToolContract, ToolHandler
from bruce.errors import NeedsConfirmation, ToolFailed, ToolInputInvalid
from bruce.jobs.book import MAX_CONTENT_CHARS, JobBook, JobError, JobView
from bruce.jobs.schedule import SCHEDULE_FIELDS, ScheduleError
from bruce.values import ConversationId, ExecutionMode, JobStatus, Notify

__all__ = ["PROACTIVE_CREATE", "PROACTIVE_LIST", "PROACTIVE_UPDATE", "PROACTIVE_CANCEL", "proactive_tools",
           "ACTIONS", "NO_SCHEDULER"]

ACTIONS = ("pause", "resume", "reschedule")
_MODES = [m.value for m in ExecutionMode]
_NOTIFY = [n.value for n in Notify]
NO_SCHEDULER = "the scheduler is not available in this process"
_RESCHEDULE_FIELDS = (*SCHEDULE_FIELDS, "timezone")

_SCHEDULE_PROPERTIES: dict[str, Any] = {
    "at": {"type": "string",
           "description": "One run at this ISO 8601 date-time, e.g. 2026-12-08T09:00:00; without an offset it is "
                          "local time in 'timezone'. Must be in the future."},
    "in_seconds": {"type": "integer",
                   "description": "One run this many seconds from now (at least 1), for relative times: "
                                  "'in 2 minutes' is 120. Bruce computes the time; do not compute 'at' yourself."},
    "cron": {"type": "string",
             "description": "Recurring, a standard 5-field cron expression (minute hour day-of-month month "
                            "day-of-week, Sunday = 0) in 'timezone', e.g. '0 8 * * 1-5' = weekdays at 08:00."},
    "every_seconds": {"type": "integer",
                      "description": "Recurring every this many seconds (at least 60), the first run that long "
                                     "from now."},
    "timezone": {"type": "string",
                 "description": "IANA timezone for 'at' and 'cron', e.g. Europe/Lisbon; default: the user's."},
}

_JOB: dict[str, Any] = {
    "type": "object",
    "properties": {
        "job_id": {"type": "string"},
        "status": {"type": "string", "enum": [s.value for s in JobStatus]},
        "execution_mode": {"type": "string", "enum": _MODES},
        "content": {"type": "string"},
        "description": {"type": "string"},
        "next_run": {"type": ["string", "null"], "description": "local time, e.g. Wed 2026-12-02 09:02 -03 (...)"},
        "notify": {"type": "string", "enum": _NOTIFY},
        "flagged": {"type": ["string", "null"]},
        "untrusted": {"type": "boolean", "description": "made or changed after untrusted text entered a turn"},
    },
    "required": ["job_id", "status", "execution_mode", "content", "description", "next_run"],
}

_FAILURES = ("invalid_args", "unavailable")

PROACTIVE_CREATE = ToolContract(
    name="proactive.create",
    activity="Scheduling a job",
    description=(
        "Schedule a reminder or a recurring job in this conversation. execution_mode 'message' sends 'content' "
        "as it is when due (a reminder); 'agent' runs 'content' as an instruction for you, with tools, when due "
        "and sends your answer. Give exactly one of at, in_seconds (one run) or cron, every_seconds (recurring). "
        "Returns job_id, next_run (local time) and a description; the same request again within 10 minutes "
        "returns the same job (created: false)."
    ),
    category="schedule",
    risk=Risk.MEDIUM,
    autonomous=True,
    confirmation=False,
    idempotent=False,  # JobBook returns the live job made in the last 10 minutes (see the module docstring)
    input_schema={
        "type": "object",
        "properties": {
            "execution_mode": {"type": "string", "enum": _MODES,
                               "description": "'message': send content as it is; 'agent': carry content out "
                                              "as an instruction when due."},
            "content": {"type": "string",
                        "description": "message: the text to send, e.g. 'Call Ana.'; agent: the instruction, e.g. "
                                       f"'Summarize the weather in Lisbon.' At most {MAX_CONTENT_CHARS} characters."},
            **_SCHEDULE_PROPERTIES,
            "notify": {"type": "string", "enum": _NOTIFY,
                       "description": "Agent mode only: 'if_actionable' sends nothing when a run has nothing to "
                                      "report; default 'always'."},
        },
        "required": ["execution_mode", "content"],
        "additionalProperties": False,
    },
    output_schema={**_JOB, "properties": {**_JOB["properties"], "created": {"type": "boolean"}},
                   "required": [*_JOB["required"], "created"]},
    side_effects=(
        "stores one proactive job for this conversation; when due, the scheduler sends its message or runs it "
        "as an agent turn, once per run. The same request within 10 minutes returns the job already made"
    ),
    audit_event="proactive.created",
    failure_modes=_FAILURES,
    timeout_s=10.0,
    guideline=(
        "Reminders: for a relative time ('in 10 minutes') give in_seconds, not a computed 'at'; tell the user "
        "the next_run the tool returns."
    ),
)

PROACTIVE_LIST = ToolContract(
    name="proactive.list",
    activity="Looking at your jobs",
    description="The reminders and scheduled jobs of this conversation that are still live (active or paused), "
                "with their job_id, schedule and next run.",
    category="schedule",
    risk=Risk.LOW,
    autonomous=True,
    confirmation=False,
    input_schema={"type": "object", "properties": {}, "additionalProperties": False},
    output_schema={"type": "object", "properties": {"jobs": {"type": "array", "items": _JOB}}, "required": ["jobs"]},
    side_effects="none: reads this conversation's jobs",
    audit_event="proactive.listed",
    failure_modes=_FAILURES,
    timeout_s=10.0,
)

PROACTIVE_UPDATE = ToolContract(
    name="proactive.update",
    activity="Changing a job",
    description=(
        "Pause, resume or reschedule one of this conversation's jobs (its job_id from proactive_list). "
        "reschedule: give exactly one of at, in_seconds, cron, every_seconds (and timezone if needed); the "
        "new schedule replaces the old one. Returns the job."
    ),
    category="schedule",
    risk=Risk.MEDIUM,
    autonomous=True,
    confirmation=False,
    input_schema={
        "type": "object",
        "properties": {
            "job_id": {"type": "string", "description": "The job's id, as proactive_list shows it."},
            "action": {"type": "string", "enum": list(ACTIONS)},
            **_SCHEDULE_PROPERTIES,
        },
        "required": ["job_id", "action"],
        "additionalProperties": False,
    },
    output_schema=_JOB,
    side_effects="changes one job of this conversation: paused jobs do not run until resumed; a rescheduled job "
                 "runs on its new schedule only",
    audit_event="proactive.updated",
    failure_modes=_FAILURES,
    timeout_s=10.0,
    guideline="Scheduled jobs: to change or cancel one, take its job_id from proactive_list; never guess an id.",
)

PROACTIVE_CANCEL = ToolContract(
    name="proactive.cancel",
    activity="Cancelling a job",
    description="Cancel one of this conversation's jobs for good (its job_id from proactive_list). Returns the job.",
    category="schedule",
    risk=Risk.MEDIUM,
    autonomous=True,
    confirmation=False,
    input_schema={
        "type": "object",
        "properties": {"job_id": {"type": "string", "description": "The job's id, as proactive_list shows it."}},
        "required": ["job_id"],
        "additionalProperties": False,
    },
    output_schema=_JOB,
    side_effects="cancels one job of this conversation: it never runs again (a new one must be created)",
    audit_event="proactive.cancelled",
    failure_modes=_FAILURES,
    timeout_s=10.0,
)


@contextmanager
def _for_the_model() -> Iterator[None]:
    """JobBook's and the schedule's refusals, as invalid arguments the model can fix."""
    try:
        yield
    except (JobError, ScheduleError) as exc:
        raise ToolInputInvalid(str(exc)) from None


class _Proactive:
    def __init__(self, jobs: JobBook | None) -> None:
        self._jobs = jobs

    def _where(self, ctx: ToolContext) -> tuple[JobBook, ConversationId]:
        if self._jobs is None:
            raise ToolFailed(NO_SCHEDULER, code="unavailable")
        if ctx.conversation_id is None:
            raise ToolFailed("proactive jobs belong to a conversation, and this call has none", code="unavailable")
        return self._jobs, ctx.conversation_id

    async def create(self, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        jobs, conversation = self._where(ctx)
        with _for_the_model():
            if _asks(ctx) and args.get("execution_mode") == ExecutionMode.AGENT:
                draft = await jobs.draft(conversation, args)
                raise NeedsConfirmation(draft.preview(_WHY.format(what="make a new agent job")))
            view = await jobs.create(conversation, args, person=ctx.person, untrusted=ctx.untrusted)
        return {**view.as_dict(), "created": view.created}

    async def list(self, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        jobs, conversation = self._where(ctx)
        return {"jobs": [view.as_dict() for view in await jobs.list(conversation, person=ctx.person)]}

    async def update(self, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        jobs, conversation = self._where(ctx)
        action = args.get("action")
        if action not in ACTIONS:
            raise ToolInputInvalid(f"action: must be one of {', '.join(repr(a) for a in ACTIONS)}")
        schedule = {name: args[name] for name in _RESCHEDULE_FIELDS if args.get(name) is not None}
        if action != "reschedule" and schedule:
            raise ToolInputInvalid(f"{', '.join(schedule)}: only with action 'reschedule' (the action is {action!r})")
        job_id = args.get("job_id")
        with _for_the_model():
            view: JobView
            if action == "pause":
                if _asks(ctx):
                    await _ask_to_stop(jobs, conversation, job_id, "pause", ctx.person)
                view = await jobs.pause(conversation, job_id, person=ctx.person)
                return view.as_dict()
            if _asks(ctx):
                await _ask_to_change(jobs, conversation, job_id, action, schedule, ctx.person)
            if action == "resume":
                view = await jobs.resume(conversation, job_id, person=ctx.person, untrusted=ctx.untrusted)
            else:
                view = await jobs.reschedule(conversation, job_id, schedule, person=ctx.person, untrusted=ctx.untrusted)
        return view.as_dict()

    async def cancel(self, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        jobs, conversation = self._where(ctx)
        with _for_the_model():
            if _asks(ctx):
                await _ask_to_stop(jobs, conversation, args.get("job_id"), "cancel", ctx.person)
            view = await jobs.cancel(conversation, args.get("job_id"), person=ctx.person)
        return view.as_dict()


_WHY = ("After untrusted text (a page, a search result, an MCP result or client) entered this turn"
        " (or an earlier one of this conversation since /new), the model "
        "asks to {what}. Approve only if you asked for it; it is stored as untrusted.")


def _asks(ctx: ToolContext) -> bool:
    """Untrusted text is in the turn and nobody said yes to this call yet."""
    return ctx.untrusted and not ctx.approved


async def _ask_to_change(jobs: JobBook, conversation: ConversationId, job_id: Any, action: str,
                         schedule: dict[str, Any], person: str) -> None:
    """Resuming a paused agent job, or rescheduling one, in a tainted turn needs the owner's yes:
    ``NeedsConfirmation`` with the job as it would run (message-mode jobs go ahead)."""
    job = await jobs.get(conversation, job_id, person=person)
    if job.execution_mode is not ExecutionMode.AGENT or (action == "resume" and job.status is JobStatus.ACTIVE):
        return
    planned = await jobs.planned(conversation, job_id, action, schedule, person=person)
    raise NeedsConfirmation(planned.preview(_WHY.format(what=f"{action} agent job {job.id}")))


_WHY_STOP = ("After untrusted text (a page, a search result, an MCP result or client) entered this turn"
             " (or an earlier one of this conversation since /new), the model "
             "asks to {what}, a job made in a turn without untrusted text. Approve only if you asked for it.")


async def _ask_to_stop(jobs: JobBook, conversation: ConversationId, job_id: Any, action: str, person: str) -> None:
    """Pausing or cancelling a live job that was made in a clean turn (not ``untrusted``), in a
    tainted turn, needs the owner's yes: a page must not silently stop the owner's own reminder.
    A job made after untrusted text is stopped as asked (stopping runs nothing)."""
    job = await jobs.get(conversation, job_id, person=person)
    stopped = JobStatus.PAUSED if action == "pause" else JobStatus.CANCELLED
    if job.untrusted or job.status is stopped or job.status not in (JobStatus.ACTIVE, JobStatus.PAUSED):
        return  # nothing of the owner's would stop (errors, such as a finished job, come from the book)
    raise NeedsConfirmation(JobView(job).preview(_WHY_STOP.format(what=f"{action} job {job.id}")))


def proactive_tools(jobs: JobBook | None) -> list[tuple[ToolContract, ToolHandler]]:
    """The four proactive tools, working on ``jobs`` (None: they answer that there is no scheduler)."""
    tools = _Proactive(jobs)
    return [(PROACTIVE_CREATE, tools.create), (PROACTIVE_LIST, tools.list), (PROACTIVE_UPDATE, tools.update),
            (PROACTIVE_CANCEL, tools.cancel)]
