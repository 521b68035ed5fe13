"""What every admin page shares: its templates (Jinja2, autoescaped, from the package), the
session the gate found (for the forms' CSRF token), and the redirect after a form."""

from __future__ import annotations

from typing import Any, Protocol

from aiohttp import web
from jinja2 import Environment, PackageLoader, select_autoescape

from bruce.admin.auth import Session

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
    def __init__(self) -> None:
        self._env = Environment(loader=PackageLoader("bruce.admin", "templates"),
                                autoescape=select_autoescape(default=True))

    def page(self, name: str, *, status: int = 200, request: web.Request | None = None, **values: Any) -> web.Response:
        session: Session | None = request.get(SESSION) if request is not None else None
        html = self._env.get_template(name).render(csrf=session.csrf if session else "", **values)
        return web.Response(text=html, content_type="text/html", status=status)

    def text(self, name: str, **values: Any) -> str:
        """A template (a part of a page) as text."""
        return self._env.get_template(name).render(**values)


def redirect(location: str) -> web.Response:
    return web.Response(status=303, headers={"Location": location})
