"""``scheduler.briefing``: the morning briefing Bruce keeps as one agent-mode job (docs/tools.md,
"Morning briefing"; the job itself is ``bruce.jobs.briefing``).

The key names are a contract::

    scheduler:
      briefing:
        enabled: false
        cron: "30 7 * * 1-5"          # in assistant.timezone
        conversation: "telegram:123"  # where it is delivered ('<channel>:<chat id>')
        known_senders: []             # addresses or @domains; empty: tools.email.allowed_recipients
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from bruce.jobs.schedule import ScheduleError, parse_schedule

__all__ = ["BriefingConfig", "MAX_KNOWN_SENDERS"]

MAX_KNOWN_SENDERS = 50  # as many as one emails.search takes
_SENDER = re.compile(r"[^@\s<>,;\"]*@[^@\s<>,;\".]+(\.[^@\s<>,;\".]+)+")


class BriefingConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = False
    cron: str = "30 7 * * 1-5"  # 5-field cron in assistant.timezone: weekdays at 07:30
    conversation: str | None = Field(None, pattern=r"^[a-z][a-z0-9_-]*:[^\s:]+$")  # '<channel>:<chat id>'
    known_senders: list[str] = Field(default_factory=list, max_length=MAX_KNOWN_SENDERS)

    @field_validator("cron")
    @classmethod
    def _cron(cls, value: str) -> str:
        try:
            schedule = parse_schedule({"cron": value}, now=datetime.now(UTC), default_zone=ZoneInfo("UTC"))
        except ScheduleError as exc:
            raise ValueError(str(exc).removeprefix("cron: ")) from None
        return schedule.value

    @field_validator("known_senders")
    @classmethod
    def _senders(cls, values: list[str]) -> list[str]:
        for value in values:
            if not _SENDER.fullmatch(value.strip()):
                raise ValueError(f"{value[:80]!r} is neither an email address (name@example.org) nor a domain "
                                 "(@example.org)")
        return [v.strip().lower() for v in values]

    @model_validator(mode="after")
    def _delivered_somewhere(self) -> BriefingConfig:
        if self.enabled and self.conversation is None:
            raise ValueError("enabled, but conversation is not set; give the chat it is "
                             "delivered to, e.g. conversation: \"telegram:123456\" (`bruce jobs list` shows "
                             "conversation ids)")
        return self
