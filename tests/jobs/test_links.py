"""A reminder's links, as the store vouches for them: a link to one of our artifacts is kept when
the artifact exists and taken out otherwise, however it is spelled; other links are left alone.
An agent-mode job's content is an instruction, not a message, and is not checked."""

from __future__ import annotations

from zoneinfo import ZoneInfo

import pytest

from bruce.jobs.book import JobBook, JobError
from bruce.jobs.links import MessageLinks
from bruce.store import Store
from bruce.texts import REMINDER_LINK_REMOVED
from bruce.values import ConversationId
from tests.fakes.clock import FakeClock

ADMIN = "http://127.0.0.1:8765"
CID = ConversationId("test", "c1")


@pytest.fixture
async def store(tmp_path):
    store = await Store.open(tmp_path / "bruce.db", FakeClock())
    await store.artifacts.add(artifact_id="a1", conversation_id=None, turn_id=None, title=None, filename="r.html",
                              fmt="html", path="a1/r.html", size_bytes=1, sha256="0" * 64)
    yield store
    await store.close()


@pytest.mark.parametrize(("link", "kept"), [
    ("http://127.0.0.1:8765/artifacts/a1/r.html", True),
    ("/artifacts/a1/r.html", True),
    ("http://localhost:9999/artifacts/a1/r.html", True),
    ("https://example.org/artifacts/zz/r.html", True),  # not ours: not ours to judge
    ("http://127.0.0.1:8765/artifacts/zz/r.html", False),
    ("http://127.1:8765/%61rtifacts/zz/r.html", False),
    ("/artifacts/a1/other.html", False),  # the id exists, that file does not
])
async def test_a_link_is_kept_only_when_it_names_a_saved_artifact(store, link: str, kept: bool) -> None:
    links = MessageLinks(artifacts=store.artifacts, admin_base_url=ADMIN)
    text = await links.text_to_send(f"See {link} now.")
    if kept:
        assert text == f"See {link} now." and await links.made_up(f"See {link}") == ()
    else:
        assert text == f"See [link removed] now.\n\n{REMINDER_LINK_REMOVED}"
        assert await links.made_up(f"See {link}") == (link,)


async def test_the_book_refuses_a_made_up_link_in_a_message_and_not_in_an_agent_instruction(store) -> None:
    book = JobBook(store=store, clock=FakeClock(), zone=ZoneInfo("UTC"), admin_base_url=ADMIN)
    fake, other = "/artifacts/zz/r.html", "/artifacts/yy/q.html"
    with pytest.raises(JobError, match=r"content: the links '/artifacts/zz/r.html', '/artifacts/yy/q.html' point at"):
        await book.create(CID, {"execution_mode": "message", "content": f"{fake} {other}", "in_seconds": 60})
    assert await store.jobs.all(live_only=False) == []
    view = await book.create(CID, {"execution_mode": "agent", "content": f"Check whether {fake} exists.",
                                   "in_seconds": 60})
    assert view.created
