"""tools.web.extract in this process (in the reader process: tests/tools/test_web_tools.py)."""

from __future__ import annotations

from tools.web.extract import readable, readable_in_worker

PAGE = ("<html><head><title>  Tide\n tables </title></head><body><nav>Home</nav><article><h1>Tides</h1>"
        + "<p>High tide in Recife is at 10:42 today, and the next low tide follows six hours later.</p>" * 3
        + "</article></body></html>")


def test_html_gives_its_title_and_the_article_text():
    title, text = readable(PAGE.encode(), url="http://site.test/", media_type="text/html", charset="utf-8",
                           truncated=False)
    assert title == "Tide tables"
    assert "High tide in Recife" in text and "Home" not in text


def test_plain_text_has_no_title_and_honours_its_charset():
    body = "  café au lait \n".encode("latin-1")
    assert readable(body, url="u", media_type="text/plain", charset="iso-8859-1", truncated=False) == (
        None, "café au lait")


def test_a_character_cut_in_half_by_the_size_limit_is_dropped():
    body = "thé".encode()[:-1]
    assert readable(body, url="u", media_type="text/plain", charset=None, truncated=True) == (None, "th")


def test_the_worker_side_cuts_the_text_one_character_past_the_limit():
    request = {"url": "u", "media_type": "text/plain", "charset": "utf-8", "truncated": False, "max_chars": 3}
    assert readable_in_worker(request, b"abcdefgh") == [None, "abcd"]
