"""The web a case sees: its pages (``setup.web``) and a SearXNG-shaped search answer
(``setup.search``, else every page) served on 127.0.0.1. The case's config points
``web.search`` at it and lets ``web.read_url`` fetch only from it, so nothing reaches the
internet. ``{web}`` in a page, a search result or a user turn is this server's address."""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

from aiohttp import web

from bruce.eval.cases import Case, CaseError, WebPage

__all__ = ["PageServer", "WEB", "page_body"]

WEB = "{web}"
_TITLE = re.compile(r"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)
_TAGS = re.compile(r"<(script|style)\b.*?</\1>|<[^>]+>", re.IGNORECASE | re.DOTALL)


def page_body(page: WebPage, case_file: Path) -> str:
    """A page's text as given (``{web}`` not yet replaced); a page file is read relative to the case file."""
    if page.body is not None:
        return page.body
    assert page.file is not None  # the model allows one of the two
    path = case_file.parent / page.file
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CaseError(f"{case_file}: page file {page.file}: cannot be read ({exc})") from None


def _summary(path: str, body: str) -> dict[str, str]:
    found = _TITLE.search(body)
    title = html.unescape(found.group(1)).strip() if found else path
    text = " ".join(html.unescape(_TAGS.sub(" ", body)).split())
    return {"title": title, "snippet": text[:200]}


class PageServer:
    def __init__(self, case: Case) -> None:
        self._case = case
        self._runner: web.AppRunner | None = None
        self.base_url = ""
        self.host = ""
        self._pages: dict[str, tuple[WebPage, str]] = {}
        self._results: list[dict[str, str]] = []

    async def __aenter__(self) -> PageServer:
        app = web.Application()
        app.router.add_get("/search", self._search)
        app.router.add_get("/{path:.*}", self._page)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.host = f"127.0.0.1:{port}"
        self.base_url = f"http://{self.host}"
        self._load()
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    def expand(self, text: str) -> str:
        return text.replace(WEB, self.base_url)

    def _load(self) -> None:
        setup = self._case.spec.setup
        for path, page in setup.web.items():
            self._pages[path] = (page, self.expand(page_body(page, self._case.file)))
        if setup.search is not None:
            self._results = [{"title": self.expand(r.title), "url": self.expand(r.url),
                              "content": self.expand(r.snippet)} for r in setup.search]
        else:
            self._results = []
            for path, (_, body) in self._pages.items():
                summary = _summary(path, body)
                self._results.append({"title": summary["title"], "url": self.base_url + path,
                                      "content": summary["snippet"]})

    async def _search(self, request: web.Request) -> web.Response:
        body: dict[str, Any] = {"query": request.query.get("q", ""), "results": self._results}
        return web.json_response(body)

    async def _page(self, request: web.Request) -> web.Response:
        found = self._pages.get(request.path)
        if found is None:
            return web.Response(status=404, text="no such page in this eval case", content_type="text/plain")
        page, body = found
        kind, _, charset = page.content_type.partition(";")
        return web.Response(status=page.status, text=body, content_type=kind.strip(),
                            charset=charset.partition("=")[2].strip() or "utf-8")
