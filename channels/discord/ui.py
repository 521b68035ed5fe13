"""What the Discord channel shows besides replies: the approval request with its buttons, and the
status message of a turn that runs tools.

Approval buttons carry persistent custom ids, ``bruce:approve:ID`` and ``bruce:deny:ID``, in a
``discord.ui.View`` with ``timeout=None``. The view only draws them: it is stopped before it is
sent, so discord.py's view store keeps nothing per message, and every press is handled by the
channel's ``on_interaction`` from the custom id alone, the same before and after a restart. A
step-up request has no Approve button. After a decision (or at expiry) the message is edited
with the outcome and the view is sent again with its buttons disabled.

The status message (``StatusMessage``, the turn's progress sink) is posted at the first tool
step, edited as steps start and finish at most once every ``EDIT_EVERY_S``, and deleted when the
turn ends, just before the answer is sent. It is a preview: any failure to show it is logged and
the turn goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from dataclasses import dataclass

import aiohttp
import discord
import structlog

from bruce.channel import ConfirmationRequest
from bruce.turns.progress import ProgressEvent, ToolFinished, ToolStarted
from bruce.values import ToolStatus
from channels.discord.format import FENCE, MESSAGE_LIMIT

__all__ = ["NO_MENTIONS", "EDIT_EVERY_S", "StatusMessage", "approval_text", "approval_view", "decided_text",
           "parse_custom_id"]

log = structlog.get_logger(__name__)

NO_MENTIONS = discord.AllowedMentions.none()  # the model's text never pings @everyone, a role or a user
EDIT_EVERY_S = 1.5
STATUS_TIMEOUT_S = 10.0
CUSTOM_ID = re.compile(r"bruce:(approve|deny):([A-Za-z0-9_-]{1,64})")
_MARK = {ToolStatus.OK: "✓", ToolStatus.AWAITING_CONFIRMATION: "⏸", ToolStatus.SKIPPED: "–"}


def parse_custom_id(custom_id: str) -> tuple[bool, str] | None:
    """``(approve, confirmation id)`` from one of our buttons' custom id; None for any other."""
    found = CUSTOM_ID.fullmatch(custom_id)
    return (found.group(1) == "approve", found.group(2)) if found else None


def approval_text(request: ConfirmationRequest) -> str:
    """The request as a Discord message (Markdown, well under the 2000-character limit)."""
    escape = discord.utils.escape_markdown
    lines = [f"**Approval needed** (request `{request.id}`)", escape(request.summary[:400]),
             f"Tool: `{request.tool_name}` (risk {request.risk})", f"Side effects: {escape(request.side_effects[:300])}"]
    if request.expires_shown:
        lines.append(f"Expires at {escape(request.expires_shown)}.")
    if request.step_up:
        lines.append(f"This needs the owner's approval on the machine: run `bruce approve {request.id}` there.")
    if request.preview:
        room = MESSAGE_LIMIT - 200 - sum(len(line) + 1 for line in lines)
        preview = request.preview.replace(FENCE, "`\u200b``")[: max(room, 0)]  # a fence in it would end ours
        lines.append(f"{FENCE}\n{preview}\n{FENCE}")
    return "\n".join(lines)


def decided_text(original: str, outcome: str) -> str:
    """The request message once decided: what it asked, then what became of it."""
    suffix = f"\n\n**{discord.utils.escape_markdown(outcome[:300])}**"
    return original[: MESSAGE_LIMIT - len(suffix)] + suffix


def approval_view(confirmation_id: str, *, step_up: bool, disabled: bool = False) -> discord.ui.View:
    view = discord.ui.View(timeout=None)
    if not step_up:
        view.add_item(discord.ui.Button(label="Approve", style=discord.ButtonStyle.success, disabled=disabled,
                                        custom_id=f"bruce:approve:{confirmation_id}"))
    view.add_item(discord.ui.Button(label="Deny", style=discord.ButtonStyle.danger, disabled=disabled,
                                    custom_id=f"bruce:deny:{confirmation_id}"))
    view.stop()  # drawn only: presses go to the channel's on_interaction (see the module docstring)
    return view


@dataclass(slots=True)
class _Step:
    tool: str
    activity: str  # the tool's label, from its contract
    status: ToolStatus | None = None

    def line(self) -> str:
        mark = "…" if self.status is None else _MARK.get(self.status, "✗")
        return f"{mark} {self.activity}"


class StatusMessage:
    """A turn's tool steps as one message, edited at most once every ``EDIT_EVERY_S``."""

    wants_text = False  # steps only: the answer is not streamed for it

    def __init__(self, target: discord.PartialMessageable) -> None:
        self._target = target
        self._steps: list[_Step] = []
        self._message: discord.Message | None = None
        self._shown = ""
        self._last = 0.0
        self._pending: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()
        self._closed = False

    async def emit(self, event: ProgressEvent) -> None:
        match event:
            case ToolStarted(tool=tool, activity=activity):
                self._steps.append(_Step(tool, activity))
            case ToolFinished(tool=tool, status=status):
                for step in reversed(self._steps):
                    if step.tool == tool and step.status is None:
                        step.status = status
                        break
            case _:
                return
        wait = EDIT_EVERY_S - (time.monotonic() - self._last)
        if self._message is not None and wait > 0:
            if self._pending is None:  # the latest steps are shown when the interval is over
                self._pending = asyncio.create_task(self._later(wait), name="discord.status")
            return
        await self._put()

    def _text(self) -> str:
        return "\n".join(["-# working on it", *(step.line() for step in self._steps[-20:])])

    async def _later(self, wait: float) -> None:
        await asyncio.sleep(wait)
        self._pending = None
        await self._put()

    async def _put(self) -> None:
        async with self._lock:
            text = self._text()
            if self._closed or text == self._shown:
                return
            self._last, self._shown = time.monotonic(), text
            try:
                async with asyncio.timeout(STATUS_TIMEOUT_S):
                    if self._message is None:
                        self._message = await self._target.send(text, allowed_mentions=NO_MENTIONS,
                                                                suppress_embeds=True)
                    else:
                        self._message = await self._message.edit(content=text, allowed_mentions=NO_MENTIONS,
                                                                suppress=True)
            except (discord.HTTPException, discord.RateLimited, aiohttp.ClientError, TimeoutError) as exc:
                log.info("discord.status_failed", error=type(exc).__name__)

    async def close(self) -> None:
        """Delete the status message: the answer replaces it."""
        if self._pending is not None:
            self._pending.cancel()
            await asyncio.gather(self._pending, return_exceptions=True)
        async with self._lock:
            self._closed = True
            if self._message is None:
                return
            with contextlib.suppress(discord.HTTPException, discord.RateLimited, aiohttp.ClientError, TimeoutError):
                async with asyncio.timeout(STATUS_TIMEOUT_S):
                    await self._message.delete()
