"""The records the store hands out and takes in: frozen values, never dicts, that any layer may
import without importing the store (this package knows no database, only ``bruce.values``).

``from_json`` reads back a JSON column the store wrote (tool inputs and outputs, a
confirmation's arguments)."""

from bruce.records.audit import (
    ActedTool,
    ArtifactRecord,
    ConfirmationRecord,
    LLMCallRecord,
    PairingRequestRecord,
    ToolExecutionRecord,
    ToolStart,
    UnfinishedTool,
)
from bruce.records.base import from_json
from bruce.records.jobs import JobRecord, JobRunRecord
from bruce.records.memory import Fact, MemorySummary
from bruce.records.messages import AnsweredTurn, StoredMessage, StoredTurn, Summary, TurnView
from bruce.records.usage import (
    Count,
    KindTotals,
    LatencyHistogram,
    ModelTotals,
    Spent,
    StoredLLMCall,
    StoredToolExecution,
    TracedMessage,
    TracedReply,
    TurnTrace,
    UsageRow,
    as_dict,
)

__all__ = [
    "from_json",
    "StoredMessage",
    "Summary",
    "TurnView",
    "StoredTurn",
    "AnsweredTurn",
    "LLMCallRecord",
    "ToolExecutionRecord",
    "ToolStart",
    "UnfinishedTool",
    "ActedTool",
    "ConfirmationRecord",
    "ArtifactRecord",
    "PairingRequestRecord",
    "JobRecord",
    "JobRunRecord",
    "Fact",
    "MemorySummary",
    "Spent",
    "KindTotals",
    "UsageRow",
    "StoredLLMCall",
    "StoredToolExecution",
    "TracedMessage",
    "TracedReply",
    "TurnTrace",
    "Count",
    "ModelTotals",
    "LatencyHistogram",
    "as_dict",
]
