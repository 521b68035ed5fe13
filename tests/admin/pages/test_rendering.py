"""What the admin pages share (``bruce.admin.pages.rendering``): a template rendered escaped, with
the session's CSRF token when the gate found one (none otherwise), and a redirect."""

from __future__ import annotations

from zoneinfo import ZoneInfo

from aiohttp.test_utils import make_mocked_request

from bruce.admin.auth import Session
from bruce.admin.pages.rendering import SESSION, Templates, redirect


def test_a_page_carries_the_sessions_csrf_token():
    templates = Templates()
    request = make_mocked_request("GET", "/memory")
    request[SESSION] = Session(csrf="the-csrf-token", expires=0.0)
    response = templates.page("memory.html", request=request, facts=[], summaries=[], error="<bad>", status=400)
    assert response.status == 400 and response.content_type == "text/html"
    assert response.text is not None
    assert 'name="csrf" value="the-csrf-token"' in response.text and "&lt;bad&gt;" in response.text


def test_without_a_session_there_is_no_token():
    page = Templates().page("memory.html", facts=[], summaries=[], error=None)
    assert page.status == 200 and page.text is not None
    assert 'action="/logout"' not in page.text  # no session: no form that would need the token


def test_a_time_is_local_and_named_with_utc_on_hover_and_a_bad_one_is_shown_as_it_is():
    templates = Templates(ZoneInfo("Europe/Berlin"))
    page = templates.page("pairing.html", requests=[{"code": "ABCD2345", "channel": "telegram", "sender_id": "5",
                                                     "display_name": None, "expires_at": "2026-12-05T13:05:12.5+00:00"}])
    assert ('<time datetime="2026-12-05T13:05:12+00:00" title="2026-12-05T13:05:12+00:00 (UTC)">2026-12-05 14:05 CET'
            "</time>") in (page.text or "")
    bad = templates.page("pairing.html", requests=[{"code": "X", "channel": "t", "sender_id": "5", "display_name": None,
                                                    "expires_at": "<b>soon</b>"}])
    assert bad.status == 200 and "&lt;b&gt;soon&lt;/b&gt;" in (bad.text or "")


def test_a_redirect_is_a_303_to_the_location():
    response = redirect("/jobs")
    assert response.status == 303 and response.headers["Location"] == "/jobs"
