"""The console channel: chat with Bruce in a terminal (``bruce chat``).

Lines are read on a daemon thread (so a blocked read never holds up shutdown) and handed to
the worker; each reply is printed before the next prompt. ``/quit`` or end of input ends the
session. With a terminal, input gets readline editing and history. While a turn runs, each
tool step is printed as a line (``  · <the tool's name>: ok``) on standard error, so a pipe's output
holds only the replies; the answer itself is printed once, complete, when it is sent.

What this channel prints comes from a model, a web page or a file, so a terminal must never
act on it: control characters (C0 but newline and tab, DEL, C1), bidi overrides and other
invisible format characters are shown as text (``ESC`` as ``^[``, U+202E as ``<U+202E>``) by
``bruce.safe_text.visible``, in replies, step lines and the approval prompt alike.

Input that is not valid UTF-8 (or holds lone surrogates) is decoded with replacement
characters, and the user is told. A line the database cannot store (``StoreError`` from
``deliver``: locked past the busy timeout, disk full) is not lost: the user is told once, and
the same line is delivered again with backoff (1, 2, 4… s, at most 30 s) until it is stored,
or until the user types ``/quit`` (or Ctrl-D at a terminal); lines typed meanwhile wait their
turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import sys
import threading
from collections import deque
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TextIO

from bruce.channel import ConfirmationRequest, Inbound, IncomingMessage
from bruce.clock import Clock
from bruce.errors import StoreError
from bruce.safe_text import visible
from bruce.turns.progress import ProgressEvent, Thinking, ToolFinished

__all__ = ["ConsoleChannel"]

QUIT_COMMANDS = {"/quit", "/exit"}
RETRY_FIRST_S = 1.0
RETRY_MAX_S = 30.0

_SURROGATE = re.compile("[\ud800-\udfff]")


def _as_text(line: str) -> tuple[str, bool]:
    """The line as valid text (undecodable bytes and lone surrogates replaced by U+FFFD), and
    whether anything had to be replaced."""
    if not _SURROGATE.search(line):
        return line, False
    try:  # bytes the reader could not decode, kept by surrogateescape: decode them properly
        return line.encode("utf-8", "surrogateescape").decode("utf-8", "replace"), True
    except UnicodeEncodeError:  # other lone surrogates
        return _SURROGATE.sub("\ufffd", line), True


def _consume(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()  # a delivery finishing after the session was cut: nobody waits for it


class _Quit(Exception):
    """The user left while a line was waiting to be stored."""


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
        self._name = visible(assistant_name)
        self._stdin = stdin or sys.stdin
        self._stdout = stdout or sys.stdout
        self._steps = steps or sys.stderr  # tool step lines and notices: the terminal, not a pipe's output
        self._user_id = user_id
        self._chat_id = chat_id
        self._interactive = self._stdin.isatty() and self._stdout.isatty()
        self._inbound: Inbound | None = None
        self._ready = threading.Event()  # interactive: prompt again only once the reply is out
        self._lines: asyncio.Queue[str | None] = asyncio.Queue()
        self._backlog: deque[str | None] = deque()  # lines read while one waited for the database
        self._asked = False  # a prompt is out and its line has not arrived yet
        self.busy = False  # a line is being stored or answered (not while backing off)
        self.lines_handled = 0  # lines whose turn has fully finished (reply and requests shown)

    async def start(self, inbound: Inbound) -> None:
        self._inbound = inbound

    async def stop(self) -> None:
        self._inbound = None

    # output: everything goes through visible() -----------------------------------------

    def _print(self, text: str) -> None:
        clear = "\r\033[K" if self._interactive else ""  # wipe the "thinking" line first
        self._stdout.write(clear + visible(text) + "\n")
        self._stdout.flush()

    def _print_step(self, text: str) -> None:
        clear = "\r\033[K" if self._interactive else ""
        self._steps.write(clear + visible(text) + "\n")
        self._steps.flush()

    def _notice(self, text: str) -> None:
        """One line for the user about the session itself (not a reply): with the step lines."""
        self._print_step(text)

    notice = _notice

    def show(self, event: ProgressEvent) -> None:
        """A step of the turn in flight: a line per finished tool; "thinking" at a terminal."""
        match event:
            case Thinking() if self._interactive:
                self._stdout.write("(thinking…)\r")
                self._stdout.flush()
            case ToolFinished(tool=tool, status=status):
                self._print_step(f"  · {visible(tool)}: {visible(str(status))}")

    async def send_text(self, chat_id: str, text: str) -> None:
        self._print(f"{self._name}> {visible(text)}")

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
        # built only from escaped fields: nothing the model wrote can move the cursor or
        # start a line of its own outside the indented preview
        rid, tool, risk = visible(request.id), visible(request.tool_name), visible(request.risk)
        lines = [
            f"[approval needed] {visible(request.summary)}",
            f"  tool: {tool} (risk {risk})",
            f"  side effects: {visible(request.side_effects)}",
        ]
        if request.expires_shown:
            lines.append(f"  expires at {visible(request.expires_shown)}")
        if request.preview:
            preview = visible(request.preview).splitlines()
            lines.append("  preview:\n" + "\n".join("    " + line for line in preview))
        if request.step_up:
            lines.append(f"  This needs the owner's local approval: run `bruce approve {rid}` on the machine.")
        else:
            lines.append(f"  Type /approve {rid} or /deny {rid}")
        self._print("\n".join(lines))

    async def send_file(self, chat_id: str, path: Path, caption: str | None = None) -> None:
        self._print(f"{self._name}> [file] {visible(str(path))}" + (f" - {visible(caption)}" if caption else ""))

    # input ------------------------------------------------------------------------------

    def _read_lines(self, loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[str | None]) -> None:
        reconfigure = getattr(self._stdin, "reconfigure", None)
        if reconfigure is not None:  # keep undecodable bytes (as surrogates) instead of failing the read
            try:
                reconfigure(errors="surrogateescape")
            except (ValueError, OSError):
                pass
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
        except UnicodeDecodeError:  # a stream that cannot keep bad bytes: end the session, say why
            loop.call_soon_threadsafe(self._notice, "(input that is not valid UTF-8 text could not be read; leaving)")
            loop.call_soon_threadsafe(queue.put_nowait, None)
        except (OSError, ValueError, KeyboardInterrupt):  # stdin closed under us: the session is over
            with contextlib.suppress(RuntimeError):  # ...and so may be the event loop, already
                loop.call_soon_threadsafe(queue.put_nowait, None)

    def _offer_prompt(self) -> None:
        """At a terminal: let the reading thread show a prompt (once; not while one is out)."""
        if not self._asked:
            self._asked = True
            self._ready.set()

    def _received(self, line: str | None) -> str | None:
        self._asked = False
        if line is None:
            return None
        text, replaced = _as_text(line)
        if replaced:
            self._notice("(some of what you typed was not valid UTF-8 text; those bytes were replaced)")
        return text

    async def _next_line(self) -> str | None:
        if self._backlog:
            return self._backlog.popleft()
        return self._received(await self._lines.get())

    def _save_terminal(self) -> Any:
        if not self._interactive:
            return None
        try:
            import termios

            return termios.tcgetattr(self._stdin.fileno())
        except (ImportError, OSError, ValueError):
            return None

    def _restore_terminal(self, saved: Any) -> None:
        """readline may be left mid-line by a signal; give the shell its terminal back as it was."""
        if saved is None:
            return
        try:
            import termios

            termios.tcsetattr(self._stdin.fileno(), termios.TCSADRAIN, saved)
        except (ImportError, OSError, ValueError):
            pass

    async def interact(self) -> None:
        """Read and answer lines until /quit or end of input. Cancelling it stops reading; a turn
        already started is left to the worker (drained at shutdown), not cancelled."""
        if self._inbound is None:
            raise RuntimeError("start() the console channel before interact()")
        loop = asyncio.get_running_loop()
        self._lines = asyncio.Queue()
        self._backlog.clear()
        self._asked = False
        saved = self._save_terminal()
        threading.Thread(target=self._read_lines, args=(loop, self._lines), daemon=True, name="console-input").start()
        try:
            if self._interactive:
                self._print(f"Chatting with {self._name}. /quit to leave.")
            self._offer_prompt()
            while True:
                line = await self._next_line()
                if line is None or line.strip() in QUIT_COMMANDS:
                    return
                try:
                    if line.strip():
                        await self._submit(line.strip())
                except _Quit:
                    return
                finally:
                    self.lines_handled += 1
                if not self._backlog:  # (not when cancelled: nobody will read that line)
                    self._offer_prompt()
        finally:
            self._restore_terminal(saved)

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
        self.busy = True
        try:
            handle = await self._deliver_until_stored(message)
            if handle is not None:
                await asyncio.shield(handle)  # cancelled (a signal): the worker drains the turn
        finally:
            self.busy = False

    async def _deliver_until_stored(self, message: IncomingMessage) -> Awaitable[None] | None:
        """``deliver``, again and again with backoff while the database cannot store the line."""
        delay, told, waiting = RETRY_FIRST_S, False, False
        try:
            while True:
                try:
                    handle = await self._deliver(message)
                except StoreError as exc:
                    if not told:
                        told = True
                        self._backlog.extend(self._queued())  # typed ahead: answered after this one
                        self._notice(f"(your message was not saved yet: {exc}; trying again with backoff, "
                                     "/quit to give up)")
                    self.busy, waiting = False, True  # nothing to wait for while backing off
                    if await self._wait_or_quit(delay):
                        self._notice("(gave up: your message was not saved)")
                        raise _Quit from None
                    self.busy, waiting = True, False
                    delay = min(delay * 2, RETRY_MAX_S)
                    continue
                if told:
                    self._notice("(your message is saved now)")
                return handle
        except asyncio.CancelledError:  # the session is ending (a signal)
            if waiting:
                self._notice("(gave up: your message was not saved)")
            elif told:  # the last try goes on in the background: stored (answered at the next start) or not
                self._notice("(stopping: your message may not have been saved)")
            raise

    async def _deliver(self, message: IncomingMessage) -> Awaitable[None] | None:
        assert self._inbound is not None
        task = asyncio.ensure_future(self._inbound.deliver(message))
        try:
            return await asyncio.shield(task)  # a signal must not cut a write in half
        except asyncio.CancelledError:
            task.add_done_callback(_consume)
            raise

    def _queued(self) -> list[str | None]:
        lines = []
        while not self._lines.empty():
            lines.append(self._received(self._lines.get_nowait()))
        return lines

    async def _wait_or_quit(self, seconds: float) -> bool:
        """Back off for ``seconds``; True when the user quits meanwhile (``/quit``; at a terminal
        also Ctrl-D). Other lines typed now wait in the backlog, in order."""
        self._offer_prompt()
        pause = asyncio.ensure_future(self._clock.sleep(seconds))
        line_in: asyncio.Future[str | None] | None = None
        try:
            while True:
                line_in = asyncio.ensure_future(self._lines.get())
                await asyncio.wait({pause, line_in}, return_when=asyncio.FIRST_COMPLETED)
                if not line_in.done():
                    return False
                line = self._received(line_in.result())
                if (line is None and self._interactive) or (line is not None and line.strip() in QUIT_COMMANDS):
                    return True
                self._backlog.append(line)
                if line is not None:
                    self._offer_prompt()
                if pause.done():
                    return False
        finally:
            for waiting in (pause, line_in):
                if waiting is not None and not waiting.done():
                    waiting.cancel()  # an asyncio.Queue loses no line to a cancelled get


class _StepLines:
    """Progress on a terminal: a line per tool step; the text arrives complete, once."""

    wants_text = False

    def __init__(self, console: ConsoleChannel) -> None:
        self._console = console

    async def emit(self, event: ProgressEvent) -> None:
        self._console.show(event)
