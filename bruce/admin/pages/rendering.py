"""What every admin page shares: its templates (Jinja2, autoescaped, from the package), the
session the gate found (for the forms' CSRF token), and the redirect after a form.

A template shows a stored instant with the ``local`` filter: in ``assistant.timezone``, the zone
named (``2026-12-05 14:05 CET``), the UTC instant on hover: ``{{ row.created_at | local }}``,
``| local(seconds=True)`` or ``| local(date=False)``; an empty one is ``-``."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol
from zoneinfo import ZoneInfo

from aiohttp import web
from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup, escape

from bruce.admin.auth import Session
from bruce.clock import local_time, utc_title

__all__ = ["Page", "PageGroup", "Templates", "SESSION", "redirect"]

SESSION = web.RequestKey("session", Session)  # set by the gate for a request made with the login cookie


class Page(Protocol):
    """A template rendered with the session's CSRF token: ``Templates.page``."""

    def __call__(self, name: str, *, status: int = 200, request: web.Request | None = None,
                 **values: Any) -> web.Response: ...


class PageGroup(Protocol):
    """One group of the admin page (``LogPages``, ``JobPages``...): the routes it serves."""

    def routes(self) -> list[web.RouteDef]: ...


class Templates:
    def __init__(self, zone: ZoneInfo | None = None) -> None:
        """``zone``: the owner's (``assistant.timezone``), every time on a page is shown in."""
        self._env = Environment(loader=PackageLoader("bruce.admin", "templates"),
                                autoescape=select_autoescape(default=True))
        self.zone = zone or ZoneInfo("UTC")
        self._env.filters["local"] = self._local

    def _local(self, moment: datetime | str | None, *, date: bool = True, seconds: bool = False) -> Markup:
        if moment is None or moment == "":
            return Markup("-")
        try:
            utc = utc_title(moment)
            shown = local_time(moment, self.zone, date=date, seconds=seconds)
        except (TypeError, ValueError):  # not an instant (a hand-edited eval run file): shown as it is
            return escape(str(moment))
        return Markup(f'<time datetime="{escape(utc)}" title="{escape(utc)} (UTC)">{escape(shown)}</time>')

    def page(self, name: str, *, status: int = 200, request: web.Request | None = None, **values: Any) -> web.Response:
        session: Session | None = request.get(SESSION) if request is not None else None
        html = self._env.get_template(name).render(csrf=session.csrf if session else "", **values)
        return web.Response(text=html, content_type="text/html", status=status)

    def text(self, name: str, **values: Any) -> str:
        """A template (a part of a page) as text."""
        return self._env.get_template(name).render(**values)


def redirect(location: str) -> web.Response:
    return web.Response(status=303, headers={"Location": location})
