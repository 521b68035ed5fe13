"""config.yml's ``people`` and ``access`` sections: who the owner is, and what a guest may use.

``people.owner`` lists the owner's user ids per chat platform, like ``allowed_users``. Without
it, every ``allowed_users`` entry is the owner (Bruce's behaviour before people); with it, only
those ids are, and the other allowed users are guests. Paired users are always guests. The
console, the web chat and every ``bruce`` command act as the owner (``bruce.runtime.people``).

``access.guest_tools`` names the tools a guest is offered and may run (``*`` patterns, as
``proactive.*``). Whatever it says, a guest never gets a tool of risk high, critical or forbidden,
nor the owner's own things (artifacts, the notes folder); ``bruce config check`` and ``bruce run``
refuse an entry that names one of the built-in ones (``bruce.actions.guests``).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from bruce.config.rules import ids_as_text

__all__ = ["AccessConfig", "DEFAULT_GUEST_TOOLS", "OwnerConfig", "PeopleConfig"]

DEFAULT_GUEST_TOOLS = ("clock.now", "math.calculate", "web.search", "web.read_url", "proactive.*", "memory.*")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class OwnerConfig(_Model):
    """The owner's user ids on each chat platform (as ``/id`` shows them)."""

    telegram: list[str] = Field(default_factory=list)
    discord: list[str] = Field(default_factory=list)

    _ids = field_validator("telegram", "discord", mode="before")(ids_as_text)

    def ids(self) -> dict[str, frozenset[str]]:
        """The owner's ids by channel name."""
        return {name: frozenset(getattr(self, name)) for name in type(self).model_fields}


class PeopleConfig(_Model):
    owner: OwnerConfig | None = None  # null: every allowed_users entry is the owner


class AccessConfig(_Model):
    guest_tools: list[str] = Field(default_factory=lambda: list(DEFAULT_GUEST_TOOLS))

    @field_validator("guest_tools")
    @classmethod
    def _patterns(cls, value: list[str]) -> list[str]:
        for entry in value:
            if not entry.strip() or any(c.isspace() for c in entry):
                raise ValueError(f"{entry!r}: a tool name (clock.now) or a pattern (proactive.*), without spaces")
        return value
