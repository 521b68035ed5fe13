"""Conversations, their messages, session summaries and turns (the outbox's rows: ``outbound``)."""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Sequence

from bruce.records import ActedTool, StoredMessage, StoredTurn, Summary, TurnView
from bruce.store.database import Database
from bruce.store.message_rows import MESSAGE_COLUMNS, close_inbound, in_conversation, session_start
from bruce.store.outbound import insert_outbound
from bruce.store.rows import from_row
from bruce.values import Direction, MessageKind, MessageStatus, ToolStatus, TurnSource, TurnStatus

__all__ = ["MessageStore"]


_IN_CONVERSATION = in_conversation("")
_M_COLUMNS = ", ".join(f"m.{c.strip()}" for c in MESSAGE_COLUMNS.split(","))
_IN_CONVERSATION_M = in_conversation("m.")


def _last_id(db: sqlite3.Connection, conversation_id: str) -> int:
    row = db.execute("SELECT MAX(id) AS id FROM messages WHERE conversation_id = ?", (conversation_id,)).fetchone()
    return int(row["id"]) if row and row["id"] is not None else 0


def _previous_time(db: sqlite3.Connection, conversation_id: str, before_id: int) -> str | None:
    row = db.execute("SELECT created_at FROM messages WHERE conversation_id = ? AND id < ? ORDER BY id DESC LIMIT 1",
                     (conversation_id, before_id)).fetchone()
    return str(row["created_at"]) if row else None


def _latest_summary(db: sqlite3.Connection, conversation_id: str) -> Summary | None:
    row = db.execute("SELECT summary, up_to_message_id, created_at FROM session_summaries"
                     " WHERE conversation_id = ? ORDER BY up_to_message_id DESC, id DESC LIMIT 1",
                     (conversation_id,)).fetchone()
    return from_row(Summary, row) if row else None


_POSITION = "COALESCE(CASE WHEN m.direction = 'out' THEN t.inbound_message_id END, m.id)"


def _history(db: sqlite3.Connection, conversation_id: str, *, limit: int, up_to_id: int, after_id: int,
             inbound_id: int | None) -> list[StoredMessage]:
    """A reply takes the place of the message its turn answered (right after it); anything else,
    its own. With ``inbound_id``, the conversation as it stood when that message arrived: what
    came before it (a reply to an earlier message stored since included), then the message
    itself; never a later message, a reply to one, or anything else stored after it."""
    as_it_stood = "" if inbound_id is None else f" AND ({_POSITION} < ? OR m.id = ?)"
    params: list[object] = [conversation_id, up_to_id, after_id]
    if inbound_id is not None:
        params += [inbound_id, inbound_id]
    rows = db.execute(
        f"SELECT {_M_COLUMNS}, {_POSITION} AS pos"
        " FROM messages m LEFT JOIN turns t ON t.id = m.turn_id"
        f" WHERE m.conversation_id = ? AND m.id <= ? AND m.id > ? AND {_IN_CONVERSATION_M}{as_it_stood}"
        " ORDER BY pos DESC, m.direction = 'out' DESC, m.id DESC LIMIT ?",
        (*params, limit),
    ).fetchall()
    return [from_row(StoredMessage, r) for r in reversed(rows)]


# Everyone who wrote in a conversation, one index step per sender (``messages_senders``, v18) however
# long the conversation: the next sender is the least one greater than the last.
_SENDERS = (
    "WITH RECURSIVE s(sender) AS ("
    " SELECT MIN(sender_id) FROM messages WHERE conversation_id = :c AND direction = 'in' AND sender_id IS NOT NULL"
    " UNION ALL SELECT (SELECT MIN(sender_id) FROM messages WHERE conversation_id = :c AND direction = 'in'"
    "  AND sender_id IS NOT NULL AND sender_id > s.sender) FROM s WHERE s.sender IS NOT NULL)"
    " SELECT sender FROM s WHERE sender IS NOT NULL"
)


def _senders(db: sqlite3.Connection, conversation_id: str) -> frozenset[str]:
    return frozenset(str(r["sender"]) for r in db.execute(_SENDERS, {"c": conversation_id}))


def _senders_since(db: sqlite3.Connection, conversation_id: str, after_id: int) -> frozenset[str]:
    """Who wrote after ``after_id`` (its messages read by ``messages_by_conversation``): a conversation
    with no summary yet, short unless folding keeps failing."""
    rows = db.execute("SELECT DISTINCT sender_id FROM messages WHERE conversation_id = ? AND direction = 'in'"
                      " AND id > ? AND sender_id IS NOT NULL", (conversation_id, after_id))
    return frozenset(str(r["sender_id"]) for r in rows)


class MessageStore:
    def __init__(self, db: Database) -> None:
        self._db = db
        self._known_conversations: set[str] = set()

    # conversations and messages ------------------------------------------------------------

    async def ensure_conversation(self, conversation_id: str, channel: str, chat_id: str) -> None:
        if conversation_id in self._known_conversations:
            return
        await self._db.execute(
            "INSERT OR IGNORE INTO conversations (id, channel, chat_id, created_at) VALUES (?, ?, ?, ?)",
            (conversation_id, channel, chat_id, self._db.now()),
        )
        self._known_conversations.add(conversation_id)

    async def start_session(self, conversation_id: str, *, at_message_id: int) -> None:
        """Start a fresh session at this message: what came before leaves the model's history."""
        await self._db.execute(
            "UPDATE conversations SET session_start_id = MAX(session_start_id, ?) WHERE id = ?",
            (at_message_id, conversation_id),
        )

    async def add_inbound(
        self, conversation_id: str, *, sender_id: str, text: str, platform_message_id: str | None,
        received_at: str | None = None, status: MessageStatus = MessageStatus.PENDING,
        attachments: str | None = None, where: tuple[str, str] | None = None,
    ) -> tuple[int, bool]:
        """Store a user's message as pending (or ``rate_limited``: never answered), with the JSON
        list of its ``attachments`` (None: text only). Returns (id, is_new); a redelivered platform
        message id returns the stored row instead of a duplicate. ``where`` (channel, chat id): the
        conversation's row is made too when it has none (``ensure_conversation``), in the same
        transaction: one trip for a chat's first message, not two."""
        now = self._db.now()
        make = where is not None and conversation_id not in self._known_conversations

        def work(db: sqlite3.Connection) -> tuple[int, bool]:
            if make and where is not None:
                db.execute("INSERT OR IGNORE INTO conversations (id, channel, chat_id, created_at) VALUES (?, ?, ?, ?)",
                           (conversation_id, *where, now))
            cur = db.execute(
                "INSERT OR IGNORE INTO messages (conversation_id, direction, role, sender_id, text,"
                " platform_message_id, status, created_at, updated_at, attachments)"
                " VALUES (?, 'in', 'user', ?, ?, ?, ?, ?, ?, ?)",
                (conversation_id, sender_id, text, platform_message_id, str(status), received_at or now, now,
                 attachments))
            if cur.rowcount:
                return int(cur.lastrowid or 0), True
            row = db.execute("SELECT id FROM messages WHERE conversation_id = ? AND platform_message_id = ?"
                             " AND direction = 'in'", (conversation_id, platform_message_id)).fetchone()
            assert row is not None
            return int(row["id"]), False

        stored = await self._db.write(work)
        if make:
            self._known_conversations.add(conversation_id)
        return stored

    async def set_status(self, message_id: int, status: MessageStatus, *, turn_id: str | None = None) -> None:
        await self._db.execute(
            "UPDATE messages SET status = ?, updated_at = ?, turn_id = COALESCE(?, turn_id) WHERE id = ?",
            (str(status), self._db.now(), turn_id, message_id),
        )

    async def get(self, message_id: int) -> StoredMessage | None:
        row = await self._db.row(f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE id = ?", (message_id,))
        return from_row(StoredMessage, row) if row else None

    async def turn_view(self, conversation_id: str, *, limit: int, inbound_id: int | None = None) -> TurnView:
        """What a turn starts from, read in one trip: the session summary, when the message before
        the turn's came, the history (``history`` of the session after the summary, up to
        the newest message) and everyone whose words are in either (every sender of the
        session; of the whole conversation once it has a summary, which folds them all)."""
        def work(db: sqlite3.Connection) -> TurnView:
            summary = _latest_summary(db, conversation_id)
            last = _last_id(db, conversation_id)
            previous = _previous_time(db, conversation_id, inbound_id if inbound_id is not None else last + 1)
            after = max(summary.up_to_message_id if summary else 0, session_start(db, conversation_id))
            history = _history(db, conversation_id, limit=limit, up_to_id=last, after_id=after, inbound_id=inbound_id)
            # a summary folds every session before: then everyone who ever wrote in the conversation
            senders = _senders(db, conversation_id) if summary else _senders_since(db, conversation_id, after)
            return TurnView(summary, previous, history, senders)

        return await self._db.read(work)

    async def turn_of(self, message_id: int) -> str | None:
        """The chat turn that answered an inbound message (the latest, after a retry)."""
        row = await self._db.row("SELECT id FROM turns WHERE inbound_message_id = ? ORDER BY started_at DESC LIMIT 1",
                                 (message_id,))
        return str(row["id"]) if row else None

    async def latest_conversation(self) -> str | None:
        """The conversation the owner wrote in last (outside the console), if any."""
        row = await self._db.row("SELECT conversation_id FROM messages WHERE direction = 'in'"
                                 " AND conversation_id NOT LIKE 'console:%' ORDER BY id DESC LIMIT 1")
        return str(row["conversation_id"]) if row else None

    async def max_id(self) -> int:
        row = await self._db.row("SELECT MAX(id) AS id FROM messages")
        return int(row["id"]) if row and row["id"] is not None else 0

    async def to_fold(self, conversation_id: str, *, keep_last: int) -> list[StoredMessage]:
        """Chat messages of the current session older than the last ``keep_last`` and not yet in
        a summary, all older than any message still waiting for its turn (which must see what
        came before it)."""
        def work(db: sqlite3.Connection) -> list[StoredMessage]:
            summary = _latest_summary(db, conversation_id)
            after = max(summary.up_to_message_id if summary else 0, session_start(db, conversation_id))
            rows = db.execute(
                f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE conversation_id = ? AND id > ?"
                f" AND {_IN_CONVERSATION} AND status != 'pending'"
                " AND id < COALESCE((SELECT MIN(id) FROM messages WHERE conversation_id = ? AND direction = 'in'"
                " AND status = 'pending'), 9223372036854775807)"
                " ORDER BY id DESC LIMIT -1 OFFSET ?",
                (conversation_id, after, conversation_id, keep_last),
            ).fetchall()
            return [from_row(StoredMessage, r) for r in reversed(rows)]

        return await self._db.read(work)

    async def with_status(self, direction: Direction, status: MessageStatus, *, up_to_id: int) -> list[StoredMessage]:
        """E.g. (IN, PENDING): messages a crash left unanswered."""
        rows = await self._db.rows(
            f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE direction = ? AND status = ? AND id <= ? ORDER BY id",
            (str(direction), str(status), up_to_id),
        )
        return [from_row(StoredMessage, r) for r in rows]

    # summaries -----------------------------------------------------------------------------

    async def latest_summary(self, conversation_id: str) -> Summary | None:
        """The summary that covers the most (a background fold finishing after ``/new``'s own
        covers less, and does not replace it)."""
        return await self._db.read(lambda db: _latest_summary(db, conversation_id))

    async def add_summary(self, conversation_id: str, summary: str, *, up_to_message_id: int) -> None:
        await self._db.execute(
            "INSERT INTO session_summaries (conversation_id, summary, up_to_message_id, created_at) VALUES (?, ?, ?, ?)",
            (conversation_id, summary, up_to_message_id, self._db.now()),
        )

    # turns -----------------------------------------------------------------------------------

    async def start_turn(
        self, turn_id: str, conversation_id: str, *, source: TurnSource, inbound_message_id: int | None,
        job_id: str | None = None,
    ) -> None:
        await self._db.execute(
            "INSERT INTO turns (id, conversation_id, inbound_message_id, source, status, started_at, job_id)"
            " VALUES (?, ?, ?, ?, 'running', ?, ?)",
            (turn_id, conversation_id, inbound_message_id, str(source), self._db.now(), job_id),
        )

    async def finish_turn(
        self, turn_id: str, *, status: TurnStatus, llm_calls: int = 0, tool_calls: int = 0,
        hit_ceiling: bool = False, stopped_repeat: bool = False, error: str | None = None,
    ) -> None:
        await self._db.execute(
            "UPDATE turns SET status = ?, llm_calls = ?, tool_calls = ?, hit_ceiling = ?,"
            " stopped_repeat = ?, error = ?, finished_at = ? WHERE id = ?",
            (str(status), llm_calls, tool_calls, int(hit_ceiling), int(stopped_repeat), error, self._db.now(), turn_id),
        )

    async def complete_turn(
        self, turn_id: str, *, conversation_id: str, reply: str, llm_calls: int, tool_calls: int,
        inbound_id: int | None = None, hit_ceiling: bool = False, stopped_repeat: bool = False,
        error: str | None = None, unbacked_claims: int = 0,
    ) -> int:
        """Store the reply (pending, to be sent), close the message it answers and the turn: all
        or nothing, so a crash can neither lose the reply nor answer the message twice. With
        ``error`` the turn failed and the reply is a notice (kept out of the model's history)."""
        now = self._db.now()
        failed = error is not None

        def work(db: sqlite3.Connection) -> int:
            reply_id = insert_outbound(db, now=now, conversation_id=conversation_id, text=reply, turn_id=turn_id,
                                       kind=MessageKind.NOTICE if failed else MessageKind.CHAT)
            if inbound_id is not None:
                close_inbound(db, now=now, inbound_id=inbound_id, turn_id=turn_id,
                               status=MessageStatus.FAILED if failed else MessageStatus.DONE)
            db.execute(
                "UPDATE turns SET status = ?, llm_calls = ?, tool_calls = ?, hit_ceiling = ?, stopped_repeat = ?,"
                " unbacked_claims = ?, error = ?, finished_at = ? WHERE id = ?",
                (str(TurnStatus.FAILED if failed else TurnStatus.OK), llm_calls, tool_calls, int(hit_ceiling),
                 int(stopped_repeat), unbacked_claims, error, now, turn_id),
            )
            return reply_id

        return await self._db.write(work)

    async def actions_for_message(self, message_id: int) -> list[ActedTool]:
        """Tool calls that acted (or asked for approval) in turns that handled this message, dry
        runs excepted: what a crash interrupted, so that the message is not blindly redone."""
        rows = await self._db.rows(
            "SELECT te.tool_name, te.status, json_extract(te.output, '$.confirmation_id') AS confirmation_id"
            " FROM tool_executions te JOIN turns t ON te.turn_id = t.id"
            " WHERE t.inbound_message_id = ? AND te.status IN ('ok', 'awaiting_confirmation')"
            " AND COALESCE(json_extract(te.output, '$.dry_run'), 0) = 0 ORDER BY te.id",
            (message_id,),
        )
        return [ActedTool(str(r["tool_name"]), ToolStatus(r["status"]), r["confirmation_id"]) for r in rows]

    async def inbound_by_platform_id(self, conversation_id: str, platform_message_id: str) -> StoredMessage | None:
        """The user's message the platform named so (its redeliveries are stored once)."""
        row = await self._db.row(f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE conversation_id = ? AND direction = 'in'"
                                 " AND platform_message_id = ?", (conversation_id, platform_message_id))
        return from_row(StoredMessage, row) if row else None

    async def turns_for_message(self, message_id: int) -> list[StoredTurn]:
        """Every turn that handled an inbound message (a retry makes another), first started first."""
        rows = await self._db.rows("SELECT * FROM turns WHERE inbound_message_id = ? ORDER BY started_at",
                                   (message_id,))
        return [from_row(StoredTurn, r) for r in rows]

    async def replies_of_turns(self, turn_ids: Sequence[str]) -> list[StoredMessage]:
        """The messages these turns stored to be sent, oldest first."""
        if not turn_ids:
            return []
        marks = ", ".join("?" * len(turn_ids))
        rows = await self._db.rows(f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE direction = 'out'"
                                   f" AND turn_id IN ({marks}) ORDER BY id", tuple(turn_ids))
        return [from_row(StoredMessage, r) for r in rows]

    async def outbound_after(self, conversation_id: str, message_id: int) -> list[StoredMessage]:
        """The conversation's outbound text messages stored after ``message_id``, oldest first (a
        command's notice or a refusal is stored without a turn; approval requests and files are
        not text)."""
        rows = await self._db.rows(f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE conversation_id = ? AND direction = 'out'"
                                   " AND payload_kind = 'text' AND id > ? ORDER BY id", (conversation_id, message_id))
        return [from_row(StoredMessage, r) for r in rows]

    async def interrupt_open_turns(self, channels: Collection[str], *, error: str) -> int:
        """Close as ``interrupted`` every turn still ``running`` in conversations on these
        channels: what a stopped process left open (another process's channels are left be)."""
        names = list(channels)
        if not names:
            return 0
        marks = ", ".join("?" for _ in names)
        _, closed = await self._db.execute(
            "UPDATE turns SET status = 'interrupted', error = COALESCE(error, ?), finished_at = ?"
            f" WHERE status = 'running' AND conversation_id IN (SELECT id FROM conversations WHERE channel IN ({marks}))",
            (error, self._db.now(), *names),
        )
        return closed

    async def interrupt_turns_of(self, message_id: int, *, error: str) -> None:
        await self._db.execute(
            "UPDATE turns SET status = 'interrupted', error = ?, finished_at = ? WHERE inbound_message_id = ?"
            " AND status = 'running'",
            (error, self._db.now(), message_id),
        )

    async def latest(self, conversation_id: str, *, limit: int) -> list[StoredMessage]:
        """The last ``limit`` text messages of a conversation, of every kind and status, oldest
        first (what the web chat shows when it opens; approval requests and files are not lines)."""
        rows = await self._db.rows(
            f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE conversation_id = ? AND payload_kind = 'text'"
            " ORDER BY id DESC LIMIT ?",
            (conversation_id, limit))
        return [from_row(StoredMessage, r) for r in reversed(rows)]
