"""The four-layer system prompt (a fifth for a scheduled run). Each layer is one small pure function; ``build_system_prompt``
joins them. Time comes in as an argument (from the injected clock), never from the machine."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from bruce.contracts import ToolContract
from bruce.records import Fact, MemorySummary

__all__ = [
    "base_layer",
    "conversation_context",
    "temporal_context",
    "tool_execution_guidelines",
    "DOMAIN_GUIDELINES",
    "build_system_prompt",
    "describe_gap",
    "ScheduledRun",
    "scheduled_run_context",
]


def base_layer(system_prompt: str, *, name: str) -> str:
    return system_prompt.replace("{name}", name).strip()


def conversation_context(summary: str | None, memory: str = "") -> str:
    """The session summary, and ``memory`` (the ``<memory>`` part, from ``memory_part``) when there is any."""
    body = (
        f"Summary of the earlier part of this conversation:\n{summary.strip()}"
        if summary and summary.strip()
        else "No earlier conversation has been summarized yet."
    )
    if memory:
        body = f"{body}\n{memory}"
    return f"<conversation_context>\n{body}\n</conversation_context>"


def memory_part(facts: Sequence[Fact], summary: MemorySummary | None, *, max_chars: int) -> str:
    """Long-term memory for the prompt: the latest memory summary with its period, then the recent
    facts (given newest first), each tagged with its type and the day it was last seen. At most
    ``max_chars`` characters: facts that do not fit are left out, newest kept; "" when there is nothing."""
    if not facts and summary is None:
        return ""
    head, tail = "<memory>", "</memory>"
    parts: list[str] = []
    if summary is not None:
        text = summary.content.strip()
        room = max_chars - len(head) - len(tail) - 80
        if len(text) > room:
            text = text[: max(room - 1, 0)] + "…"
        parts.append(f"Summary ({summary.period_start[:10]} to {summary.period_end[:10]}): {text}")
    used = len(head) + len(tail) + sum(len(p) + 1 for p in parts) + len("Recent facts, newest first:") + 1
    lines = []
    for fact in facts:
        line = f"- [{fact.type}] {fact.content} ({fact.last_seen_at[:10]})"
        if used + len(line) + 1 > max_chars:
            break
        lines.append(line)
        used += len(line) + 1
    if lines:
        parts.append("Recent facts, newest first:\n" + "\n".join(lines))
    if not parts:
        return ""
    return "\n".join([head, *parts, tail])


def describe_gap(gap: timedelta) -> str:
    """A human phrase for an idle gap: 'just now', '5 minutes', '2 hours 5 minutes', '3 days 4 hours'."""
    seconds = int(gap.total_seconds())
    if seconds < 60:
        return "less than a minute"
    minutes, _ = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)

    def unit(n: int, word: str) -> str:
        return f"{n} {word}{'' if n == 1 else 's'}"

    if days:
        return unit(days, "day") + (f" {unit(hours, 'hour')}" if hours else "")
    if hours:
        return unit(hours, "hour") + (f" {unit(minutes, 'minute')}" if minutes else "")
    return unit(minutes, "minute")


def _utc_offset(moment: datetime) -> str:
    offset = moment.utcoffset() or timedelta(0)
    sign = "-" if offset < timedelta(0) else "+"
    total = abs(int(offset.total_seconds())) // 60
    return f"UTC{sign}{total // 60:02d}:{total % 60:02d}"


def temporal_context(now: datetime, zone: ZoneInfo, previous_message_at: datetime | None) -> str:
    local = now.astimezone(zone)
    if previous_message_at is None:
        gap = "This is the first message of the conversation."
    else:
        gap = f"Time since the previous message: {describe_gap(now - previous_message_at)}."
    lines = [
        f"Today is {local:%A}, {local:%Y-%m-%d}.",
        f"Local time: {local:%H:%M} ({_utc_offset(local)}, timezone {zone.key}).",
        gap,
        "Resolve relative dates ('tomorrow', 'next Friday') from this date and timezone.",
    ]
    return "<temporal_context>\n" + "\n".join(lines) + "\n</temporal_context>"


_GENERAL_GUIDELINES = """\
Chaining: a request may need several tools in sequence. Call a tool, read its result, then
decide the next call; calls that do not depend on each other may be made together. Stop
calling tools once you can answer."""

_HONESTY_RULES = """\
Honesty rules, strict:
- Never say you saved, sent, wrote or changed anything unless a tool call in this
  conversation returned success for exactly that action.
- Never promise to do something later unless a tool call in this conversation set it up.
- Never write a URL or file path that no tool returned; never invent an artifact link.
- If a tool fails, is denied, or awaits the user's approval, say so plainly; an action waiting
  for approval has NOT happened yet.
- If you lack a tool for something, say you cannot do it rather than pretending."""

_NO_TOOLS = """\
No tools are available in this turn: you cannot look anything up, save, send or change
anything, or act later. Never say you did, and never invent a link to something you made;
if the user asks for an action, say plainly that you cannot do it now."""

DOMAIN_GUIDELINES: Mapping[str, str] = {
    # shared by every tool of a domain, shown once when any of them is offered
    "proactive": (
        'Reminders and scheduled jobs: use execution mode "message" when the stored text is enough to\n'
        'send as it is ("remind me to call Ana"), and "agent" when the job must think or use tools\n'
        'when it fires ("every morning, summarize the weather").'
    ),
}


def _tool_guidelines(tools: Iterable[ToolContract]) -> list[str]:
    """Each offered domain's and tool's own guidance, once, in the order of the tool names."""
    texts: list[str] = []
    for contract in sorted({t.name: t for t in tools}.values(), key=lambda t: t.name):
        domain = DOMAIN_GUIDELINES.get(contract.name.split(".", 1)[0], "")
        texts += [text for text in (domain, contract.guideline.strip()) if text and text not in texts]
    return texts


def tool_execution_guidelines(tools: Iterable[ToolContract]) -> str:
    """The rules for using tools, made only from the tools offered this turn (``tools``): the
    general rules whenever there is one, each tool's ``guideline``, or a note that there are none."""
    offered = list(tools)
    if not offered:
        body = _NO_TOOLS
    else:
        body = "\n".join([_GENERAL_GUIDELINES, *_tool_guidelines(offered), _HONESTY_RULES])
    return f"<tool_execution_guidelines>\n{body}\n</tool_execution_guidelines>"


def build_system_prompt(
    *,
    system_prompt: str,
    name: str,
    summary: str | None,
    now: datetime,
    zone: ZoneInfo,
    previous_message_at: datetime | None,
    tools: Iterable[ToolContract],
    scheduled: ScheduledRun | None = None,
    memory: str = "",
) -> str:
    """The whole system prompt; ``tools``: the contracts the model is offered this turn;
    ``scheduled``: this turn is a proactive job's run, not an answer to a message."""
    layers = [
        base_layer(system_prompt, name=name),
        conversation_context(summary, memory),
        temporal_context(now, zone, previous_message_at),
        tool_execution_guidelines(tools),
    ]
    if scheduled is not None:
        layers.append(scheduled_run_context(scheduled))
    return "\n\n".join(layers)


@dataclass(frozen=True, slots=True)
class ScheduledRun:
    job_id: str | None
    quiet_token: str | None = None  # notify if_actionable: answer exactly this when there is nothing to report


def scheduled_run_context(run: ScheduledRun) -> str:
    lines = [
        "This turn was started by a scheduled job" + (f" ({run.job_id})" if run.job_id else "")
        + ", not by a message from the user. The user's last message is the instruction the job was",
        "created with; do it now and write what the user should read. Nobody can approve actions",
        "during this turn, and you cannot create, change or cancel scheduled jobs from it.",
    ]
    if run.quiet_token:
        lines.append(f"If there is nothing worth telling the user, answer exactly {run.quiet_token} and nothing else.")
    return "<scheduled_run>\n" + "\n".join(lines) + "\n</scheduled_run>"
