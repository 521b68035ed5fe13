"""Drive the real console channel through a pipe, as a person at a terminal would."""

from __future__ import annotations

import asyncio
import io
import os
import re

from channels.console import ConsoleChannel


class ConsoleDriver:
    def __init__(self, clock) -> None:
        read_fd, self._write_fd = os.pipe()
        self._stdin = os.fdopen(read_fd, "r", encoding="utf-8")
        self.stdout = io.StringIO()
        self.steps = io.StringIO()  # step lines and notices (standard error in `bruce chat`)
        self.channel = ConsoleChannel(clock=clock, stdin=self._stdin, stdout=self.stdout, steps=self.steps)
        self._task: asyncio.Task[None] | None = None
        self._seen = 0
        self._closed = False

    def start(self) -> None:
        self._task = asyncio.create_task(self.channel.interact())

    def type(self, line: str | bytes) -> None:
        """Type a line (bytes: exactly these bytes) without waiting for anything."""
        raw = line if isinstance(line, bytes) else line.encode()
        os.write(self._write_fd, raw + b"\n")

    async def wait_for_notice(self, text: str, *, timeout: float = 30.0) -> str:
        """Wait until ``text`` shows among the step lines and notices; return them all."""
        deadline = asyncio.get_running_loop().time() + timeout
        while text not in self.steps.getvalue():
            await asyncio.sleep(0.01)
            assert asyncio.get_running_loop().time() < deadline, f"no notice {text!r} in {self.steps.getvalue()!r}"
        return self.steps.getvalue()

    async def say(self, line: str | bytes, *, timeout: float = 30.0) -> str:
        """Type a line, wait until the console has finished handling it, return what it printed."""
        target = self.channel.lines_handled + 1
        self.type(line)
        deadline = asyncio.get_running_loop().time() + timeout
        while self.channel.lines_handled < target:
            await asyncio.sleep(0.01)
            assert asyncio.get_running_loop().time() < deadline, "the console did not finish the line"
        out = self.stdout.getvalue()[self._seen:]
        self._seen = len(self.stdout.getvalue())
        return out

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._task is None or not self._task.done():
            os.write(self._write_fd, b"/quit\n")
        os.close(self._write_fd)
        if self._task:
            await asyncio.wait_for(self._task, 10)
        self._stdin.close()


def request_id(text: str) -> str:
    match = re.search(r"/approve ([0-9a-f]{8})|bruce approve ([0-9a-f]{8})", text)
    assert match, f"no request id in {text!r}"
    return match.group(1) or match.group(2)
