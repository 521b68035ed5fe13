"""Pairing requests: ``/pairing`` and ``GET /api/pairing`` (the pending codes), and
``POST /api/pairing/CODE/ACTION`` or the page's forms: approve or deny a code, as ``bruce pairing
approve|deny`` does (``PairingStore.decide``: a code is used once)."""

from __future__ import annotations

from typing import Any

import structlog
from aiohttp import web

from bruce.admin.pages.rendering import Page, redirect
from bruce.store.pairing import PairingStore
from bruce.values import DecisionOutcome

__all__ = ["PairingPages"]

log = structlog.get_logger(__name__)


class PairingPages:
    def __init__(self, pairing: PairingStore, page: Page) -> None:
        self._pairing = pairing
        self._page = page

    def routes(self) -> list[web.RouteDef]:
        return [web.get("/pairing", self._pairing_page), web.get("/api/pairing", self._api_pairing),
                web.post("/api/pairing/{code}/{action}", self._api_pairing_decide),
                web.post("/pairing/{code}/{action}", self._pairing_form)]

    async def _pending(self) -> list[dict[str, Any]]:
        return [{"code": r.code, "channel": r.channel, "sender_id": r.sender_id, "display_name": r.display_name,
                 "created_at": r.created_at, "expires_at": r.expires_at} for r in await self._pairing.pending()]

    async def _decide(self, request: web.Request) -> tuple[int, dict[str, Any]]:
        """approve | deny a pending code, as ``bruce pairing approve|deny`` does."""
        action, code = request.match_info["action"], request.match_info["code"]
        if action not in ("approve", "deny"):
            return 400, {"error": f"action: {action[:20]!r} is not approve or deny"}
        typed = "".join(code.split()).replace("-", "").upper()[:16]
        outcome, found = await self._pairing.decide(typed, approve=action == "approve")
        if found is None or outcome not in (DecisionOutcome.APPROVED, DecisionOutcome.DENIED):
            return 400, {"error": f"pairing code {typed!r} is not pending ({outcome})"}
        log.info("admin.pairing_decided", code=typed, outcome=str(outcome), channel=found.channel)
        return 200, {"code": typed, "outcome": str(outcome), "channel": found.channel, "sender_id": found.sender_id}

    async def _api_pairing(self, request: web.Request) -> web.Response:
        return web.json_response({"items": await self._pending()})

    async def _api_pairing_decide(self, request: web.Request) -> web.Response:
        status, body = await self._decide(request)
        return web.json_response(body, status=status)

    async def _pairing_form(self, request: web.Request) -> web.Response:
        status, body = await self._decide(request)
        if status != 200:
            return self._page("pairing.html", request=request, requests=await self._pending(), error=body["error"],
                              status=status)
        return redirect("/pairing")

    async def _pairing_page(self, request: web.Request) -> web.Response:
        return self._page("pairing.html", request=request, requests=await self._pending(), error=None)
