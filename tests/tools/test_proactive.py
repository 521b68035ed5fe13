"""proactive.create / list / update / cancel, as the model and the user see them: through a chat
turn with the fake LLM, or through the real registry (the many invalid arguments), always
against the real store. The fake clock stands at Wed 2026-12-02 12:00 UTC, 09:00 in São Paulo
(the assistant's zone)."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from zoneinfo import ZoneInfo

import pytest
from jsonschema import Draft202012Validator

from bruce.actions.checks import check_contract
from bruce.clock import utc_iso
from bruce.config.loader import parse_config
from bruce.contracts import Risk, ToolCall, ToolContext, ToolResult
from bruce.errors import ToolFailed
from bruce.jobs.scheduler import no_proactive_tools
from bruce.turns.prompt import DOMAIN_GUIDELINES
from bruce.turns.scope import TurnScope, new_turn_id
from bruce.values import ConversationId, JobStatus
from tests.conftest import T0
from tests.fakes.clock import FakeClock
from tests.fakes.llm_server import Step
from tests.helpers import rows, say
from tools.builtin import builtin_tools
from tools.proactive import NO_SCHEDULER, PROACTIVE_CANCEL, PROACTIVE_CREATE, PROACTIVE_LIST, PROACTIVE_UPDATE

HERE = "test:c1"  # the conversation of say(app, ...)
ELSEWHERE = "test:c2"
ZONE = "(America/Sao_Paulo)"
CONTRACTS = (PROACTIVE_CREATE, PROACTIVE_LIST, PROACTIVE_UPDATE, PROACTIVE_CANCEL)
REMINDER = {"execution_mode": "message", "content": "Call Ana.", "in_seconds": 3600}  # not due while a test runs


async def call(app, name: str, args: dict, *, conversation: str = HERE, tainted: bool = False) -> ToolResult:
    """One call from the model in a chat turn of ``conversation``, through the registry
    (``tainted``: after a web page entered the turn)."""
    scope = TurnScope(new_turn_id(), ConversationId.parse(conversation), "u1", tainted=tainted)
    channel, chat = conversation.split(":", 1)
    await app.store.messages.ensure_conversation(conversation, channel, chat)
    await app.store.messages.start_turn(scope.turn_id, conversation, source="chat", inbound_message_id=None)
    return await app.registry.execute(ToolCall(uuid.uuid4().hex, name, json.dumps(args)), scope)


async def create(app, args: dict | None = None, *, conversation: str = HERE) -> dict:
    result = await call(app, "proactive_create", args or REMINDER, conversation=conversation)
    assert result.ok, result.error
    return result.output


def tool_messages(request: dict) -> list[dict]:
    return [json.loads(m["content"]) for m in request["messages"] if m["role"] == "tool"]


# --- the contracts -------------------------------------------------------------------------------


def test_the_contracts_declare_their_policy():
    assert [c.wire_name for c in CONTRACTS] == ["proactive_create", "proactive_list", "proactive_update",
                                                "proactive_cancel"]
    for contract in CONTRACTS:
        assert check_contract(contract) == [], contract.name
        assert contract.autonomous and not contract.confirmation and not contract.step_up
        assert contract.input_schema["additionalProperties"] is False
        assert not no_proactive_tools(contract)  # never offered to a scheduled agent run
    assert [c.risk for c in CONTRACTS] == [Risk.MEDIUM, Risk.LOW, Risk.MEDIUM, Risk.MEDIUM]
    assert PROACTIVE_CREATE.input_schema["required"] == ["execution_mode", "content"]
    assert set(PROACTIVE_CREATE.input_schema["properties"]) == {
        "execution_mode", "content", "at", "in_seconds", "cron", "every_seconds", "timezone", "notify"}
    assert set(PROACTIVE_UPDATE.input_schema["properties"]) == {
        "job_id", "action", "at", "in_seconds", "cron", "every_seconds", "timezone"}
    assert PROACTIVE_CANCEL.input_schema["required"] == ["job_id"]
    # JobBook returns the job made in the last ten minutes itself, and only while it is live: a registry
    # replay would return a cancelled (or already sent) reminder as if it had just been set
    assert not PROACTIVE_CREATE.idempotent
    assert Draft202012Validator(PROACTIVE_CREATE.input_schema).is_valid(
        {"execution_mode": "agent", "content": "x", "cron": "0 8 * * *", "timezone": "UTC", "notify": "always"})


async def test_the_tools_are_built_in_and_offered_with_the_scheduling_guidance(app, fake_llm):
    fake_llm.add(Step.text("Hi."))
    await say(app, "hello")
    offered = {t["function"]["name"] for t in fake_llm.requests[0]["tools"]}
    assert {"proactive_create", "proactive_list", "proactive_update", "proactive_cancel"} <= offered
    system = fake_llm.requests[0]["messages"][0]["content"]
    assert system.count(DOMAIN_GUIDELINES["proactive"]) == 1
    assert PROACTIVE_CREATE.guideline in system and PROACTIVE_UPDATE.guideline in system


# --- create --------------------------------------------------------------------------------------


async def test_a_reminder_in_two_minutes_from_a_chat_turn(app, fake_llm, channel):
    fake_llm.add(Step.tool_calls(("proactive_create", {"execution_mode": "message", "content": "Call Ana.",
                                                       "in_seconds": 120})),
                 Step.text("I'll remind you at 09:02."))
    await say(app, "remind me in 2 minutes to call Ana")

    (feedback,) = tool_messages(fake_llm.requests[1])
    assert feedback["ok"] is True
    job = feedback["result"]
    assert job == {
        "job_id": job["job_id"], "status": "active", "execution_mode": "message", "content": "Call Ana.",
        "description": f"once, Wed 2026-12-02 09:02 -03 {ZONE}", "next_run": f"Wed 2026-12-02 09:02 -03 {ZONE}",
        "notify": "always", "flagged": None, "untrusted": False, "created": True,
    }
    assert channel.texts() == ["I'll remind you at 09:02."]  # the claim is backed: no correction, no note
    stored = await app.store.jobs.get(job["job_id"])
    assert stored is not None and stored.conversation_id == HERE and stored.status is JobStatus.ACTIVE
    assert stored.next_run_at == utc_iso(T0 + timedelta(minutes=2))
    assert (stored.execution_mode, stored.content, stored.schedule_kind) == ("message", "Call Ana.", "at")
    (audit,) = await rows(app, "SELECT tool_name, status, risk FROM tool_executions")
    assert audit == {"tool_name": "proactive.create", "status": "ok", "risk": "medium"}  # no approval asked


async def test_agent_mode_and_the_schedule_kinds_are_stored(app):
    briefing = await create(app, {"execution_mode": "agent", "content": "Summarize the weather in Lisbon.",
                                  "cron": "0 8 * * 1-5", "notify": "if_actionable"})
    assert briefing["execution_mode"] == "agent" and briefing["notify"] == "if_actionable"
    assert briefing["description"] == "At 08:00, Monday through Friday (America/Sao_Paulo)"
    assert briefing["next_run"] == f"Thu 2026-12-03 08:00 -03 {ZONE}"  # today's 08:00 has passed
    stored = await app.store.jobs.get(briefing["job_id"])
    assert stored is not None
    assert (stored.execution_mode, stored.content, stored.notify, stored.schedule_kind, stored.schedule_value) == (
        "agent", "Summarize the weather in Lisbon.", "if_actionable", "cron", "0 8 * * 1-5")

    lisbon = await create(app, {"execution_mode": "message", "content": "Flight.", "at": "2026-12-08T09:00:00",
                                "timezone": "Europe/Lisbon"})
    assert lisbon["next_run"] == "Tue 2026-12-08 09:00 WET (Europe/Lisbon)"  # no offset: local time there
    hourly = await create(app, {"execution_mode": "message", "content": "Stretch.", "every_seconds": 3600})
    assert hourly["description"] == f"every 1 hour, from Wed 2026-12-02 10:00 -03 {ZONE}"
    quiet = await create(app, {"execution_mode": "message", "content": "Water.", "in_seconds": 600,
                               "notify": "if_actionable"})
    assert quiet["notify"] == "always"  # notify is for agent runs; a message is always sent
    assert len(await app.store.jobs.for_conversation(HERE)) == 4


async def test_the_same_request_within_ten_minutes_returns_the_same_job(app, clock):
    first = await create(app)
    assert first["created"] is True
    clock.advance(minutes=9)
    again = await create(app)
    assert again["job_id"] == first["job_id"] and again["created"] is False
    assert [j.id for j in await app.store.jobs.for_conversation(HERE)] == [first["job_id"]]

    clock.advance(minutes=1, seconds=1)  # ten minutes and a second after the first
    later = await create(app)
    assert later["job_id"] != first["job_id"] and later["created"] is True
    assert len(await app.store.jobs.for_conversation(HERE)) == 2


async def test_a_reminder_cancelled_or_sent_is_set_again_by_the_same_request(app):
    first = await create(app)
    await call(app, "proactive_cancel", {"job_id": first["job_id"]})
    second = await create(app)  # "remind me after all"
    assert second["job_id"] != first["job_id"] and second["created"] is True and second["status"] == "active"

    assert await app.store.jobs.update(second["job_id"], status=JobStatus.DONE, next_run_at=None)  # it was sent
    third = await create(app)  # "remind me again"
    assert third["job_id"] not in (first["job_id"], second["job_id"]) and third["created"] is True
    assert [j.id for j in await app.store.jobs.for_conversation(HERE)] == [third["job_id"]]


PAST = f"at: Wed 2026-12-02 08:59 -03 {ZONE} is in the past (now it is Wed 2026-12-02 09:00 -03 {ZONE}); give a future time"
SCHEMA = "arguments do not match the schema of proactive_create: "


@pytest.mark.parametrize(
    ("args", "error"),
    [
        pytest.param({"at": "2026-12-02T08:59:00"}, PAST, id="at-in-the-past"),
        pytest.param({"at": "2026-12-02T11:59:00Z"}, PAST, id="at-in-the-past-with-offset"),
        pytest.param({"at": "next tuesday"},
                     "at: 'next tuesday' is not an ISO 8601 date-time such as 2026-12-08T09:00:00", id="at-not-iso"),
        pytest.param({"cron": "61 * * * *"}, "cron: '61 * * * *' is not a valid 5-field cron expression", id="cron-bad"),
        pytest.param({"cron": "every day"}, "cron: 'every day' is not a valid 5-field cron expression "
                     "(minute hour day-of-month month day-of-week, e.g. '0 8 * * 1-5'): '2 fields, expected 5'",
                     id="cron-not-cron"),
        pytest.param({"cron": "0 0 30 2 *"}, "cron: '0 0 30 2 *' never runs", id="cron-never"),
        pytest.param({"in_seconds": 60, "timezone": "Mars/Olympus"},
                     "timezone: unknown zone 'Mars/Olympus'; use an IANA name such as America/Sao_Paulo",
                     id="unknown-timezone"),
        pytest.param({"in_seconds": 60, "content": ""}, "content: give the text to send (message mode) or the "
                     "instruction to run (agent mode); it must not be empty", id="content-empty"),
        pytest.param({"in_seconds": 60, "content": " \n "}, "content: give the text to send", id="content-blank"),
        pytest.param({"in_seconds": 60, "content": "x" * 4001}, "content: at most 4000 characters (got 4001)",
                     id="content-too-long"),
        pytest.param({}, "give exactly one of at, in_seconds, cron and every_seconds (got none)", id="no-schedule"),
        pytest.param({"in_seconds": 60, "cron": "0 8 * * *"},
                     "give exactly one of at, in_seconds, cron and every_seconds (got in_seconds, cron)",
                     id="two-schedules"),
        pytest.param({"every_seconds": 59}, "every_seconds: must be at least 60 (got 59)", id="every-under-60"),
        pytest.param({"in_seconds": 0}, "in_seconds: must be at least 1 (got 0)", id="in-seconds-zero"),
        pytest.param({"in_seconds": -30}, "in_seconds: must be at least 1 (got -30)", id="in-seconds-negative"),
        pytest.param({"in_seconds": 400_000_000}, "in_seconds: at most ten years (got 400000000 seconds)",
                     id="in-seconds-huge"),
        pytest.param({"in_seconds": 1.5}, SCHEMA + "in_seconds: 1.5 is not of type 'integer'", id="in-seconds-float"),
        pytest.param({"in_seconds": "120"}, SCHEMA + "in_seconds: '120' is not of type 'integer'",
                     id="in-seconds-text"),
        pytest.param({"in_seconds": 60, "execution_mode": "sms"},
                     SCHEMA + "execution_mode: 'sms' is not one of ['message', 'agent']", id="mode-bad"),
        pytest.param({"in_seconds": 60, "execution_mode": None},
                     SCHEMA + "execution_mode: None is not of type 'string'", id="mode-null"),
        pytest.param({"in_seconds": 60, "execution_mode": "agent", "notify": "never"},
                     SCHEMA + "notify: 'never' is not one of ['always', 'if_actionable']", id="notify-bad"),
        pytest.param({"in_seconds": 60, "when": "soon"},
                     SCHEMA + "Additional properties are not allowed ('when' was unexpected)", id="unknown-argument"),
    ],
)
async def test_each_invalid_argument_is_named_for_the_model(app, args, error):
    full = {"execution_mode": "message", "content": "Call Ana.", **args}
    result = await call(app, "proactive_create", full)
    assert result.status == "invalid_args"
    assert result.error.startswith(error)
    assert result.for_model() == {"ok": False, "status": "invalid_args", "error": result.error}
    assert await app.store.jobs.for_conversation(HERE) == []
    (audit,) = await rows(app, "SELECT status, error FROM tool_executions")
    assert audit == {"status": "invalid_args", "error": result.error}


async def test_a_required_argument_left_out(app):
    result = await call(app, "proactive_create", {"content": "Call Ana.", "in_seconds": 60})
    assert result.status == "invalid_args" and result.error == SCHEMA + "'execution_mode' is a required property"


async def test_a_time_in_the_past_is_explained_to_the_model_in_a_chat_turn(app, fake_llm, channel):
    fake_llm.add(Step.tool_calls(("proactive_create", {"execution_mode": "message", "content": "Call Ana.",
                                                       "at": "2026-12-02T08:59:00"})),
                 Step.text("08:59 has already passed today. Should it be tomorrow?"))
    await say(app, "remind me at 8:59 to call Ana")
    (feedback,) = tool_messages(fake_llm.requests[1])
    assert feedback == {"ok": False, "status": "invalid_args", "error": PAST}
    assert channel.texts() == ["08:59 has already passed today. Should it be tomorrow?"]
    assert await app.store.jobs.for_conversation(HERE) == []


# --- list ----------------------------------------------------------------------------------------


async def test_list_shows_this_conversations_live_jobs_only(app):
    later = await create(app)
    sooner = await create(app, {"execution_mode": "agent", "content": "Check the oven.", "in_seconds": 900})
    gone = await create(app, {"execution_mode": "message", "content": "Gone.", "in_seconds": 600})
    await call(app, "proactive_cancel", {"job_id": gone["job_id"]})
    theirs = await create(app, {"execution_mode": "message", "content": "Their reminder.", "in_seconds": 60},
                          conversation=ELSEWHERE)

    mine = await call(app, "proactive_list", {})
    assert mine.ok
    without_created = [{k: v for k, v in j.items() if k != "created"} for j in (sooner, later)]
    assert mine.output == {"jobs": without_created}  # by next run; the cancelled one is not live
    other = await call(app, "proactive_list", {}, conversation=ELSEWHERE)
    assert [j["job_id"] for j in other.output["jobs"]] == [theirs["job_id"]]
    empty = await call(app, "proactive_list", {}, conversation="test:c3")
    assert empty.output == {"jobs": []}


async def test_the_model_lists_then_cancels_in_one_turn(app, fake_llm, channel):
    job = await create(app)
    fake_llm.add(Step.tool_calls(("proactive_list", {})),
                 Step.tool_calls(("proactive_cancel", {"job_id": job["job_id"]})),
                 Step.text("Your reminder to call Ana is cancelled."))
    await say(app, "forget the Ana reminder")
    listed, cancelled = tool_messages(fake_llm.requests[2])
    assert [j["job_id"] for j in listed["result"]["jobs"]] == [job["job_id"]]
    assert cancelled["ok"] is True and cancelled["result"]["status"] == "cancelled"
    assert cancelled["result"]["next_run"] is None
    assert channel.texts() == ["Your reminder to call Ana is cancelled."]
    stored = await app.store.jobs.get(job["job_id"])
    assert stored is not None and stored.status is JobStatus.CANCELLED and stored.next_run_at is None


# --- another conversation's job does not exist ----------------------------------------------------


async def test_another_conversation_can_neither_see_nor_change_a_job(app):
    job = await create(app)
    before = await app.store.jobs.get(job["job_id"])

    def unknown(job_id: str) -> str:
        return f"job_id: there is no job {job_id!r} in this conversation; proactive_list shows its jobs"

    assert (await call(app, "proactive_list", {}, conversation=ELSEWHERE)).output == {"jobs": []}
    attempts = [
        ("proactive_update", {"job_id": job["job_id"], "action": "pause"}),
        ("proactive_update", {"job_id": job["job_id"], "action": "resume"}),
        ("proactive_update", {"job_id": job["job_id"], "action": "reschedule", "in_seconds": 60}),
        ("proactive_cancel", {"job_id": job["job_id"]}),
    ]
    for name, args in attempts:
        result = await call(app, name, args, conversation=ELSEWHERE)
        assert (result.status, result.error) == ("invalid_args", unknown(job["job_id"])), name
    # exactly what a made-up id gets: nothing tells that the job exists
    made_up = await call(app, "proactive_cancel", {"job_id": "0123456789"}, conversation=ELSEWHERE)
    assert made_up.error == unknown("0123456789")
    assert await app.store.jobs.get(job["job_id"]) == before


# --- update --------------------------------------------------------------------------------------


async def test_pause_resume_and_reschedule(app):
    job = await create(app)
    job_id = job["job_id"]
    paused = await call(app, "proactive_update", {"job_id": job_id, "action": "pause"})
    assert paused.ok and paused.output["status"] == "paused" and paused.output["next_run"] == job["next_run"]
    assert (await app.store.jobs.get(job_id)).status is JobStatus.PAUSED
    listed = await call(app, "proactive_list", {})
    assert [(j["job_id"], j["status"]) for j in listed.output["jobs"]] == [(job_id, "paused")]
    twice = await call(app, "proactive_update", {"job_id": job_id.upper(), "action": "pause"})
    assert twice.ok and twice.output["status"] == "paused"  # already so: nothing to do

    resumed = await call(app, "proactive_update", {"job_id": job_id, "action": "resume"})
    assert resumed.ok and resumed.output["status"] == "active" and resumed.output["next_run"] == job["next_run"]
    stored = await app.store.jobs.get(job_id)
    assert stored.status is JobStatus.ACTIVE and stored.next_run_at == utc_iso(T0 + timedelta(hours=1))

    moved = await call(app, "proactive_update", {"job_id": job_id, "action": "reschedule", "cron": "30 7 * * *",
                                                 "timezone": "Europe/Lisbon"})
    assert moved.ok
    assert moved.output == {
        "job_id": job_id, "status": "active", "execution_mode": "message", "content": "Call Ana.",
        "description": "At 07:30 (Europe/Lisbon)", "next_run": "Thu 2026-12-03 07:30 WET (Europe/Lisbon)",
        "notify": "always", "flagged": None, "untrusted": False,
    }
    stored = await app.store.jobs.get(job_id)
    assert (stored.schedule_kind, stored.schedule_value, stored.timezone) == ("cron", "30 7 * * *", "Europe/Lisbon")
    assert stored.next_run_at == "2026-12-03T07:30:00.000000+00:00"

    back = await call(app, "proactive_update", {"job_id": job_id, "action": "reschedule",
                                                "at": "2026-12-04T18:00:00"})
    assert back.output["next_run"] == "Fri 2026-12-04 18:00 WET (Europe/Lisbon)"  # the job's zone stays


@pytest.mark.parametrize(
    ("args", "error"),
    [
        pytest.param({"action": "reschedule"},
                     "reschedule: give exactly one of at, in_seconds, cron and every_seconds", id="no-schedule"),
        pytest.param({"action": "reschedule", "timezone": "UTC"},
                     "reschedule: give exactly one of at, in_seconds, cron and every_seconds", id="only-timezone"),
        pytest.param({"action": "reschedule", "at": "2026-12-09T10:00:00", "in_seconds": 60},
                     "give exactly one of at, in_seconds, cron and every_seconds (got at, in_seconds)",
                     id="two-schedules"),
        pytest.param({"action": "reschedule", "every_seconds": 30}, "every_seconds: must be at least 60 (got 30)",
                     id="every-under-60"),
        pytest.param({"action": "reschedule", "cron": "* *"}, "cron: '* *' is not a valid 5-field cron expression",
                     id="cron-bad"),
        pytest.param({"action": "reschedule", "in_seconds": 60, "timezone": "Atlantis/Capital"},
                     "timezone: unknown zone 'Atlantis/Capital'", id="unknown-timezone"),
        pytest.param({"action": "pause", "in_seconds": 60},
                     "in_seconds: only with action 'reschedule' (the action is 'pause')", id="schedule-with-pause"),
        pytest.param({"action": "delete"}, "arguments do not match the schema of proactive_update: action: 'delete' "
                     "is not one of ['pause', 'resume', 'reschedule']", id="action-bad"),
        pytest.param({"action": "pause", "job_id": " "}, "job_id: give the id of a job, as proactive_list shows it",
                     id="job-id-blank"),
    ],
)
async def test_invalid_updates_are_named_and_change_nothing(app, args, error):
    job = await create(app)
    before = await app.store.jobs.get(job["job_id"])
    result = await call(app, "proactive_update", {"job_id": job["job_id"], **args})
    assert result.status == "invalid_args" and result.error.startswith(error)
    assert await app.store.jobs.get(job["job_id"]) == before


async def test_a_one_off_whose_time_passed_while_paused_must_be_rescheduled(app, clock):
    job = await create(app, {"execution_mode": "message", "content": "Call Ana.", "in_seconds": 120})
    await call(app, "proactive_update", {"job_id": job["job_id"], "action": "pause"})
    clock.advance(minutes=5)
    result = await call(app, "proactive_update", {"job_id": job["job_id"], "action": "resume"})
    assert result.status == "invalid_args"
    assert result.error == (f"job {job['job_id']}: its time (Wed 2026-12-02 09:02 -03 {ZONE}) passed while it was "
                            "paused; reschedule it with a new time instead")
    moved = await call(app, "proactive_update", {"job_id": job["job_id"], "action": "reschedule", "in_seconds": 600})
    assert moved.output["status"] == "paused" and moved.output["next_run"] == f"Wed 2026-12-02 09:15 -03 {ZONE}"
    resumed = await call(app, "proactive_update", {"job_id": job["job_id"], "action": "resume"})
    assert resumed.output["status"] == "active"


# --- cancel --------------------------------------------------------------------------------------


async def test_cancel_ends_a_job_for_good(app):
    job = await create(app, {"execution_mode": "message", "content": "Stretch.", "every_seconds": 3600})
    cancelled = await call(app, "proactive_cancel", {"job_id": job["job_id"]})
    assert cancelled.ok
    assert cancelled.output == {**{k: v for k, v in job.items() if k != "created"}, "status": "cancelled",
                                "next_run": None}
    stored = await app.store.jobs.get(job["job_id"])
    assert stored.status is JobStatus.CANCELLED and stored.next_run_at is None
    assert await app.store.jobs.for_conversation(HERE) == []
    assert [j.id for j in await app.store.jobs.for_conversation(HERE, live_only=False)] == [job["job_id"]]
    assert (await call(app, "proactive_list", {})).output == {"jobs": []}

    again = await call(app, "proactive_cancel", {"job_id": job["job_id"]})
    assert again.ok and again.output["status"] == "cancelled"  # asking twice is harmless
    for action in ("pause", "resume", "reschedule"):
        result = await call(app, "proactive_update", {"job_id": job["job_id"], "action": action, "in_seconds": 60}
                            if action == "reschedule" else {"job_id": job["job_id"], "action": action})
        assert result.status == "invalid_args"
        verb = {"pause": "paused", "resume": "resumed", "reschedule": "rescheduled"}[action]
        assert result.error == f"job {job['job_id']} is cancelled and cannot be {verb}"
    missing = await call(app, "proactive_cancel", {})
    assert missing.status == "invalid_args" and "'job_id' is a required property" in missing.error


# --- where the tools cannot work -----------------------------------------------------------------


def ctx(conversation_id: str | None = HERE) -> ToolContext:
    where = ConversationId.parse(conversation_id) if conversation_id is not None else None
    return ToolContext(clock=FakeClock(), zone=ZoneInfo("UTC"), conversation_id=where, turn_id=None)


async def test_without_a_scheduler_the_tools_say_so():
    tools = {c.name: h for c, h in builtin_tools(parse_config({}, environ={}), store=None)}
    calls = [("proactive.create", REMINDER), ("proactive.list", {}),
             ("proactive.update", {"job_id": "x", "action": "pause"}), ("proactive.cancel", {"job_id": "x"})]
    for name, args in calls:
        with pytest.raises(ToolFailed) as info:
            await tools[name](args, ctx())
        assert str(info.value) == NO_SCHEDULER == "the scheduler is not available in this process"
        assert info.value.code == "unavailable"


async def test_outside_a_conversation_the_tools_refuse(app):
    tools = {c.name: h for c, h in builtin_tools(app.config, store=app.store, jobs=app.jobs)}
    for name in ("proactive.create", "proactive.list"):
        with pytest.raises(ToolFailed) as info:
            await tools[name](REMINDER if name == "proactive.create" else {}, ctx(None))
        assert info.value.code == "unavailable" and "conversation" in str(info.value)
    assert await app.store.jobs.all() == []


# --- after untrusted text entered the turn -------------------------------------------------------


AGENT = {"execution_mode": "agent", "content": "Summarize the news.", "every_seconds": 3600}


async def test_in_a_tainted_turn_resuming_or_rescheduling_an_agent_job_asks_with_the_job_shown(app, channel):
    job = await create(app, AGENT)
    paused = await call(app, "proactive_update", {"job_id": job["job_id"], "action": "pause"}, tainted=True)
    assert paused.status == "awaiting_confirmation"  # the owner's own job: a page does not stop it silently
    await call(app, "proactive_update", {"job_id": job["job_id"], "action": "pause"})
    resumed = await call(app, "proactive_update", {"job_id": job["job_id"], "action": "resume"}, tainted=True)
    assert resumed.status == "awaiting_confirmation"
    moved = await call(app, "proactive_update", {"job_id": job["job_id"], "action": "reschedule", "every_seconds": 60},
                       tainted=True)
    assert moved.status == "awaiting_confirmation"
    (_, resume_row, move_row) = await rows(app, "SELECT tool_name, preview, untrusted FROM pending_confirmations"
                                                " ORDER BY created_at, rowid")
    assert "Summarize the news." in json.loads(move_row["preview"]) and "every 1 minute" in json.loads(move_row["preview"])
    assert resume_row["untrusted"] == 1 == move_row["untrusted"]
    stored = await app.store.jobs.get(job["job_id"])
    assert stored.status is JobStatus.PAUSED and not stored.untrusted  # nothing changed before the yes


async def test_in_a_tainted_turn_a_message_job_changes_without_asking_and_becomes_untrusted(app):
    job = await create(app)
    moved = await call(app, "proactive_update", {"job_id": job["job_id"], "action": "reschedule", "in_seconds": 60},
                       tainted=True)
    assert moved.ok and moved.output["untrusted"] is True
    made = await call(app, "proactive_create", {**REMINDER, "content": "Water the plants."}, tainted=True)
    assert made.ok and made.output["untrusted"] is True
    listed = await call(app, "proactive_list", {})
    assert {j["untrusted"] for j in listed.output["jobs"]} == {True}


async def test_an_invalid_agent_job_in_a_tainted_turn_is_refused_without_asking(app):
    bad = await call(app, "proactive_create", {**AGENT, "every_seconds": 5}, tainted=True)
    assert bad.status == "invalid_args" and "every_seconds" in (bad.error or "")
    assert await rows(app, "SELECT id FROM pending_confirmations") == []
