"""A calendar collection on a CalDAV server (Google, iCloud, Fastmail, Nextcloud, Radicale) as the
calendar's backend: the ``caldav`` library talks to the server, ``icalendar`` reads and writes the
events, and ``recurring_ical_events`` expands repeating ones within the range asked for.

Times keep the zone each event was written in and come out as aware UTC datetimes; an all-day
event (a date, no time) and a floating time (no zone) are read in the calendar's timezone. New
events are written in UTC under a UID the caller may choose, so writing the same UID twice finds
the first one instead of adding another. Nothing here is one transaction: events are written one
by one, and a repeat skips those already there. A server that does not answer, or refuses the
login, raises :class:`CalendarUnavailable`; the message names the host, never the credentials.
"""

from __future__ import annotations

import logging
import secrets
import ssl
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo

import icalendar
import recurring_ical_events
from caldav.collection import Calendar
from caldav.davclient import DAVClient
from caldav.lib import error as dav_error

from tools.mcp_servers.calendar.backend import CalendarUnavailable
from tools.mcp_servers.calendar.store import Change, Event, EventNotFound, NewEvent

__all__ = ["CalDavStore"]

NO_TITLE = "(no title)"

log = logging.getLogger("tools.mcp_servers.calendar")


def certificate_problem(exc: BaseException) -> str | None:
    """Why the server's certificate was refused, when ``exc`` or one of its causes says so; else None."""
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen:
        if isinstance(current, ssl.SSLCertVerificationError):
            return str(current.verify_message or current.reason or current)
        seen.append(current)
        current = current.__cause__ or current.__context__
    return None


class CalDavStore:
    """The calendar collection at ``url``; the login is ``username``/``password`` when given."""

    def __init__(self, url: str, zone: ZoneInfo, username: str | None = None, password: str | None = None,
                 timeout_s: int = 10, ca_file: str | None = None) -> None:
        self.url = url
        self.host = urlsplit(url).netloc.rsplit("@", 1)[-1]
        self._zone = zone
        # https certificates are always verified: against ca_file when given, else the system's store
        client = DAVClient(url=url, username=username or None, password=password or None, timeout=timeout_s,
                           ssl_verify_cert=ca_file or True)
        self._calendar = Calendar(client=client, url=url)
        # the SDK runs tools on worker threads; one HTTP session answering two at once loses its login
        self._one_at_a_time = threading.RLock()

    @contextmanager
    def _talking(self, event_id: str | None = None) -> Iterator[None]:
        """One request at a time; the library's errors translated: 404 for an event is
        :class:`EventNotFound`, the rest unavailable."""
        try:
            with self._one_at_a_time:
                yield
        except dav_error.AuthorizationError:
            raise CalendarUnavailable(
                f"the CalDAV server {self.host} refused the login; check CALDAV_USERNAME and CALDAV_PASSWORD"
            ) from None
        except dav_error.NotFoundError:
            if event_id is not None:
                raise EventNotFound(event_id) from None
            raise CalendarUnavailable(f"the CalDAV server {self.host} has no calendar at {self.url}") from None
        except (OSError, dav_error.DAVError) as exc:  # niquests' connection errors and time-outs are OSErrors
            reason = certificate_problem(exc)
            if reason is not None:
                raise CalendarUnavailable(
                    f"the certificate of the CalDAV server {self.host} could not be verified ({reason}); if it comes "
                    "from your own CA, give that CA's certificate (PEM) as CALDAV_CA_FILE in the server's env"
                ) from None
            raise CalendarUnavailable(f"the CalDAV server {self.host} did not answer ({type(exc).__name__})") from None

    # ---- reading ----

    def _moment(self, value: date | datetime) -> datetime:
        if not isinstance(value, datetime):
            return datetime.combine(value, time(), tzinfo=self._zone).astimezone(UTC)
        if value.tzinfo is None:
            value = value.replace(tzinfo=self._zone)
        return value.astimezone(UTC).replace(microsecond=0)

    def _event(self, component: Any, repeating: bool = False) -> Event:
        first = component.decoded("DTSTART")
        if "DTEND" in component:
            last = component.decoded("DTEND")
        elif "DURATION" in component:
            last = first + component.decoded("DURATION")
        else:  # RFC 5545: a date lasts the day, a date-time is an instant
            last = first if isinstance(first, datetime) else first + timedelta(days=1)
        start, end = self._moment(first), self._moment(last)
        stamp = component.decoded("DTSTAMP") if "DTSTAMP" in component else first
        return Event(
            id=str(component.get("UID", "")),
            title=str(component.get("SUMMARY") or NO_TITLE),
            start=start,
            end=max(end, start),
            location=str(component["LOCATION"]) if component.get("LOCATION") else None,
            notes=str(component["DESCRIPTION"]) if component.get("DESCRIPTION") else None,
            created_at=self._moment(stamp),
            all_day=not isinstance(first, datetime),
            recurring=repeating or "RRULE" in component or "RDATE" in component,
        )

    def _occurrences(self, start: datetime, end: datetime) -> list[Event]:
        """Every event and occurrence of a repeating one that overlaps ``[start, end)``, by start."""
        with self._talking():
            found: list[Any] = self._calendar.search(start=start, end=end, event=True)  # type: ignore[assignment]
            texts = [resource.data for resource in found]
        events = [event for text in texts if text for event in self._expand(text, start, end)]
        return sorted(events, key=lambda e: (e.start, e.end, e.id))

    def _expand(self, text: str, start: datetime, end: datetime) -> list[Event]:
        """The events of one calendar object within ``[start, end)``; one the libraries cannot read is
        left out and logged, so one broken event does not hide the others."""
        try:
            calendar = icalendar.Calendar.from_ical(text)
            # the expansion marks every occurrence with a RECURRENCE-ID, even a single event's: ask the source
            repeating = any(key in c for c in calendar.walk("VEVENT") for key in ("RRULE", "RDATE", "RECURRENCE-ID"))
            events = [self._event(c, repeating) for c in recurring_ical_events.of(calendar).between(start, end)]
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            log.warning("calendar: an event on %s cannot be read, left out (%s: %s)", self.host,
                        type(exc).__name__, str(exc)[:200])
            return []
        return [e for e in events if e.start < end and (e.end > start or e.end == e.start == start)]

    def overlapping(self, start: datetime, end: datetime) -> list[Event]:
        return self._occurrences(start, end)

    def upcoming(self, now: datetime, until: datetime, limit: int) -> list[Event]:
        return [e for e in self._occurrences(now, until) if e.end > now][:limit]

    def _resource(self, event_id: str) -> Any:
        with self._talking(event_id):
            return self._calendar.get_event_by_uid(event_id)

    def get(self, event_id: str) -> Event:
        resource = self._resource(event_id)
        with self._talking(event_id):
            return self._event(resource.icalendar_component)

    # ---- writing ----

    def _ical(self, new: NewEvent, uid: str, now: datetime) -> str:
        calendar = icalendar.Calendar()
        calendar.add("prodid", "-//Bruce//calendar//EN")
        calendar.add("version", "2.0")
        event = icalendar.Event()
        event.add("uid", uid)
        event.add("dtstamp", now.astimezone(UTC).replace(microsecond=0))
        event.add("dtstart", new.start.astimezone(UTC))
        event.add("dtend", new.end.astimezone(UTC))
        event.add("summary", new.title)
        if new.location:
            event.add("location", new.location)
        if new.notes:
            event.add("description", new.notes)
        calendar.add_component(event)
        return str(calendar.to_ical().decode())

    def create(self, events: Sequence[NewEvent], now: datetime) -> list[tuple[Event, bool]]:
        """Each event written with ``True``, or the one already there (same UID, or same title,
        start and end) with ``False``."""
        results: list[tuple[Event, bool]] = []
        for new in events:
            uid = new.uid or f"bruce-{secrets.token_hex(8)}"
            try:
                results.append((self.get(uid), False))
                continue
            except EventNotFound:
                pass
            same = [e for e in self.overlapping(new.start, new.end) if (e.title, e.start, e.end) == (
                new.title, new.start, new.end)]
            if same:
                results.append((same[0], False))
                continue
            with self._talking():
                self._calendar.add_event(self._ical(new, uid, now), no_overwrite=True)
            results.append((self.get(uid), True))
        return results

    def update(self, event_id: str, change: Change) -> Event:
        """``change`` applied to the event (to the whole series of a repeating one)."""
        resource = self._resource(event_id)
        with self._talking(event_id):
            component = resource.icalendar_component
            old = self._event(component)
            start, end = change.start or old.start, change.end or old.end
            if change.start is not None and change.end is None:
                end = start + (old.end - old.start)
            texts = {"SUMMARY": change.title, "LOCATION": change.location, "DESCRIPTION": change.notes}
            for key, value in texts.items():
                if value is not None:
                    component.pop(key, None)
                    if value:
                        component.add(key.lower(), value)
            if (start, end) != (old.start, old.end):
                for key in ("DTSTART", "DTEND", "DURATION"):
                    component.pop(key, None)
                component.add("dtstart", start)
                component.add("dtend", end)
            resource.icalendar_component = component
            resource.save()
        return self.get(event_id)

    def delete(self, event_id: str) -> Event:
        """Remove the event (every occurrence of a repeating one); returns it as it was."""
        resource = self._resource(event_id)
        with self._talking(event_id):
            old = self._event(resource.icalendar_component)
            resource.delete()
        return old
