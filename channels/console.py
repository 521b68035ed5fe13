"""The console channel: chat with Bruce in a terminal (``bruce chat``).

Lines are read on a daemon thread (so a blocked read never holds up shutdown) and handed to
the worker; each reply is printed before the next prompt. ``/quit`` or end of input ends the
session. With a terminal, input gets readline editing and history. While a turn runs, each
tool step is printed as a line (``  · web.search: ok``) on standard error, so a pipe's output
holds only the replies; the answer itself is printed once, complete, when it is sent.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TextIO

from bruce.channel import ConfirmationRequest, Inbound, IncomingMessage
from bruce.clock import Clock
from bruce.progress import ProgressEvent, Thinking, ToolFinished

__all__ = ["ConsoleChannel"]

QUIT_COMMANDS = {"/quit", "/exit"}


class ConsoleChannel:
    name = "console"
    max_message_length = 100_000

    def __init__(
        self,
        *,
        clock: Clock,
        assistant_name: str = "Bruce",
        stdin: TextIO | None = None,
        stdout: TextIO | None = None,
        steps: TextIO | None = None,
        user_id: str = "local",
        chat_id: str = "local",
    ) -> None:
        self._clock = clock
        self._name = assistant_name
        self._stdin = stdin or sys.stdin
        self._stdout = stdout or sys.stdout
        self._steps = steps or sys.stderr  # tool step lines: the terminal, but not a pipe's output
        self._user_id = user_id
        self._chat_id = chat_id
        self._interactive = self._stdin.isatty() and self._stdout.isatty()
        self._inbound: Inbound | None = None
        self._ready = threading.Event()  # interactive: prompt again only once the reply is out
        self.lines_handled = 0  # lines whose turn has fully finished (reply and requests shown)

    async def start(self, inbound: Inbound) -> None:
        self._inbound = inbound

    async def stop(self) -> None:
        self._inbound = None

    def _print(self, text: str) -> None:
        clear = "\r\033[K" if self._interactive else ""  # wipe the "thinking" line first
        self._stdout.write(clear + text + "\n")
        self._stdout.flush()

    def _print_step(self, text: str) -> None:
        clear = "\r\033[K" if self._interactive else ""
        self._steps.write(clear + text + "\n")
        self._steps.flush()

    async def send_text(self, chat_id: str, text: str) -> None:
        self._print(f"{self._name}> {text}")

    @asynccontextmanager
    async def thinking(self, chat_id: str) -> AsyncIterator[None]:
        if self._interactive:
            self._stdout.write("(thinking…)\r")
            self._stdout.flush()
        yield

    @asynccontextmanager
    async def progress(self, chat_id: str) -> AsyncIterator[_StepLines]:
        yield _StepLines(self)

    async def send_confirmation(self, chat_id: str, request: ConfirmationRequest) -> None:
        lines = [
            f"[approval needed] {request.summary}",
            f"  tool: {request.tool_name} (risk {request.risk})",
            f"  side effects: {request.side_effects}",
        ]
        if request.preview:
            lines.append("  preview:\n" + "\n".join("    " + line for line in request.preview.splitlines()))
        if request.step_up:
            lines.append(f"  This needs the owner's local approval: run `bruce approve {request.id}` on the machine.")
        else:
            lines.append(f"  Type /approve {request.id} or /deny {request.id}")
        self._print("\n".join(lines))

    async def send_file(self, chat_id: str, path: Path, caption: str | None = None) -> None:
        self._print(f"{self._name}> [file] {path}" + (f" - {caption}" if caption else ""))

    def _read_lines(self, loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[str | None]) -> None:
        if self._interactive:
            try:
                import readline  # noqa: F401  (enables line editing for input())
            except ImportError:
                pass
        try:
            while True:
                if self._interactive:
                    self._ready.wait()
                    self._ready.clear()
                    try:
                        line: str | None = input("you> ")
                    except EOFError:
                        line = None
                else:
                    raw = self._stdin.readline()
                    line = raw.rstrip("\n") if raw else None
                loop.call_soon_threadsafe(queue.put_nowait, line)
                if line is None:
                    return
        except (OSError, ValueError, KeyboardInterrupt):
            loop.call_soon_threadsafe(queue.put_nowait, None)

    async def interact(self) -> None:
        """Read and answer lines until /quit or end of input."""
        if self._inbound is None:
            raise RuntimeError("start() the console channel before interact()")
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[str | None] = asyncio.Queue()
        threading.Thread(target=self._read_lines, args=(loop, queue), daemon=True, name="console-input").start()
        if self._interactive:
            self._print(f"Chatting with {self._name}. /quit to leave.")
        self._ready.set()
        while True:
            line = await queue.get()
            if line is None or line.strip() in QUIT_COMMANDS:
                return
            try:
                if line.strip():
                    await self._submit(line.strip())
            finally:
                self.lines_handled += 1
                self._ready.set()

    async def _submit(self, text: str) -> None:
        assert self._inbound is not None
        message = IncomingMessage(
            channel=self.name,
            chat_id=self._chat_id,
            sender_id=self._user_id,
            text=text,
            platform_message_id=None,
            timestamp=self._clock.now(),
        )
        handle = await self._inbound.deliver(message)
        if handle is not None:
            await handle


class _StepLines:
    """Progress on a terminal: a line per tool step; the text arrives complete, once."""

    wants_text = False

    def __init__(self, console: ConsoleChannel) -> None:
        self._console = console

    async def emit(self, event: ProgressEvent) -> None:
        match event:
            case Thinking() if self._console._interactive:
                self._console._stdout.write("(thinking…)\r")
                self._console._stdout.flush()
            case ToolFinished(tool=tool, status=status):
                self._console._print_step(f"  · {tool}: {status}")
