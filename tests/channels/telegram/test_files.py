"""channels.telegram.files: an attachment's bytes through ``getFile`` and the file download,
against the fake Bot API over real sockets; every failure a clear ``MediaFetchError``. Through
the channel (``TelegramChannel.fetch``) with real updates: ``test_media.py``."""

from __future__ import annotations

import pytest
from structlog.testing import capture_logs

from bruce.channel import Attachment
from bruce.errors import MediaFetchError
from bruce.values import AttachmentKind
from channels.telegram.api import BotAPI
from channels.telegram.files import fetch_file
from tests.fakes.media_files import pdf_with_text
from tests.fakes.telegram_api import FakeTelegramAPI

MB = 2**20


@pytest.fixture
async def api():
    async with FakeTelegramAPI() as fake:
        yield fake


@pytest.fixture
async def bot_api(api):
    client = BotAPI(api.token, api.base_url)
    yield client
    await client.close()


async def fetch(bot_api: BotAPI, file_id: str, *, max_bytes: int, timeout_s: float = 2.0) -> bytes:
    return await fetch_file(bot_api, Attachment(AttachmentKind.DOCUMENT, ref=file_id), max_bytes=max_bytes,
                            timeout_s=timeout_s)


async def test_the_exact_bytes_are_fetched_from_the_path_get_file_gives(bot_api, api):
    pdf = pdf_with_text()
    file_id = api.add_file(pdf, name="a.pdf")
    assert await fetch(bot_api, file_id, max_bytes=len(pdf)) == pdf
    assert api.calls_to("getFile") == [{"file_id": file_id}] and api.downloads == [api.files[file_id].path]


async def test_a_file_larger_than_the_limit_is_refused_without_a_download(bot_api, api):
    file_id = api.add_file(pdf_with_text(), size=5 * MB)
    with pytest.raises(MediaFetchError, match=r"5\.0 MB, more than the 1\.0 MB"):
        await fetch(bot_api, file_id, max_bytes=MB)
    assert api.calls_to("getFile") and api.downloads == []


async def test_a_file_over_telegrams_bot_limit_is_refused_clearly(bot_api, api):
    file_id = api.add_file(b"x", name="film.mkv", size=25 * MB)
    with pytest.raises(MediaFetchError, match="over 20 MB"):
        await fetch(bot_api, file_id, max_bytes=100 * MB)
    assert api.downloads == []


async def test_a_download_is_cut_at_the_limit_when_its_size_was_not_told(bot_api, api):
    file_id = api.add_file(bytes(300_000), size=100)  # getFile says 100 bytes; 300 kB come
    with pytest.raises(MediaFetchError, match="more than the"):
        await fetch(bot_api, file_id, max_bytes=200_000)


@pytest.mark.parametrize(("breakage", "reason"), [
    ({"status": 404}, "no longer has this file"),
    ({"status": 500}, r"could not send the file \(500\)"),
    ({"cut_at": 1000}, "connection broke"),
    ({"hang": True}, "took longer than 0.5 s"),
])
async def test_a_failing_download_is_a_clear_media_fetch_error_without_the_token(bot_api, api, breakage, reason):
    file_id = api.add_file(bytes(50_000))
    api.break_file(file_id, **breakage)
    with capture_logs() as logs, pytest.raises(MediaFetchError, match=reason) as raised:
        await fetch(bot_api, file_id, max_bytes=MB, timeout_s=0.5)
    assert api.token not in str(raised.value) and api.token not in repr(logs)
    assert raised.value.__cause__ is None and raised.value.__suppress_context__


async def test_an_unknown_file_id_and_a_failing_get_file_are_clear(bot_api, api):
    with pytest.raises(MediaFetchError, match="no longer has this file"):
        await fetch(bot_api, "gone-file-id", max_bytes=MB)
    file_id = api.add_file(b"data")
    api.fail_next("getFile", status=502, description="Bad Gateway")
    with pytest.raises(MediaFetchError, match=r"\(502\)"):
        await fetch(bot_api, file_id, max_bytes=MB)
    assert await fetch(bot_api, file_id, max_bytes=MB) == b"data"
