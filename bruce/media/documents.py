"""Documents: their text, for the model and the history.

A PDF's text layer is read with pypdf in a worker thread (parsing a large file must not stall the
event loop); .txt, .md and .csv are decoded as UTF-8, else as Windows-1252 with replacement, which
never fails. A PDF pypdf cannot open, one locked with a password, or one with no text layer (a
scan) is refused with a clear reply. The text is cut at ``media.max_document_chars``, with a note
saying so. What a document says is text from outside: the turn that reads it is tainted
(docs/security.md).
"""

from __future__ import annotations

import asyncio
import io
import json
from dataclasses import dataclass

from bruce.errors import MediaError

__all__ = ["DocumentText", "read_document", "decode_text", "cut_note", "own_words", "MARK"]

MARK = "[document: "  # a document's text in a message's stored text starts here


@dataclass(frozen=True, slots=True)
class DocumentText:
    text: str  # as the model sees it: cut, with the note
    chars: int  # the whole text's length
    cut: bool


def cut_note(chars: int, shown: int) -> str:
    return f"[… cut: the document has {chars} characters, the first {shown} are shown]"


def decode_text(data: bytes) -> str:
    """UTF-8 (a BOM dropped), else Windows-1252 with replacement characters: never raises."""
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return data.decode("utf-16", errors="replace")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return data.decode("cp1252", errors="replace")


def _pdf_text(data: bytes, what: str) -> str:
    from pypdf import PdfReader

    locked = MediaError(f"I could not read {what}: it is locked with a password.")
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            try:
                opened = reader.decrypt("")  # locked only against changes: readable without a password
            except Exception:  # a cipher pypdf cannot undo here
                raise locked from None
            if not opened:
                raise locked
        return "\n\n".join((page.extract_text() or "").strip() for page in reader.pages).strip()
    except MediaError:
        raise
    except Exception:  # pypdf raises many kinds on a file that is not a PDF or is broken
        raise MediaError(f"I could not read {what}: it is not a PDF, or it is damaged.") from None


async def read_document(data: bytes, *, kind: str, what: str, max_chars: int) -> DocumentText:
    """The text of a document of ``kind`` (".pdf", ".txt", ".md", ".csv"), cut at ``max_chars``."""
    if not data:
        raise MediaError(f"I could not read {what}: it is empty (0 bytes).")
    if kind == ".pdf":
        text = await asyncio.to_thread(_pdf_text, data, what)
        if not text:
            raise MediaError(f"I could not read {what}: it has no text layer (a scan?), and I cannot read scans.")
    else:
        text = decode_text(data).strip()
        if "\x00" in text:
            raise MediaError(f"I could not read {what}: it is not a text file.")
        if not text:
            raise MediaError(f"I could not read {what}: it holds no text.")
    if len(text) <= max_chars:
        return DocumentText(text, len(text), False)
    return DocumentText(f"{text[:max_chars]}\n{cut_note(len(text), max_chars)}", len(text), True)


def own_words(text: str, attachments: str | None) -> str:
    """A stored message's text without the documents it carried: what its sender wrote or said
    (long-term memory learns only from that; a document's text is from outside). Everything from
    the first document on is left out, a voice note after it too: less, never a document's words."""
    try:
        entries = json.loads(attachments) if attachments else []
    except json.JSONDecodeError:
        entries = []
    read = isinstance(entries, list) and any(isinstance(e, dict) and e.get("chars") is not None for e in entries)
    return text.split(MARK, 1)[0].strip() if read else text
