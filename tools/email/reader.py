"""An email's HTML as text: the same extraction as ``web.read_url`` (``tools/web/extract.py``,
trafilatura), in a worker process of its own that is stopped at its time limit, so a crafted HTML
part can hold neither the event loop nor a thread."""

from __future__ import annotations

from bruce.safe_text import visible
from tools.procworker import ProcessWorker, WorkerTimeout

__all__ = ["html_text", "TIME_LIMIT_S"]

TIME_LIMIT_S = 10.0
_READER = ProcessWorker("tools.web.extract:readable_in_worker", time_limit_s=TIME_LIMIT_S)


async def html_text(body: bytes, charset: str | None, max_chars: int) -> str:
    request = {"url": "", "media_type": "text/html", "charset": charset, "truncated": False, "max_chars": max_chars}
    try:
        _, text = await _READER.call(request, body)
    except WorkerTimeout:
        return f"(the HTML of this email could not be turned into text within {TIME_LIMIT_S:g} s)"
    return visible(text or "")
