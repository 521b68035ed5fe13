"""tools.web.client: a body read within its size limit, compressed or not, and URLs shown safely."""

from __future__ import annotations

import zlib

import httpx
import pytest

from bruce.errors import ToolFailed
from tools.web.client import host_of, read_capped, safe_url


def packed(data: bytes, wbits: int) -> bytes:
    squeeze = zlib.compressobj(wbits=wbits)
    return squeeze.compress(data) + squeeze.flush()


def response(body: bytes, encoding: str | None = None) -> httpx.Response:
    headers = {"Content-Encoding": encoding} if encoding else {}
    return httpx.Response(200, headers=headers, stream=httpx.ByteStream(body), request=httpx.Request("GET", "http://site.test/p"))


async def test_a_plain_body_is_read_whole_or_cut_at_the_limit():
    assert await read_capped(response(b"abcdef"), 10) == (b"abcdef", False)
    assert await read_capped(response(b"abcdef"), 4) == (b"abcd", True)
    assert await read_capped(response(b"abcd"), 4) == (b"abcd", False)


@pytest.mark.parametrize(("encoding", "wbits"), [("gzip", 31), ("x-gzip", 31), ("deflate", 15), ("deflate", -15)])
async def test_gzip_and_deflate_are_inflated(encoding, wbits):
    assert await read_capped(response(packed(b"hello " * 100, wbits), encoding), 10_000) == (b"hello " * 100, False)


async def test_a_compression_bomb_is_inflated_only_up_to_the_limit():
    bomb = packed(b"\0" * 50_000_000, 31)
    body, truncated = await read_capped(response(bomb, "gzip"), 1000)
    assert (len(body), truncated) == (1000, True)


async def test_an_encoding_not_asked_for_is_refused():
    with pytest.raises(ToolFailed) as err:
        await read_capped(response(b"x", "br"), 100)
    assert err.value.code == "unsupported_content" and "'br'" in str(err.value)


async def test_a_broken_compressed_body_is_a_decoding_error():
    with pytest.raises(httpx.DecodingError):
        await read_capped(response(b"not gzip at all", "gzip"), 100)


def test_urls_are_shown_without_credentials():
    assert safe_url("http://bob:hunter2@site.test/p") == "http://site.test/p"
    assert safe_url("http://site.test/p") == "http://site.test/p"
    assert safe_url("http://[::1") == "(invalid URL)"
    assert host_of("https://site.test:8443/x") == "site.test" and host_of("http://[::1") == "?"
