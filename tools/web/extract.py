"""A fetched page's title and readable text: decoding its bytes, and trafilatura on HTML.

Nothing here runs on the event loop: lxml and charset detection hold the GIL for long stretches,
so ``tools/web/page.py`` runs ``readable_in_worker`` in a worker process
(:class:`tools.procworker.ProcessWorker`), which can be stopped at its time limit.
"""

from __future__ import annotations

import re
from typing import Any

import structlog
import trafilatura

__all__ = ["readable", "readable_in_worker"]

log = structlog.get_logger(__name__)

_SPACE_RE = re.compile(r"\s+")


def _decode(body: bytes, charset: str | None, *, truncated: bool) -> str:
    if charset:
        try:
            return body.decode(charset, errors="replace")
        except LookupError:
            pass
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as exc:
        if truncated and exc.start >= len(body) - 4:
            return body.decode("utf-8", errors="ignore")  # cap cut a character in half
    return trafilatura.utils.decode_file(body)


def _title(html: str) -> str | None:
    """The document's <title>, else the title trafilatura's metadata finds."""
    try:
        tree = trafilatura.load_html(html)
        node = tree.find(".//title") if tree is not None else None
        if node is not None:
            title = _SPACE_RE.sub(" ", node.text_content()).strip()
            if title:
                return title
        meta = trafilatura.extract_metadata(html)
        if meta is not None and meta.title:
            return str(meta.title).strip() or None
    except Exception:  # noqa: BLE001 - the title is best effort
        log.debug("web.title_failed", exc_info=True)
    return None


def _extract_html(html: str, url: str) -> tuple[str | None, str]:
    """(title, readable text) of an HTML document."""
    text: str | None = None
    try:
        text = trafilatura.extract(
            html, url=url, include_comments=False, include_tables=True,
            include_links=False, include_images=False, output_format="txt",
        )
    except Exception:  # noqa: BLE001 - fall back to the plain text below
        log.debug("web.extract_failed", exc_info=True)
    if not text:
        try:
            text = trafilatura.html2txt(html)
        except Exception:  # noqa: BLE001
            log.debug("web.html2txt_failed", exc_info=True)
            text = ""
    return _title(html), (text or "").strip()


def readable(body: bytes, *, url: str, media_type: str, charset: str | None,
             truncated: bool) -> tuple[str | None, str]:
    """(title, text) of a fetched page: decoding (charset detection can take a while on odd
    bytes) and extraction. CPU-bound: ``read_url`` runs it in the reader process."""
    decoded = _decode(body, charset, truncated=truncated)
    if media_type == "text/plain":
        return None, decoded.strip()
    return _extract_html(decoded, url)


def readable_in_worker(request: dict[str, Any], body: bytes) -> list[str | None]:
    """The reader process's side of ``tools/web/page.py``'s reader: [title, text], the text cut
    one character past ``max_chars`` (so the caller still sees that it was longer)."""
    title, text = readable(body, url=request["url"], media_type=request["media_type"],
                           charset=request["charset"], truncated=request["truncated"])
    return [title, text[: request["max_chars"] + 1]]
