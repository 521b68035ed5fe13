"""The session's taint and its senders, read the fast way (schema v18), agree with the simple reads.

``AuditStore.answered_turns`` (behind ``carried_taint``) starts from the turns that can carry text
from outside and ``MessageStore.turn_view`` finds the senders one index step each. Missing a taint
lets a web page steer the owner's tools, so random but realistic histories, made through the store's
own API (several chats interleaved, tool calls ours and from outside, with and without an output,
documents read or not, photos, runs of trusted and untrusted jobs, approved actions, failed and
interrupted turns, turns answered after a ``/new`` that came while they ran, summaries), are read
both ways at many points, and the answers must be the same:

- the reference for the taint is the read of f09fa1c (every answered turn of the session with the
  tools that returned an output; its SQL copied below) and, independently, the same semantics in
  plain Python over whole tables; both go through today's ``carried_taint`` rules (only the last
  ``SOURCE_TURNS`` turns that called tools from outside give sources);
- the reference for the senders is f09fa1c's: the distinct senders of the conversation's inbound
  messages since the session's start, or since its first message once it has a summary.
"""

from __future__ import annotations

import json
import random
import sqlite3
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bruce.records import JobRecord, ToolExecutionRecord
from bruce.store import Store
from bruce.turns.carried import SOURCE_TURNS, carried_taint
from bruce.values import (
    ExecutionMode,
    JobStatus,
    MessageKind,
    MessageStatus,
    Notify,
    PayloadKind,
    ToolStatus,
    TurnSource,
    TurnStatus,
)
from tests.fakes.clock import FakeClock

SEEDS = range(30)  # histories of up to 40 events each
LONG_SEEDS = range(100, 104)  # longer, mostly pages read in one chat: the SOURCE_TURNS cap comes into play
CONVERSATIONS = ("test:1", "test:2", "telegram:42")
QUIET = "test:idle"  # a conversation with no message at all
SENDERS = {"test:1": ("owner",), "test:2": ("owner", "ana", "bob"), "telegram:42": ("10", "9", "Zoë", "")}
OURS_POOL = ("clock.now", "memory.search", "notes.read")
OUTSIDE_POOL = ("web.read_url", "web.search", "mcp.files.read", "mcp.gone.fetch")
OURS_SETS = (frozenset(), frozenset({"clock.now", "memory.search"}),
             frozenset({"clock.now", "memory.search", "notes.read", "web.search"}),
             frozenset(OURS_POOL + OUTSIDE_POOL))  # all ours: only job runs and documents taint
T0 = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


# The reference reads ------------------------------------------------------------------------------------

# f09fa1c:bruce/store/audit.py, AuditStore.answered_turns: every turn whose answer is in the session, with
# its tools that returned an output (``in_conversation('m.')`` of f09fa1c:bruce/store/message_rows.py written out).
F09FA1C_ANSWERED_TURNS = (
    "SELECT t.id, COALESCE(j.untrusted, 0) AS untrusted_run, te.tool_name,"
    " EXISTS (SELECT 1 FROM messages im, json_each(im.attachments) a WHERE im.id = t.inbound_message_id"
    "  AND json_valid(im.attachments) AND json_extract(a.value, '$.kind') = 'document'"
    "  AND json_extract(a.value, '$.chars') IS NOT NULL) AS read_document FROM turns t"
    " LEFT JOIN proactive_jobs j ON j.id = t.job_id"
    " LEFT JOIN tool_executions te ON te.turn_id = t.id AND te.output IS NOT NULL"
    " WHERE t.id IN (SELECT m.turn_id FROM messages m WHERE m.conversation_id = ? AND m.id > ?"
    " AND m.direction = 'out' AND m.turn_id IS NOT NULL AND m.kind = 'chat' AND m.payload_kind = 'text'"
    " AND m.status NOT IN ('expired', 'rate_limited') AND NOT (m.direction = 'out' AND m.status = 'failed'))"
    " ORDER BY t.started_at, te.id"
)
# f09fa1c:bruce/store/messages.py, MessageStore.turn_view: the senders after ``floor`` (0 once a summary exists).
F09FA1C_SENDERS = ("SELECT DISTINCT sender_id FROM messages WHERE conversation_id = ? AND direction = 'in'"
                   " AND id > ? AND sender_id IS NOT NULL")


@dataclass(frozen=True)
class Answered:
    """A turn whose answer is in the session, as the simple read lists it."""

    id: str
    untrusted_run: bool
    read_document: bool
    tools: tuple[str, ...]  # the tools it called that returned an output, in order


def session_start(db: sqlite3.Connection, cid: str) -> int:
    row = db.execute("SELECT session_start_id FROM conversations WHERE id = ?", (cid,)).fetchone()
    return int(row["session_start_id"]) if row else 0


def answered_by_f09fa1c(db: sqlite3.Connection, cid: str) -> list[Answered]:
    turns: dict[str, Answered] = {}
    for row in db.execute(F09FA1C_ANSWERED_TURNS, (cid, session_start(db, cid))):
        turn = turns.get(row["id"]) or Answered(row["id"], bool(row["untrusted_run"]), bool(row["read_document"]), ())
        tools = turn.tools if row["tool_name"] is None else (*turn.tools, row["tool_name"])
        turns[turn.id] = Answered(turn.id, turn.untrusted_run, turn.read_document, tools)
    return list(turns.values())


def _read_a_document(attachments: str | None) -> bool:
    """An attachment of kind 'document' whose 'chars' is set (``bruce.media`` read it)."""
    try:
        entries = json.loads(attachments) if attachments is not None else []
    except ValueError:
        return False
    entries = entries.values() if isinstance(entries, dict) else entries if isinstance(entries, list) else []
    return any(isinstance(e, dict) and e.get("kind") == "document" and e.get("chars") is not None for e in entries)


def _in_history(m: sqlite3.Row) -> bool:
    """A reply the model sees: a chat text, neither expired nor given up on."""
    return (m["kind"] == "chat" and m["payload_kind"] == "text" and m["status"] not in ("expired", "rate_limited")
            and m["status"] != "failed")


def answered_in_python(db: sqlite3.Connection, cid: str) -> list[Answered]:
    """The same, from whole tables, without SQL's help."""
    start = session_start(db, cid)
    messages = {m["id"]: m for m in db.execute("SELECT * FROM messages")}
    answered = {m["turn_id"] for m in messages.values() if m["direction"] == "out" and m["conversation_id"] == cid
                and m["id"] > start and m["turn_id"] is not None and _in_history(m)}
    untrusted = {j["id"] for j in db.execute("SELECT id, untrusted FROM proactive_jobs") if j["untrusted"]}
    executions = db.execute("SELECT turn_id, tool_name, output FROM tool_executions ORDER BY id").fetchall()
    turns = sorted((t for t in db.execute("SELECT * FROM turns") if t["id"] in answered), key=lambda t: t["started_at"])
    inbound = [messages.get(t["inbound_message_id"]) for t in turns]
    return [Answered(t["id"], t["job_id"] in untrusted, m is not None and _read_a_document(m["attachments"]),
                     tuple(e["tool_name"] for e in executions if e["turn_id"] == t["id"] and e["output"] is not None))
            for t, m in zip(turns, inbound, strict=True)]


def _decoded(text: str | None) -> Any:
    """An audited output as the store reads it back: JSON, or the text itself."""
    try:
        return None if text is None else json.loads(text)
    except ValueError:
        return text


def expected_carried(db: sqlite3.Connection, answered: list[Answered], ours: frozenset[str]) -> tuple[bool, list]:
    """``carried_taint``'s rules over the simple read: (tainted, sources as (call_id, name, output))."""
    outside = [t.id for t in answered if any(n not in ours for n in t.tools)]
    if not (outside or any(t.untrusted_run or t.read_document for t in answered)):
        return False, []
    vouching = set(outside[-SOURCE_TURNS:])
    rows = db.execute("SELECT turn_id, call_id, tool_name, output FROM tool_executions ORDER BY id").fetchall()
    outputs = [(r["call_id"] or "", r["tool_name"], _decoded(r["output"])) for r in rows if r["turn_id"] in vouching]
    return True, [o for o in outputs if o[2] is not None and o[1] not in ours]


def expected_senders(db: sqlite3.Connection, cid: str) -> frozenset[str]:
    summarized = db.execute("SELECT 1 FROM session_summaries WHERE conversation_id = ?", (cid,)).fetchone()
    floor = 0 if summarized else session_start(db, cid)
    return frozenset(str(r["sender_id"]) for r in db.execute(F09FA1C_SENDERS, (cid, floor)))


# Random histories through the store's API ---------------------------------------------------------------

@dataclass
class Running:
    turn_id: str
    cid: str
    kind: str  # 'chat', 'job' or 'approval'
    inbound: int | None = None
    calls: int = 0


@dataclass
class History:
    """One random history, written as it is made; ``log`` tells it event by event."""

    store: Store
    clock: FakeClock
    rng: random.Random
    long: bool = False
    log: list[str] = field(default_factory=list)
    pending: dict[str, list[int]] = field(default_factory=lambda: {c: [] for c in CONVERSATIONS})
    running: list[Running] = field(default_factory=list)
    jobs: dict[str, list[str]] = field(default_factory=lambda: {c: [] for c in CONVERSATIONS})
    made: int = 0

    def tick(self) -> None:
        self.clock.advance(milliseconds=self.rng.randint(1, 3000))

    def name(self, prefix: str) -> str:
        self.made += 1
        return f"{prefix}{self.made}"

    def conversation(self) -> str:
        return CONVERSATIONS[0] if self.long and self.rng.random() < 0.8 else self.rng.choice(CONVERSATIONS)

    async def step(self) -> None:
        events = {"message": 5, "start": 4, "tool": 5, "answer": 4, "exchange": 4, "new": 1, "summary": 1,
                  "job": 1, "run": 2, "taint_job": 0.5, "approval": 1, "mcp": 0.5, "memory": 0.5}
        if self.long:
            events |= {"exchange": 14, "new": 0.2, "summary": 0.5}
        kind = self.rng.choices(list(events), weights=list(events.values()))[0]
        await getattr(self, f"_{kind}")()

    # messages and chat turns

    def _attachments(self) -> str | None:
        pick = self.rng.choice(["none"] * 6 + ["document", "photo", "voice", "two"])
        entries = {"none": [], "document": [{"kind": "document", "name": "bill.pdf", "mime": "application/pdf"}],
                   "photo": [{"kind": "image", "mime": "image/jpeg"}], "voice": [{"kind": "voice", "mime": "audio/ogg"}],
                   "two": [{"kind": "image", "mime": "image/png"}, {"kind": "document", "name": "notes.txt"}]}[pick]
        return json.dumps(entries) if entries else None

    async def _message(self, cid: str | None = None, text: str = "hello") -> int:
        cid = cid or self.conversation()
        self.tick()
        limited = self.rng.random() < 0.05
        sender = self.rng.choice(SENDERS[cid])
        attachments = self._attachments()
        inbound, _ = await self.store.messages.add_inbound(
            cid, sender_id=sender, text=text, platform_message_id=self.name("p"), attachments=attachments,
            status=MessageStatus.RATE_LIMITED if limited else MessageStatus.PENDING)
        self.log.append(f"in#{inbound} {cid} from {sender!r} {attachments or ''}{' rate-limited' if limited else ''}")
        if not limited:
            self.pending[cid].append(inbound)
        return inbound

    async def _start(self) -> Running | None:
        waiting = [c for c in CONVERSATIONS if self.pending[c]]
        if not waiting:
            return None
        cid = self.rng.choice(waiting)
        inbound = self.pending[cid].pop(0)
        turn = Running(self.name("t"), cid, "chat", inbound)
        self.tick()
        await self.store.messages.start_turn(turn.turn_id, cid, source=TurnSource.CHAT, inbound_message_id=inbound)
        self.log.append(f"turn {turn.turn_id} starts on in#{inbound}")
        await self._read_media(inbound)
        self.running.append(turn)
        return turn

    async def _read_media(self, inbound: int) -> None:
        """What ``bruce.media`` keeps of the message's attachments: a document read (its chars), or not."""
        stored = await self.store.media.attachments_of(inbound)
        if stored is None or self.rng.random() < 0.2:  # no attachments, or the turn stops before
            return
        made = []
        for entry in json.loads(stored):
            if entry["kind"] == "document" and self.rng.random() < 0.7:
                entry |= {"chars": self.rng.choice([0, 1, 4000]), "cut": False, "used": True}  # 0: read, empty
            elif entry["kind"] == "document":
                entry |= {"error": "I could not read it."}
            else:
                entry |= {"used": True}
            made.append(entry)
        self.tick()
        await self.store.media.set_media(inbound, text="[document]\ntext of it", attachments=json.dumps(made))
        self.log.append(f"  media of in#{inbound}: {json.dumps(made)}")

    def _output(self) -> object:
        return self.rng.choice([
            None, None, f"see https://a.example/{self.made}", {"text": "page", "links": [self.made]},
            json.dumps(f"quoted {self.made}"), {"truncated": True, "original_chars": 9000, "preview": "…"}, [], 0,
            "null"])

    async def _tool(self, turn: Running | None = None) -> None:
        turn = turn or (self.rng.choice(self.running) if self.running else None)
        if turn is None:
            return
        name = self.rng.choice(OUTSIDE_POOL if self.rng.random() < 0.5 else OURS_POOL)
        output = self._output()
        status = ToolStatus.OK if output is not None else self.rng.choice(list(ToolStatus))
        source = {"chat": TurnSource.CHAT, "job": TurnSource.PROACTIVE, "approval": TurnSource.CONFIRMATION}[turn.kind]
        call_id = None if self.rng.random() < 0.1 else self.name("c")
        self.tick()
        await self.store.audit.record_tool_execution(ToolExecutionRecord(
            turn.turn_id, turn.cid, call_id, name, "low", {"q": self.made}, output, status, None, 1.0, source))
        turn.calls += 1
        self.log.append(f"  {turn.turn_id} calls {name} ({call_id}) -> {output!r}")

    async def _answer(self, turn: Running | None = None, how: str | None = None) -> None:
        turn = turn or (self.rng.choice(self.running) if self.running else None)
        if turn is None:
            return
        self.running.remove(turn)
        how = how or self.rng.choice(["reply"] * 6 + ["notice", "interrupted", "approval", "quiet", "held"])
        if how in ("quiet", "held") and turn.kind == "chat":  # only a job's run ends so
            how = "reply"
        self.tick()
        reply = await self._end(turn, how)
        self.log.append(f"turn {turn.turn_id} ends: {how}" + (f" (out#{reply})" if reply else ""))
        if reply:
            await self._sent(reply)

    async def _end(self, turn: Running, how: str) -> int | None:
        """The turn closed as ``how`` says; the id of its reply in the chat, if it sent one."""
        if turn.kind == "approval":  # the follow-up of an approved action (or none), then the turn closed
            reply = await self.store.outbound.add(turn.cid, "done", turn_id=turn.turn_id) if how == "reply" else None
            await self.store.messages.finish_turn(turn.turn_id, status=TurnStatus.OK, tool_calls=turn.calls)
            return reply
        if how in ("reply", "notice"):
            return await self.store.messages.complete_turn(
                turn.turn_id, conversation_id=turn.cid, reply="answer", llm_calls=1, tool_calls=turn.calls,
                inbound_id=turn.inbound, error="llm down" if how == "notice" else None)
        if how == "approval" and turn.kind == "chat":  # an approval request is all it sent
            await self.store.outbound.add(turn.cid, "May I?", turn_id=turn.turn_id, kind=MessageKind.NOTICE,
                                          inbound_id=turn.inbound, payload_kind=PayloadKind.CONFIRMATION,
                                          payload=json.dumps({"id": turn.turn_id}))
            await self.store.messages.finish_turn(turn.turn_id, status=TurnStatus.OK, tool_calls=turn.calls)
            return None
        # interrupted (a chat's message is answered again later), a job's run quiet or held: nothing sent
        status = {"interrupted": TurnStatus.INTERRUPTED, "held": TurnStatus.FAILED}.get(how, TurnStatus.OK)
        await self.store.messages.finish_turn(turn.turn_id, status=status, tool_calls=turn.calls)
        if turn.inbound is not None and how == "interrupted":
            self.pending[turn.cid].insert(0, turn.inbound)
        return None

    async def _sent(self, reply: int) -> None:
        """How the outbox fared with a reply ('failed': only in databases from before 'unsent')."""
        outcome = self.rng.choice([None, MessageStatus.SENT, MessageStatus.SENT, MessageStatus.UNSENT,
                                   MessageStatus.FAILED])
        if outcome is not None:
            await self.store.outbound.record_send(reply, status=outcome, parts_sent=1, attempts=1, error=None)
            self.log.append(f"  out#{reply} {outcome}")

    async def _exchange(self) -> None:
        """A message answered at once, with a few tool calls (most of a chat's life)."""
        cid = self.conversation()
        await self._message(cid)
        while self.pending[cid]:
            turn = await self._start_in(cid)
            for _ in range(self.rng.choice([0, 1, 1, 2, 3])):
                await self._tool(turn)
            await self._answer(turn, "reply" if self.rng.random() < 0.85 else None)

    async def _start_in(self, cid: str) -> Running:
        while True:
            turn = await self._start()
            if turn is not None and turn.cid == cid:
                return turn

    # sessions and summaries

    async def _new(self, cid: str | None = None) -> None:
        """``/new``: the session so far folded (sometimes), the new one starts at the command."""
        cid = cid or self.conversation()
        if self.rng.random() < 0.5:
            await self._summary(cid)
        self.tick()
        inbound, _ = await self.store.messages.add_inbound(cid, sender_id=SENDERS[cid][0], text="/new",
                                                           platform_message_id=self.name("p"))
        await self.store.messages.start_session(cid, at_message_id=inbound)
        await self.store.outbound.add(cid, "New session.", turn_id=None, kind=MessageKind.NOTICE, inbound_id=inbound)
        self.log.append(f"/new at in#{inbound} in {cid}")

    async def _summary(self, cid: str | None = None) -> None:
        cid = cid or self.conversation()
        rows = await self.store.database.rows("SELECT id FROM messages WHERE conversation_id = ?", (cid,))
        if not rows:
            return
        up_to = self.rng.choice([int(r["id"]) for r in rows])
        self.tick()
        await self.store.messages.add_summary(cid, "so far", up_to_message_id=up_to)
        self.log.append(f"summary of {cid} up to #{up_to}")

    # jobs, approvals and the rest

    async def _job(self) -> None:
        cid = self.conversation()
        job_id, at = self.name("j"), self.store.database.now()
        untrusted = self.rng.random() < 0.4
        job = JobRecord(id=job_id, conversation_id=cid, execution_mode=ExecutionMode.AGENT, content="check the news",
                        schedule_kind="every", schedule_value="3600", timezone="UTC", notify=Notify.ALWAYS,
                        description="hourly", status=JobStatus.ACTIVE, next_run_at=at, anchor_at=at, failures=0,
                        flagged=None, dedup_key=job_id, created_at=at, updated_at=at, untrusted=untrusted)
        self.tick()
        await self.store.jobs.create(job, dedup_since=at)
        self.jobs[cid].append(job_id)
        self.log.append(f"job {job_id} in {cid}{' untrusted' if untrusted else ''}")

    async def _run(self) -> None:
        """A run of a job: its turn, answered later like any other (or quiet, or held)."""
        cid = self.rng.choice([c for c in CONVERSATIONS if self.jobs[c]] or [None])
        if cid is None:
            return
        job_id = self.rng.choice(self.jobs[cid])
        turn = Running(self.name("t"), cid, "job")
        self.tick()
        await self.store.messages.start_turn(turn.turn_id, cid, source=TurnSource.PROACTIVE, inbound_message_id=None,
                                             job_id=job_id)
        self.running.append(turn)
        self.log.append(f"turn {turn.turn_id} runs job {job_id}")

    async def _taint_job(self) -> None:
        """A job changed after untrusted text: every run of it is untrusted from now on, earlier ones too."""
        jobs = [j for c in CONVERSATIONS for j in self.jobs[c]]
        if jobs:
            job_id = self.rng.choice(jobs)
            self.tick()
            await self.store.jobs.update(job_id, untrusted=True)
            self.log.append(f"job {job_id} made untrusted")

    async def _approval(self) -> None:
        """An approved action's turn: the call, then (later) its follow-up in the chat."""
        cid = self.conversation()
        turn = Running(self.name("t"), cid, "approval")
        self.tick()
        await self.store.messages.start_turn(turn.turn_id, cid, source=TurnSource.CONFIRMATION,
                                             inbound_message_id=None)
        self.running.append(turn)
        self.log.append(f"turn {turn.turn_id} runs an approved action in {cid}")
        await self._tool(turn)

    async def _mcp(self) -> None:
        """An MCP client's call: no turn, no conversation."""
        self.tick()
        await self.store.audit.record_tool_execution(ToolExecutionRecord(
            None, None, self.name("c"), "web.read_url", "low", {}, "a page", ToolStatus.OK, None, 1.0, TurnSource.MCP,
            server="files"))
        self.log.append("an MCP client reads a page")

    async def _memory(self) -> None:
        """Long-term memory's background call: a turn with no reply."""
        turn_id, cid = self.name("t"), self.conversation()
        self.tick()
        await self.store.messages.start_turn(turn_id, cid, source=TurnSource.MEMORY, inbound_message_id=None)
        await self.store.messages.finish_turn(turn_id, status=TurnStatus.OK, llm_calls=1)
        self.log.append(f"memory turn {turn_id} in {cid}")


# The comparison ----------------------------------------------------------------------------------------

@dataclass
class Seen:
    """What the histories reached, so that a change to them cannot quietly stop testing a case."""

    checks: int = 0
    tainted: int = 0
    clean: int = 0
    capped: int = 0  # more turns with outputs from outside than SOURCE_TURNS
    by_job_or_document: int = 0  # tainted with no tool from outside
    summarized: int = 0
    started_before_new: int = 0


async def compare(store: Store, db: sqlite3.Connection, seed: int, log: list[str], seen: Seen) -> list[str]:
    """Every way of reading, for each conversation: the differences, described."""
    wrong = []
    for cid in (*CONVERSATIONS, QUIET):
        old, plain = answered_by_f09fa1c(db, cid), answered_in_python(db, cid)
        if old != plain:
            wrong.append(f"seed {seed} {cid}: the two references differ\n f09fa1c: {old}\n python:  {plain}")
        for ours in OURS_SETS:
            carried = await carried_taint(store, cid, ours=ours)
            got = (carried.tainted, [(s.call_id, s.name, s.output) for s in carried.sources])
            expected = expected_carried(db, old, ours)
            if got != expected:
                wrong.append(f"seed {seed} {cid} ours={sorted(ours)}: carried_taint\n expected {expected}\n got"
                             f"      {got}\n answered turns (f09fa1c): {old}")
            seen.checks += 1
            seen.tainted += expected[0]
            seen.clean += not expected[0]
            seen.capped += sum(any(n not in ours for n in t.tools) for t in old) > SOURCE_TURNS
            seen.by_job_or_document += expected[0] and not any(n not in ours for t in old for n in t.tools)
        view = await store.messages.turn_view(cid, limit=22)
        if view.senders != (senders := expected_senders(db, cid)):
            wrong.append(f"seed {seed} {cid}: turn_view's senders\n expected {sorted(senders)}\n got"
                         f"      {sorted(view.senders)}")
        seen.summarized += view.summary is not None
    if wrong:
        wrong.append("the history:\n  " + "\n  ".join(log))
    return wrong


async def run_history(path: Path, seed: int, seen: Seen, *, long: bool = False) -> list[str]:
    clock = FakeClock(T0)
    store = await Store.open(path, clock)
    db = sqlite3.connect(path)
    db.row_factory = sqlite3.Row
    try:
        for cid in (*CONVERSATIONS, QUIET):
            await store.messages.ensure_conversation(cid, *cid.split(":"))
        rng = random.Random(seed)
        history = History(store, clock, rng, long=long)
        for n in range(rng.randint(90, 120) if long else rng.randint(5, 40)):
            await history.step()
            if n % 6 == 5 and (wrong := await compare(store, db, seed, history.log, seen)):
                return wrong
        for turn in list(history.running):  # the turns still running are answered, some after a /new
            if rng.random() < 0.3:
                await history._new(turn.cid)
                seen.started_before_new += turn.kind == "chat"
            await history._answer(turn)
        return await compare(store, db, seed, history.log, seen)
    finally:
        db.close()
        await store.close()


async def test_the_fast_taint_and_senders_reads_agree_with_the_simple_ones(tmp_path):
    seen, wrong = Seen(), []
    for seed in SEEDS:
        wrong += await run_history(tmp_path / f"seed{seed}.db", seed, seen)
    for seed in LONG_SEEDS:
        wrong += await run_history(tmp_path / f"seed{seed}.db", seed, seen, long=True)
    assert not wrong, "\n".join(wrong[:12])
    # and the histories reached the cases that matter
    assert seen.tainted and seen.clean and seen.capped and seen.by_job_or_document and seen.summarized, seen
    assert seen.started_before_new, seen
