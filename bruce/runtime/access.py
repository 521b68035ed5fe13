"""Admission: who reaches the agent, and what a stranger is told.

A sender is admitted when their channel has no access rule (the console), when they are in the
channel's ``allowed_users`` or under ``people.owner``, or when they are paired (``paired_users``).
Who an admitted sender is (the owner or a guest) is ``person`` (``bruce.runtime.people``). Paired users are kept
in memory, re-read every ``paired_refresh_s`` and looked up in the database on a miss, so a
``bruce pairing approve`` from another process lets the sender in at their next message and a
``revoke`` takes effect within ``paired_refresh_s``.

A stranger costs no model call and no stored message. In a private chat they get one line, sent
straight to the channel (nothing is stored for them): with ``pairing`` on, a pairing code (the
same one while it is pending; none while the channel has ``max_pending`` requests waiting),
else a refusal. A pending code is told again at most once per ``code_repeat_s`` (ten minutes:
a stranger sending 30 messages gets one reply, not 30; a new code, once the old one expired, is
told at once); a refusal (and a "try later") once per sender per ``quiet_s``. That memory is
this process's only (a restart forgets it). In a group, a stranger hears nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta

import structlog

from bruce.channel import Channel, IncomingMessage
from bruce.clock import Clock, utc_iso
from bruce.limits import Quiet
from bruce.runtime.pairing import new_code
from bruce.runtime.people import person_of
from bruce.store import Store
from bruce.texts import PAIRING_FULL, STRANGER_REFUSED, pairing_code
from bruce.values import ConversationId, PairingOutcome, is_owner

__all__ = ["Access", "AccessRule", "AccessSettings"]

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class AccessRule:
    """One chat platform's admission: its allow-list, and whether strangers may ask to pair."""

    allowed_users: frozenset[str]
    pairing: bool = False


@dataclass(frozen=True, slots=True)
class AccessSettings:
    code_ttl_s: float = 3600.0  # a pairing code expires after this long (the user is told "1 hour")
    max_pending: int = 3  # pending codes per channel; past it, a new stranger is told to try later
    quiet_s: float = 3600.0  # after a refusal, the same stranger hears nothing for this long
    code_repeat_s: float = 600.0  # a pending pairing code is told to its stranger at most this often
    paired_refresh_s: float = 30.0  # paired users are re-read from the database this often


class Access:
    def __init__(self, *, store: Store, clock: Clock, rules: Mapping[str, AccessRule],
                 channels: Mapping[str, Channel], settings: AccessSettings | None = None,
                 owners: Mapping[str, frozenset[str]] | None = None) -> None:
        """``owners``: ``people.owner``'s ids by channel (admitted, and the owner); None when it is
        not set (then every allowed user is the owner)."""
        self._store = store
        self._clock = clock
        self._rules = dict(rules)
        self._owners = dict(owners) if owners is not None else None
        self._channels = channels
        self._settings = settings or AccessSettings()
        self._paired: dict[str, frozenset[str]] = {}
        self._paired_at: float | None = None  # monotonic time of the last full read
        self._refused = Quiet(self._settings.quiet_s)  # (channel, sender) refused lately
        self._told_code = Quiet(self._settings.code_repeat_s)  # (channel, sender, code) told lately

    async def admits(self, channel: str, user_id: str) -> bool:
        rule = self._rules.get(channel)
        if rule is None or user_id in rule.allowed_users or user_id in (self._owners or {}).get(channel, ()):
            return True
        now = self._clock.monotonic()
        if self._paired_at is None or now - self._paired_at >= self._settings.paired_refresh_s:
            self._paired, self._paired_at = await self._store.pairing.paired(), now
            return user_id in self._paired.get(channel, frozenset())
        if user_id in self._paired.get(channel, frozenset()):
            return True
        if await self._store.pairing.is_paired(channel, user_id):  # approved since the last read
            self._paired[channel] = self._paired.get(channel, frozenset()) | {user_id}
            return True
        return False

    async def still_admits(self, person: str, conversation: ConversationId) -> bool:
        """Whether a job of ``person`` in ``conversation`` may still run as them. A guest: while
        their platform has an access rule that admits them (allowed, or still paired). The owner:
        on a chat platform, only where the owner has written, or nobody has (a job made before
        ``people.owner`` in a chat only a guest writes in would read the owner's memory to them)."""
        if not is_owner(person):
            channel, _, user_id = person.partition(":")
            return channel in self._rules and await self.admits(channel, user_id)
        if conversation.channel not in self._rules:
            return True
        senders = await self._store.jobs.senders(str(conversation))
        return not senders or any(is_owner(self.person(conversation.channel, s)) for s in senders)

    async def others_wrote(self, person: str, conversation: ConversationId) -> bool:
        """Whether someone other than ``person`` ever wrote in ``conversation`` (a group): a run of
        ``person``'s job there reads their words in its history, as a chat turn would."""
        if conversation.channel not in self._rules:
            return False
        senders = await self._store.jobs.senders(str(conversation))
        return any(self.person(conversation.channel, s) != person for s in senders)

    def person(self, channel: str, user_id: str | None) -> str:
        """The person an admitted sender is: ``OWNER`` or a guest's key (``bruce.runtime.people``)."""
        return person_of(channel, user_id, rules=self._rules, owners=self._owners)

    async def answer_stranger(self, message: IncomingMessage) -> None:
        """Tell a refused sender what they may do, if anything; never raises."""
        rule = self._rules.get(message.channel)
        channel = self._channels.get(message.channel)
        if rule is None or channel is None or not message.private:
            return
        try:
            text = await self._pairing_reply(message) if rule.pairing else self._refusal(message)
            if text is not None:
                await channel.send_text(message.chat_id, text)
        except Exception as exc:
            log.warning("access.stranger_reply_failed", channel=message.channel, sender=message.sender_id,
                        error=type(exc).__name__)

    async def _pairing_reply(self, message: IncomingMessage) -> str | None:
        s = self._settings
        outcome, code = await self._store.pairing.ask(
            channel=message.channel, sender_id=message.sender_id, chat_id=message.chat_id,
            display_name=message.sender_name, max_pending=s.max_pending, new_code=new_code,
            expires_at=utc_iso(self._clock.now() + timedelta(seconds=s.code_ttl_s)))
        log.info("access.pairing", channel=message.channel, sender=message.sender_id, outcome=str(outcome))
        if code is not None:
            key = (message.channel, message.sender_id, code)
            return pairing_code(code) if self._told_code.first_in_a_while(key, self._clock.monotonic()) else None
        if outcome is PairingOutcome.FULL:
            return PAIRING_FULL if self._first_in_a_while(message) else None
        return self._refusal(message)  # denied within the hour

    def _refusal(self, message: IncomingMessage) -> str | None:
        return STRANGER_REFUSED if self._first_in_a_while(message) else None

    def _first_in_a_while(self, message: IncomingMessage) -> bool:
        """True (and remembered) unless this sender was refused less than ``quiet_s`` ago."""
        return self._refused.first_in_a_while((message.channel, message.sender_id), self._clock.monotonic())
