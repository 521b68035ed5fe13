"""``LeaseStore``: a lease is taken from nobody, renewed by its owner, taken from another only by
naming the holder that was judged gone, released only by its owner; two processes racing for it
through two connections to one file (one through a symlink) never both win."""

from __future__ import annotations

import asyncio

from bruce.store import Store

T = "2026-12-02T12:00:00.000000+00:00"
LATER = "2026-12-02T12:01:00.000000+00:00"


async def test_a_lease_is_ours_until_released_and_another_needs_to_name_its_holder(store):
    await store.migrate()
    leases = store.leases
    assert await leases.take("scheduler", "a", now=T, expires_at=LATER, replacing=None)
    assert not await leases.take("scheduler", "b", now=T, expires_at=LATER, replacing=None)
    assert not await leases.take("scheduler", "b", now=T, expires_at=LATER, replacing="someone else")
    assert await leases.holder("scheduler") == ("a", LATER)
    assert not await leases.renew("scheduler", "b", now=T, expires_at=LATER)
    await leases.release("scheduler", "b")  # not b's: nothing happens
    assert await leases.holds_any("a", now=T) and not await leases.holds_any("a", now=LATER)
    assert await leases.take("scheduler", "b", now=LATER, expires_at=LATER, replacing="a")  # a judged gone
    assert not await leases.renew("scheduler", "a", now=LATER, expires_at=LATER)  # a finds it lost
    await leases.release("scheduler", "b")
    assert await leases.holder("scheduler") is None


async def test_two_processes_racing_for_a_lease_through_two_paths_never_both_win(store, tmp_path, clock):
    await store.migrate()
    (tmp_path / "alias.db").symlink_to(tmp_path / "bruce.db")
    other = await Store.open(tmp_path / "alias.db", clock)
    try:
        for n in range(20):
            name = f"race{n}"
            won = await asyncio.gather(store.leases.take(name, "a", now=T, expires_at=LATER, replacing=None),
                                       other.leases.take(name, "b", now=T, expires_at=LATER, replacing=None))
            assert sorted(won) == [False, True]
    finally:
        await other.close()
