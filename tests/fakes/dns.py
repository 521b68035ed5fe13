"""A resolver standing in for the event loop's ``getaddrinfo``, the one way tools.netguard looks a
name up, so a test can say which names were asked (and that none was)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Mapping, Sequence
from typing import Any

import pytest


class CountingResolver:
    """Answers from a table of name -> address(es) (a name missing from it does not resolve) and
    records every name asked."""

    def __init__(self, answers: Mapping[str, str | Sequence[str]]) -> None:
        self.answers = dict(answers)
        self.asked: list[str] = []

    async def getaddrinfo(self, host: str, port: int, **_: Any) -> list[Any]:
        self.asked.append(host)
        found = self.answers.get(host)
        if found is None:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        addresses = [found] if isinstance(found, str) else list(found)
        return [(socket.AF_INET6, socket.SOCK_STREAM, 6, "", (a, port, 0, 0)) if ":" in a
                else (socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port)) for a in addresses]


def install_resolver(monkeypatch: pytest.MonkeyPatch, answers: Mapping[str, str | Sequence[str]]) -> CountingResolver:
    """A CountingResolver answering ``answers`` for the running event loop, until the test ends."""
    resolver = CountingResolver(answers)
    monkeypatch.setattr(asyncio.get_running_loop(), "getaddrinfo", resolver.getaddrinfo)
    return resolver
