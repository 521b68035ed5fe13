"""tools.procworker: a child process that answers JSON requests, killed at its time limit or when
its caller is cancelled, replaced when it dies, and stopped by shutdown()."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from typing import Any

import pytest

from bruce.errors import ToolFailed
from tools import procworker
from tools.procworker import ProcessWorker, WorkerGone, WorkerTimeout


def answer(request: Any) -> Any:
    """A worker target (runs in the child)."""
    if request == "spin":
        while True:
            pass
    if request == "refuse":
        raise ToolFailed("not that one", code="refused")
    if request == "crash":
        raise KeyError("boom")
    if request == "exit":
        os._exit(3)
    if request == "print":
        print("a stray line on stdout")  # must not be taken for the answer
    return {"echo": request}


def measure(request: Any, payload: bytes) -> dict[str, Any]:
    """A worker target taking raw bytes with its request."""
    return {"request": request, "size": len(payload), "head": payload[:5].decode()}


TARGET = f"{__name__}:answer"


def process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture
def worker() -> Iterator[ProcessWorker]:
    worker = ProcessWorker(TARGET, time_limit_s=5.0)
    yield worker
    worker.shutdown()


async def test_it_starts_on_first_use_and_keeps_one_child(worker: ProcessWorker) -> None:
    assert worker.pid is None
    assert await worker.call([1, "two"]) == {"echo": [1, "two"]}
    pid = worker.pid
    assert pid is not None and pid != os.getpid()
    assert await worker.call("print") == {"echo": "print"}
    assert worker.pid == pid


async def test_raw_bytes_go_with_a_request() -> None:
    worker = ProcessWorker(f"{__name__}:measure", time_limit_s=5.0)
    try:
        body = b"hello" + b"x" * 3_000_000  # larger than a pipe holds: written as the child reads
        assert await worker.call({"url": "u"}, body) == {"request": {"url": "u"}, "size": len(body), "head": "hello"}
    finally:
        worker.shutdown()


async def test_a_tool_failure_in_the_child_is_raised_with_its_code(worker: ProcessWorker) -> None:
    with pytest.raises(ToolFailed) as err:
        await worker.call("refuse")
    assert (err.value.code, str(err.value)) == ("refused", "not that one")
    with pytest.raises(RuntimeError, match=r"failed: KeyError: 'boom'"):
        await worker.call("crash")
    assert await worker.call("still here") == {"echo": "still here"}  # the same child goes on


async def test_a_child_that_dies_while_answering_is_worker_gone_and_replaced(worker: ProcessWorker) -> None:
    with pytest.raises(WorkerGone):
        await worker.call("exit")
    assert await worker.call("again") == {"echo": "again"}


async def test_a_worker_past_its_time_limit_is_killed(worker: ProcessWorker) -> None:
    assert await worker.call("1+1") == {"echo": "1+1"}
    pid = worker.pid
    with pytest.raises(WorkerTimeout) as err:
        await worker.call("spin", time_limit_s=0.2)
    assert err.value.limit_s == 0.2 and str(err.value) == "no answer within 0.2 s"
    assert pid is not None and not process_exists(pid)


async def test_a_cancelled_call_kills_its_child(worker: ProcessWorker) -> None:
    # the registry's own time-out cancels the handler: a late answer must never be read as the next one's
    assert await worker.call("first") == {"echo": "first"}
    pid = worker.pid
    spinning = asyncio.create_task(worker.call("spin"))
    await asyncio.sleep(0.05)
    spinning.cancel()
    with pytest.raises(asyncio.CancelledError):
        await spinning
    assert worker.pid is None  # killed at once
    assert await worker.call("next") == {"echo": "next"}  # a new child, which answers this call and not the old one
    assert pid is not None and not process_exists(pid)  # the old one is reaped by then


async def test_a_child_killed_from_outside_is_replaced(worker: ProcessWorker) -> None:
    assert await worker.call("before") == {"echo": "before"}
    pid = worker.pid
    assert pid is not None
    os.kill(pid, 9)
    while worker.pid is not None:  # until the worker notices (worker.pid reaps a dead child)
        await asyncio.sleep(0.01)
    assert await worker.call("after") == {"echo": "after"}
    assert worker.pid != pid


async def test_calls_wait_their_turn(worker: ProcessWorker) -> None:
    answers = await asyncio.gather(*(worker.call(n) for n in range(5)))
    assert answers == [{"echo": n} for n in range(5)]


async def test_shutdown_stops_every_worker_and_a_later_call_starts_again() -> None:
    first, second = ProcessWorker(TARGET, time_limit_s=5.0), ProcessWorker(TARGET, time_limit_s=5.0)
    try:
        await first.call("a")
        await second.call("b")
        pids = [first.pid, second.pid]
        assert all(pid is not None and process_exists(pid) for pid in pids)
        procworker.shutdown()
        assert first.pid is None and second.pid is None
        assert not any(process_exists(pid) for pid in pids if pid is not None)
        procworker.shutdown()  # twice is fine
        assert await first.call("c") == {"echo": "c"}
    finally:
        first.shutdown()
        second.shutdown()
