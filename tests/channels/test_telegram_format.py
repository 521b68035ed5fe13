"""channels.telegram_format: Markdown to Telegram HTML, splitting it, and the plain fallback.

Well-formedness is checked by a real parser (html.parser) against Telegram's rules: only the tags
Telegram allows (with only their allowed attributes), balanced and properly nested, no entity
nested where Telegram forbids it, and no raw ``<``, ``>`` or bare ``&`` in the text."""

from __future__ import annotations

import html
import random
import re
from html.parser import HTMLParser

import pytest

from channels.telegram_format import MIN_SPLIT_LIMIT, plain_text, split_html, to_telegram_html

_ALLOWED = {"b", "strong", "i", "em", "u", "ins", "s", "strike", "del", "span", "tg-spoiler", "a", "code", "pre",
            "blockquote"}
_TAG = re.compile(r"</?[A-Za-z][A-Za-z0-9-]*(?:\s[^<>]*)?>")
_ENTITY = re.compile(r"&(?:lt|gt|amp|quot|#[0-9]+|#x[0-9A-Fa-f]+);")


class _Checker(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in _ALLOWED:
            self.errors.append(f"tag <{tag}> not allowed")
        self._attributes(tag, dict(attrs))
        if self.stack and self.stack[-1] == "code" or self.stack and self.stack[-1] == "pre" and tag != "code":
            self.errors.append(f"<{tag}> inside <{self.stack[-1]}>")
        if tag in ("a", "blockquote") and tag in self.stack:
            self.errors.append(f"<{tag}> inside <{tag}>")
        if tag in ("code", "pre") and "a" in self.stack:
            self.errors.append(f"<{tag}> inside <a>")
        self.stack.append(tag)

    def _attributes(self, tag: str, attrs: dict[str, str | None]) -> None:
        allowed = {"a": {"href"}, "code": {"class"}, "span": {"class"}, "blockquote": {"expandable"}}.get(tag, set())
        if set(attrs) - allowed:
            self.errors.append(f"<{tag}> with attributes {sorted(attrs)}")
        if tag == "a" and not re.match(r"(https?://[^/\s]|tg:)", attrs.get("href") or "", re.IGNORECASE):
            self.errors.append(f"href {attrs.get('href')!r}")
        if tag == "code" and "class" in attrs and not re.fullmatch(r"language-[\w+#.-]+", attrs["class"] or ""):
            self.errors.append(f"code class {attrs['class']!r}")
        if tag == "span" and attrs.get("class") != "tg-spoiler":
            self.errors.append("span without tg-spoiler")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.errors.append(f"self-closing <{tag}/>")

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1:] or 'nothing'}")
        else:
            self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def problems(markup: str) -> list[str]:
    """What Telegram's HTML parser would object to in ``markup`` (nothing: it is well-formed)."""
    checker = _Checker()
    checker.feed(markup)
    checker.close()
    errors = list(checker.errors)
    if checker.stack:
        errors.append(f"left open: {checker.stack}")
    text = _TAG.sub("", markup)
    if "<" in text or ">" in text:
        errors.append("raw < or > in text")
    if "&" in _ENTITY.sub("", text):
        errors.append("bare & in text")
    return errors


def well_formed(markup: str) -> bool:
    return not problems(markup)


def visible(markup: str) -> str:
    checker = _Checker()
    checker.feed(markup)
    checker.close()
    return "".join(checker.text)


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


# ---- split_html -------------------------------------------------------------------------------

def _long_answer() -> str:
    rng = random.Random(7)
    words = ["assistant", "telegram", "message", "**bold**", "split", "piece", "paragraph", "text", "`code`", "&"]
    paragraphs: list[str] = []
    while sum(len(p) + 2 for p in paragraphs) < 9000:
        paragraphs.append(" ".join(rng.choice(words) for _ in range(rng.randint(20, 60))))
    return "\n\n".join(paragraphs)[:9000].rstrip()


def test_a_9000_character_answer_splits_into_three_well_formed_pieces() -> None:
    answer = _long_answer()
    assert len(answer) >= 8990
    out = to_telegram_html(answer)
    pieces = split_html(out)
    assert len(pieces) == 3
    for piece in pieces:
        assert len(piece) <= 4096
        assert well_formed(piece), problems(piece)
        assert piece == piece.strip()
    assert " ".join(plain_text(p) for p in pieces).split() == plain_text(out).split()


def test_pieces_are_cut_at_paragraphs_when_they_can_be() -> None:
    out = "\n\n".join(["word " * 50] * 10).replace(" \n", "\n").strip()
    pieces = split_html(out, 1000)
    assert all(p.endswith("word") and p.startswith("word") for p in pieces)
    assert all(len(p) <= 1000 for p in pieces)
    assert sum(p.count("\n\n") for p in pieces) + len(pieces) - 1 == 9


def test_a_long_code_block_is_pre_in_every_piece() -> None:
    lines = [f"    value_{n} = compute({n}) < limit & flag  # line {n}" for n in range(200)]
    out = to_telegram_html("Here:\n\n```python\n" + "\n".join(lines) + "\n```\n\nThat is all.")
    pieces = split_html(out, 3000)
    code_pieces = [p for p in pieces if "value_" in p]
    assert len(code_pieces) >= 3
    for piece in code_pieces:
        assert well_formed(piece), problems(piece)
        start = piece.index('<pre><code class="language-python">')
        assert piece.index("value_") > start
        assert piece.rindex("value_") < piece.index("</code></pre>", start)
    code = "\n".join(visible(p).removeprefix("Here:\n\n").removesuffix("\n\nThat is all.") for p in code_pieces)
    assert code == "\n".join(lines)  # every line whole, its indentation kept


def test_a_cut_never_lands_inside_an_entity_or_a_tag() -> None:
    markup = to_telegram_html("&&&&<<<>>> **&&&** [a&b](https://example.com/?x=1&y=2) `<&>`" * 20)
    for limit in range(MIN_SPLIT_LIMIT, 90):
        pieces = split_html(markup, limit)
        for piece in pieces:
            assert len(piece) <= limit
            assert well_formed(piece), (limit, piece, problems(piece))
        assert "".join(plain_text(p) for p in pieces).replace(" ", "") == plain_text(markup).replace(" ", "")


def test_a_tag_open_at_a_cut_is_closed_and_reopened() -> None:
    markup = '<b>bold <a href="https://example.com">' + "link " * 30 + "</a> tail</b>"
    pieces = split_html(markup, 80)
    assert len(pieces) > 2
    for piece in pieces:
        assert well_formed(piece), problems(piece)
        assert piece.startswith("<b>") and piece.endswith("</b>")
    assert all('<a href="https://example.com">' in p for p in pieces[1:-1])


def test_words_are_not_cut_when_a_space_fits() -> None:
    text = " ".join(f"word{n}" for n in range(400))
    pieces = split_html(text, 100)
    assert " ".join(pieces) == text
    assert all(re.fullmatch(r"word\d+( word\d+)*", p) for p in pieces)


def test_a_word_longer_than_a_piece_is_cut_hard() -> None:
    pieces = split_html("x" * 250, 100)
    assert pieces == ["x" * 100, "x" * 100, "x" * 50]


def test_astral_characters_count_as_two() -> None:
    pieces = split_html("😀" * 30, 20)
    assert all(len(p.encode("utf-16-le")) // 2 <= 20 for p in pieces)
    assert "".join(pieces) == "😀" * 30


def test_no_piece_is_empty_or_blank() -> None:
    markup = "a" + "\n" * 300 + "<b>" + " " * 300 + "</b>" + "\n\n" + "b"
    pieces = split_html(markup, 50)
    assert pieces == ["a", "b"]
    assert split_html("   \n\n  ") == []


def test_a_short_message_is_one_piece_unchanged() -> None:
    markup = to_telegram_html("**hi** there")
    assert split_html(markup) == [markup]


def test_a_tag_longer_than_any_piece_is_dropped_and_its_text_kept() -> None:
    markup = to_telegram_html(f"see [the page](https://example.com/{'a' * 200}) now")
    pieces = split_html(markup, 100)
    assert all(well_formed(p) and len(p) <= 100 for p in pieces)
    assert " ".join(pieces) == "see the page now"


def test_a_limit_too_small_is_refused() -> None:
    with pytest.raises(ValueError, match="at least"):
        split_html("text", MIN_SPLIT_LIMIT - 1)


def test_the_visible_text_survives_a_split() -> None:
    markdown = "# Title\n\n" + "\n\n".join(f"Para {n}: **bold {n}** & _it_ `c<{n}>`" for n in range(60))
    out = to_telegram_html(markdown)
    pieces = split_html(out, 300)
    assert all(well_formed(p) for p in pieces)
    assert html.unescape(" ".join(plain_text(p) for p in pieces)).split() == plain_text(out).split()


def test_the_one_piece_shortcut_gives_what_the_full_split_gives() -> None:
    """``split_html`` returns a text that is already one piece as it is; checked against the
    atom-by-atom split on short replies, edge cases and random markup."""
    from channels.telegram_format import _already_one_piece, _split

    fragments = ["word", " ", "\n", "\n\n", "<b>", "</b>", "<i>", "</i>", "&amp;", "&#32;", "&nbsp;", "&#10;", "<br/>",
                 '<a href="https://example.com">', "</a>", "<pre>", "</pre>", "<code>", "</code>", "x" * 30, "é🙂", "<",
                 "<b></b>", "   "]
    cases = ["hi", " hi", "hi ", "\nhi", "<b>hi</b>", "<b> hi</b>", "<b>hi </b>", "<b>hi", "hi</b>", "<b><i>x</b></i>",
             "<b></b>hi", "hi<b></b>", "&#32;hi", "hi&#10;", "&nbsp;", "<br/>", "a < b", "🙂" * 20, "x" * 17,
             to_telegram_html("Sure! Here is a **short** answer with a [link](https://example.org) and `code`.")]
    rng = random.Random(11)
    cases += ["".join(rng.choice(fragments) for _ in range(rng.randint(1, 12))) for _ in range(3000)]
    for text in cases:
        for limit in (MIN_SPLIT_LIMIT, 40, 4096):
            assert split_html(text, limit) == _split(text, limit), (text, limit)
    assert _already_one_piece(cases[19], 4096) and not _already_one_piece("<b> hi</b>", 4096)
