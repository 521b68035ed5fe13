"""``load_config(path, environ)``: the one entry from a config file to a validated ``Config``.

Reading goes: the file's bytes as UTF-8 and its YAML through the strict reader
(``bruce.config.reader``), ``${VAR}`` expanded from ``environ``, ``assistant.timezone`` defaulted
to the machine's zone (read from the same ``environ``), the models validated
(``bruce.config.schema``) with each problem named by its key path (``bruce.config.messages``),
then relative paths (``storage.path``, ``tools.artifacts.dir``, ``tools.files.notes_dir``,
``console.socket_path``, ``eval.cases_dir``, ``eval.runs_dir``, an MCP server's ``cwd``) resolved
against the config file's folder, never the current directory.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from bruce.config.messages import validation_problems
from bruce.config.reader import decode, expand, parse_yaml
from bruce.config.rules import blank_to_none
from bruce.config.schema import Config
from bruce.config.timezone import local_zone_name
from bruce.errors import ConfigError

__all__ = ["anchored", "default_config_path", "load_config", "parse_config"]


def anchored(config: Config, base_dir: Path) -> Config:
    """``config`` with each relative path (``storage.path``, ``tools.artifacts.dir``,
    ``tools.files.notes_dir``, ``console.socket_path``, ``eval.cases_dir``, ``eval.runs_dir``,
    an MCP server's ``cwd``) under ``base_dir``; absolute paths are kept and ``~`` is expanded."""
    def at(path: Path) -> Path:
        path = path.expanduser()
        return path if path.is_absolute() else base_dir / path

    tools = config.tools
    return config.model_copy(update={
        "storage": config.storage.model_copy(update={"path": at(config.storage.path)}),
        "tools": tools.model_copy(update={
            "artifacts": tools.artifacts.model_copy(update={"dir": at(tools.artifacts.dir)}),
            "files": tools.files.model_copy(update={"notes_dir": at(tools.files.notes_dir)}),
        }),
        "console": config.console.model_copy(update={"socket_path": at(config.console.socket_path)}),
        "eval": config.eval.model_copy(update={"cases_dir": at(config.eval.cases_dir),
                                               "runs_dir": at(config.eval.runs_dir)}),
        "mcp_servers": {name: server.model_copy(update={"cwd": at(server.cwd) if server.cwd else None})
                        for name, server in config.mcp_servers.items()},
    })


def _with_local_zone(data: dict[str, Any], environ: Mapping[str, str]) -> dict[str, Any]:
    """``data`` with ``assistant.timezone`` set to this machine's zone (from ``environ``'s TZ)
    when it is absent or empty."""
    assistant = data.get("assistant", {})
    if not isinstance(assistant, dict) or blank_to_none(assistant.get("timezone")) is not None:
        return data  # set, or not a mapping (which validation reports)
    return {**data, "assistant": {**assistant, "timezone": local_zone_name(environ)}}


def parse_config(data: Any, *, source: str | None = None, environ: Mapping[str, str] | None = None,
                 base_dir: Path | None = None) -> Config:
    """Validate ``data``; relative paths are resolved against ``base_dir`` (None: kept as given)."""
    environ = os.environ if environ is None else environ
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError("<root>: must be a mapping of keys", source=source)
    try:
        config = Config.model_validate(_with_local_zone(expand(data, environ), environ))
    except ValidationError as exc:
        raise ConfigError(validation_problems(exc), source=source) from None
    return config if base_dir is None else anchored(config, base_dir)


def default_config_path(environ: Mapping[str, str] | None = None) -> Path:
    """``BRUCE_CONFIG`` when set, else ``config.yml`` in the current directory."""
    environ = os.environ if environ is None else environ
    return Path(environ.get("BRUCE_CONFIG") or "config.yml")


def load_config(path: Path | str | None = None, environ: Mapping[str, str] | None = None) -> Config:
    """Read, expand and validate a config file; raise ConfigError naming each bad key."""
    environ = os.environ if environ is None else environ
    path = Path(path) if path is not None else default_config_path(environ)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}", source=str(path)) from None
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}", source=str(path)) from None
    try:
        data = parse_yaml(decode(raw))
    except ConfigError as exc:
        raise ConfigError(exc.problems, source=str(path)) from None
    return parse_config(data, source=str(path), environ=environ, base_dir=path.resolve().parent)
