"""Small typed values that cross modules: the statuses, sources and kinds stored in the
database, and the conversation id. Each is parsed and formatted here, and only here."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = [
    "ConversationId",
    "OWNER",
    "guest_person",
    "is_owner",
    "ExecutionMode",
    "AttachmentKind",
    "LLMCallKind",
    "Notify",
    "FactType",
    "FactStatus",
    "JobStatus",
    "JobRunStatus",
    "Direction",
    "MessageKind",
    "MessageStatus",
    "PayloadKind",
    "TurnSource",
    "TurnStatus",
    "ToolStatus",
    "LLMCallStatus",
    "ConfirmationState",
    "DecidedVia",
    "DecisionOutcome",
    "PairingState",
    "PairingOutcome",
]


@dataclass(frozen=True, slots=True)
class ConversationId:
    """``<channel>:<chat id>``, e.g. ``telegram:123456``. The chat id may itself contain colons."""

    channel: str
    chat_id: str

    @classmethod
    def parse(cls, text: str) -> ConversationId:
        channel, sep, chat_id = str(text).partition(":")
        if not sep or not channel or not chat_id:
            raise ValueError(f"not a conversation id (channel:chat): {text!r}")
        return cls(channel, chat_id)

    def __str__(self) -> str:
        return f"{self.channel}:{self.chat_id}"


OWNER = "owner"
"""The person key of the owner: what the console, the web chat, every ``bruce`` command and the
ids under ``people.owner`` act as. A guest's key is ``<channel>:<user id>`` (``guest_person``).
Facts, memory summaries and proactive jobs are stored under a person key (docs/security.md)."""


def guest_person(channel: str, user_id: str) -> str:
    """A guest's person key: ``telegram:123``, ``discord:456`` (never equal to ``OWNER``)."""
    return f"{channel}:{user_id}"


def is_owner(person: str) -> bool:
    return person == OWNER


class Direction(StrEnum):
    IN = "in"
    OUT = "out"


class MessageKind(StrEnum):
    CHAT = "chat"  # part of the conversation the model sees
    NOTICE = "notice"  # apologies, error notes, approval requests, files: sent, stored, kept out of the model's history


class MessageStatus(StrEnum):
    # inbound: pending -> done | failed | expired
    PENDING = "pending"
    DONE = "done"
    FAILED = "failed"
    EXPIRED = "expired"
    RATE_LIMITED = "rate_limited"  # over the sender's or conversation's rate limit: never answered
    # outbound: pending -> sent | unsent (kept and re-sent); 'failed' only in old databases
    SENT = "sent"
    UNSENT = "unsent"


class PayloadKind(StrEnum):
    """What an outbound row carries to the channel: all of them go out through the outbox."""

    TEXT = "text"  # a reply: split into pieces for ``send_text``
    CONFIRMATION = "confirmation"  # an approval request with its buttons (``send_confirmation``), payload JSON
    FILE = "file"  # a document (``send_file``), payload JSON: its path and caption


class TurnSource(StrEnum):
    CHAT = "chat"
    PROACTIVE = "proactive"
    CONFIRMATION = "confirmation"
    SUMMARY = "summary"
    MCP = "mcp"  # an MCP client's call through ``bruce mcp serve`` (tool executions only; no turn)
    MEMORY = "memory"  # a long-term memory extraction or summary (its model call; no tools)


class FactType(StrEnum):
    PREFERENCE = "preference"
    FACT = "fact"
    PROJECT = "project"
    PROGRESS = "progress"
    INSIGHT = "insight"


class FactStatus(StrEnum):
    ACTIVE = "active"  # in the prompt and in search
    ARCHIVED = "archived"  # kept, shown with `bruce memory list --all`, never in the prompt


class ExecutionMode(StrEnum):
    """How a proactive job runs when due."""

    MESSAGE = "message"  # send the stored text as it is: no model call
    AGENT = "agent"  # run the stored text as an instruction, with tools


class Notify(StrEnum):
    """When an agent-mode job's answer is sent."""

    ALWAYS = "always"
    IF_ACTIONABLE = "if_actionable"  # only when the run found something to report


class JobStatus(StrEnum):
    ACTIVE = "active"
    PAUSED = "paused"
    DONE = "done"  # a one-off job whose delivery is stored
    MISSED = "missed"  # a one-off job that fell due longer than the grace ago while Bruce was down
    CANCELLED = "cancelled"


class JobRunStatus(StrEnum):
    RUNNING = "running"  # claimed; a crash leaves it so, and the next start settles it
    DELIVERED = "delivered"  # stored and sent
    UNSENT = "unsent"  # stored; the platform refused it for now (the outbox keeps trying)
    QUIET = "quiet"  # agent mode, notify if_actionable: nothing to report, nothing sent
    FAILED = "failed"
    INTERRUPTED = "interrupted"  # the process stopped during an agent run
    MISSED = "missed"  # fell due beyond the grace: not fired, the user told once
    OVER_BUDGET = "over_budget"  # agent mode, the day's LLM budget spent: skipped, nothing sent
    HELD = "held"  # an untrusted job's run stopped at a tool needing the owner's yes; its answer not sent


class TurnStatus(StrEnum):
    RUNNING = "running"
    OK = "ok"
    FAILED = "failed"
    INTERRUPTED = "interrupted"  # the process stopped (shutdown, crash) while it ran


class ToolStatus(StrEnum):
    OK = "ok"
    ERROR = "error"
    TIMEOUT = "timeout"
    INVALID_ARGS = "invalid_args"
    UNKNOWN_TOOL = "unknown_tool"
    DENIED = "denied"
    AWAITING_CONFIRMATION = "awaiting_confirmation"
    SKIPPED = "skipped"  # needs approval, but the turn has nobody to ask (a proactive turn)
    CACHED = "cached"  # audit only: a read tool answered from the cache (the model sees an ok result)


class AttachmentKind(StrEnum):
    """What a file or item sent with a chat message is, as the core treats it."""

    VOICE = "voice"  # a voice note: transcribed into the message text
    AUDIO = "audio"  # an audio file: transcribed too
    IMAGE = "image"  # a photo: shown to the model in the turn it arrived in
    DOCUMENT = "document"  # a file: PDF, .txt, .md and .csv are read; untrusted text
    OTHER = "other"  # a sticker, video, location…: answered with a clear reply, no model call


class LLMCallKind(StrEnum):
    CHAT = "chat"  # a completion (answers, summaries, memory)
    TRANSCRIPTION = "transcription"  # a voice note or audio file turned into text


class LLMCallStatus(StrEnum):
    OK = "ok"
    ERROR = "error"
    TIMEOUT = "timeout"


class ConfirmationState(StrEnum):
    # pending -> running (approved in chat) | approved (approved locally; the daemon picks it up)
    #         | denied | expired;  approved -> running | expired;  running -> executed | failed
    PENDING = "pending"
    APPROVED = "approved"
    RUNNING = "running"
    DENIED = "denied"
    EXPIRED = "expired"
    EXECUTED = "executed"
    FAILED = "failed"


class DecidedVia(StrEnum):
    CHAT = "chat"  # a typed /approve or a button press in the conversation
    CLI = "cli"  # `bruce approve` on the machine
    ADMIN = "admin"


class DecisionOutcome(StrEnum):
    """What became of a user's approve / deny."""

    APPROVED = "approved"  # approved in chat: it runs now
    QUEUED = "queued"  # approved locally: the daemon serving the conversation runs it
    DENIED = "denied"
    NOT_FOUND = "not_found"
    EXPIRED = "expired"
    ALREADY_DECIDED = "already_decided"
    WRONG_USER = "wrong_user"
    NEEDS_STEP_UP = "needs_step_up"
    UNAVAILABLE = "unavailable"  # the daemon is restarting: nothing was decided


class PairingState(StrEnum):
    # pending -> approved | denied | expired (its hour passed before anyone decided)
    PENDING = "pending"
    APPROVED = "approved"
    DENIED = "denied"
    EXPIRED = "expired"


class PairingOutcome(StrEnum):
    """What an unknown sender's message did to the pairing requests of their channel."""

    ISSUED = "issued"  # a new code
    STILL_PENDING = "still_pending"  # their code from earlier, unchanged
    FULL = "full"  # the channel already has the most pending requests it takes: no code
    DENIED = "denied"  # the owner denied their request within the hour: no new code yet
