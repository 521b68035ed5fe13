"""`bruce init`: a first config that `bruce run` accepts, a .env (0600) for the secrets, and no
secret, overwrite or half-written file along the way."""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import yaml
from aiohttp import web

from bruce.cli.check import check_config
from bruce.cli.init import detect_ollama
from bruce.cli.main import main
from bruce.config.loader import load_config
from tests.fakes.llm_server import closed_base_url

LLM_KEY = "sk-proj-Zq8live0KEY0value0never0written"
BOT_TOKEN = "123456789:AAHfakeTelegramTokenValue0123456789"
ENV = {"OPENAI_API_KEY": LLM_KEY, "ANTHROPIC_API_KEY": LLM_KEY, "TELEGRAM_BOT_TOKEN": BOT_TOKEN,
       "DISCORD_BOT_TOKEN": "discord-token-value-1234", "BRUCE_ADMIN_TOKEN": "admin-token-value-0123456789abcdef"}


@pytest.fixture
def umask_zero() -> Iterator[None]:
    """Nothing masks the modes files are created with: 0600 must come from the creation itself."""
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


@pytest.fixture
def no_chmod(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: object, **__: object) -> None:
        raise AssertionError("bruce init must create .env with its mode, never chmod it afterwards")

    monkeypatch.setattr(os, "chmod", refuse)
    monkeypatch.setattr(os, "fchmod", refuse)


def all_written(root: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}


def no_ollama() -> str:
    return closed_base_url().removesuffix("/v1") + "/api/tags"


def answers(monkeypatch: pytest.MonkeyPatch, replies: list[str]) -> list[str]:
    """Feed ``replies`` to input() in order; return the prompts it was called with."""
    prompts: list[str] = []
    queue = list(replies)

    def fake_input(prompt: str = "") -> str:
        prompts.append(prompt)
        if not queue:
            raise EOFError  # a question the test did not expect
        return queue.pop(0)

    monkeypatch.setattr("builtins.input", fake_input)
    return prompts


def test_non_interactive_writes_a_config_run_accepts_with_no_secret_in_it(tmp_path, monkeypatch, capsys,
                                                                           umask_zero, no_chmod):
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    path = tmp_path / "etc" / "config.yml"
    code = main(["--config", str(path), "init", "--non-interactive", "--telegram-user", "111",
                 "--telegram-user", "222", "--discord-token-env", "MY_DISCORD_TOKEN", "--discord-user", "333",
                 "--timezone", "Europe/Berlin"])
    assert code == 0, capsys.readouterr().err

    config = load_config(path, {**ENV, "MY_DISCORD_TOKEN": "d-token"})
    check_config(config, source=str(path))  # what `bruce run` checks before it starts
    assert config.llm.model == "openai/gpt-4o-mini"
    assert config.llm.api_key is not None and config.llm.api_key.get_secret_value() == LLM_KEY
    assert config.channels.telegram.enabled and config.channels.telegram.allowed_users == ["111", "222"]
    assert config.channels.discord.enabled and config.channels.discord.allowed_users == ["333"]
    assert config.assistant.timezone == "Europe/Berlin"
    assert config.storage.path == tmp_path / "etc" / "data" / "bruce.db"

    raw = yaml.safe_load(path.read_text())
    assert raw["llm"]["api_key"] == "${OPENAI_API_KEY}"
    assert raw["channels"]["telegram"]["token"] == "${TELEGRAM_BOT_TOKEN}"
    assert raw["channels"]["discord"]["token"] == "${MY_DISCORD_TOKEN}"
    assert raw["admin"]["token"] == "${BRUCE_ADMIN_TOKEN}"

    env_file = tmp_path / "etc" / ".env"
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600
    lines = env_file.read_text().splitlines()
    assert {"OPENAI_API_KEY=", "TELEGRAM_BOT_TOKEN=", "MY_DISCORD_TOKEN="} <= set(lines)
    admin = [line for line in lines if line.startswith("BRUCE_ADMIN_TOKEN=")]
    assert len(admin) == 1 and len(admin[0]) > len("BRUCE_ADMIN_TOKEN=") + 30  # generated, long

    written = all_written(tmp_path)
    assert set(written) == {path, env_file}  # no temporary file left behind
    for secret in ENV.values():
        assert all(secret.encode() not in content for content in written.values())
    out = capsys.readouterr().out
    assert f"set -a; . {env_file}; set +a" in out
    assert f"--config {path} run" in out and f"--config {path} chat" in out and f"--config {path} doctor" in out


@pytest.mark.parametrize("flags", [
    ["--key-env", LLM_KEY],
    ["--telegram-token-env", BOT_TOKEN, "--telegram-user", "1"],
    ["--discord-token-env", "MTA5.GhYx1b.kLm0pQrStUvWxYz0123456789", "--discord-user", "1"],
])
def test_a_pasted_secret_where_a_variable_name_belongs_is_refused(tmp_path, capsys, flags):
    path = tmp_path / "config.yml"
    assert main(["--config", str(path), "init", "--non-interactive", *flags]) == 2
    err = capsys.readouterr().err
    assert "looks like a key or token" in err and flags[1] not in err  # refused, and not echoed either
    assert all_written(tmp_path) == {}


def test_an_enabled_channel_without_an_owner_is_refused(tmp_path, capsys):
    assert main(["--config", str(tmp_path / "config.yml"), "init", "--non-interactive",
                 "--telegram-token-env", "TELEGRAM_BOT_TOKEN"]) == 2
    assert "--telegram-user" in capsys.readouterr().err
    assert all_written(tmp_path) == {}


@pytest.mark.parametrize("existing", ["config.yml", ".env"])
def test_an_existing_file_is_kept_byte_identical_without_force(tmp_path, capsys, existing):
    original = b"# mine\nllm: {model: openai/mine}\n\xe2\x9c\x93 keep\n"
    (tmp_path / existing).write_bytes(original)
    path = tmp_path / "config.yml"
    assert main(["--config", str(path), "init", "--non-interactive"]) == 2
    err = capsys.readouterr().err
    assert str(tmp_path / existing) in err and "--force" in err
    assert all_written(tmp_path) == {tmp_path / existing: original}

    assert main(["--config", str(path), "init", "--non-interactive", "--force"]) == 0
    assert (tmp_path / existing).read_bytes() != original
    check_config(load_config(path, {}))


def test_an_interruption_while_writing_leaves_the_old_files_and_no_temporary_one(tmp_path, monkeypatch):
    path = tmp_path / "config.yml"
    path.write_text("# the old config\n")
    (tmp_path / ".env").write_text("OLD=1\n")
    before = all_written(tmp_path)
    real_fsync, calls = os.fsync, []

    def interrupted(fd: int) -> None:
        calls.append(fd)
        if len(calls) == 2:  # the first file is on disk (as a temporary file), the second is not
            raise KeyboardInterrupt
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", interrupted)
    assert main(["--config", str(path), "init", "--non-interactive", "--force"]) == 130
    assert all_written(tmp_path) == before


def test_interactive_asks_again_until_each_answer_is_usable(tmp_path, monkeypatch, capsys):
    prompts = answers(monkeypatch, [
        "2",                                      # anthropic, from the list
        "",                                       # the key's variable: the provider's default
        "discord",
        "MTA5.GhYx1b.kLm0pQrStUvWxYz0123456789",  # a pasted token where its variable's name belongs
        "",                                       # ...so asked again: the default name
        "",                                       # no user id: asked again
        "444, 555",
        "Mars/Olympus_Mons",                      # not a zone
        "Asia/Tokyo",
    ])
    path = tmp_path / "config.yml"
    assert main(["--config", str(path), "init", "--ollama-url", no_ollama()]) == 0
    out = capsys.readouterr().out

    assert any("[ANTHROPIC_API_KEY]" in p for p in prompts)
    assert any("[DISCORD_BOT_TOKEN]" in p for p in prompts)
    assert "looks like a key or token itself" in out and "at least one user id" in out
    assert "not an IANA timezone" in out and "ollama_chat/" not in out  # nothing answers at the Ollama URL
    config = load_config(path, ENV)
    check_config(config)
    assert config.llm.model.startswith("anthropic/") and config.llm.api_base is None
    assert yaml.safe_load(path.read_text())["llm"]["api_key"] == "${ANTHROPIC_API_KEY}"
    assert config.channels.discord.allowed_users == ["444", "555"] and not config.channels.telegram.enabled
    assert config.assistant.timezone == "Asia/Tokyo"
    env_lines = (tmp_path / ".env").read_text().splitlines()
    assert {"ANTHROPIC_API_KEY=", "DISCORD_BOT_TOKEN="} <= set(env_lines)
    assert all(b"MTA5.GhYx1b" not in content for content in all_written(tmp_path).values())


def test_interactive_end_of_input_writes_nothing(tmp_path, monkeypatch, capsys):
    answers(monkeypatch, ["1"])
    assert main(["--config", str(tmp_path / "config.yml"), "init", "--ollama-url", no_ollama()]) == 1
    assert "nothing was written" in capsys.readouterr().err
    assert all_written(tmp_path) == {}


@pytest.fixture
async def fake_ollama() -> AsyncIterator[tuple[str, list[dict[str, str]]]]:
    """An Ollama-like /api/tags; the test sets the models it lists."""
    models: list[dict[str, str]] = []

    async def tags(_: web.Request) -> web.Response:
        return web.json_response({"models": models})

    app = web.Application()
    app.router.add_get("/api/tags", tags)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}", models
    finally:
        await runner.cleanup()


async def test_a_local_ollama_is_detected_and_offered_first(tmp_path, monkeypatch, capsys, fake_ollama):
    base, models = fake_ollama
    models += [{"name": "qwen2.5:0.5b", "model": "qwen2.5:0.5b"}, {"name": "llama3.2:latest"}]
    monkeypatch.setenv("TZ", "America/Sao_Paulo")  # the machine's zone is the default
    prompts = answers(monkeypatch, ["", "none", ""])  # the offered Ollama model, no channel, the zone
    path = tmp_path / "config.yml"
    code = await asyncio.to_thread(main, ["--config", str(path), "init", "--ollama-url", f"{base}/api/tags"])
    assert code == 0
    out = capsys.readouterr().out
    assert f"4) ollama_chat/qwen2.5:0.5b  (a local Ollama answers at {base})" in out
    assert prompts[0].endswith("[4]: ") and not any("API key" in p for p in prompts)
    config = load_config(path, {})
    check_config(config)
    assert (config.llm.model, config.llm.api_base, config.llm.api_key) == ("ollama_chat/qwen2.5:0.5b", base, None)
    assert config.assistant.timezone == "America/Sao_Paulo"
    assert not config.channels.telegram.enabled and not config.channels.discord.enabled
    assert [line.split("=")[0] for line in (tmp_path / ".env").read_text().splitlines()
            if not line.startswith("#")] == ["BRUCE_ADMIN_TOKEN"]  # no key to fill for a local model


async def test_detect_ollama_tells_no_server_from_a_server_without_models(fake_ollama):
    base, models = fake_ollama
    assert await detect_ollama(f"{base}/api/tags") == []
    models.append({"name": "llama3.2:latest"})
    assert await detect_ollama(f"{base}/api/tags") == ["llama3.2:latest"]
    assert await detect_ollama(f"{base}/not-ollama") is None
    assert await detect_ollama(no_ollama()) is None


def test_the_env_names_the_config_it_belongs_to_and_the_admin_page_it_logs_into(tmp_path, capsys):
    path = tmp_path / "bruce.yml"  # the checkout already has a config.yml: the README's example
    code = main(["--config", str(path), "init", "--non-interactive", "--key-env", "none",
                 "--model", "ollama_chat/llama3.2", "--timezone", "UTC"])
    assert code == 0, capsys.readouterr().err

    env = (tmp_path / ".env").read_text()
    assert "bruce.yml refers to each as ${NAME}" in env
    assert "config.yml" not in env
    assert "not built" not in env
    assert "# the admin page's login token (http://127.0.0.1:8765), generated by bruce init" in env
