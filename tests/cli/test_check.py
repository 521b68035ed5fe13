"""``check_config``: what start-up would refuse, found from the contracts and the config alone
(no database is opened), every problem named at once with the config file it came from."""

from __future__ import annotations

import pytest

from bruce.cli.check import check_config
from bruce.errors import ConfigError


def test_a_good_config_passes_without_a_database(make_config, tmp_path):
    check_config(make_config())
    assert not (tmp_path / "bruce.db").exists()


def test_every_problem_is_named_with_the_file(make_config):
    config = make_config(tools={"overrides": {"web.serch": {"enabled": False}, "mcp.files.read": {"enabled": False}}},
                         admin={"host": "0.0.0.0"})
    with pytest.raises(ConfigError) as raised:
        check_config(config, source="config.yml")
    problems = raised.value.problems
    assert any(p.startswith("tools.overrides.web.serch: unknown tool") for p in problems)
    assert not any("mcp.files.read" in p for p in problems)  # an MCP server's tools are known once it connects
    assert any(p.startswith("admin.token: required when admin.host (0.0.0.0)") for p in problems)
    assert "config.yml" in str(raised.value)


def test_guest_tools_naming_a_high_or_critical_tool_or_the_owners_things_are_refused(make_config):
    config = make_config(access={"guest_tools": ["clock.now", "http.post", "files.*", "artifact.save", "web.serch",
                                                 "mcp.calendar.*"]})
    with pytest.raises(ConfigError) as raised:
        check_config(config, source="config.yml")
    problems = [p for p in raised.value.problems if p.startswith("access.guest_tools")]
    assert problems == [
        "access.guest_tools: 'http.post' names http.post (risk critical): a guest never gets a tool of risk high or "
        "critical",
        "access.guest_tools: 'files.*' names files.write (risk high): a guest never gets a tool of risk high or critical",
        "access.guest_tools: 'artifact.save' names artifact.save: the owner's own things (artifacts, the notes "
        "folder) are never a guest's",
        problems[3],
    ]
    assert problems[3].startswith("access.guest_tools: 'web.serch' names no tool (known tools: artifact.save, ")


def test_the_default_guest_tools_pass(make_config):
    check_config(make_config(people={"owner": {"telegram": [111]}}))


# Every place outside the shared checks where start-up raises a ConfigError, and a config that
# reaches it (or why none can be written): `bruce config check` must refuse each such config as
# `bruce run` does. A new `raise ConfigError` fails test_every_refusal_of_run_has_a_case until
# it is listed here.
_TOKEN = "123456:AAFakeTokenForTests"
REFUSALS: dict[str, tuple[dict, str] | str] = {
    "bruce/admin/auth.py:resolve_token:1": ({"admin": {"token": "short"}}, "admin.token: at least 32 characters"),
    "bruce/admin/auth.py:resolve_token:2": ({"admin": {"host": "0.0.0.0"}}, "admin.token: required when admin.host"),
    "bruce/app.py:_registry:1": ({"tools": {"overrides": {"web.serch": {"enabled": False}}}},
                                 "tools.overrides.web.serch: unknown tool"),
    "tools/http_post.py:_entries:1": ({"tools": {"http_post": {"allowed_urls": ["ftp://example.org"]}}},
                                      "tools.http_post.allowed_urls[0]:"),  # the schema refuses it first
    "channels/telegram/channel.py:__init__:1": ({"channels": {"telegram": {"enabled": True}}},
                                                "channels.telegram.token: required when channels.telegram.enabled"),
    "channels/telegram/api.py:check_token:1": ({"channels": {"telegram": {"enabled": True, "token": "not-a-token"}}},
                                               "channels.telegram.token: not a Telegram bot token"),
    "channels/discord/channel.py:__init__:1": ({"channels": {"discord": {"enabled": True}}},
                                               "channels.discord.token: required when channels.discord.enabled"),
    "bruce/runtime/event_loop.py:loop_factory:1": "uvloop asked for but not installed: check_config calls loop_factory "
                                                  "itself, and uvloop is installed here",
    "channels/telegram/channel.py:_connect:1": "Telegram's answer to getMe (401): known only "
                                                                 "when it answers; bruce doctor asks it",
    "channels/telegram/channel.py:_connect:2": "Telegram's answer to getMe: known only when it "
                                                                 "answers; bruce doctor asks it",
    "channels/discord/gateway.py:start_error:1": "Discord's answer at login: known only when it answers",
    "channels/discord/gateway.py:start_error:2": "Discord's answer at login: known only when it answers",
}


def _raise_sites() -> list[str]:
    """``path:function:n`` for each ``raise``/``return ConfigError(...)`` outside bruce/config/ and
    the checks themselves (what load_config refuses, every command refuses)."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    sites = []
    for package in ("bruce", "channels", "tools"):
        for path in sorted((root / package).rglob("*.py")):
            relative = path.relative_to(root).as_posix()
            if relative.startswith(("bruce/config/", "bruce/cli/")):
                continue
            for function in ast.walk(ast.parse(path.read_text())):
                if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                    continue
                found = [n for n in ast.walk(function) if isinstance(n, ast.Raise | ast.Return)
                         and isinstance(n.exc if isinstance(n, ast.Raise) else n.value, ast.Call)
                         and getattr((n.exc if isinstance(n, ast.Raise) else n.value).func, "id", "") == "ConfigError"]
                sites += [f"{relative}:{function.name}:{i}" for i in range(1, len(found) + 1)]
    return sites


def test_every_refusal_of_run_has_a_case():
    assert sorted(_raise_sites()) == sorted(REFUSALS)


@pytest.mark.parametrize("site", [s for s, case in REFUSALS.items() if isinstance(case, tuple)])
async def test_config_check_refuses_every_config_run_refuses(tmp_path, site):
    import asyncio
    import os
    import sys

    import yaml

    overrides, message = REFUSALS[site]
    config = {"storage": {"path": str(tmp_path / "bruce.db")}, "console": {"socket_path": str(tmp_path / "b.sock")},
              "admin": {"port": 0}, "memory": {"enabled": False}}
    for key, value in overrides.items():
        config[key] = {**config.get(key, {}), **value}
    path = tmp_path / "config.yml"
    path.write_text(yaml.safe_dump(config))
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_TOKEN")) and k != "BRUCE_CONFIG"}
    for command in (["config", "check"], ["run"]):
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bruce.cli.main", "--config", str(path), *command,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env, cwd=tmp_path)
        try:
            _, err = await asyncio.wait_for(proc.communicate(), 60)
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        assert proc.returncode == 2, (command, err.decode()[-500:])
        assert message in err.decode(), command
