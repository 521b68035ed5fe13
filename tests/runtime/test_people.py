"""Who is who: the console and the web chat are the owner's; ``people.owner`` names the owner on
a platform, else the allow-list does; everyone else admitted is a guest keyed by channel and id."""

from __future__ import annotations

from bruce.runtime.access import AccessRule
from bruce.runtime.people import person_of
from bruce.values import OWNER

RULES = {"telegram": AccessRule(frozenset({"111", "222"}), pairing=True), "discord": AccessRule(frozenset({"9"}))}


def test_a_channel_without_an_access_rule_is_the_owners():
    assert person_of("console", "anyone", rules=RULES, owners=None) == OWNER
    assert person_of("web", None, rules=RULES, owners={"telegram": frozenset({"111"})}) == OWNER


def test_without_people_owner_every_allowed_user_is_the_owner_and_a_paired_one_a_guest():
    assert person_of("telegram", "222", rules=RULES, owners=None) == OWNER
    assert person_of("telegram", "666", rules=RULES, owners=None) == "telegram:666"  # paired


def test_with_people_owner_only_its_ids_are_the_owner():
    owners = {"telegram": frozenset({"111"})}
    assert person_of("telegram", "111", rules=RULES, owners=owners) == OWNER
    assert person_of("telegram", "222", rules=RULES, owners=owners) == "telegram:222"
    assert person_of("discord", "9", rules=RULES, owners=owners) == "discord:9"  # no owner named there
    assert person_of("telegram", None, rules=RULES, owners=owners) != OWNER


async def test_access_admits_the_owners_ids_and_says_who_each_sender_is(tmp_path, clock):
    from bruce.runtime.access import Access
    from bruce.store import Store

    store = await Store.open(tmp_path / "bruce.db", clock)
    try:
        access = Access(store=store, clock=clock, rules={"telegram": AccessRule(frozenset({"222"}))}, channels={},
                        owners={"telegram": frozenset({"111"})})
        assert await access.admits("telegram", "111") and await access.admits("telegram", "222")
        assert not await access.admits("telegram", "666")
        assert access.person("telegram", "111") == OWNER and access.person("telegram", "222") == "telegram:222"
        assert access.person("console", "local") == OWNER
    finally:
        await store.close()
