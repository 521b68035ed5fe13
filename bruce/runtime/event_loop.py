"""Which event loop the daemon runs on (``runtime.event_loop``).

``auto`` (the default) runs on uvloop where it is installed: it is a dependency everywhere but
Windows, and the loop's own scheduling and socket handling run in C there (on the Telegram
benchmark, about 0.8 ms less CPU and 0.5 ms less overhead per message; docs/benchmarks.md).
``asyncio`` is the way back to the standard loop should uvloop ever misbehave with a library;
``uvloop`` insists on it and fails at start-up, naming the key, when it cannot be loaded.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, Literal, TypeVar

from bruce.errors import ConfigError

EventLoopChoice = Literal["auto", "uvloop", "asyncio"]
T = TypeVar("T")


def loop_factory(choice: EventLoopChoice) -> tuple[str, Callable[[], asyncio.AbstractEventLoop]]:
    """The loop's name and the factory that makes it, for the operator's choice."""
    if choice == "asyncio":
        return "asyncio", asyncio.new_event_loop
    try:
        import uvloop
    except ImportError as exc:
        if choice == "uvloop":
            raise ConfigError(f"runtime.event_loop: uvloop is asked for but cannot be loaded ({exc}); "
                              "install it, or set runtime.event_loop to auto or asyncio") from exc
        return "asyncio", asyncio.new_event_loop
    return "uvloop", uvloop.new_event_loop


def run(main: Coroutine[Any, Any, T], choice: EventLoopChoice = "auto") -> T:
    """``asyncio.run(main)`` on the chosen loop (``asyncio.Runner``: no global policy is changed)."""
    try:
        _name, factory = loop_factory(choice)
    except BaseException:
        main.close()  # never awaited: no "coroutine was never awaited" warning on the way out
        raise
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main)


def running_loop_name() -> str:
    """``uvloop`` or ``asyncio``: what this process runs on, for the start-up log line."""
    return "uvloop" if type(asyncio.get_running_loop()).__module__.startswith("uvloop") else "asyncio"
