"""A local web site for the web tools' tests: an aiohttp app on 127.0.0.1 that records requests."""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web


class LocalServer:
    """An aiohttp app on 127.0.0.1:<random port> that logs every request path."""

    def __init__(self) -> None:
        self.app = web.Application()
        self.requests: list[str] = []
        self.headers: list[dict[str, str]] = []
        self.port = 0
        self.stopping = asyncio.Event()  # slow handlers end early when the server stops
        self._runner: web.AppRunner | None = None

        @web.middleware
        async def record(request: web.Request, handler: Any) -> web.StreamResponse:
            self.requests.append(request.path_qs)
            self.headers.append(dict(request.headers))
            return await handler(request)

        self.app.middlewares.append(record)

    def url(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def route(self, path: str, handler: Any) -> None:
        self.app.router.add_get(path, handler)

    async def start(self) -> None:
        self._runner = web.AppRunner(self.app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = self._runner.addresses[0][1]

    async def stop(self) -> None:
        self.stopping.set()
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def paths(self) -> list[str]:
        return [p.split("?", 1)[0] for p in self.requests]
