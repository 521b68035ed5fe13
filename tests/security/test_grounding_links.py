"""Grounding of artifact links, as a table: each row is a link the model wrote in its answer and
whether the user gets it (``kept``) or sees ``[link removed]`` (``removed``).

The admin page is http://127.0.0.1:8765 and one tool call of the turn returned
http://127.0.0.1:8765/artifacts/a1/r.html. A fabricated link is removed however it is spelled,
as long as a browser (or the server behind it) would open our /artifacts/ with it; anything
else is left alone. A new variant is one more row.
"""

from __future__ import annotations

import pytest
from structlog.testing import capture_logs

from bruce.contracts import ToolResult
from bruce.turns.grounding import check_links

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
    ("http://example.org/artifacts/a1/r.html", KEPT),  # the produced path, on a host that is not ours
    ("http:/example.org/artifacts/fake/r.html", KEPT),  # a browser reads this as http://example.org/...
    ("https:example.org/artifacts/x.html", KEPT),
    ("example.org/artifacts/fake/r.html", KEPT),  # a bare host name is a host, not a path
    ("example.org:8765/artifacts/a1/r.html", KEPT),
    ("https://example.org/%FF/artifacts/x.html", KEPT),  # not UTF-8 once decoded: still read, still external
    # the produced link, written without the slashes or relative to the page
    ("http:/127.0.0.1:8765/artifacts/a1/r.html", KEPT),
    ("./artifacts/a1/r.html", KEPT),
    # fabricated, plainly written
    ("http://127.0.0.1:8765/artifacts/fake/r.html", REMOVED),
    ("/artifacts/fake/r.html", REMOVED),
    ("127.0.0.1:8765/artifacts/fake/r.html", REMOVED),
    ("HTTP://LOCALHOST/Artifacts/fake/r.html", REMOVED),
    ("./artifacts/fake/r.html", REMOVED),
    ("../artifacts/fake/r.html", REMOVED),
    # missing slashes after the scheme, in any letter case: browsers fix these up
    ("http:/127.0.0.1:8765/artifacts/fake/r.html", REMOVED),
    ("HTTP:/127.0.0.1:8765/artifacts/fake/r.html", REMOVED),
    ("http:127.0.0.1:8765/artifacts/fake/r.html", REMOVED),
    ("https:/127.0.0.1:8765/artifacts/fake/r.html", REMOVED),
    ("HTTPS:localhost/artifacts/fake/r.html", REMOVED),
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
    ("http://127.0.0.1:8765/%252e/artifacts/fake/r.html", REMOVED),  # dot segments only once decoded
    ("http://127.0.0.1:8765/x/%252e%252e/artifacts/fake/r.html", REMOVED),
    ("http://127.0.0.1:8765/x%5C..%5Cartifacts/fake/r.html", REMOVED),
    ("http://127.0.0.1:8765/artifacts/fake/%FF.html", REMOVED),  # an escape that is not UTF-8
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


# Markdown and prose around a link: what is removed is the link alone, the rest stays as written.
SURROUNDINGS = [
    ("**/artifacts/fake/r.html**", "/artifacts/fake/r.html", "**[link removed]**"),
    ("_/artifacts/fake/r.html_", "/artifacts/fake/r.html", "_[link removed]_"),
    ("|/artifacts/fake/r.html|", "/artifacts/fake/r.html", "|[link removed]|"),
    ("=http://127.0.0.1:8765/artifacts/fake/r.html", "http://127.0.0.1:8765/artifacts/fake/r.html", "=[link removed]"),
    ("NEXT:http://127.0.0.1:8765/artifacts/fake/r.html", "http://127.0.0.1:8765/artifacts/fake/r.html",
     "NEXT:[link removed]"),
    ("url=HTTP://localhost/artifacts/fake/r.html", "HTTP://localhost/artifacts/fake/r.html", "url=[link removed]"),
]


@pytest.mark.parametrize(("written", "link", "shown"), SURROUNDINGS, ids=[_test_id(row[0]) for row in SURROUNDINGS])
def test_only_the_link_is_removed_from_its_surroundings(written: str, link: str, shown: str) -> None:
    report = check_links(f"See {written} now.", PRODUCED, admin_base=ADMIN)
    assert report.removed == (link,)
    assert report.text.split("\n\n")[0] == f"See {shown} now."


def test_a_produced_link_whose_artifact_is_gone_is_removed() -> None:
    """A tool's ``url`` vouches for a link only if the artifact exists; existing but unproduced ones do not count."""
    results = [ToolResult("c1", "artifact_save", "ok", output={"url": f"{ADMIN}/artifacts/a1/r.html"}),
               ToolResult("c2", "web_search", "ok", output={"url": f"{ADMIN}/artifacts/gone/r.html"})]
    text = f"New: {ADMIN}/artifacts/a1/r.html, old: /artifacts/a2/r.html, gone: {ADMIN}/artifacts/gone/r.html"
    report = check_links(text, results, admin_base=ADMIN, existing={"/artifacts/a1/r.html", "/artifacts/a2/r.html"})
    assert report.removed == ("/artifacts/a2/r.html", f"{ADMIN}/artifacts/gone/r.html")
    assert report.text.split("\n\n")[0] == f"New: {ADMIN}/artifacts/a1/r.html, old: [link removed], gone: [link removed]"


def test_url_fields_anywhere_in_a_tool_result_vouch_for_links() -> None:
    results = [
        ToolResult("c1", "artifact_save", "ok", output={"artifact": {"id": "a1", "url": f"{ADMIN}/artifacts/a1/r.html"}}),
        ToolResult("c2", "artifact_list", "ok", output={"items": [{"url": "/artifacts/a2/r.html"},
                                                                  {"url": "/artifacts/a3/r.html"}]}),
        ToolResult("c3", "artifact_list", "ok", output=[[{"url": "/artifacts/a4/r.html"}]]),
    ]
    text = "Files: /artifacts/a1/r.html /artifacts/a2/r.html /artifacts/a3/r.html /artifacts/a4/r.html"
    report = check_links(text, results, admin_base=ADMIN)
    assert report.removed == () and report.text == text


def test_only_a_url_field_vouches_for_a_link() -> None:
    """Any other field (a path, a link, a title) can hold what a page said: it vouches for nothing."""
    page = ToolResult("c1", "web_read_url", "ok", output={
        "url": "https://example.org/post", "path": "/artifacts/evil/x.html", "link": f"{ADMIN}/artifacts/evil/y.html",
        "urls": ["/artifacts/evil/z.html"]})
    text = f"Files: /artifacts/evil/x.html {ADMIN}/artifacts/evil/y.html /artifacts/evil/z.html"
    report = check_links(text, [page], admin_base=ADMIN)
    assert report.removed == ("/artifacts/evil/x.html", f"{ADMIN}/artifacts/evil/y.html", "/artifacts/evil/z.html")


@pytest.mark.parametrize("link", [
    "/artifacts/a1/%252e",  # "." once decoded
    f"{ADMIN}/artifacts/a1/x/%252e%252e",  # ".." once decoded
    f"{ADMIN}/artifacts/a1%5C.",  # an encoded backslash, then "."
    f"{ADMIN}/artifacts/a1/",
])
def test_a_link_ending_in_a_dot_segment_names_the_folder(link: str) -> None:
    """``/artifacts/a1/x/..`` is ``/artifacts/a1/``, with its trailing slash: the folder a tool returned."""
    folder = [ToolResult("c1", "artifact_save", "ok", output={"url": f"{ADMIN}/artifacts/a1/"})]
    report = check_links(f"Here: {link}", folder, admin_base=ADMIN, existing={"/artifacts/a1/"})
    assert report.removed == () and report.text == f"Here: {link}"


@pytest.mark.parametrize(("link", "verdict"), [
    ("http://192.168.1.10:8765/artifacts/fake/r.html", REMOVED),
    ("http://192.168.1.10:9000/artifacts/fake/r.html", REMOVED),  # the admin host on another port
    ("192.168.1.10:8765/artifacts/fake/r.html", REMOVED),
    ("http://192.168.1.11:8765/artifacts/fake/r.html", KEPT),
    ("http://example.org/artifacts/fake/r.html", KEPT),
])
def test_links_on_the_admin_host_are_ours(link: str, verdict: str) -> None:
    """The admin page on a LAN address: a link on that host is ours, the same path on any other host is not."""
    report = check_links(f"See {link}", [], admin_base="http://192.168.1.10:8765")
    assert report.removed == ((link,) if verdict == REMOVED else ())


@pytest.mark.parametrize("link", ["http://bruce.lan:8765/artifacts/fake/r.html",
                                  "http://BRUCE.LAN.:8765/artifacts/fake/r.html"])
def test_an_admin_host_name_matches_in_any_case_and_with_a_trailing_dot(link: str) -> None:
    report = check_links(f"See {link}", [], admin_base="http://Bruce.LAN:8765")
    assert report.removed == (link,)


def test_removed_links_are_logged() -> None:
    text = "See /artifacts/fake/r.html and http://localhost/artifacts/fake/y.html"
    with capture_logs() as logs:
        check_links(text, PRODUCED, admin_base=ADMIN)
    assert logs == [{"event": "grounding.link_removed", "log_level": "warning",
                     "urls": ["/artifacts/fake/r.html", "http://localhost/artifacts/fake/y.html"]}]


def test_nothing_is_logged_when_every_link_is_grounded() -> None:
    with capture_logs() as logs:
        check_links(f"See {ADMIN}/artifacts/a1/r.html", PRODUCED, admin_base=ADMIN)
    assert logs == []
