"""``bruce doctor``: is this setup ready to start? One line per check, greppable:

    ✓ what is fine
    ✗ what blocks start-up, or a login that fails — fix: what to do
    ! what works but deserves a look — fix: what to do
    – what was not checked, and why

The exit status is 2 when the config itself is invalid (nothing else is checked then), 1 when
any line is ✗, else 0. Tokens and keys are never printed: a secret is named by the variable it
came from (``$TELEGRAM_BOT_TOKEN``), or by its last four characters when the config holds it.
The LLM check makes one tiny call per model (primary and each fallback) through ``LLMService``,
recorded in a scratch in-memory database: the real one is only opened, never written by a call.
The media check says ``media: off`` or ``voice: not set up``, else sends the transcription model
half a second of silence and reports how long it took to answer. The email check logs in to the
IMAP and the SMTP server (never MAIL FROM: no mail is sent); the calendar check logs in to each
CalDAV calendar an MCP server is given (``--caldav URL``) and finds the calendar there.
The checks themselves are in ``bruce/cli/checks/``, one module per subject.
"""

from __future__ import annotations

import argparse
import asyncio
import os
from collections.abc import Callable, Mapping
from pathlib import Path

from bruce.cli.check import check_config, config_warnings
from bruce.cli.checks.admin import check_admin
from bruce.cli.checks.calendar import check_calendars
from bruce.cli.checks.findings import Finding, Mark, check_secrets_in_file
from bruce.cli.checks.mail import check_email
from bruce.cli.checks.media import check_media
from bruce.cli.checks.models import check_models
from bruce.cli.checks.platforms import check_channels, check_daemon, check_mcp
from bruce.cli.checks.storage import check_database, check_disk, check_timezone
from bruce.cli.checks.systemd import check_systemd
from bruce.config.loader import load_config
from bruce.config.reader import parse_yaml
from bruce.config.schema import Config
from bruce.errors import ConfigError

__all__ = ["add_arguments", "doctor_command", "diagnose", "Mark", "Finding", "SYSTEMD_UNIT"]

SYSTEMD_UNIT = Path("/etc/systemd/system/bruce.service")

Out = Callable[[str], None]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-llm", action="store_true", help="skip the call to each model")
    parser.add_argument("--timeout", type=float, default=15.0, metavar="S", help="per network check (default 15)")
    parser.add_argument("--unit", type=Path, default=SYSTEMD_UNIT, help=f"systemd unit to check (default {SYSTEMD_UNIT})")


def doctor_command(config_path: Path, args: argparse.Namespace) -> int:
    return asyncio.run(diagnose(config_path, llm=not args.no_llm, timeout_s=args.timeout, unit=args.unit))


async def diagnose(config_path: Path, *, environ: Mapping[str, str] | None = None, llm: bool = True,
                   timeout_s: float = 15.0, unit: Path = SYSTEMD_UNIT, out: Out = print) -> int:
    """Run every check, printing each line as it is known; return the exit status."""
    from bruce.log import Redactor, configure_logging

    environ = os.environ if environ is None else environ
    try:
        config = load_config(config_path, environ)
        check_config(config, source=str(config_path))
    except ConfigError as exc:
        out(Finding(Mark.FAIL, f"config {config_path} is invalid", "correct these keys, then run bruce doctor again").line())
        for problem in exc.problems:
            out(f"    {problem}")
        return 2
    configure_logging(level="error", fmt=config.logging.format, redactor=Redactor(config.secrets()))
    raw = parse_yaml(Path(config_path).read_text(encoding="utf-8"))
    findings = [Finding(Mark.OK, f"config {config_path}: valid, as `bruce run` checks it")]
    findings += check_secrets_in_file(raw)
    findings += [Finding(Mark.WARN, warning) for warning in config_warnings(config)]
    for finding in findings:
        out(finding.line())
    checks = await _run_checks(config, raw, environ, llm=llm, timeout_s=timeout_s, unit=unit, out=out)
    failed = any(f.mark is Mark.FAIL for found in [findings, *checks] for f in found)
    return 1 if failed else 0


async def _run_checks(config: Config, raw: object, environ: Mapping[str, str], *, llm: bool, timeout_s: float,
                      unit: Path, out: Out) -> list[list[Finding]]:
    """Run every check after the config's, in order, and print their lines."""
    checks: list[list[Finding]] = []
    daemon = await check_daemon(config)  # before the admin check: a running daemon holds the admin port
    for found in (await check_database(config), check_disk(config), check_timezone(config),
                  await check_models(config, raw, environ, timeout_s) if llm
                  else [Finding(Mark.SKIP, "llm: not called (--no-llm)")],
                  await check_media(config, raw, environ, timeout_s, call=llm),
                  await check_channels(config, raw, timeout_s), daemon, check_mcp(config),
                  await check_calendars(config.mcp_servers, raw, timeout_s),
                  await check_email(config.tools.email, raw, timeout_s),
                  check_admin(config, raw, daemon_running=daemon[0].mark is Mark.OK), check_systemd(config, unit)):
        for finding in found:
            out(finding.line())
        checks.append(found)
    return checks
