"""Ogg voice notes checked before they cost a call; the heard line."""

from __future__ import annotations

import pytest

from bruce.channel import Attachment
from bruce.errors import MediaError
from bruce.media.audio import check_audio, heard_line, ogg_duration
from bruce.values import AttachmentKind
from tests.fakes.media_files import jpeg, ogg_opus

VOICE = Attachment(AttachmentKind.VOICE, "v", mime="audio/ogg")


def test_the_length_comes_from_the_last_page() -> None:
    assert ogg_duration(ogg_opus(3.0)) == pytest.approx(3.0, abs=0.03)
    assert ogg_duration(ogg_opus(12.5)) == pytest.approx(12.5, abs=0.03)


@pytest.mark.parametrize("data", [ogg_opus(3.0)[:-10], ogg_opus(3.0)[:40], ogg_opus(3.0)[:200], jpeg(), b"OggS"])
def test_a_cut_or_foreign_file_is_damaged(data: bytes) -> None:
    with pytest.raises(MediaError, match="damaged or cut off"):
        check_audio(VOICE, data, what="the voice note", max_voice_s=300)


def test_a_file_cut_at_a_page_boundary_has_no_end_and_is_damaged() -> None:
    whole = ogg_opus(3.0)
    last = whole.rfind(b"OggS")
    with pytest.raises(MediaError, match="cut off"):
        ogg_duration(whole[:last])


def test_empty_is_refused() -> None:
    with pytest.raises(MediaError, match="empty"):
        check_audio(VOICE, b"", what="the voice note", max_voice_s=300)


def test_too_long_by_its_own_clock() -> None:
    with pytest.raises(MediaError, match="over the 5 s limit"):
        check_audio(VOICE, ogg_opus(8.0), what="the voice note", max_voice_s=5)
    check_audio(VOICE, ogg_opus(4.0), what="the voice note", max_voice_s=5)


def test_an_mp3_is_not_checked_as_ogg() -> None:
    check_audio(Attachment(AttachmentKind.AUDIO, "a", mime="audio/mpeg", name="a.mp3"), b"ID3...", what="a.mp3",
                max_voice_s=5)


def test_the_heard_line_is_short() -> None:
    assert heard_line(["remind me to call the plumber at five"]) == '🎤 "remind me to call the plumber at five"'
    long = heard_line(["word " * 100])
    assert len(long) < 130 and long.endswith('…"')
    assert heard_line([" "]) == ""
