"""The ``media:`` block in ``bruce config check``: a transcription model without its provider and an
api_base that is no URL are refused like any start-up problem, naming the key; a ``max_file_mb``
over what a Telegram bot may download, and settings that cannot take effect, are warnings. And
``bruce doctor``'s media line, against the fake provider's audio API over a real socket."""

from __future__ import annotations

import io
import wave
from pathlib import Path
from typing import Any

import pytest
import yaml

from bruce.cli.check import check_config, config_warnings
from bruce.cli.checks.media import check_media
from bruce.cli.doctor import diagnose
from bruce.cli.main import main
from bruce.errors import ConfigError
from tests.fakes.llm_server import Step, closed_base_url


def write(tmp_path: Path, data: dict[str, Any]) -> Path:
    path = tmp_path / "config.yml"
    path.write_text(yaml.safe_dump({"storage": {"path": "data/bruce.db"}, **data}))
    return path


@pytest.mark.parametrize("model", ["whisper-1", "/whisper-1", "openai/"])
def test_a_transcription_model_without_its_provider_is_refused_naming_the_key(tmp_path, capsys, model):
    path = write(tmp_path, {"media": {"transcription_model": model}})
    assert main(["--config", str(path), "config", "check"]) == 2
    err = capsys.readouterr().err
    assert f"media.transcription_model: {model!r} names no provider; write provider/model, e.g. openai/whisper-1 " \
           "or groq/whisper-large-v3" in err
    assert str(path) in err


@pytest.mark.parametrize("model", ["openai/whisper-1", "groq/whisper-large-v3"])
def test_a_transcription_model_with_its_provider_passes(make_config, model):
    config = make_config(media={"transcription_model": model})
    check_config(config)
    assert config_warnings(config) == []


@pytest.mark.parametrize(("api_base", "problem"), [("ftp://whisper.local/v1", "is not an http(s) URL"),
                                                   ("http://user:pw@whisper.local/v1", "user:password")])
def test_an_api_base_that_is_no_usable_url_is_refused(make_config, api_base, problem):
    config = make_config(media={"transcription_model": "openai/whisper-1", "api_base": api_base})
    with pytest.raises(ConfigError) as raised:
        check_config(config, source="config.yml")
    (found,) = [p for p in raised.value.problems if p.startswith("media.api_base ")]
    assert problem in found and "pw" not in found


def test_max_file_mb_over_what_telegram_bots_download_is_a_warning_not_an_error(tmp_path, capsys):
    path = write(tmp_path, {"media": {"max_file_mb": 50},
                            "channels": {"telegram": {"enabled": True, "token": "1:abc", "allowed_users": [1]}}})
    assert main(["--config", str(path), "config", "check"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [f"config ok: {path}",
                   "warning: media.max_file_mb: 50 MB is more than the 20 MB a Telegram bot may download; a larger "
                   "file sent on Telegram is refused all the same (set it to 20 or less)"]


def test_max_file_mb_over_20_is_fine_without_telegram(make_config):
    assert config_warnings(make_config(media={"max_file_mb": 50})) == []
    on_telegram = make_config(media={"max_file_mb": 20},
                              channels={"telegram": {"enabled": True, "token": "1:abc", "allowed_users": ["1"]}})
    assert config_warnings(on_telegram) == []


def test_settings_that_cannot_take_effect_are_warnings(make_config):
    off = make_config(media={"enabled": False, "transcription_model": "openai/whisper-1"})
    assert config_warnings(off) == ["media.transcription_model is set but media.enabled is false: no voice note is "
                                    "heard (set media.enabled: true)"]
    no_model = make_config(media={"api_base": "http://127.0.0.1:9000/v1"})
    assert config_warnings(no_model) == ["media.api_base or media.api_key is set but media.transcription_model is "
                                         "not: no voice note is heard (set media.transcription_model, e.g. "
                                         "openai/whisper-1)"]


def test_a_plain_config_checks_with_no_warning(tmp_path, capsys):
    path = write(tmp_path, {})
    assert main(["--config", str(path), "config", "check"]) == 0
    assert capsys.readouterr().out.splitlines() == [f"config ok: {path}"]


# bruce doctor's media line, against the fake provider's audio API -------------------------------


async def test_doctor_sends_half_a_second_of_silence_and_reports_the_models_latency(make_config, fake_llm):
    fake_llm.add_transcript("")  # silence: the model hears no words, and that is an answer
    config = make_config(media={"transcription_model": "groq/whisper-large-v3", "api_base": fake_llm.base_url,
                                "api_key": "gsk-media-key-0123456789"})
    (finding,) = await check_media(config, {}, {}, 5)
    assert finding.mark == "✓" and finding.text.startswith("voice groq/whisper-large-v3: transcribed a test sound in ")
    (sent,) = fake_llm.transcriptions
    assert sent.model == "whisper-large-v3" and sent.file_name == "doctor-silence.wav"
    with wave.open(io.BytesIO(sent.data)) as wav:  # a real WAV: 0.5 s of 16 kHz mono silence
        assert (wav.getnchannels(), wav.getframerate(), wav.getnframes()) == (1, 16000, 8000)
        assert set(wav.readframes(8000)) == {0}
    assert fake_llm.requests == []  # no chat call


async def test_doctor_falls_back_to_the_llm_endpoint_and_key(make_config, fake_llm):
    config = make_config(media={"transcription_model": "openai/whisper-1"})  # llm.api_base: the fake
    (finding,) = await check_media(config, {}, {}, 5)
    assert finding.mark == "✓" and [t.model for t in fake_llm.transcriptions] == ["whisper-1"]


async def test_doctor_says_media_off_and_voice_not_set_up_without_calling(make_config, fake_llm):
    (off,) = await check_media(make_config(media={"enabled": False}), {}, {}, 5)
    assert off.line() == "– media: off (media.enabled: false); voice notes, photos and documents get a reply saying so"
    (unset,) = await check_media(make_config(), {}, {}, 5)
    assert unset.line() == ("– voice: not set up (media.transcription_model); voice notes get a reply saying so — "
                            "fix: to hear them, set media.transcription_model, e.g. openai/whisper-1")
    (skipped,) = await check_media(make_config(media={"transcription_model": "openai/whisper-1"}), {}, {}, 5,
                                   call=False)
    assert skipped.line() == "– voice openai/whisper-1: not called (--no-llm)"
    assert fake_llm.transcriptions == []


async def test_a_transcription_model_that_does_not_answer_is_a_cross_with_its_fix(make_config, fake_llm):
    closed = closed_base_url()
    config = make_config(media={"transcription_model": "openai/whisper-1", "api_base": closed})
    (refused,) = await check_media(config, {}, {}, 5)
    assert refused.line() == (f"✗ voice openai/whisper-1: did not answer (connection refused) — fix: check "
                              f"media.api_base ({closed}) and that the server there is running")
    fake_llm.add_transcript(Step.error(401, "bad key"))
    keyed = make_config(media={"transcription_model": "openai/whisper-1", "api_key": "sk-wrong-key-0123456789"})
    (rejected,) = await check_media(keyed, {"media": {"api_key": "${WHISPER_KEY}"}}, {}, 5)
    assert rejected.mark == "✗" and rejected.fix == "put a valid key in $WHISPER_KEY"
    assert "sk-wrong-key" not in rejected.line()


async def test_no_key_anywhere_fails_without_a_call(make_config, fake_llm):
    config = make_config(llm={"api_base": None, "api_key": None}, media={"transcription_model": "groq/whisper-1"})
    (finding,) = await check_media(config, {}, {}, 5)
    assert finding.line().startswith("✗ voice groq/whisper-1: no API key or endpoint configured — fix: ")
    assert "GROQ_API_KEY" in finding.line() and fake_llm.transcriptions == []


async def test_doctor_prints_the_media_line_and_the_config_warnings(tmp_path, fake_llm):
    path = write(tmp_path, {
        "llm": {"model": "openai/primary", "api_base": fake_llm.base_url, "api_key": "sk-doctor-0123456789"},
        "media": {"transcription_model": "openai/whisper-1", "max_file_mb": 50},
        "channels": {"telegram": {"enabled": True, "token": "1:abc", "allowed_users": [1]}},
        "admin": {"enabled": False},
    })
    lines: list[str] = []
    await diagnose(path, environ={}, timeout_s=5, unit=tmp_path / "none.service", out=lines.append)
    assert any(line.startswith("! media.max_file_mb: 50 MB is more than the 20 MB a Telegram bot may download")
               for line in lines)
    (voice,) = [line for line in lines if line.startswith(("✓ voice", "✗ voice"))]
    assert voice.startswith("✓ voice openai/whisper-1: transcribed a test sound in ")
    assert lines.index(voice) == 1 + max(i for i, line in enumerate(lines) if line.startswith("✓ llm "))
