"""The job book tells its listeners of every stored change (``JobBook.subscribe``): the
scheduler re-arms at once, ``bruce mcp serve`` tells the running daemon."""

from __future__ import annotations

from zoneinfo import ZoneInfo

from bruce.jobs.book import JobBook
from bruce.store import Store
from bruce.values import ConversationId
from tests.fakes.clock import FakeClock

CID = "test:c1"
ADMIN = "http://127.0.0.1:8765"  # the admin page, where links to artifacts point
REMINDER = {"execution_mode": "message", "content": "Call Ana", "in_seconds": 120}


async def open_book(tmp_path) -> tuple[Store, JobBook]:
    clock = FakeClock()
    store = await Store.open(tmp_path / "bruce.db", clock)
    return store, JobBook(store=store, clock=clock, zone=ZoneInfo("UTC"), admin_base_url=ADMIN)


async def test_a_listener_hears_each_stored_change_with_the_job_id(tmp_path):
    store, book = await open_book(tmp_path)
    heard: list[str] = []
    book.subscribe(heard.append)
    try:
        job = (await book.create(ConversationId.parse(CID), REMINDER)).job
        await book.pause(ConversationId.parse(CID), job.id)
        await book.cancel(ConversationId.parse(CID), job.id)
        assert heard == [job.id, job.id, job.id]
    finally:
        await store.close()


async def test_the_same_job_made_again_in_the_window_is_no_change(tmp_path):
    store, book = await open_book(tmp_path)
    heard: list[str] = []
    book.subscribe(heard.append)
    try:
        first = await book.create(ConversationId.parse(CID), REMINDER)
        again = await book.create(ConversationId.parse(CID), REMINDER)
        assert not again.created and heard == [first.job.id]
    finally:
        await store.close()


async def test_every_listener_hears_in_order_and_an_unsubscribed_one_no_more(tmp_path):
    store, book = await open_book(tmp_path)
    heard: list[str] = []
    stop_first = book.subscribe(lambda job_id: heard.append(f"first {job_id}"))
    book.subscribe(lambda job_id: heard.append(f"second {job_id}"))
    try:
        one = (await book.create(ConversationId.parse(CID), REMINDER)).job
        stop_first()
        stop_first()  # a second call does nothing
        two = (await book.create(ConversationId.parse(CID), {**REMINDER, "content": "Call Bia"})).job
        assert heard == [f"first {one.id}", f"second {one.id}", f"second {two.id}"]
    finally:
        await store.close()


async def test_with_no_listener_a_change_is_only_stored(tmp_path):
    store, book = await open_book(tmp_path)
    try:
        job = (await book.create(ConversationId.parse(CID), REMINDER)).job
        assert [view.job.id for view in await book.list(ConversationId.parse(CID))] == [job.id]
    finally:
        await store.close()
