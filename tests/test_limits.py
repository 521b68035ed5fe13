"""Rate limits at admission: a flood is cut at the limit, before any model call; the sender is
told once when they can continue; the rest is stored as rate_limited, never answered later;
approvals are not counted; the window slides."""

from __future__ import annotations

import asyncio

from bruce.limits import Quiet, RateLimiter
from tests.conftest import T0
from tests.fakes.llm_server import Step
from tests.helpers import incoming, rows


def turns(fake_llm) -> int:
    """Model calls of chat turns (a summary of old history is a call without tools)."""
    return len([r for r in fake_llm.requests if "tools" in r])


async def flood(app, count: int, *, seconds: float, chat: str = "c1", sender: str = "u1", start: int = 0) -> None:
    """``count`` messages spread over ``seconds``, as fast as the platform hands them over."""
    handles = []
    for i in range(start, start + count):
        handle = await app.worker.deliver(incoming(app, f"message {i}", chat=chat, sender=sender, message_id=f"m{i}"))
        if handle is not None:
            handles.append(handle)
        app.clock.advance(seconds=seconds / count)
    await asyncio.gather(*handles)


async def test_a_flood_of_50_in_10_seconds_answers_the_limit_and_sends_one_notice(app_factory, fake_llm, channel):
    app = await app_factory(limits={"messages_per_minute": 20})
    fake_llm.responder = lambda body: Step.text("ok")
    await flood(app, 50, seconds=10)
    assert turns(fake_llm) == 20
    notices = [t for t in channel.texts() if t.startswith("You are sending messages faster")]
    assert len(notices) == 1 and "09:01:00" in notices[0]  # the first of them leaves the window at 12:01 UTC
    assert channel.texts().count("ok") == 20
    statuses = [r["status"] for r in await rows(app, "SELECT status FROM messages WHERE direction = 'in' ORDER BY id")]
    assert statuses == ["done"] * 20 + ["rate_limited"] * 30
    await app.worker.wait_idle()
    assert turns(fake_llm) == 20  # nothing was queued for later


async def test_the_window_slides_and_a_new_episode_gets_a_new_notice(app_factory, fake_llm, channel, clock):
    app = await app_factory(limits={"messages_per_minute": 3})
    fake_llm.responder = lambda body: Step.text("ok")
    await flood(app, 5, seconds=5)
    assert turns(fake_llm) == 3
    clock.advance(seconds=55)  # 12:01:00: the first message (12:00:00) has just left the window
    await flood(app, 2, seconds=1, start=5)
    assert turns(fake_llm) == 4  # one slot free, the next refused
    notices = [t for t in channel.texts() if t.startswith("You are sending messages faster")]
    assert len(notices) == 2


async def test_the_hourly_limit_holds_across_minutes(app_factory, fake_llm, clock):
    app = await app_factory(limits={"messages_per_minute": 20, "messages_per_hour": 5})
    fake_llm.responder = lambda body: Step.text("ok")
    for i in range(7):
        await flood(app, 1, seconds=1, start=i)
        clock.advance(minutes=5)
    assert turns(fake_llm) == 5


async def test_each_conversation_is_limited_on_its_own_and_so_is_each_sender(app_factory, fake_llm):
    app = await app_factory(limits={"messages_per_minute": 2})
    fake_llm.responder = lambda body: Step.text("ok")
    await flood(app, 3, seconds=1, chat="c1", sender="u1")
    await flood(app, 3, seconds=1, chat="c2", sender="u2", start=10)
    assert turns(fake_llm) == 4  # two each
    await flood(app, 2, seconds=1, chat="c3", sender="u1", start=20)  # the same sender elsewhere: still over
    assert turns(fake_llm) == 4


async def test_approvals_are_not_counted(app_factory, fake_llm, channel):
    app = await app_factory(limits={"messages_per_minute": 1})
    fake_llm.responder = lambda body: Step.text("ok")
    await flood(app, 1, seconds=1)
    for i in range(3):
        handle = await app.worker.deliver(incoming(app, "/approve deadbeef", message_id=f"a{i}"))
        assert handle is not None
        await handle
    statuses = [r["status"] for r in await rows(app, "SELECT status FROM messages WHERE direction = 'in' ORDER BY id")]
    assert "rate_limited" not in statuses


async def test_a_redelivered_message_is_counted_once(app_factory, fake_llm):
    app = await app_factory(limits={"messages_per_minute": 2})
    fake_llm.responder = lambda body: Step.text("ok")
    for _ in range(3):
        handle = await app.worker.deliver(incoming(app, "same", message_id="m1"))
        if handle is not None:
            await handle
    await flood(app, 1, seconds=1, start=5)
    assert turns(fake_llm) == 2


def test_the_limiter_says_when_to_come_back():
    limiter = RateLimiter(per_minute=2, per_hour=100)
    keys = ("sender:test:u1",)
    assert limiter.take(keys, T0).admitted
    from datetime import timedelta
    assert limiter.take(keys, T0 + timedelta(seconds=10)).admitted
    refused = limiter.take(keys, T0 + timedelta(seconds=20))
    assert not refused.admitted and refused.notify and refused.retry_at == T0 + timedelta(seconds=60)
    again = limiter.take(keys, T0 + timedelta(seconds=30))
    assert not again.admitted and not again.notify
    assert limiter.take(keys, T0 + timedelta(seconds=61)).admitted


def test_quiet_says_once_per_key_in_a_while_and_keeps_its_memory_bounded():
    quiet = Quiet(60.0, keep=3)
    assert quiet.first_in_a_while("a", 0.0) and not quiet.first_in_a_while("a", 59.0)
    assert quiet.first_in_a_while("b", 59.0)  # another key is not held back by the first
    assert quiet.first_in_a_while("a", 60.0)  # the quiet time is over
    assert quiet.first_in_a_while("c", 61.0) and quiet.first_in_a_while("d", 62.0)  # 4 keys remembered
    # past `keep`, only keys whose quiet time is over are dropped ("b"): "a" and "d" are still held back
    assert quiet.first_in_a_while("e", 119.5)
    assert not quiet.first_in_a_while("a", 119.6) and not quiet.first_in_a_while("d", 119.7)
