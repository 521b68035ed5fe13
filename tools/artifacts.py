"""artifact.save: keep a document the assistant wrote (HTML, Markdown or plain text) and give back
a link to it.

Each artifact is one file at ``<artifacts_dir>/<id>/<safe filename>`` plus one ``artifacts`` row;
its URL is ``<base_url>/artifacts/<id>/<safe filename>``. The model's filename is only a hint:
it is reduced to its last path component, to the characters ``A-Z a-z 0-9 . _ -`` (accents are
dropped, anything else becomes ``-``), stripped of leading dots and dashes, capped in length,
and its extension is replaced by the one matching ``format`` (.html, .md, .txt).

Failure codes: ``invalid_args`` (also: content that is not valid Unicode text, e.g. a lone
surrogate), ``too_large`` (content over ``max_bytes`` UTF-8 bytes; a text with more characters
than that is refused before it is encoded), ``io_error`` (the file could not be written).

Idempotent by key: a call with an idempotency key (the registry gives one: same tool,
conversation, person and arguments) gets an artifact id derived from that key (the first of
``sha256(key, 0)``, ``sha256(key, 1)``... not taken by an artifact older than the contract's
idempotency window). Run again with the same key within the window (its result not remembered
because a crash came between the write and the audit row), it finds its own row and returns that
artifact, rewriting the file only if it is missing or differs, or finishes a save the crash cut
off between the file and the row: one row, one file. After the window, the same call saves a new
artifact, as the registry's replay would. Without a key (a direct call), the id is random.

On the event loop: encoding the content (bounded by ``max_bytes``, about a millisecond per
megabyte) and the write itself (see ``tools.files``: a write that has been reported as timed
out must not still happen). The SHA-256 is computed in a thread, before anything is written.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import shutil
import unicodedata
import uuid
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from bruce.clock import parse_iso
from bruce.contracts import DryRun, Risk, ToolContext, ToolContract, ToolHandler
from bruce.errors import ToolFailed
from bruce.files import write_atomic
from bruce.store import Store

__all__ = ["ARTIFACT_SAVE", "artifact_save_tool", "safe_filename", "EXTENSIONS"]

EXTENSIONS = {"html": ".html", "markdown": ".md", "text": ".txt"}
MAX_FILENAME_CHARS = 100
DEFAULT_MAX_BYTES = 1_000_000
MAX_GENERATIONS = 1000  # ids looked at for one key before a random one is taken
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_filename(raw: str, fmt: str) -> str:
    """A filename safe on disk and in a URL, ending in the extension of ``fmt``."""
    base = raw.replace("\\", "/").rsplit("/", 1)[-1]
    base = "".join(c for c in unicodedata.normalize("NFKD", base) if not unicodedata.combining(c))
    base = _UNSAFE.sub("-", base).lstrip(".-")
    stem = base.rsplit(".", 1)[0] if "." in base else base
    ext = EXTENSIONS[fmt]
    stem = stem[: MAX_FILENAME_CHARS - len(ext)].rstrip(".-") or "artifact"
    return stem + ext


def _description(max_bytes: int) -> str:
    return (
        "Save a document you wrote (an HTML page, Markdown or plain text) and get a link the user can open. "
        "Use it for reports, tables, plans or anything too long or too rich for a chat message. "
        f"Content is limited to {max_bytes} bytes. The filename is cleaned up and its extension set from 'format'."
    )


ARTIFACT_SAVE = ToolContract(
    name="artifact.save",
    activity="Saving a document",
    description=_description(DEFAULT_MAX_BYTES),
    category="documents",
    risk=Risk.MEDIUM,
    autonomous=True,
    confirmation=False,
    dry_run=DryRun.OPTIONAL,
    idempotent=True,
    idempotency_window_s=3600.0,
    input_schema={
        "type": "object",
        "properties": {
            "filename": {"type": "string", "minLength": 1, "maxLength": 120,
                         "description": "Suggested file name, e.g. 'trip-plan.html'."},
            "content": {"type": "string", "description": "The whole document."},
            "format": {"type": "string", "enum": ["html", "markdown", "text"], "default": "html"},
            "title": {"type": "string", "maxLength": 200, "description": "Optional human title."},
        },
        "required": ["filename", "content"],
        "additionalProperties": False,
    },
    output_schema={
        "type": "object",
        "properties": {
            "artifact_id": {"type": "string"},
            "url": {"type": "string"},
            "filename": {"type": "string"},
            "format": {"type": "string"},
            "size_bytes": {"type": "integer"},
        },
        "required": ["artifact_id", "url", "filename", "format", "size_bytes"],
    },
    side_effects=(
        "writes one file under data/artifacts and records it in the database; an identical call (same "
        "conversation, same arguments) within an hour returns the first artifact instead of saving again "
        "(also when it is run again after a crash)"
    ),
    audit_event="artifact.saved",
    failure_modes=("invalid_args", "too_large", "io_error"),
    timeout_s=15.0,
    guideline=(
        "Documents: when the user wants a document, page or report, write it as HTML and save it with "
        "artifact_save; share only the URL that the tool returns."
    ),
)


def _contract(max_bytes: int) -> ToolContract:
    """ARTIFACT_SAVE with the size limit this instance enforces in its description."""
    return replace(ARTIFACT_SAVE, description=_description(max_bytes))


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def artifact_id_for(key: str | None, generation: int = 0) -> str:
    """The id of the artifact a call with this idempotency key saves (random without one);
    ``generation``: the same call again after the idempotency window, a new artifact."""
    if key is None:
        return uuid.uuid4().hex[:16]
    return hashlib.sha256(f"artifact.save\x00{key}\x00{generation}".encode()).hexdigest()[:16]


def _write(root: Path, artifact_id: str, filename: str, data: bytes, *, again: bool = False) -> Path:
    """Write the artifact's file in its own folder under ``root``; the file's path. ``again``:
    the folder may exist already (the same keyed call, cut off by a crash, is run again)."""
    folder = root / artifact_id
    target = (folder / filename).resolve()
    if not target.is_relative_to(root) or target.parent != folder:
        raise ToolFailed("the artifact file name is not usable; choose a simpler one.", code="invalid_args")
    folder.mkdir(parents=True, exist_ok=again)
    if again and target.is_file() and target.read_bytes() == data:
        return target  # written before the crash: not written twice
    write_atomic(target, data)
    return target


@dataclass(frozen=True, slots=True)
class _Artifacts:
    """Where artifact.save keeps files and rows, the public base URL, and the size limit."""

    store: Store
    root: Path
    base: str
    max_bytes: int

    def encode(self, content: str) -> bytes:
        """The content as UTF-8, or ToolFailed(too_large / invalid_args)."""
        if len(content) > self.max_bytes:  # at least one byte per character: no need to encode it all
            raise ToolFailed(
                f"the content is at least {len(content)} bytes; artifacts are limited to {self.max_bytes} bytes. "
                "Shorten it or split it into several artifacts.",
                code="too_large",
            )
        try:
            data = content.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ToolFailed(
                f"the content is not valid text (character {exc.start} cannot be encoded as UTF-8).", code="invalid_args"
            ) from None
        if len(data) > self.max_bytes:
            raise ToolFailed(
                f"the content is {len(data)} bytes; artifacts are limited to {self.max_bytes} bytes. "
                "Shorten it or split it into several artifacts.",
                code="too_large",
            )
        return data

    def write(self, artifact_id: str, filename: str, data: bytes, *, again: bool = False) -> Path:
        try:  # on the loop: see files.write (at most max_bytes)
            return _write(self.root, artifact_id, filename, data, again=again)
        except OSError as exc:
            raise ToolFailed(f"could not save the artifact: {exc.strerror or 'disk error'}.", code="io_error") from None

    async def artifact_save(self, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        store, root, base = self.store, self.root, self.base
        fmt = args.get("format", "html")
        filename = safe_filename(args["filename"], fmt)
        data = self.encode(args["content"])
        if ctx.dry_run:
            return {"would_save": filename, "format": fmt, "size_bytes": len(data),
                    "url_pattern": f"{base}/artifacts/<id>/{filename}"}
        digest = await asyncio.to_thread(_sha256, data)  # before writing: a time-out here leaves nothing behind
        artifact_id, earlier = await self.keyed_id(ctx, (digest, filename, fmt))
        if earlier:
            self.write(artifact_id, filename, data, again=True)  # the same call again: its own artifact
            return self.saved(artifact_id, filename, fmt, len(data))
        target = self.write(artifact_id, filename, data, again=ctx.idempotency_key is not None)
        try:
            await store.artifacts.add(
                artifact_id=artifact_id, conversation_id=str(ctx.conversation_id) if ctx.conversation_id else None,
                turn_id=ctx.turn_id,
                title=args.get("title"), filename=filename, fmt=fmt, path=target.relative_to(root).as_posix(),
                size_bytes=len(data), sha256=digest,
            )
        except BaseException:
            shutil.rmtree(root / artifact_id, True)  # no file without its row
            raise
        return self.saved(artifact_id, filename, fmt, len(data))

    async def keyed_id(self, ctx: ToolContext, same: tuple[str, str, str]) -> tuple[str, bool]:
        """The id this call saves under, and whether its artifact exists already (the same call,
        run again within the window: ``same`` is its sha256, filename and format)."""
        if ctx.idempotency_key is None:
            return artifact_id_for(None), False
        now = ctx.now or ctx.clock.now()
        for generation in range(MAX_GENERATIONS):
            artifact_id = artifact_id_for(ctx.idempotency_key, generation)
            row = await self.store.artifacts.get(artifact_id)
            if row is None:
                return artifact_id, False
            recent = (now - parse_iso(row.created_at)).total_seconds() < ARTIFACT_SAVE.idempotency_window_s
            if recent and (row.sha256, row.filename, row.format) == same:
                return artifact_id, True
        return artifact_id_for(None), False

    def saved(self, artifact_id: str, filename: str, fmt: str, size: int) -> dict[str, Any]:
        return {"artifact_id": artifact_id, "url": f"{self.base}/artifacts/{artifact_id}/{filename}",
                "filename": filename, "format": fmt, "size_bytes": size}


def artifact_save_tool(
    *, store: Store, artifacts_dir: Path, base_url: str, max_bytes: int = DEFAULT_MAX_BYTES
) -> tuple[ToolContract, ToolHandler]:
    artifacts = _Artifacts(store, Path(artifacts_dir).resolve(), base_url.rstrip("/"), max_bytes)
    return _contract(max_bytes), artifacts.artifact_save
