"""runtime.event_loop: the loop `bruce run` and `bruce chat` run on, and what happens without uvloop."""

from __future__ import annotations

import asyncio
import json
import sys
import warnings

import pytest
import yaml

from bruce.config.loader import parse_config
from bruce.errors import ConfigError
from bruce.runtime.event_loop import loop_factory, run, running_loop_name
from tests.cli.test_main import clean_env, write_config


async def _which() -> str:
    await asyncio.sleep(0)
    return running_loop_name()


def _hide_uvloop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # `import uvloop` raises ImportError, as where it is absent


def test_auto_runs_on_uvloop_where_it_is_installed():
    assert sys.platform != "win32"  # uvloop is a dependency on every other platform, so CI has it
    assert loop_factory("auto")[0] == "uvloop"
    assert run(_which()) == "uvloop"
    assert run(_which(), "uvloop") == "uvloop"


def test_asyncio_runs_on_the_standard_loop_and_leaves_the_global_policy_alone():
    before = type(asyncio.get_event_loop_policy())
    assert run(_which(), "asyncio") == "asyncio"
    assert run(_which(), "auto") == "uvloop"
    assert type(asyncio.get_event_loop_policy()) is before


def test_without_uvloop_auto_falls_back_and_uvloop_is_a_config_error_naming_the_key(monkeypatch):
    _hide_uvloop(monkeypatch)
    assert run(_which(), "auto") == "asyncio"
    main = _which()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "coroutine was never awaited" would be a RuntimeWarning
        with pytest.raises(ConfigError, match=r"runtime\.event_loop: uvloop is asked for but cannot be loaded"):
            run(main, "uvloop")
    assert main.cr_frame is None  # closed, not left dangling


def test_a_result_and_an_exception_come_back_as_from_asyncio_run():
    async def fails() -> None:
        raise KeyError("boom")

    with pytest.raises(KeyError, match="boom"):
        run(fails(), "uvloop")
    assert run(asyncio.sleep(0, result=42), "asyncio") == 42


def test_an_unknown_loop_is_refused_naming_the_key():
    with pytest.raises(ConfigError) as info:
        parse_config({"runtime": {"event_loop": "trio"}})
    assert any(p.startswith("runtime.event_loop:") and "auto" in p and "asyncio" in p for p in info.value.problems)
    assert parse_config({}).runtime.event_loop == "auto"


async def _bruce(config, *args: str, hide_uvloop: bool) -> asyncio.subprocess.Process:
    """`bruce --config CONFIG ARGS`, in a Python that cannot import uvloop when ``hide_uvloop``."""
    hide = "sys.modules['uvloop'] = None; " if hide_uvloop else ""
    return await asyncio.create_subprocess_exec(
        sys.executable, "-c", f"import sys; {hide}from bruce.cli.main import main; sys.exit(main())",
        "--config", str(config), *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=clean_env(), cwd=config.parent,
    )


async def _started_event(config, *, hide_uvloop: bool = False) -> tuple[int | None, dict | None, str]:
    """Start `bruce run`, read up to its app.started line, stop it with SIGTERM."""
    proc = await _bruce(config, "run", hide_uvloop=hide_uvloop)
    started, lines = None, []
    try:
        while started is None:
            raw = await asyncio.wait_for(proc.stderr.readline(), 60)
            if not raw:
                break
            lines.append(raw.decode())
            event = json.loads(raw) if raw.startswith(b"{") else {}
            if event.get("event") == "app.started":
                started = event
        if started is not None:
            proc.terminate()
        rest = await asyncio.wait_for(proc.stderr.read(), 60)
        await asyncio.wait_for(proc.wait(), 60)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    return proc.returncode, started, "".join(lines) + rest.decode()


@pytest.mark.parametrize("choice, expected", [("auto", "uvloop"), ("asyncio", "asyncio")])
async def test_bruce_run_says_which_loop_it_runs_on(tmp_path, choice, expected):
    config = write_config(tmp_path, {"api_key": "sk-test-123456"})
    config.write_text(config.read_text() + yaml.safe_dump({"runtime": {"event_loop": choice}}))
    code, started, err = await _started_event(config)
    assert code == 0, err
    assert started is not None and started["event_loop"] == expected


async def test_bruce_run_without_uvloop_runs_on_asyncio_or_refuses_when_uvloop_is_required(tmp_path):
    config = write_config(tmp_path, {"api_key": "sk-test-123456"})
    code, started, err = await _started_event(config, hide_uvloop=True)
    assert code == 0, err
    assert started is not None and started["event_loop"] == "asyncio"

    config.write_text(config.read_text() + yaml.safe_dump({"runtime": {"event_loop": "uvloop"}}))
    code, started, err = await _started_event(config, hide_uvloop=True)
    assert code == 2 and started is None
    assert "runtime.event_loop: uvloop is asked for but cannot be loaded" in err
    assert "Traceback" not in err
    check = await _bruce(config, "config", "check", hide_uvloop=True)
    _, err = await asyncio.wait_for(check.communicate(), 60)
    assert check.returncode == 2  # `bruce config check` refuses what `bruce run` would refuse
    assert "runtime.event_loop: uvloop is asked for but cannot be loaded" in err.decode()
