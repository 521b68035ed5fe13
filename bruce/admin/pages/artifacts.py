"""Saved documents: ``/artifacts`` (the newest, with a short preview of the text ones) and
``/artifacts/ID/FILENAME`` (one file, as ``artifact.save`` linked it, sandboxed)."""

from __future__ import annotations

from pathlib import Path

from aiohttp import web

from bruce.admin.pages.rendering import Page
from bruce.store.artifacts import ArtifactStore

__all__ = ["ArtifactPages"]

LISTED = 100
PREVIEW_CHARS = 300


class ArtifactPages:
    def __init__(self, artifacts: ArtifactStore, folder: Path | None, page: Page) -> None:
        self._artifacts = artifacts
        self._folder = folder.resolve() if folder is not None else None  # None: no file is served
        self._page = page

    def routes(self) -> list[web.RouteDef]:
        return [web.get("/artifacts", self._artifacts_page), web.get("/artifacts/{id}/{filename}", self._artifact_file)]

    async def _artifacts_page(self, request: web.Request) -> web.Response:
        shown = []
        for record in await self._artifacts.recent(limit=LISTED):
            preview = ""
            file = self._file(record.path)
            if record.format != "html" and file is not None:
                try:
                    with open(file, encoding="utf-8", errors="replace") as handle:
                        preview = handle.read(PREVIEW_CHARS)
                except OSError:
                    preview = "(the file is missing)"
            shown.append({"record": record, "url": f"/artifacts/{record.id}/{record.filename}", "preview": preview})
        return self._page("artifacts.html", request=request, artifacts=shown)

    async def _artifact_file(self, request: web.Request) -> web.StreamResponse:
        """One artifact, as ``artifact.save`` linked it. The URL only names a row (id, and its exact
        filename); the file is the row's, and must lie inside the artifacts folder: no path
        in a URL ever reaches the file system. ``sandbox``: a saved page can never script this origin."""
        artifact_id, filename = request.match_info["id"], request.match_info["filename"]
        record = await self._artifacts.get(artifact_id) if artifact_id.isalnum() and len(artifact_id) <= 64 \
            else None
        file = self._file(record.path) if record is not None and record.filename == filename else None
        if record is None or file is None:
            raise web.HTTPNotFound(text="no such artifact")
        kind = {"html": "text/html", "markdown": "text/markdown"}.get(record.format, "text/plain")
        try:
            body = file.read_bytes()
        except OSError:
            raise web.HTTPNotFound(text="the artifact's file is missing") from None
        return web.Response(body=body, content_type=kind, charset="utf-8",
                            headers={"Content-Security-Policy": "sandbox", "X-Content-Type-Options": "nosniff"})

    def _file(self, stored: str) -> Path | None:
        """The file a row names (relative to the artifacts folder, as ``artifact.save`` stores it),
        if it lies inside that folder; None otherwise."""
        if self._folder is None:
            return None
        try:
            path = (self._folder / stored).resolve()
        except (OSError, ValueError):
            return None
        return path if path.is_relative_to(self._folder) else None
