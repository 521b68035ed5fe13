"""Who is who, once a sender is admitted (``bruce.runtime.access``): the owner or a guest.

The person decides whose memory and jobs a turn sees and which tools it gets (docs/security.md,
"People"). The rule, in order:

* a channel with no access rule (the console, the web chat) is the owner's: so is every ``bruce``
  command, which never comes through a channel;
* with ``people.owner`` set, the ids it lists for the channel are the owner; every other admitted
  sender (an ``allowed_users`` entry not under it, a paired user) is a guest;
* without it, every ``allowed_users`` entry is the owner (Bruce's behaviour before people), and a
  paired user is a guest.

A guest's person key is ``<channel>:<user id>`` (``bruce.values.guest_person``); in a group chat
the sender of the message decides, not the chat.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from bruce.values import OWNER, guest_person

__all__ = ["person_of", "AllowList"]


class AllowList(Protocol):
    @property
    def allowed_users(self) -> frozenset[str]: ...


def person_of(channel: str, user_id: str | None, *, rules: Mapping[str, AllowList],
              owners: Mapping[str, frozenset[str]] | None) -> str:
    """The person key of ``user_id`` writing on ``channel`` (``owners``: ``people.owner`` by
    channel, None when it is not set)."""
    rule = rules.get(channel)
    if rule is None:
        return OWNER
    if user_id is None:  # a stored message of a platform always has its sender; none is nobody's
        return guest_person(channel, "unknown")
    owner_ids = rule.allowed_users if owners is None else owners.get(channel, frozenset())
    return OWNER if user_id in owner_ids else guest_person(channel, user_id)
