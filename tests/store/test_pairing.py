"""Pairing requests: a stranger's code issued once, found again, capped per channel, refused
for an hour after a denial; a decision used once; paired users by channel."""

from __future__ import annotations

import asyncio
import itertools

from bruce.values import DecisionOutcome, PairingOutcome, PairingState

HOUR = "2026-12-02T13:00:00.000000+00:00"


def codes():
    counter = itertools.count(1)
    return lambda: f"CODE{next(counter)}"


async def ask(store, sender: str, *, channel: str = "telegram", max_pending: int = 3, new_code=None,
              expires_at: str = HOUR):
    return await store.pairing.ask(channel=channel, sender_id=sender, chat_id=sender, display_name=f"name {sender}",
                                   expires_at=expires_at, max_pending=max_pending, new_code=new_code or codes())


async def test_a_stranger_gets_one_code_and_the_same_one_when_asking_again(store):
    new_code = codes()
    assert await ask(store, "s1", new_code=new_code) == (PairingOutcome.ISSUED, "CODE1")
    assert await ask(store, "s1", new_code=new_code) == (PairingOutcome.STILL_PENDING, "CODE1")
    (request,) = await store.pairing.pending()
    assert (request.code, request.channel, request.sender_id, request.display_name, request.status) == (
        "CODE1", "telegram", "s1", "name s1", PairingState.PENDING)


async def test_the_cap_holds_however_many_strangers_write_at_once(store):
    new_code = codes()
    outcomes = await asyncio.gather(*(ask(store, f"s{i}", max_pending=2, new_code=new_code) for i in range(6)))
    assert sorted(o for o, _ in outcomes) == sorted([PairingOutcome.ISSUED] * 2 + [PairingOutcome.FULL] * 4)
    assert len(await store.pairing.pending()) == 2
    assert (await ask(store, "s9", channel="discord", max_pending=2, new_code=new_code))[0] is PairingOutcome.ISSUED


async def test_a_code_already_taken_is_drawn_again(store):
    await ask(store, "s1", new_code=lambda: "SAME")
    draws = iter(["SAME", "SAME", "OTHER"])
    assert await ask(store, "s2", new_code=lambda: next(draws)) == (PairingOutcome.ISSUED, "OTHER")


async def test_approving_pairs_the_sender_once(store):
    _, code = await ask(store, "s1")
    outcome, request = await store.pairing.decide(code, approve=True)
    assert outcome is DecisionOutcome.APPROVED and request is not None and request.sender_id == "s1"
    assert await store.pairing.is_paired("telegram", "s1") and not await store.pairing.is_paired("discord", "s1")
    assert (await store.pairing.decide(code, approve=False))[0] is DecisionOutcome.ALREADY_DECIDED
    assert await store.pairing.decide("NOPE", approve=True) == (DecisionOutcome.NOT_FOUND, None)
    assert await store.pairing.paired() == {"telegram": frozenset({"s1"})}
    assert await store.pairing.pending() == []


async def test_a_denied_sender_gets_no_new_code_until_the_request_expires(store, clock):
    _, code = await ask(store, "s1")
    assert (await store.pairing.decide(code, approve=False))[0] is DecisionOutcome.DENIED
    assert await ask(store, "s1") == (PairingOutcome.DENIED, None)
    assert not await store.pairing.is_paired("telegram", "s1")
    clock.advance(hours=1)
    assert (await ask(store, "s1", expires_at="2026-12-02T14:00:00.000000+00:00"))[0] is PairingOutcome.ISSUED


async def test_an_expired_request_cannot_be_decided(store, clock):
    _, code = await ask(store, "s1")
    clock.advance(hours=2)
    outcome, request = await store.pairing.decide(code, approve=True)
    assert outcome is DecisionOutcome.EXPIRED and request is not None
    assert (await store.pairing.decide(code, approve=True))[0] is DecisionOutcome.EXPIRED  # now stored expired
    assert await store.pairing.pending() == [] and await store.pairing.paired() == {}


async def test_revoking_forgets_a_paired_user(store):
    _, code = await ask(store, "s1")
    await store.pairing.decide(code, approve=True)
    assert await store.pairing.revoke("telegram", "s1")
    assert not await store.pairing.revoke("telegram", "s1")
    assert not await store.pairing.is_paired("telegram", "s1")
