"""Every English sentence Bruce itself says to the user, in one place.

What the model writes is the model's; these are the lines written by code: failure notices,
decisions on requests, recovery notes. A notice never hides an action: whatever completed, or
waits for approval, is named.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from bruce.clock import local_time
from bruce.safe_text import visible
from bruce.values import DecisionOutcome, ExecutionMode

__all__ = [
    "budget_reached",
    "budget_warning",
    "rate_limited",
    "job_missed",
    "job_held",
    "unlinked",
    "jobs_listing",
    "your_id",
    "LLM_DOWN",
    "INTERNAL_ERROR",
    "NOT_FINISHED",
    "EMPTY_ANSWER",
    "UNGROUNDED_LINK",
    "REMINDER_LINK_REMOVED",
    "actions_note",
    "with_actions",
    "message_too_long",
    "expired_while_offline",
    "interrupted_by_shutdown",
    "interrupted_by_crash",
    "interrupted_action",
    "interrupted_with_unknown",
    "unknown_outcome",
    "skipped_note",
    "proactive_failed",
    "command_usage",
    "new_session",
    "decision_text",
    "action_outcome",
    "approval_arrived_late",
    "llm_not_configured",
    "claim_note",
    "STRANGER_REFUSED",
    "PAIRING_FULL",
    "pairing_code",
]

LLM_DOWN = "I can't reach the language model right now, so I couldn't answer. Please try again in a few minutes."
INTERNAL_ERROR = "Something went wrong on my side while answering. Please try again."
NOT_FINISHED = "I could not finish this within the steps I'm allowed."
EMPTY_ANSWER = "The language model returned an empty answer, so I have nothing to tell you. Please ask again."
UNGROUNDED_LINK = "(I removed a link I could not actually produce: no tool created it in this turn.)"
REMINDER_LINK_REMOVED = "(I removed a link from this reminder: it pointed at a saved document that does not exist.)"
STRANGER_REFUSED = "Sorry, I only talk to my owner."
PAIRING_FULL = "I can't take new pairing requests right now. Please try again later."


def _snippet(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def actions_note(done: Sequence[str], waiting: Sequence[str]) -> str:
    """What did happen, in words: a failure notice must never hide an action, nor an approval
    request the user has not seen."""
    parts = []
    if done:
        parts.append(f"These actions completed: {', '.join(done)}.")
    if waiting:
        parts.append("Waiting for your approval: " + ", ".join(f"/approve {w}" for w in waiting) + ".")
    return " ".join(parts) if parts else "Nothing was done."


def with_actions(notice: str, done: Sequence[str], waiting: Sequence[str]) -> str:
    return f"{notice} {actions_note(done, waiting)}"


def message_too_long(chars: int, limit: int) -> str:
    return (f"Your message is {chars} characters long; I accept at most {limit}. "
            "Nothing was done with it. Please send it in shorter parts.")


def expired_while_offline(when: str, text: str) -> str:
    return (f"Sorry: I was offline when you sent this ({when}) and did not answer it: \"{_snippet(text)}\". "
            "Nothing was done about it; please send it again if it still matters.")


def interrupted_by_shutdown(done: Sequence[str], waiting: Sequence[str]) -> str:
    return with_actions("I was stopped while answering this, so I could not finish.", done, waiting) + (
        " Ask again if you still need the rest.")


def interrupted_by_crash(text: str, done: Sequence[str], waiting: Sequence[str]) -> str:
    return (f"I was interrupted while answering \"{_snippet(text)}\". {actions_note(done, waiting)} "
            "Ask again if you still need the rest.")


def _maybe(unknown: Sequence[tuple[str, str]]) -> str:
    calls = "; ".join(f"{name} ({summary})" if summary else name for name, summary in unknown)
    if len(unknown) == 1:
        return (f"A restart cut off this action, so it may or may not have happened: {calls}. "
                "I did not run it again; please check, and ask me again if it is still needed.")
    return (f"A restart cut off these actions, so they may or may not have happened: {calls}. "
            "I did not run them again; please check, and ask me again if they are still needed.")


def interrupted_with_unknown(text: str, done: Sequence[str], waiting: Sequence[str],
                             unknown: Sequence[tuple[str, str]]) -> str:
    """A message whose turn a crash cut off while a tool ran (``unknown``: its name and a short
    view of its arguments): what completed, what may or may not have happened."""
    finished = actions_note(done, waiting) if done or waiting else ""
    return " ".join(part for part in (f"I was interrupted while answering \"{_snippet(text)}\".", finished,
                                      _maybe(unknown)) if part)


def unknown_outcome(unknown: Sequence[tuple[str, str]]) -> str:
    """Tool calls outside a user's message (a scheduled task's) that a restart cut off."""
    return _maybe(unknown)


def interrupted_action(confirmation_id: str, tool_name: str) -> str:
    return (f"Request {confirmation_id} ({tool_name}) was interrupted by a restart while running; "
            "it may or may not have completed. Please check before asking again.")


def skipped_note(tools: Sequence[str]) -> str:
    names = ", ".join(dict.fromkeys(tools))
    return (f"(Skipped: {names}. It needs your approval, and a scheduled turn never runs such an action; "
            "ask me in chat if you want it done.)")


def proactive_failed(notice: str) -> str:
    return f"I could not complete a scheduled task. {notice}"


def _spent(spend: Any) -> str:
    parts = []
    if spend.limit_usd is not None:
        parts.append(f"${spend.usd:.2f} of ${spend.limit_usd:.2f}")
    if spend.limit_tokens is not None:
        parts.append(f"{spend.tokens:,} of {spend.limit_tokens:,} tokens")
    return ", ".join(parts)


def budget_reached(spend: Any, zone: ZoneInfo) -> str:
    return (f"Today's LLM budget is used up ({_spent(spend)}), so I cannot answer with the model until "
            f"{local_time(spend.resets_at, zone, weekday=True)}. The owner can raise today's budget once with "
            "`bruce budget allow --usd N`. Reminders still arrive.")


def budget_warning(spend: Any, zone: ZoneInfo) -> str:
    return (f"Note: {int(spend.fraction * 100)}% of today's LLM budget is used ({_spent(spend)}). "
            f"At 100% I stop using the model until {local_time(spend.resets_at, zone, date=False)}.")


def rate_limited(retry_at: datetime, zone: ZoneInfo) -> str:
    return (f"You are sending messages faster than I take them, so I am not reading them for now. "
            f"Messages sent before {local_time(retry_at, zone, date=False, seconds=True)} are not answered; after that, write again.")


def job_missed(content: str, when: str, mode: ExecutionMode) -> str:
    what = "reminder" if mode is ExecutionMode.MESSAGE else "scheduled task"
    shown = content if len(content) <= 300 else content[:297] + "..."
    return (f"I was not running when this {what} was due ({when}), and it is too late to send it now, "
            f"so it was not sent: {shown}")


_SCHEME = re.compile(r"(?i)\b([a-z][a-z0-9+.-]{0,20}):(//)|\b(mailto|tel|sms|tg|javascript|data|file):()")
_DOT = re.compile(r"(?<=[A-Za-z0-9-])\.(?=[A-Za-z])")


def unlinked(text: str) -> str:
    """``text`` with nothing a chat client would turn into a link: ``http://a.example/x`` reads
    ``http[:]//a[.]example/x`` (schemes like ``mailto:`` too; dots before a letter, as in a domain)."""
    text = _SCHEME.sub(lambda m: f"{m.group(1) or m.group(3)}[:]{m.group(2) or ''}", text)
    return _DOT.sub("[.]", text)


def job_held(job_id: str, tool: str, arguments: str, *, untrusted: bool = True) -> str:
    """A tainted job run (an untrusted job's, or one in a chat where others write) stopped at a
    tool that needs a yes: what it wanted, short, inert (control characters written out, no
    clickable link, inside a code span it cannot leave)."""
    shown = unlinked(" ".join(visible(arguments).split())).replace("`", "'")
    shown = shown if len(shown) <= 200 else shown[:197] + "..."
    why = ("this job is untrusted (it was made or changed after untrusted text, such as a web page, entered a chat)"
           if untrusted else "this run read what someone else wrote in this chat")
    return (f"Scheduled job {job_id} stopped before running {tool} with `{shown}`: that needs your yes, and {why}. "
            "Nothing of it was done and its answer was not sent. If you want it, ask me in chat; if not, cancel the "
            f"job (ask me, or `bruce jobs cancel {job_id}`). I say this once until the job is changed.")


def jobs_listing(lines: list[str], runs: list[str] | None = None) -> str:
    """``/jobs``: the conversation's live jobs, then its last runs (``runs``: one line each, newest
    first), so a reminder that just fired is not answered with "nothing"."""
    parts = ["Scheduled jobs in this conversation:\n" + "\n".join(f"- {line}" for line in lines) if lines
             else "No active jobs in this conversation."]
    if runs:
        parts.append("Last runs:\n" + "\n".join(f"- {line}" for line in runs))
    return "\n\n".join(parts)


_PLATFORMS = {"telegram": "Telegram", "discord": "Discord"}
_ON_THIS_MACHINE = {"console": "the terminal", "web": "the web chat"}


def your_id(channel: str, sender_id: str | None) -> str:
    """``/id`` where the core answers it: the sender's id on a chat platform, or, on a channel of
    this machine (the console, the web chat), that there is none to allow-list."""
    if channel in _PLATFORMS and sender_id:
        return f"Your {_PLATFORMS[channel]} user id is {sender_id}."
    where = _ON_THIS_MACHINE.get(channel, f"the {channel} channel")
    return (f"There is no user id to allow-list here: {where} is on this machine, and whoever uses it is the "
            "owner. Send /id to the bot on Telegram or Discord to learn your id there.")


def memory_listing(facts: list[Any], summary: Any | None, zone: ZoneInfo, *, limit: int = 50) -> str:
    """``/memory``: what Bruce remembers (active facts, newest first), and how to forget one."""
    if not facts and summary is None:
        return "I don't remember anything about you yet."
    lines = ["What I remember (forget one with /forget ID):"]
    for fact in sorted(facts, key=lambda f: f.last_seen_at, reverse=True)[:limit]:
        lines.append(f"{fact.id}. [{fact.type}] {fact.content}")
    if len(facts) > limit:
        lines.append(f"…and {len(facts) - limit} more (`bruce memory list` on the machine shows them all).")
    if summary is not None:
        lines.append(f"Summary ({local_time(summary.period_start, zone)} to {local_time(summary.period_end, zone)}): "
                     f"{summary.content}")
    return "\n".join(lines)


USAGE_IS_THE_OWNERS = "Usage and cost are the owner's to see: ask them."  # /usage from a guest


def command_usage(name: str) -> str:
    return f"Usage: /{name} ID, with the 8-character id shown in the request."


def new_session(*, summary_kept: bool, summary_failed: bool) -> str:
    """The reply to ``/new``: the earlier messages left the model's window, with or without a summary."""
    if summary_failed:
        return ("Started a fresh conversation. I could not make a summary of what came before (the language "
                "model did not answer), so I start without it.")
    if summary_kept:
        return "Started a fresh conversation. I keep a short summary of what came before."
    return "Started a fresh conversation."


def decision_text(outcome: DecisionOutcome, confirmation_id: str, tool_name: str | None, status: str | None) -> str:
    cid, tool = confirmation_id, tool_name or "the action"
    match outcome:
        case DecisionOutcome.NOT_FOUND:
            return f"There is no request {cid} in this conversation. Nothing was run."
        case DecisionOutcome.WRONG_USER:
            return f"Only the person who asked can decide on request {cid}. Nothing was run."
        case DecisionOutcome.EXPIRED:
            return f"Request {cid} has expired; nothing was run. Ask again if you still want it."
        case DecisionOutcome.ALREADY_DECIDED:
            return f"Request {cid} was already handled ({status or 'decided'}); nothing more was run."
        case DecisionOutcome.NEEDS_STEP_UP:
            return (f"Request {cid} ({tool}) is critical: it can only be approved by the owner on the machine "
                    f"running Bruce, with `bruce approve {cid}`. Nothing has run yet.")
        case DecisionOutcome.DENIED:
            return f"Denied: {tool} will not run (request {cid})."
        case DecisionOutcome.APPROVED:
            return f"Approved: {tool} is running (request {cid}); I'll report the outcome here."
        case DecisionOutcome.QUEUED:
            return f"Approved: {tool} will run shortly (request {cid})."
        case DecisionOutcome.UNAVAILABLE:
            return f"I'm restarting, so nothing was decided on request {cid}. Please try again in a minute."
    raise AssertionError(outcome)


def action_outcome(confirmation_id: str, tool_name: str, ok: bool, error: str | None) -> str:
    """The code-written first line about an approved action: sent even if the model is down."""
    if ok:
        return f"Done: {tool_name} ran (request {confirmation_id})."
    return f"{tool_name} did not succeed (request {confirmation_id}): {error}"


def approval_arrived_late(confirmation_id: str, tool_name: str) -> str:
    """A local approval nobody picked up before the request expired (the daemon was down)."""
    return (f"Your approval of request {confirmation_id} ({tool_name}) was not picked up before the request "
            "expired, so nothing was run. Ask again if you still want it.")


def llm_not_configured(model: str, env: str) -> str:
    return (
        f"No API key is configured for the language model {model}. "
        f"Set the environment variable {env} (config: llm.api_key: \"${{{env}}}\"), "
        "or point llm.api_base at a local OpenAI-compatible server such as Ollama "
        "(e.g. llm.model: ollama_chat/llama3.2, llm.api_base: http://127.0.0.1:11434)."
    )


_CLAIMED = {"saved": "saved", "scheduled": "scheduled", "sent": "sent", "remembered": "stored in memory"}


def claim_note(actions: Sequence[str]) -> str:
    """Appended by code when the answer still claims an action no tool performed."""
    verbs = " or ".join(dict.fromkeys(a if a != "remembered" else "remembered" for a in actions))
    done = ", ".join(f"nothing was {_CLAIMED.get(a, a)}" for a in dict.fromkeys(actions))
    return f"(Note from Bruce: no tool {verbs} anything in this turn; {done}.)"


def pairing_code(code: str) -> str:
    """What an unknown sender is told when pairing is on (the owner runs the command)."""
    return f"I don't know you yet. To pair, ask the owner to run: bruce pairing approve {code} (expires in 1 hour)."
