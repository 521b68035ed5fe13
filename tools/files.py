"""files.write: create, overwrite or append to one text file inside the configured notes folder.

The path the model gives is always relative to ``notes_dir``. Refused (``path_not_allowed``):
absolute paths, drive letters, ``..`` segments, NUL characters, and anything that resolves
(after following symlinks) outside ``notes_dir``. Only ``.md`` and ``.txt`` files may be
written (``extension_not_allowed``); the final file may not exceed ``max_bytes``
(``too_large``), and neither may an existing file be changed that is already larger (it is
refused before it is read); an existing file that is not UTF-8 text is left alone
(``not_text``); disk problems are ``io_error``. Writes are atomic: a temporary file next to the
target, then ``os.replace``.

Dry run (always required before the real call) returns a unified diff of the change and
touches nothing on disk, not even folders. That diff is what the user approves, so it must show
the whole change: a change whose diff would be longer than ``DIFF_MAX_CHARS`` (4000) characters
is refused (``preview_too_long``) rather than cut, and the model is told to split it into
smaller writes (a first part, then appends). Diffing is bounded too: a change so scattered that
finding its diff would take more than ``DIFF_MAX_WORK`` comparisons is refused the same way.
The dry run (reading, hashing, diffing: no writing) runs in a worker thread; the write itself
runs on the event loop (see ``files_write``).
"""

from __future__ import annotations

import asyncio
import difflib
import hashlib
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import Any

from bruce.contracts import DryRun, Risk, ToolContext, ToolContract, ToolHandler
from bruce.errors import ToolFailed
from bruce.files import write_atomic

__all__ = ["FILES_WRITE", "files_write_tool"]

ALLOWED_EXTENSIONS = frozenset({".md", ".txt"})
DIFF_MAX_CHARS = 4000
DIFF_MAX_WORK = 500_000  # line comparisons one preview's diff may take (about 0.2 s at most, in a thread)
DEFAULT_MAX_BYTES = 200_000
_CONTEXT_LINES = 3


def _relative(raw: str) -> PurePosixPath:
    """The model's path as clean relative parts, or ToolFailed(path_not_allowed)."""
    text = raw.strip().replace("\\", "/")
    refuse = None
    if not text or "\x00" in text:
        refuse = "it is empty or contains invalid characters"
    elif text.startswith("/") or (len(text) > 1 and text[1] == ":"):
        refuse = "absolute paths are not allowed; give a path relative to the notes folder"
    elif any(part == ".." for part in text.split("/")):
        refuse = "'..' segments are not allowed"
    parts = [p for p in text.split("/") if p not in ("", ".")] if refuse is None else []
    if refuse is None and not parts:
        refuse = "it does not name a file"
    if refuse:
        raise ToolFailed(f"cannot write {raw!r}: {refuse}.", code="path_not_allowed")
    return PurePosixPath(*parts)


def _check_extension(name: str, shown: str) -> None:
    if PurePosixPath(name).suffix.lower() not in ALLOWED_EXTENSIONS:
        raise ToolFailed(
            f"cannot write {shown!r}: only .md and .txt files may be written.", code="extension_not_allowed"
        )


class _TooMuchWork(Exception):
    """The diff would take more than DIFF_MAX_WORK comparisons to find."""


class _BoundedMatcher(difflib.SequenceMatcher[str]):
    """difflib's matcher, counting the work of each longest-match search before doing it
    (every line of the range, plus every candidate position of those lines in the other text)
    and giving up once ``work`` is spent. Pathological inputs (many lines repeating a few
    hundred times each) otherwise take difflib seconds for a 200 kB note."""

    a: list[str]  # set by difflib (not in its type stubs)
    b2j: dict[str, list[int]]

    def __init__(self, a: list[str], b: list[str], work: int) -> None:
        self.work_left = work
        super().__init__(None, a, b)

    def find_longest_match(self, alo: int = 0, ahi: int | None = None, blo: int = 0,
                           bhi: int | None = None) -> difflib.Match:
        ahi = len(self.a) if ahi is None else ahi
        self.work_left -= ahi - alo
        if self.work_left < 0:
            raise _TooMuchWork
        self.work_left -= sum(len(self.b2j.get(line, ())) for line in self.a[alo:ahi])
        if self.work_left < 0:
            raise _TooMuchWork
        return super().find_longest_match(alo, ahi, blo, bhi)


def _span(start: int, stop: int) -> str:
    """A unified-diff range, as difflib writes it."""
    length = stop - start
    if length == 1:
        return str(start + 1)
    return f"{start + 1 if length else start},{length}"


def _too_long(rel: str, why: str) -> ToolFailed:
    return ToolFailed(
        f"the change to {rel!r} {why}, so the user could not see all of it before approving; nothing can be "
        f"approved that the preview does not show. Split it into smaller writes: write the first part, then add "
        f"the rest with mode 'append', each part short enough that its diff stays under {DIFF_MAX_CHARS} characters "
        "(about 3000 characters of text per call).",
        code="preview_too_long",
    )


def _diff(old: str, new: str, rel: str) -> str:
    """The whole unified diff from ``old`` to ``new``, or ToolFailed(preview_too_long) when it
    would be longer than DIFF_MAX_CHARS or take more than DIFF_MAX_WORK to find. CPU-bound:
    the tool runs it in a thread."""
    a, b = old.splitlines(), new.splitlines()
    try:
        groups = list(_BoundedMatcher(a, b, DIFF_MAX_WORK).get_grouped_opcodes(_CONTEXT_LINES))
    except _TooMuchWork:
        raise _too_long(rel, "is too large or too scattered to show as one diff") from None
    if not groups:
        return "(no changes)"
    lines = [f"--- a/{rel}", f"+++ b/{rel}"]
    for group in groups:
        lines.append(f"@@ -{_span(group[0][1], group[-1][2])} +{_span(group[0][3], group[-1][4])} @@")
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                lines += [" " + line for line in a[i1:i2]]
                continue
            if tag in ("replace", "delete"):
                lines += ["-" + line for line in a[i1:i2]]
            if tag in ("replace", "insert"):
                lines += ["+" + line for line in b[j1:j2]]
    text = "\n".join(lines)
    if len(text) > DIFF_MAX_CHARS:
        raise _too_long(rel, f"is a diff of {len(text)} characters, more than the {DIFF_MAX_CHARS} a preview shows")
    return text


def _description(max_bytes: int) -> str:
    return (
        "Write a text note (.md or .txt) inside the user's notes folder. 'path' is relative to that folder "
        "(e.g. 'journal/2026-12.md'); missing sub-folders are created. mode 'overwrite' (default) replaces "
        f"the file, 'append' adds to its end. Files are limited to {max_bytes} bytes. The user approves each write "
        f"from its diff, which may be at most {DIFF_MAX_CHARS} characters: write longer text in parts (the first "
        "part, then 'append' calls of about 3000 characters each)."
    )


FILES_WRITE = ToolContract(
    name="files.write",
    activity="Preparing a note",
    description=_description(DEFAULT_MAX_BYTES),
    category="files",
    risk=Risk.HIGH,
    autonomous=False,
    confirmation=True,
    step_up=False,
    dry_run=DryRun.REQUIRED,
    idempotent=False,
    input_schema={
        "type": "object",
        "properties": {
            "path": {"type": "string", "minLength": 1, "maxLength": 255,
                     "description": "Path relative to the notes folder, ending in .md or .txt."},
            "content": {"type": "string"},
            "mode": {"type": "string", "enum": ["overwrite", "append"], "default": "overwrite"},
        },
        "required": ["path", "content"],
        "additionalProperties": False,
    },
    output_schema={
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "bytes_written": {"type": "integer"},
            "created": {"type": "boolean"},
            "mode": {"type": "string"},
            "file_bytes": {"type": "integer", "description": "size of the whole file after the write"},
        },
        "required": ["path", "bytes_written", "created", "mode"],
    },
    permissions=("notes_dir:write",),
    side_effects=(
        "creates or changes one text file inside the configured notes folder; repeating an 'overwrite' "
        "gives the same file, repeating an 'append' appends the text twice"
    ),
    audit_event="files.written",
    failure_modes=("invalid_args", "path_not_allowed", "extension_not_allowed", "too_large", "not_text",
                   "preview_too_long", "io_error"),
    timeout_s=10.0,
    guideline=(
        "Notes: use files_write only when the user wants something kept in their notes folder. Each write "
        "waits for the user's approval of its diff: until a tool result says it was written, say it is waiting."
    ),
)


def _contract(max_bytes: int) -> ToolContract:
    """FILES_WRITE with the size limit this instance enforces in its description."""
    return replace(FILES_WRITE, description=_description(max_bytes))


def _read_old(resolved: Path, shown: str, max_bytes: int) -> str | None:
    """The current text of the file, or None if there is none yet. A file already over the
    limit is refused before it is read (it could be any size)."""
    if not resolved.exists():
        return None
    size = resolved.stat().st_size
    if size > max_bytes:
        raise ToolFailed(
            f"{shown!r} is already {size} bytes; notes files are limited to {max_bytes} bytes, so it will not be "
            "changed.", code="too_large")
    try:
        return resolved.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ToolFailed(
            f"{shown!r} exists but is not UTF-8 text; it will not be changed.", code="not_text"
        ) from None


def _preview(rel: str, old: str | None, new: str, mode: str, size: int) -> dict[str, Any]:
    """The dry-run answer: what would change, without touching the disk."""
    # the hash of the current file makes the preview change whenever the file does, so an
    # approval given for one version cannot overwrite another (the diff alone is capped)
    current = hashlib.sha256(old.encode("utf-8")).hexdigest()[:16] if old is not None else None
    return {"path": rel, "exists": old is not None, "mode": mode, "bytes_after": size,
            "current_sha256": current, "diff": _diff(old or "", new, rel)}


@dataclass(frozen=True, slots=True)
class _NotesFolder:
    """The folder files.write may change (already resolved) and the size limit for one file."""

    root: Path
    max_bytes: int

    def locate(self, raw: str) -> tuple[PurePosixPath, Path]:
        """The model's path as given (cleaned) and as it resolves on disk, or ToolFailed."""
        rel = _relative(raw)
        _check_extension(rel.name, raw)
        try:
            resolved = (self.root / rel).resolve()
        except (RuntimeError, OSError):  # a symlink loop (RuntimeError before Python 3.13)
            raise ToolFailed(
                f"cannot write {raw!r}: the path cannot be resolved (a symlink loop?).", code="path_not_allowed"
            ) from None
        if not resolved.is_relative_to(self.root):
            raise ToolFailed(f"cannot write {raw!r}: it points outside the notes folder.", code="path_not_allowed")
        _check_extension(resolved.name, raw)  # a symlink may hide another extension
        if resolved.exists() and not resolved.is_file():
            raise ToolFailed(f"cannot write {raw!r}: it is a folder, not a file.", code="path_not_allowed")
        return rel, resolved

    def write(self, args: dict[str, Any], dry_run: bool) -> dict[str, Any]:
        """One call: the preview (dry run) or the write itself; disk problems become io_error."""
        try:
            return self._attempt(args, dry_run)
        except OSError as exc:
            raise ToolFailed(
                f"could not write {args['path']!r}: {exc.strerror or 'disk error'}.", code="io_error"
            ) from None

    def _attempt(self, args: dict[str, Any], dry_run: bool) -> dict[str, Any]:
        mode = args.get("mode", "overwrite")
        rel, resolved = self.locate(args["path"])
        if len(args["content"]) > self.max_bytes:  # at least one byte per character: no need to encode it all
            raise ToolFailed(
                f"the file {str(rel)!r} would be at least {len(args['content'])} bytes; notes files are limited to "
                f"{self.max_bytes} bytes.", code="too_large")
        old = _read_old(resolved, str(rel), self.max_bytes)
        new = (old or "") + args["content"] if mode == "append" else args["content"]
        try:
            data = new.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ToolFailed(
                f"the content is not valid text (a character cannot be encoded as UTF-8: {exc.reason}).",
                code="invalid_args") from None
        if len(data) > self.max_bytes:
            raise ToolFailed(
                f"the file {str(rel)!r} would be {len(data)} bytes; notes files are limited to {self.max_bytes} bytes.",
                code="too_large",
            )
        if dry_run:
            return _preview(str(rel), old, new, mode, len(data))
        self._store(rel, resolved, data)
        return {"path": str(rel), "bytes_written": len(args["content"].encode("utf-8")), "created": old is None,
                "mode": mode, "file_bytes": len(data)}

    def _store(self, rel: PurePosixPath, resolved: Path, data: bytes) -> None:
        resolved.parent.mkdir(parents=True, exist_ok=True)
        if not resolved.parent.resolve().is_relative_to(self.root):  # changed under our feet
            raise ToolFailed(f"cannot write {str(rel)!r}: it points outside the notes folder.", code="path_not_allowed")
        write_atomic(resolved, data)

    async def files_write(self, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        if ctx.dry_run:
            # Reading, hashing and diffing only (nothing is written): in a thread, because a diff of
            # a note of max_bytes can take a few hundred milliseconds (bounded by DIFF_MAX_WORK).
            return await asyncio.to_thread(self.write, args, True)
        # The write deliberately stays on the loop, not in a thread: a note of at most max_bytes
        # takes milliseconds (no diff is made), and a write that cannot be interrupted can never
        # be reported as timed out yet happen.
        return self.write(args, ctx.dry_run)


def files_write_tool(*, notes_dir: Path, max_bytes: int = DEFAULT_MAX_BYTES) -> tuple[ToolContract, ToolHandler]:
    folder = _NotesFolder(Path(notes_dir).resolve(), max_bytes)
    return _contract(max_bytes), folder.files_write
