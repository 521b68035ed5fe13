"""The links in a message-mode job's content, grounded as a reply's are (``bruce.turns.grounding``).

A reminder is sent as written when it is due, with no model in between, so a link in it to one
of our artifacts (``/artifacts/...`` on the admin page, however it is spelled) must point at an
artifact that exists:

* when the model makes the job or reschedules it, ``JobBook`` refuses content with a link to
  no artifact, naming the link (``made_up``);
* when it fires, such a link is taken out as a reply's would be: ``[link removed]`` and a note
  (``text_to_send``). This covers content stored earlier or by another path, and an artifact
  gone since.

A reply's link must also come from a tool call of the same turn. A reminder fires in no turn,
so the store vouches for its links: one to an artifact saved in an earlier turn is kept.
"""

from __future__ import annotations

from bruce.store.artifacts import ArtifactStore
from bruce.texts import REMINDER_LINK_REMOVED
from bruce.turns.grounding import GroundingReport, artifact_paths, keep_links

__all__ = ["MessageLinks"]


class MessageLinks:
    def __init__(self, *, artifacts: ArtifactStore, admin_base_url: str) -> None:
        self._artifacts = artifacts
        self._admin_base_url = admin_base_url

    async def grounded(self, content: str) -> GroundingReport:
        """``content`` with each link to an artifact that does not exist removed (and said so)."""
        existing = await self._artifacts.existing_paths(artifact_paths(content, admin_base=self._admin_base_url))
        return keep_links(content, existing, admin_base=self._admin_base_url, note=REMINDER_LINK_REMOVED)

    async def made_up(self, content: str) -> tuple[str, ...]:
        """The links in ``content``, as written, that point at an artifact of ours that does not exist."""
        return (await self.grounded(content)).removed

    async def text_to_send(self, content: str) -> str:
        return (await self.grounded(content)).text
