"""http.post's allow-list as a table: each row is a URL the model asks to post to and the verdict,
``allowed`` or ``url_not_allowed`` (the code the model sees). Rows are checked with a dry run, which
runs the same check a real post runs first and sends nothing. A new trick is one more row.

The owner allowed four URLs (``ALLOWED``): a folder of hooks, one exact webhook, one URL with a
query, and one on an internationalised host.
"""

from __future__ import annotations

from zoneinfo import ZoneInfo

import pytest

from bruce.contracts import ToolContext
from bruce.errors import ToolFailed
from tests.fakes.clock import FakeClock
from tools.http_post import http_post_tool

ALLOWED_URLS = [
    "https://hooks.example/hooks",
    "http://home.lan:8123/api/webhook/lights-off",
    "https://api.example/exact?token=abc",
    "https://b\u00fccher.example/in",
]
ALLOWED, REFUSED = "allowed", "url_not_allowed"

ROWS = [
    # on the list
    ("https://hooks.example/hooks", ALLOWED),
    ("https://hooks.example/hooks/", ALLOWED),
    ("https://hooks.example/hooks/lights", ALLOWED),
    ("https://hooks.example:443/hooks/x", ALLOWED),
    ("https://HOOKS.EXAMPLE/hooks/x", ALLOWED),
    ("https://hooks.example/hooks/sala%20de%20estar", ALLOWED),
    ("https://hooks.example/hooks/%6cights", ALLOWED),
    ("https://hooks.example/hooks/x#fragment", ALLOWED),
    ("http://home.lan:8123/api/webhook/lights-off", ALLOWED),
    ("https://api.example/exact?token=abc", ALLOWED),
    ("https://b\u00fccher.example/in/x", ALLOWED),
    ("https://xn--bcher-kva.example/in/x", ALLOWED),
    # another origin
    ("http://hooks.example/hooks/x", REFUSED),
    ("https://hooks.example:8443/hooks/x", REFUSED),
    ("https://evil.example/hooks/x", REFUSED),
    ("https://hooks.example.evil.example/hooks/x", REFUSED),
    ("https://hooks.example./hooks/x", REFUSED),
    ("https://hooks.example@evil.example/hooks/x", REFUSED),
    ("https://user:pw@hooks.example/hooks/x", REFUSED),
    ("ftp://hooks.example/hooks/x", REFUSED),
    ("not a url", REFUSED),
    ("/hooks/x", REFUSED),
    # IDNA hosts not on the list, valid or not
    ("https://b\u00fccher.example.evil/in/x", REFUSED),
    ("https://xn--n3h.example/hooks", REFUSED),
    ("https://xn--abc.example/hooks", REFUSED),
    ("https://\u2603.example/hooks", REFUSED),
    ("https://hooks.ex\u0430mple/hooks/x", REFUSED),  # Cyrillic a
    # outside the path
    ("https://hooks.example/", REFUSED),
    ("https://hooks.example/hooksx", REFUSED),
    ("https://hooks.example/Hooks/x", REFUSED),
    ("https://hooks.example/other", REFUSED),
    ("http://home.lan:8123/api/webhook/lights-offx", REFUSED),
    ("http://home.lan:8123/api/webhook/lights-on", REFUSED),
    # dot segments, in any encoding
    ("https://hooks.example/hooks/../admin", REFUSED),
    ("https://hooks.example/hooks/./x", REFUSED),
    ("https://hooks.example/hooks/%2e%2e/admin", REFUSED),
    ("https://hooks.example/hooks/%2E%2E/admin", REFUSED),
    ("https://hooks.example/hooks/.%2e/admin", REFUSED),
    ("https://hooks.example/hooks/%252e%252e/admin", REFUSED),
    ("https://hooks.example/hooks/%c0%ae%c0%ae/admin", REFUSED),  # overlong UTF-8
    ("https://hooks.example/hooks/\uff0e\uff0e/admin", REFUSED),  # fullwidth dots
    ("http://home.lan:8123/api/webhook/lights-off/../lights-on", REFUSED),
    # path parameters
    ("https://hooks.example/hooks/..;/admin", REFUSED),
    ("https://hooks.example/hooks/..%3b/admin", REFUSED),
    ("https://hooks.example/hooks/;/../admin", REFUSED),
    ("https://hooks.example/hooks;x=1/a", REFUSED),
    ("https://hooks.example/hooks/x;jsessionid=1", REFUSED),
    # backslashes
    ("https://hooks.example/hooks/..\\admin", REFUSED),
    ("https://hooks.example/hooks\\..\\admin", REFUSED),
    ("https://hooks.example/hooks/%5c..%5cadmin", REFUSED),
    ("https://hooks.example/hooks/%255c..%255cadmin", REFUSED),
    # empty segments, encoded and look-alike slashes, control characters
    ("https://hooks.example/hooks//admin", REFUSED),
    ("https://hooks.example//hooks/x", REFUSED),
    ("https://hooks.example/hooks%2fx", REFUSED),
    ("https://hooks.example/hooks/x%2f..%2f..%2fadmin", REFUSED),
    ("https://hooks.example/hooks/x\uff0fy", REFUSED),
    ("https://hooks.example/hooks/%00", REFUSED),
    ("https://hooks.example/hooks/%0d%0aHost:%20evil", REFUSED),
    # the query must be the entry's
    ("https://hooks.example/hooks/x?extra=1", REFUSED),
    ("https://api.example/exact", REFUSED),
    ("https://api.example/exact?token=abd", REFUSED),
    ("https://api.example/exact?token=abc&x=1", REFUSED),
]


@pytest.mark.parametrize(("url", "verdict"), ROWS, ids=[row[0] for row in ROWS])
async def test_post_target(url: str, verdict: str) -> None:
    handler = http_post_tool(allowed_urls=ALLOWED_URLS)[1]
    ctx = ToolContext(clock=FakeClock(), zone=ZoneInfo("UTC"), conversation_id=None, turn_id=None, dry_run=True)
    if verdict == ALLOWED:
        preview = await handler({"url": url, "json": {"on": True}}, ctx)
        assert preview["method"] == "POST" and preview["body"] == '{\n  "on": true\n}'
        return
    with pytest.raises(ToolFailed) as refused:
        await handler({"url": url, "json": {"on": True}}, ctx)
    assert refused.value.code == verdict
    assert "tools.http_post.allowed_urls" in str(refused.value) and "pw" not in str(refused.value)
