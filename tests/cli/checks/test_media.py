"""The ``media:`` block in ``bruce config check``: a transcription model without its provider and an
api_base that is no URL are refused like any start-up problem, naming the key; a ``max_file_mb``
over what a Telegram bot may download, and settings that cannot take effect, are warnings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from bruce.cli.check import check_config, config_warnings
from bruce.cli.main import main
from bruce.errors import ConfigError


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
