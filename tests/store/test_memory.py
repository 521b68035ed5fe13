"""Long-term memory rows: a fact stored once however it is spelled, summaries that cover facts,
archiving, full-text search kept in step, and forgetting that takes the covering summaries too."""

from __future__ import annotations

from bruce.records import Fact
from bruce.store.memory import fts_query, normalized
from bruce.values import FactType


async def remember(store, content: str, type_: FactType = FactType.FACT, **kwargs) -> tuple[Fact, bool]:
    args = {"confidence": 0.8, "origin": "owner", "conversation_id": "test:1", "source_turn_id": None} | kwargs
    return await store.memory.remember(type_, content, **args)


def test_two_spellings_of_one_fact_are_the_same_and_a_query_is_quoted_words():
    assert normalized("  Lives in PORTO!  ") == normalized("lives in porto") == "lives in porto"
    assert fts_query('sister" OR name*') == '"sister" OR "OR" OR "name"'
    assert fts_query("?! ...") is None


async def test_the_same_fact_again_is_refreshed_not_stored_twice(store, clock):
    first, new = await remember(store, "Lives in Porto.", confidence=0.6)
    assert new and first.status == "active" and first.type is FactType.FACT
    clock.advance(hours=1)
    again, new = await remember(store, "lives in  porto", confidence=0.9)
    assert not new and again.id == first.id and again.content == "Lives in Porto."
    assert again.confidence == 0.9 and again.last_seen_at > first.last_seen_at
    other, new = await remember(store, "Lives in Porto.", FactType.PREFERENCE)  # another type: another fact
    assert new and other.id != first.id
    assert [f.id for f in await store.memory.facts()] == [first.id, other.id]
    assert await store.memory.get(999) is None


async def test_context_is_the_recent_active_facts_newest_first_and_the_latest_summary(store, clock):
    old, _ = await remember(store, "Old news.")
    clock.advance(days=10)
    since = clock.now().isoformat()
    recent = [(await remember(store, f"Fact {i}."))[0] for i in range(3)]
    assert await store.memory.context(limit=2, since=since) == ([recent[2], recent[1]], None)
    summary_id = await store.memory.add_summary("All of it.", period_start="a", period_end="b",
                                                fact_ids=[old.id], turn_id=None)
    facts, summary = await store.memory.context(limit=0, since=since)
    assert facts == [] and summary is not None and (summary.id, summary.content) == (summary_id, "All of it.")
    assert await store.memory.latest_summary() == summary and await store.memory.summaries() == [summary]


async def test_a_summary_covers_its_facts_unless_one_was_forgotten_meanwhile(store):
    a, _ = await remember(store, "A.")
    b, _ = await remember(store, "B.")
    assert [f.id for f in await store.memory.unsummarized()] == [a.id, b.id]
    assert await store.memory.add_summary("A.", period_start="s", period_end="e", fact_ids=[a.id], turn_id=None)
    assert [f.id for f in await store.memory.unsummarized()] == [b.id]
    await store.memory.forget([b.id])
    assert await store.memory.add_summary("B.", period_start="s", period_end="e", fact_ids=[b.id],
                                          turn_id=None) is None
    assert len(await store.memory.summaries()) == 1


async def test_archive_takes_summarized_facts_last_seen_before_the_cut_off_the_read_path(store, clock):
    covered, _ = await remember(store, "Covered.")
    loose, _ = await remember(store, "Loose.")
    await store.memory.add_summary("Covered.", period_start="s", period_end="e", fact_ids=[covered.id], turn_id=None)
    clock.advance(days=1)
    assert await store.memory.archive(older_than=clock.now().isoformat()) == 1
    assert [f.id for f in await store.memory.facts(include_archived=False)] == [loose.id]
    assert (await store.memory.get(covered.id)).status == "archived"  # type: ignore[union-attr]
    assert [h["id"] for h in await store.memory.search("covered") if h["kind"] == "fact"] == [covered.id]


async def test_search_finds_facts_and_summaries_by_their_words(store):
    sister, _ = await remember(store, "Sister is called Ana.")
    await remember(store, "Plays the cello.")
    summary_id = await store.memory.add_summary("Ana visited in May.", period_start="s", period_end="e",
                                                fact_ids=[sister.id], turn_id=None)
    hits = await store.memory.search("ana")
    assert {(h["kind"], h["id"]) for h in hits} == {("fact", sister.id), ("summary", summary_id)}
    assert await store.memory.search("...") == []
    assert await store.memory.matching_facts("Who is Ana?") == [await store.memory.get(sister.id)]


async def test_forgetting_a_fact_drops_every_summary_from_the_first_that_covered_it(store):
    a, _ = await remember(store, "Alpha fact.")
    b, _ = await remember(store, "Beta fact.")
    c, _ = await remember(store, "Gamma fact.")
    await store.memory.add_summary("Alpha.", period_start="s", period_end="e", fact_ids=[a.id], turn_id=None)
    later = await store.memory.add_summary("Alpha, beta.", period_start="s", period_end="e", fact_ids=[b.id],
                                           turn_id=None)
    assert await store.memory.forget([a.id]) == 1
    assert await store.memory.summaries() == []  # the later summary built on the first one: both go
    assert [f.id for f in await store.memory.unsummarized()] == [b.id, c.id]  # back on the read path
    assert await store.memory.search("alpha") == []
    assert [h["kind"] for h in await store.memory.search("beta")] == ["fact"]  # the summary's entry is gone
    assert later is not None and await store.memory.forget([]) == 0


async def test_forgetting_a_fact_of_a_later_summary_keeps_the_earlier_one(store):
    a, _ = await remember(store, "Alpha fact.")
    b, _ = await remember(store, "Beta fact.")
    first = await store.memory.add_summary("Alpha.", period_start="s", period_end="e", fact_ids=[a.id], turn_id=None)
    await store.memory.add_summary("Beta.", period_start="s", period_end="e", fact_ids=[b.id], turn_id=None)
    assert await store.memory.forget([b.id]) == 1
    assert [s.id for s in await store.memory.summaries()] == [first]
    assert await store.memory.unsummarized() == []


async def test_forget_all_empties_facts_summaries_and_search(store):
    a, _ = await remember(store, "One.")
    await remember(store, "Two.")
    await store.memory.add_summary("One.", period_start="s", period_end="e", fact_ids=[a.id], turn_id=None)
    assert await store.memory.forget_all() == 2
    assert (await store.memory.facts(), await store.memory.summaries(), await store.memory.search("one")) == ([], [], [])


async def test_each_person_has_their_own_facts_summaries_search_and_read_path(store, clock):
    since = clock.now().isoformat()
    owners, _ = await remember(store, "Lives in Porto.")
    guests, new = await remember(store, "Lives in Porto.", person="telegram:222")  # the same words: another fact
    assert new and guests.id != owners.id and (owners.person, guests.person) == ("owner", "telegram:222")
    assert await store.memory.context(limit=10, since=since) == ([owners], None)
    assert await store.memory.context(limit=10, since=since, person="telegram:222") == ([guests], None)
    assert [h["id"] for h in await store.memory.search("Porto", person="telegram:222")] == [guests.id]
    assert await store.memory.get(owners.id, person="telegram:222") is None
    assert [f.id for f in await store.memory.facts(person="owner")] == [owners.id]
    assert [f.id for f in await store.memory.facts()] == [owners.id, guests.id]  # the machine sees everyone's

    summary = await store.memory.add_summary("They live in Porto.", period_start=since, period_end=since,
                                             fact_ids=[guests.id], turn_id=None, person="telegram:222")
    assert summary is not None and await store.memory.latest_summary() is None
    assert (await store.memory.latest_summary(person="telegram:222")).content == "They live in Porto."
    assert await store.memory.add_summary("x", period_start=since, period_end=since, fact_ids=[owners.id],
                                          turn_id=None, person="telegram:222") is None  # not theirs to fold
    assert await store.memory.forget([guests.id]) == 1  # the guest's summary goes with it, the owner's fact stays
    assert await store.memory.summaries() == [] and [f.id for f in await store.memory.facts()] == [owners.id]
