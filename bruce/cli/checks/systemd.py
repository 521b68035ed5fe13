"""``bruce doctor``'s check of the systemd unit: run as the user it names, does it find its
working directory, its program and config, and may it write where Bruce writes?"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from bruce.cli.checks.findings import Finding, Mark
from bruce.cli.checks.storage import user_name
from bruce.config.schema import Config

__all__ = ["check_systemd"]


def _unit_service(text: str) -> dict[str, list[str]]:
    """The [Service] section's settings, each key with every value it was given."""
    found: dict[str, list[str]] = {}
    section = ""
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            section = line.strip("[]")
        elif section == "Service" and "=" in line:
            key, value = line.split("=", 1)
            found.setdefault(key.strip(), []).append(value.strip())
    return found


def _covered(path: Path, roots: list[Path]) -> bool:
    return any(path == root or root in path.parents for root in roots)


def _written_paths(config: Config) -> list[Path]:
    paths = [config.storage.path.parent, config.tools.artifacts.dir, config.tools.files.notes_dir]
    console = getattr(config, "console", None)
    if console is not None:
        paths.append(Path(console.socket_path).parent)
    return list(dict.fromkeys(p.absolute() for p in paths))


def check_systemd(config: Config, unit: Path) -> list[Finding]:
    if not unit.exists():
        return [Finding(Mark.SKIP, f"systemd: no unit at {unit}")]
    service = _unit_service(unit.read_text(encoding="utf-8", errors="replace"))
    user = (service.get("User") or ["root"])[-1]
    if user != user_name():
        return [Finding(Mark.SKIP, f"systemd: {unit} runs as {user}; run doctor as that user "
                                   f"(sudo -u {user} ...) to check its paths")]
    found = []
    workdir = Path((service.get("WorkingDirectory") or ["/"])[-1].lstrip("-"))
    if not workdir.is_dir():
        found.append(Finding(Mark.FAIL, f"systemd: WorkingDirectory {workdir} does not exist",
                             f"create it or fix WorkingDirectory= in {unit}"))
    argv = shlex.split((service.get("ExecStart") or [""])[-1].lstrip("-@:+!"))
    if not argv or not os.access(argv[0], os.X_OK):
        found.append(Finding(Mark.FAIL, f"systemd: ExecStart's program {argv[0] if argv else '(none)'} is not "
                                        "an executable", f"install Bruce there or fix ExecStart= in {unit}"))
    config_arg = argv[argv.index("--config") + 1] if "--config" in argv[:-1] else None
    if config_arg is not None and not (workdir / config_arg).is_file():
        found.append(Finding(Mark.FAIL, f"systemd: ExecStart's --config {config_arg} does not exist",
                             f"run bruce init --config {config_arg}, or fix ExecStart= in {unit}"))
    roots = [Path(p.lstrip("-+")) for line in service.get("ReadWritePaths", []) for p in line.split()]
    strict = (service.get("ProtectSystem") or ["no"])[-1] in ("strict", "full", "true", "yes")
    outside = [p for p in _written_paths(config) if not _covered(p, roots)] if strict or roots else []
    outside = [p for p in outside if not any(q in p.parents for q in outside)]  # data/notes goes with data
    if outside:
        found.append(Finding(Mark.FAIL, f"systemd: ReadWritePaths does not cover {', '.join(map(str, outside))}",
                             f"add them to ReadWritePaths= in {unit}, or point storage.path and the tool "
                             "folders under it"))
    return found or [Finding(Mark.OK, f"systemd: {unit} paths exist and cover what Bruce writes")]
