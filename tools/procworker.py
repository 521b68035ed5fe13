"""Worker processes for CPU-heavy tool work (``math.calculate``'s evaluation, ``web.read_url``'s
page extraction): a child process can be killed at its time limit, a thread cannot, and the
event loop never waits on the work. ``shutdown()`` stops them all (the app calls it when it
stops; it also runs at interpreter exit)."""

from __future__ import annotations

import asyncio
import atexit
import importlib
import json
import os
import signal
import subprocess
import sys
import threading
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bruce.errors import ToolFailed

__all__ = ["ProcessWorker", "WorkerTimeout", "WorkerGone", "shutdown"]


def _answer(target: Callable[..., Any], header: dict[str, Any], payload: bytes | None) -> dict[str, Any]:
    try:
        result = target(header["request"]) if payload is None else target(header["request"], payload)
        return {"ok": result}
    except ToolFailed as exc:
        return {"error": exc.code, "message": str(exc)}
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which raises it
        return {"crash": f"{type(exc).__name__}: {exc}"}


def _serve(target_name: str) -> None:
    """A child's loop. Each request is one JSON line ``{"request": ..., "payload": n}``, followed
    by ``n`` raw bytes when ``payload`` is given (then the target is called with both); each
    answer is one JSON line. Ends at the end of its input (the parent closed it or went away)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C in a terminal is for the parent to handle
    out = os.fdopen(os.dup(1), "wb")  # the answers; anything else printed (a log line) goes to stderr
    os.dup2(2, 1)
    module, _, name = target_name.partition(":")
    target = getattr(importlib.import_module(module), name)
    requests = sys.stdin.buffer
    out.write(b'{"ready": true}\n')
    out.flush()
    while line := requests.readline():
        header = json.loads(line)
        size = header.get("payload")
        payload = None if size is None else requests.read(size)
        answer = _answer(target, header, payload)
        try:
            text = json.dumps(answer)
        except ValueError as exc:  # an integer too long to print: the limits above should prevent it
            text = json.dumps({"error": "too_large", "message": f"the result cannot be written out: {exc}"})
        out.write(text.encode() + b"\n")
        out.flush()


_ROOT = str(Path(__file__).resolve().parent.parent)  # the folder holding the tools package
_WORKERS: weakref.WeakSet[ProcessWorker] = weakref.WeakSet()


class WorkerTimeout(Exception):
    """The worker did not answer within ``limit_s``; it was killed (the next call starts another)."""

    def __init__(self, limit_s: float) -> None:
        self.limit_s = limit_s
        super().__init__(f"no answer within {limit_s:g} s")


class WorkerGone(RuntimeError):
    """The worker process ended without answering (it crashed or was killed from outside)."""


class ProcessWorker:
    """One child process that runs ``target`` (``"module:function"``, taking and returning JSON
    values) for one request at a time, each within ``time_limit_s``; CPU-heavy work done there
    can never block the event loop, and unlike a thread it can be stopped. Started on first use;
    killed and replaced after a time-out or a cancelled call (so a late answer can never be taken
    for the next one's). A ToolFailed raised by the target is raised again here, with its code.

    Every worker is stopped by :func:`shutdown` and at interpreter exit."""

    def __init__(self, target: str, *, time_limit_s: float) -> None:
        self._target = target
        self._time_limit_s = time_limit_s
        self._proc: subprocess.Popen[bytes] | None = None
        self._buffer = bytearray()
        self._dead: list[subprocess.Popen[bytes]] = []  # killed, waiting to be reaped
        self._locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = weakref.WeakKeyDictionary()
        self._guard = threading.Lock()  # start/stop from atexit or another thread
        _WORKERS.add(self)

    def _forget(self) -> None:
        """In a forked child: the parent's worker is not ours to use or stop; close our copies of
        its pipes and start afresh if needed."""
        self._guard = threading.Lock()
        for proc in [self._proc, *self._dead]:
            if proc is not None:
                _close(proc)
                _close_output(proc)
        self._proc, self._dead = None, []
        self._buffer.clear()
        self._locks = weakref.WeakKeyDictionary()

    @property
    def pid(self) -> int | None:
        """The running child's process id, if there is one."""
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else None

    async def call(self, request: Any, payload: bytes | None = None, *, time_limit_s: float | None = None) -> Any:
        """The target's answer to ``request`` (a JSON value), called as ``target(request)``, or
        ``target(request, payload)`` when raw bytes go with it (sent as they are: no encoding
        work on the loop). ToolFailed as the target raised it; WorkerTimeout when the child had
        to be killed; WorkerGone when it died on its own."""
        limit = self._time_limit_s if time_limit_s is None else time_limit_s
        header = {"request": request} if payload is None else {"request": request, "payload": len(payload)}
        message = [json.dumps(header).encode() + b"\n", *([payload] if payload else [])]
        loop = asyncio.get_running_loop()
        async with self._locks.setdefault(loop, asyncio.Lock()):
            proc = await self._ready()
            try:
                async with asyncio.timeout(limit):
                    for part in message:
                        await self._send(proc, part)
                    line = await self._line(proc)
            except TimeoutError:
                self._discard()
                await asyncio.to_thread(_reap, proc)  # gone before we answer, without blocking the loop
                raise WorkerTimeout(limit) from None
            except BaseException:  # cancelled (e.g. the registry's time-out) or a broken pipe: this child is done
                self._discard()
                raise
        answer = json.loads(line)
        if "ok" in answer:
            return answer["ok"]
        if "error" in answer:
            raise ToolFailed(answer["message"], code=answer["error"])
        raise RuntimeError(f"the worker {self._target} failed: {answer.get('crash')}")

    def shutdown(self) -> None:
        """Stop the child (if any) and reap every child this worker started. Safe to call more
        than once, and from atexit."""
        with self._guard:
            proc, self._proc = self._proc, None
            if proc is not None:
                proc.kill()  # it holds nothing worth a graceful exit
                _close(proc)
                self._dead.append(proc)
            for dead in self._dead:
                _reap(dead)
            self._dead.clear()

    async def _ready(self) -> subprocess.Popen[bytes]:
        """The running child, started (and awaited until it says it is ready) if needed."""
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        self._discard()
        with self._guard:
            self._proc = _start(self._target)
        self._buffer.clear()
        try:
            line = await self._line(self._proc)
        except BaseException:
            self._discard()
            raise
        if json.loads(line) != {"ready": True}:
            self._discard()
            raise RuntimeError(f"the worker {self._target} did not start: {line[:200]!r}")
        self._reap_dead()  # a child killed just before this one started has ended by now
        return self._proc

    async def _send(self, proc: subprocess.Popen[bytes], data: bytes) -> None:
        """Write ``data`` to the child without blocking the loop (a request may be megabytes)."""
        assert proc.stdin is not None
        fd = proc.stdin.fileno()
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(fd, view):]
            except BlockingIOError:
                await _fd_ready(fd, writable=True)

    async def _line(self, proc: subprocess.Popen[bytes]) -> bytes:
        """The child's next output line, read without blocking the loop."""
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        end = self._buffer.find(b"\n")
        while end < 0:
            await _fd_ready(fd, writable=False)
            while end < 0:
                try:
                    chunk = os.read(fd, 1 << 20)
                except BlockingIOError:
                    break
                if not chunk:
                    raise WorkerGone(f"the worker {self._target} stopped without answering")
                if (at := chunk.find(b"\n")) >= 0:
                    end = len(self._buffer) + at
                self._buffer += chunk
        line = bytes(self._buffer[:end])
        del self._buffer[: end + 1]
        return line

    def _discard(self) -> None:
        """Kill the current child (if any) and reap the ones already dead, without waiting."""
        with self._guard:
            proc, self._proc = self._proc, None
            if proc is not None:
                proc.kill()
                _close(proc)
                self._dead.append(proc)
        self._reap_dead()

    def _reap_dead(self) -> None:
        """Reap the killed children that have ended by now, without waiting for the others."""
        with self._guard:
            alive = []
            for dead in self._dead:
                if dead.poll() is None:
                    alive.append(dead)
                else:
                    _close_output(dead)
            self._dead = alive


async def _fd_ready(fd: int, *, writable: bool) -> None:
    """Wait until ``fd`` can be read (or written) without blocking."""
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()
    if writable:
        loop.add_writer(fd, _set_once, ready)
    else:
        loop.add_reader(fd, _set_once, ready)
    try:
        await ready
    finally:
        if writable:
            loop.remove_writer(fd)
        else:
            loop.remove_reader(fd)


def _set_once(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _start(target: str) -> subprocess.Popen[bytes]:
    code = f"import sys; sys.path.insert(0, {_ROOT!r}); import tools.procworker as w; w._serve({target!r})"
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=_ROOT, bufsize=0,
    )
    assert proc.stdin is not None and proc.stdout is not None
    os.set_blocking(proc.stdin.fileno(), False)
    os.set_blocking(proc.stdout.fileno(), False)
    return proc


def _close(proc: subprocess.Popen[bytes]) -> None:
    if proc.stdin is not None:
        try:
            proc.stdin.close()
        except OSError:  # a broken pipe: the child is gone already
            pass


def _close_output(proc: subprocess.Popen[bytes]) -> None:
    if proc.stdout is not None:
        proc.stdout.close()


def _reap(proc: subprocess.Popen[bytes]) -> None:
    """Wait for a killed child to be gone (a SIGKILL takes effect within milliseconds)."""
    try:
        proc.wait(timeout=5.0)
    except subprocess.TimeoutExpired:  # pragma: no cover - a process that ignores SIGKILL
        return
    _close_output(proc)


def shutdown() -> None:
    """Stop every tool worker process (the calculator's, and the page reader's of ``tools.web``).
    The app should call this when it stops; it also runs at interpreter exit. A later call to a
    tool simply starts a new worker."""
    for worker in list(_WORKERS):
        worker.shutdown()


def _forget_after_fork() -> None:
    for worker in list(_WORKERS):
        worker._forget()


atexit.register(shutdown)
os.register_at_fork(after_in_child=_forget_after_fork)
