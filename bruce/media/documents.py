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

__all__ = ["DocumentText", "read_document", "decode_text", "cut_note", "own_words", "for_summary", "MARK",
           "READ_TIMEOUT_S"]

MARK = "[document: "  # a document's text in a message's stored text starts here
READ_TIMEOUT_S = 30.0  # a PDF not read by then is given up


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


def _pdf_text(data: bytes, what: str, max_chars: int) -> tuple[str, int, int]:
    """(text, pages read, pages): pages are read until more than ``max_chars`` were found, so a
    long PDF costs no more than the part of it that is shown."""
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
        texts: list[str] = []
        found = 0
        for page in reader.pages:
            texts.append((page.extract_text() or "").strip())
            found += len(texts[-1]) + 2
            if found > max_chars:
                break
        return "\n\n".join(texts).strip(), len(texts), len(reader.pages)
    except MediaError:
        raise
    except Exception:  # pypdf raises many kinds on a file that is not a PDF or is broken
        raise MediaError(f"I could not read {what}: it is not a PDF, or it is damaged.") from None


async def read_document(data: bytes, *, kind: str, what: str, max_chars: int,
                        max_read_s: float = READ_TIMEOUT_S) -> DocumentText:
    """The text of a document of ``kind`` (".pdf", ".txt", ".md", ".csv"), cut at ``max_chars``. A
    PDF that takes longer than ``max_read_s`` to read (a crafted or enormous file) is given up with
    a clear reply; its thread finishes on its own, the conversation does not wait for it."""
    if not data:
        raise MediaError(f"I could not read {what}: it is empty (0 bytes).")
    if kind == ".pdf":
        try:
            text, read, pages = await asyncio.wait_for(asyncio.to_thread(_pdf_text, data, what, max_chars), max_read_s)
        except TimeoutError:
            raise MediaError(f"I gave up reading {what}: it took longer than {max_read_s:g} s.") from None
        if not text:
            raise MediaError(f"I could not read {what}: it has no text layer (a scan?), and I cannot read scans.")
        if read < pages:  # stopped early: the whole text's length is not known, its page count is
            return DocumentText(f"{text[:max_chars]}\n[… cut: the document has {pages} pages, the first {max_chars} "
                                f"characters are shown]", len(text), True)
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


def for_summary(text: str, attachments: str | None) -> str:
    """A stored message as the session summary may fold it: a document's text is left out (the
    summary goes into the system prompt, where nothing from outside belongs), and a short note
    says a document was read, so the summary still knows it happened."""
    own = own_words(text, attachments)
    if own == text:
        return text
    return f"{own}\n[a document was read here; its text is left out of the summary: it came from outside]".strip()
