"""What is refused before any download, in the user's words."""

from __future__ import annotations

from bruce.channel import Attachment
from bruce.media.rules import MEDIA_OFF, MediaSettings, document_type, message_refusal, refusal
from bruce.values import AttachmentKind as K

S = MediaSettings(max_voice_s=300, max_file_mb=20)


def att(kind: K, **kw: object) -> Attachment:
    return Attachment(kind, "ref-1", **kw)  # type: ignore[arg-type]


def test_what_is_read_passes() -> None:
    for a in (att(K.VOICE, mime="audio/ogg", duration_s=4), att(K.IMAGE, mime="image/jpeg"),
              att(K.DOCUMENT, name="a.PDF"), att(K.DOCUMENT, name="notes.md"), att(K.DOCUMENT, mime="text/csv")):
        assert refusal(a, S, hears=True, sees=True) is None, a


def test_a_sticker_is_named_with_what_is_read() -> None:
    reason = message_refusal([att(K.OTHER, label="sticker")], S, hears=True, sees=True)
    assert reason is not None and "sticker" in reason
    assert "voice notes, photos and documents (PDF, .txt, .md, .csv)" in reason


def test_limits_are_named() -> None:
    big = refusal(att(K.IMAGE, size=25 * 1024 * 1024), S, hears=True, sees=True)
    assert big is not None and "20 MB" in big and "media.max_file_mb" in big
    long = refusal(att(K.VOICE, duration_s=301), S, hears=True, sees=True)
    assert long is not None and "300 s" in long and "media.max_voice_s" in long


def test_voice_without_a_transcription_model_names_the_setting_unless_the_platform_heard_it() -> None:
    reason = refusal(att(K.VOICE), S, hears=False, sees=True)
    assert reason is not None and "media.transcription_model" in reason
    assert refusal(att(K.VOICE, transcript="hello"), S, hears=False, sees=True) is None


def test_an_image_for_a_blind_model_names_both_settings() -> None:
    reason = refusal(att(K.IMAGE), S, hears=True, sees=False)
    assert reason is not None and "llm.model" in reason and "media.vision: true" in reason


def test_a_document_of_another_type_lists_the_types_read() -> None:
    reason = refusal(att(K.DOCUMENT, name="report.docx"), S, hears=True, sees=True)
    assert reason is not None and ".docx" in reason and "PDF, .txt, .md and .csv" in reason
    assert document_type(att(K.DOCUMENT, name="x.zip", mime="application/zip")) is None


def test_media_off_names_the_setting() -> None:
    reason = message_refusal([att(K.IMAGE)], MediaSettings(enabled=False), hears=True, sees=True)
    assert reason == MEDIA_OFF and "media.enabled" in reason


def test_one_refused_part_refuses_the_message_and_says_which() -> None:
    parts = [att(K.IMAGE, name="ok.jpg"), att(K.DOCUMENT, name="plan.docx")]
    reason = message_refusal(parts, S, hears=True, sees=True)
    assert reason is not None and "1 of its 2" in reason and "plan.docx" in reason and "ok.jpg" not in reason
    assert message_refusal(parts[:1], S, hears=True, sees=True) is None
