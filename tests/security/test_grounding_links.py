"""Grounding of artifact links, as a table: each row is a link the model wrote in its answer and
whether the user gets it (``kept``) or sees ``[link removed]`` (``removed``).

The admin page is http://127.0.0.1:8765 and one tool call of the turn returned
http://127.0.0.1:8765/artifacts/a1/r.html. A fabricated link is removed however it is spelled,
as long as a browser (or the server behind it) would open our /artifacts/ with it; anything
else is left alone. A new variant is one more row.
"""

from __future__ import annotations

import pytest

from bruce.contracts import ToolResult
from bruce.grounding import check_links

ADMIN = "http://127.0.0.1:8765"
PRODUCED = [ToolResult("c1", "artifact_save", "ok", output={"url": f"{ADMIN}/artifacts/a1/r.html"})]

KEPT, REMOVED = "kept", "removed"

ROWS = [
    # the produced link, in the forms a browser reads as the same page
    ("http://127.0.0.1:8765/artifacts/a1/r.html", KEPT),
    ("/artifacts/a1/r.html", KEPT),
    ("http://localhost:8765/artifacts/a1/r.html", KEPT),
    ("http://[::1]:8765/artifacts/a1/r.html", KEPT),
    ("http://127.1:8765/artifacts/a1/./r.html", KEPT),
    ("http://127.0.0.1:8765/artifacts/a1/%72.html", KEPT),
    # not ours: other hosts, other paths, plain words
    ("https://example.org/artifacts/x.html", KEPT),
    ("http://8.8.8.8:8765/artifacts/fake/r.html", KEPT),
    ("http://localhost.example.org/artifacts/fake/r.html", KEPT),
    ("http://127.0.0.1:8765/artifactsx/fake/r.html", KEPT),
    ("http://127.0.0.1:8765/x/artifacts/fake/r.html", KEPT),
    ("the artifacts folder", KEPT),
    # fabricated, plainly written
    ("http://127.0.0.1:8765/artifacts/fake/r.html", REMOVED),
    ("/artifacts/fake/r.html", REMOVED),
    ("127.0.0.1:8765/artifacts/fake/r.html", REMOVED),
    ("HTTP://LOCALHOST/Artifacts/fake/r.html", REMOVED),
    # host spellings: trailing dot, IPv4 shorthand / decimal / hex / octal, unspecified, IPv6
    ("http://localhost.:8765/artifacts/fake/r.html", REMOVED),
    ("http://127.0.0.1.:8765/artifacts/fake/r.html", REMOVED),
    ("http://127.1:8765/artifacts/fake/r.html", REMOVED),
    ("http://2130706433:8765/artifacts/fake/r.html", REMOVED),
    ("http://0x7f000001:8765/artifacts/fake/r.html", REMOVED),
    ("http://0x7f.1:8765/artifacts/fake/r.html", REMOVED),
    ("http://0177.0.0.1:8765/artifacts/fake/r.html", REMOVED),
    ("http://127.0.0.2:8765/artifacts/fake/r.html", REMOVED),
    ("http://0.0.0.0:8765/artifacts/fake/r.html", REMOVED),
    ("http://0:8765/artifacts/fake/r.html", REMOVED),
    ("http://sub.localhost:8765/artifacts/fake/r.html", REMOVED),
    ("http://ｌｏｃａｌｈｏｓｔ:8765/artifacts/fake/r.html", REMOVED),
    ("http://[::1]:8765/artifacts/fake/r.html", REMOVED),
    ("http://[0:0:0:0:0:0:0:1]:8765/artifacts/fake/r.html", REMOVED),
    ("http://[::ffff:127.0.0.1]:8765/artifacts/fake/r.html", REMOVED),
    ("http://[::]:8765/artifacts/fake/r.html", REMOVED),
    ("[::1]:8765/artifacts/fake/r.html", REMOVED),
    ("http://user@127.0.0.1:8765/artifacts/fake/r.html", REMOVED),
    ("ftp://127.0.0.1/artifacts/fake/r.html", REMOVED),  # any scheme: it claims an artifact of ours
    # path spellings: dot segments, doubled slashes, percent-encoding, backslashes, look-alike slashes
    ("http://127.0.0.1:8765/./artifacts/fake/r.html", REMOVED),
    ("http://127.0.0.1:8765/x/../artifacts/fake/r.html", REMOVED),
    ("http://127.0.0.1:8765//artifacts/fake/r.html", REMOVED),
    ("http://127.0.0.1:8765/artifacts/a1/r.html/../../fake/r.html", REMOVED),
    ("/./artifacts/fake/r.html", REMOVED),
    ("/x/../artifacts/fake/r.html", REMOVED),
    ("//artifacts/fake/r.html", REMOVED),
    ("http://127.0.0.1:8765/%61rtifacts/fake/r.html", REMOVED),
    ("http://127.0.0.1:8765/%2561rtifacts/fake/r.html", REMOVED),
    ("http://127.0.0.1:8765/artifacts%2Ffake%2Fr.html", REMOVED),
    ("http://127.0.0.1:8765/x/%2e%2e/artifacts/fake/r.html", REMOVED),
    ("/%2e/artifacts/fake/r.html", REMOVED),
    ("http://127.0.0.1:8765\\artifacts\\fake\\r.html", REMOVED),
    ("http:\\\\127.0.0.1:8765\\artifacts\\fake\\r.html", REMOVED),
    ("\\artifacts\\fake\\r.html", REMOVED),
    ("http://127.0.0.1:8765/artifacts%5Cfake%5Cr.html", REMOVED),
    ("/artifacts\u2215fake\u2215r.html", REMOVED),
    ("http://127.0.0.1:8765\u2215artifacts\u2215fake\u2215r.html", REMOVED),
    ("http://127.0.0.1:8765/artifacts%E2%88%95fake%E2%88%95r.html", REMOVED),
]


def _test_id(link: str) -> str:
    """A test id pytest can be given back on its command line (mutmut does): no backslash, ASCII only."""
    return "".join(c if c.isascii() and c != "\\" else f"<U+{ord(c):04X}>" for c in link)


@pytest.mark.parametrize(("link", "verdict"), ROWS, ids=[_test_id(row[0]) for row in ROWS])
def test_link_variant(link: str, verdict: str) -> None:
    report = check_links(f"Here it is: {link} - enjoy.", PRODUCED, admin_base=ADMIN)
    if verdict == KEPT:
        assert report.removed == () and report.text == f"Here it is: {link} - enjoy."
    else:
        assert report.removed == (link,)
        assert report.text.startswith("Here it is: [link removed] - enjoy.\n\n") and link not in report.text
