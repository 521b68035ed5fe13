"""Documents' text, through the real pypdf."""

from __future__ import annotations

import pytest

from bruce.errors import MediaError
from bruce.media.documents import decode_text, own_words, read_document
from tests.fakes.media_files import jpeg, pdf_scanned, pdf_with_text


async def test_a_pdf_text_layer_is_read() -> None:
    read = await read_document(pdf_with_text("Invoice 42\nTotal 17.50 EUR"), kind=".pdf", what="bill.pdf",
                               max_chars=1000)
    assert "Invoice 42" in read.text and "Total 17.50 EUR" in read.text and not read.cut


@pytest.mark.parametrize("data, words", [
    (pdf_scanned(), "no text layer"), (jpeg(), "not a PDF"), (pdf_with_text()[:60], "not a PDF"), (b"", "empty")])
async def test_unreadable_pdfs_get_a_clear_reason(data: bytes, words: str) -> None:
    with pytest.raises(MediaError, match=words):
        await read_document(data, kind=".pdf", what="bill.pdf", max_chars=1000)


async def test_long_text_is_cut_with_a_note() -> None:
    read = await read_document(("a" * 900).encode(), kind=".txt", what="a.txt", max_chars=500)
    assert read.cut and read.chars == 900
    assert read.text.endswith("[… cut: the document has 900 characters, the first 500 are shown]")


def test_decoding_never_fails() -> None:
    assert decode_text("café".encode()) == "café"
    assert decode_text("\ufeffhello".encode()) == "hello"
    assert decode_text(b"caf\xe9 \x81") == "café \ufffd"


async def test_binary_declared_as_text_is_refused() -> None:
    with pytest.raises(MediaError, match="not a text file"):
        await read_document(b"PK\x03\x04\x00\x00", kind=".txt", what="a.txt", max_chars=500)


def test_own_words_leave_a_read_document_out() -> None:
    read = '[{"kind": "document", "ref": "d", "chars": 12, "cut": false, "used": true}]'
    assert own_words("what do I owe?\n\n[document: a.pdf]\nPay 12 EUR", read) == "what do I owe?"
    assert own_words("[document: a.pdf]\nPay 12 EUR", read) == ""
    assert own_words("call mum [document: x]", None) == "call mum [document: x]"  # nothing was read: as typed


async def test_a_pdf_locked_with_a_password_is_refused() -> None:
    import io

    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter()
    writer.append(PdfReader(io.BytesIO(pdf_with_text("secret plans"))))
    writer.encrypt("a password", algorithm="RC4-128")
    out = io.BytesIO()
    writer.write(out)
    with pytest.raises(MediaError, match="locked with a password"):
        await read_document(out.getvalue(), kind=".pdf", what="plans.pdf", max_chars=1000)


async def test_a_long_pdf_is_read_only_as_far_as_it_is_shown() -> None:
    from tests.fakes.media_files import pdf_pages

    pages = [f"page {n} " + "x" * 300 for n in range(200)]
    read = await read_document(pdf_pages(pages), kind=".pdf", what="book.pdf", max_chars=1000)
    assert read.cut and "page 0 " in read.text and "page 3 " in read.text and "page 5 " not in read.text
    assert read.text.endswith("[… cut: the document has 200 pages, the first 1000 characters are shown]")
    whole = await read_document(pdf_pages(["one", "two"]), kind=".pdf", what="short.pdf", max_chars=1000)
    assert (whole.text, whole.cut) == ("one\n\ntwo", False)


async def test_a_pdf_that_takes_too_long_to_read_is_given_up_with_a_reply() -> None:
    from tests.fakes.media_files import pdf_pages

    big = pdf_pages([f"page {n} " + "y" * 2000 for n in range(400)])
    with pytest.raises(MediaError, match="took longer than 0.001 s"):
        await read_document(big, kind=".pdf", what="huge.pdf", max_chars=1_000_000, max_read_s=0.001)
