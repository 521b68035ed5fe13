"""Delivery after a turn's reply: what the outbox has stored for the conversation, then each
document the turn saved (as a file), then each confirmation request it made (with buttons).

The reply itself is stored before this runs (``TurnRunner``). Files and requests go through the
outbox, the one outbound door: stored as outbound rows, then sent in the conversation's order with
the same retries and resends after a restart as text. A file the platform refuses for good is
logged: the turn and its reply (which links the document) stand.
"""

from __future__ import annotations

from pathlib import Path

import structlog

from bruce.channel import ConfirmationRequest
from bruce.runtime.outbox import Outbox
from bruce.store import Store
from bruce.turns.scope import TurnScope
from bruce.values import ConversationId

__all__ = ["Delivery"]

log = structlog.get_logger(__name__)

_ARTIFACT_SAVE = "artifact.save"  # its successful results name a saved document, sent after the reply


class Delivery:
    """Sends what a finished turn leaves for its conversation. ``artifacts_dir``
    (``tools.artifacts.dir``): only files inside it are sent; None: none are."""

    def __init__(self, *, store: Store, outbox: Outbox, artifacts_dir: Path | None) -> None:
        self._store = store
        self._outbox = outbox
        self._artifacts_dir = artifacts_dir

    async def after_reply(self, scope: TurnScope) -> None:
        """The stored reply (and anything before it), the turn's files, its confirmation requests."""
        await self._outbox.flush(scope.conversation)
        await self.send_artifacts(scope)
        await self.send_confirmations(scope.conversation, scope.confirmations)

    async def send_artifacts(self, scope: TurnScope) -> None:
        """Send each document this turn's ``artifact.save`` calls saved, once, after the reply,
        through the outbox. A file the platform refuses is logged: the turn and its reply (which
        has the link) stand."""
        for path, caption in await self._artifact_files(scope):
            await self._outbox.post_file(scope.conversation, path, caption)

    async def _artifact_files(self, scope: TurnScope) -> list[tuple[Path, str | None]]:
        """The files (and captions) of the artifacts this turn saved: stored for this
        conversation, inside the artifacts folder, each once."""
        saved = [r.output for r in scope.results if r.name == _ARTIFACT_SAVE and r.ok and isinstance(r.output, dict)]
        if self._artifacts_dir is None or not saved:
            return []  # most replies: nothing saved, no folder to resolve
        root = self._artifacts_dir.resolve()
        files: dict[Path, str | None] = {}
        for output in saved:
            artifact_id = output.get("artifact_id")  # a dry run saved nothing and has none
            record = await self._store.artifacts.get(artifact_id) if isinstance(artifact_id, str) else None
            if record is None or record.conversation_id != str(scope.conversation):
                continue
            path = (root / record.path).resolve()
            if not path.is_relative_to(root) or not path.is_file():
                log.warning("artifact.not_sent", artifact=record.id, reason="not a file in the artifacts folder")
                continue
            files.setdefault(path, record.title or None)
        return list(files.items())

    async def send_confirmations(self, conversation_id: ConversationId, requests: list[ConfirmationRequest]) -> None:
        """Each approval request with its buttons, through the outbox: stored, then sent in order."""
        for request in requests:
            await self._outbox.post_confirmation(conversation_id, request)
