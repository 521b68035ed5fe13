"""channels.telegram.format: Markdown to Telegram HTML, and the plain fallback.

Well-formedness is checked against Telegram's rules by ``tests/channels/telegram/html_rules.py``."""

from __future__ import annotations

import random

import pytest

from channels.telegram.format import plain_text, to_telegram_html
from channels.telegram.split import MIN_SPLIT_LIMIT, split_html
from tests.channels.telegram.html_rules import problems, visible, well_formed

# ---- each construct -------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("markdown", "expected"),
    [
        ("**bold**", "<b>bold</b>"),
        ("__bold__", "<b>bold</b>"),
        ("*italic* and _italic_", "<i>italic</i> and <i>italic</i>"),
        ("`x < y`", "<code>x &lt; y</code>"),
        ("~~gone~~", "<s>gone</s>"),
        ("[Bruce](https://example.com/a?b=1&c=2)", '<a href="https://example.com/a?b=1&amp;c=2">Bruce</a>'),
        ("[me](tg://user?id=42)", '<a href="tg://user?id=42">me</a>'),
        ("<https://example.com>", '<a href="https://example.com">https://example.com</a>'),
        ("> quoted\n> still", "<blockquote>quoted\nstill</blockquote>"),
        ("# Title", "<b>Title</b>"),
        ("## Title with **bold**", "<b>Title with bold</b>"),
        ("- one\n- two", "• one\n• two"),
        ("* one\n* two", "• one\n• two"),
        ("1. one\n2. two", "1. one\n2. two"),
        ("3) three\n4) four", "3) three\n4) four"),
        ("- one\n  - inner\n- two", "• one\n   • inner\n• two"),
        ("***both***", "<i><b>both</b></i>"),
        ("**bold *and italic***", "<b>bold <i>and italic</i></b>"),
        ("line one\nline two", "line one\nline two"),
        ("para one\n\npara two", "para one\n\npara two"),
        ("a\n\n---\n\nb", "a\n\n———\n\nb"),
        ("| a | b |\n|---|---|\n| 1 | 2 |", "<b>a</b> | <b>b</b>\n1 | 2"),
        ("![a cat](https://example.com/cat.png)", '<a href="https://example.com/cat.png">a cat</a>'),
        ("[](https://example.com)", '<a href="https://example.com">https://example.com</a>'),
    ],
)
def test_constructs(markdown: str, expected: str) -> None:
    assert to_telegram_html(markdown) == expected


def test_fenced_code_with_a_language() -> None:
    out = to_telegram_html("Look:\n\n```python\nif a < b and c > d:\n    print('&')\n```\n\nDone.")
    assert out == (
        'Look:\n\n<pre><code class="language-python">if a &lt; b and c &gt; d:\n'
        "    print('&amp;')</code></pre>\n\nDone."
    )


def test_fenced_code_without_a_language_and_indented_code() -> None:
    assert to_telegram_html("```\n**not bold**\n```") == "<pre><code>**not bold**</code></pre>"
    assert to_telegram_html("text\n\n    indented <code>\n") == "text\n\n<pre><code>indented &lt;code&gt;</code></pre>"


@pytest.mark.parametrize("info", ['py" onclick="x', "py><script>", "a b", "c++", "&amp;"])
def test_a_fence_language_cannot_inject(info: str) -> None:
    out = to_telegram_html(f"```{info}\ncode\n```")
    assert well_formed(out), problems(out)
    assert visible(out) == "code"


def test_a_list_and_paragraphs_together() -> None:
    out = to_telegram_html("Intro:\n\n- **a**: one\n- `b`: two\n\n1. first\n2. second\n\nEnd.")
    assert out == "Intro:\n\n• <b>a</b>: one\n• <code>b</code>: two\n\n1. first\n2. second\n\nEnd."


def test_inline_markup_in_a_quote() -> None:
    out = to_telegram_html("> **Note:** see [docs](https://example.com)\n\nafter")
    assert out == '<blockquote><b>Note:</b> see <a href="https://example.com">docs</a></blockquote>\n\nafter'


def test_a_quote_inside_a_quote_is_flattened() -> None:
    out = to_telegram_html("> a\n>> b\n>>> c")
    assert out.count("<blockquote>") == 1
    assert well_formed(out)
    assert visible(out).split() == ["a", "b", "c"]


def test_code_in_a_link_is_text() -> None:
    assert to_telegram_html("[`run()` docs](https://example.com)") == '<a href="https://example.com">run() docs</a>'


# ---- raw HTML and entities typed by the model ----------------------------------------------

@pytest.mark.parametrize(
    ("markdown", "expected"),
    [
        ("<script>alert(1)</script>", "&lt;script&gt;alert(1)&lt;/script&gt;"),
        ("a <b>b</b> c", "a &lt;b&gt;b&lt;/b&gt; c"),
        ('<a href="https://evil.example">x</a>', '&lt;a href="https://evil.example"&gt;x&lt;/a&gt;'),
        ("<div>\nblock\n</div>", "&lt;div&gt;\nblock\n&lt;/div&gt;"),
        ("<!-- comment -->", "&lt;!-- comment --&gt;"),
        ("Tom & Jerry", "Tom &amp; Jerry"),
        ("1 < 2 > 0", "1 &lt; 2 &gt; 0"),
        ("&lt;b&gt; is how you write <b>", "&lt;b&gt; is how you write &lt;b&gt;"),
        ("&amp; &copy; &#60;", "&amp; © &lt;"),
        ('say "hi"', 'say "hi"'),
    ],
)
def test_raw_html_is_escaped(markdown: str, expected: str) -> None:
    out = to_telegram_html(markdown)
    assert out == expected
    assert well_formed(out)


# ---- links ------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "markdown",
    [
        "[click](javascript:alert(1))",
        "[click](JaVaScRiPt:alert(1))",
        "[click](  javascript:alert(1) )",
        "[click](vbscript:msgbox(1))",
        "[click](data:text/html;base64,PHNjcmlwdD4=)",
        "[click](file:///etc/passwd)",
        "[click](ftp://example.com/x)",
        "[click](mailto:a@example.com)",
        "[click](/relative/path)",
        "[click](//example.com/no-scheme)",
        "[click](http:no-host)",
        "[click](tg:)",
        "<javascript:alert(1)>",
        "![img](javascript:alert(1))",
        "[click][ref]\n\n[ref]: javascript:alert(1)",
    ],
)
def test_only_http_https_and_tg_urls_become_links(markdown: str) -> None:
    out = to_telegram_html(markdown)
    assert "<a" not in out
    assert well_formed(out), problems(out)
    assert "click" in out or "img" in out or "javascript" in out


def test_a_link_that_is_not_a_link_keeps_its_url_as_text() -> None:
    assert to_telegram_html("[write](mailto:a@example.com)") == "write (mailto:a@example.com)"


@pytest.mark.parametrize(
    "markdown",
    [
        '[x](https://example.com/"onmouseover="alert(1))',
        "[x](<https://example.com/a\"b'c>)",
        '[x](https://example.com "a \\"title\\"")',
        "[x](https://example.com/<script>)",
    ],
)
def test_quotes_in_an_href_cannot_break_out(markdown: str) -> None:
    out = to_telegram_html(markdown)
    assert well_formed(out), problems(out)
    assert out.count('"') == 2  # only the href's own quotes
    assert visible(out) == "x"


# ---- malformed Markdown is still well-formed HTML ---------------------------------------------

NASTY = [
    "**unclosed bold",
    "*unclosed italic",
    "_unclosed",
    "~~unclosed strike",
    "`unbalanced backtick",
    "``double `single",
    "```\nunclosed fence <b>",
    "**a *b** c*",
    "*a **b* c**",
    "_a *b_ c*",
    "**a `b** c`",
    "[link **bold](https://example.com) text**",
    "[unclosed](https://example.com",
    "[a [b](https://x.example) c](https://y.example)",
    "***___~~`x`~~___***",
    "> **quote\nno longer quote**",
    "- **item\n- other**",
    "# **heading\ntext**",
    "<b>**mixed</b>**",
    "</b></i></code></pre></blockquote>",
    "<pre><code>```x\n</code></pre>```",
    "&#0; &#x110000; &bogus; &amp",
    "\x00\x01\x1b[31mred\u202e",
    "> " * 60 + "deep",
    "- " * 40 + "deep list",
    "*" * 101,
    "[" * 50 + "x" + "](https://a.example)" * 50,
    "|a|\n|-|\n|<b>**x|",
]


@pytest.mark.parametrize("markdown", NASTY)
def test_malformed_markdown_gives_well_formed_html(markdown: str) -> None:
    out = to_telegram_html(markdown)
    assert well_formed(out), (out, problems(out))
    for piece in split_html(out, 64):
        assert well_formed(piece), (piece, problems(piece))


def test_a_fuzz_of_markdown_ish_text_is_always_well_formed() -> None:
    rng = random.Random(20240609)
    alphabet = list("*_~`[]()<>!#>-|&;\\\"' \n") + ["**", "```", "~~", "](https://a.example/?q=1&r=2)", "](javascript:x)",
                                                   "<b>", "</b>", "&amp;", "\n\n", "    ", "1. ", "- ", "> ", "ab", "é",
                                                   "😀"]
    for case in range(400):
        markdown = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 60)))
        out = to_telegram_html(markdown)
        assert well_formed(out), (case, markdown, out, problems(out))
        limit = rng.choice([MIN_SPLIT_LIMIT, 20, 33, 50])
        for piece in split_html(out, limit):
            assert well_formed(piece), (case, markdown, out, piece, problems(piece))
            assert len(piece.encode("utf-16-le")) // 2 <= limit
            assert piece.strip()


# ---- plain_text -------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "markdown",
    [
        "**a** & <b> `x<y` [link](https://example.com/?a=1&b=2)",
        "```py\nif a < b:\n    pass\n```",
        "> quote & *more*",
        '"quotes" and \'apostrophes\' & &amp;',
    ],
)
def test_plain_text_is_the_visible_text(markdown: str) -> None:
    out = to_telegram_html(markdown)
    assert plain_text(out) == visible(out)


def test_plain_text_unescapes_and_strips_tags() -> None:
    markup = '<b>1 &lt; 2</b> &amp; <a href="https://x.example/?a=1&amp;b=2">go</a> <pre><code class="language-py">x</code></pre>'
    assert plain_text(markup) == "1 < 2 & go x"
    assert plain_text("a < b and c > d") == "a < b and c > d"
