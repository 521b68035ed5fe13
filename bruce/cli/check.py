"""The config checks, found without opening a database or asking a platform.

``check_config`` is what every command refuses (the tool set, the admin token, media, the event
loop); ``check_start`` adds what only ``bruce run`` needs (each enabled channel's token), and is
what ``bruce run`` and ``bruce config check`` both run: so ``config check`` refuses every config
``run`` refuses at start-up, in the same words (tests/cli/test_check.py holds one case per refusal)."""

from __future__ import annotations

from bruce.actions.guests import guest_tool_problems
from bruce.cli.checks.media import media_problems, media_warnings
from bruce.config.rules import MIN_ADMIN_TOKEN, admin_token_problem, channel_problems, is_loopback, unknown_overrides
from bruce.config.schema import Config
from bruce.errors import ConfigError, ContractError
from bruce.jobs.briefing import briefing_warnings
from bruce.runtime.event_loop import loop_factory

__all__ = ["check_config", "check_start", "config_warnings"]


def check_config(config: Config, *, source: str | None = None) -> None:
    """Everything start-up refuses about the tool set, checked from the contracts alone (no
    database is opened): each contract is complete and consistent, no two share a name, and
    ``tools.overrides`` names only tools that exist; ``access.guest_tools`` names only tools a
    guest may have (``bruce.actions.guests``); ``admin.token`` is long enough (and set when
    the page listens beyond loopback); ``media.transcription_model`` names its provider and
    ``media.api_base`` is a URL (``bruce.cli.checks.media``). Raises ConfigError naming each problem."""
    from bruce.actions.checks import check_contract
    from bruce.app import tool_set

    try:
        contracts = [contract for contract, _ in tool_set(config, None)]
    except ContractError as exc:
        raise ConfigError(str(exc), source=source) from None
    except ConfigError as exc:
        raise ConfigError(exc.problems, source=source) from None
    problems, wire_names = [], set()
    for contract in contracts:
        found = check_contract(contract)
        if contract.wire_name in wire_names:
            found.append("a tool with this name is already registered")
        wire_names.add(contract.wire_name)
        if found:
            problems.append(f"tool {contract.name}: " + "; ".join(found))
    problems += unknown_overrides(config.tools, [c.name for c in contracts])
    problems += guest_tool_problems(config.access.guest_tools, contracts)
    admin = config.admin
    if admin.enabled and admin.token is None and not is_loopback(admin.host):
        problems.append(f"admin.token: required when admin.host ({admin.host}) is beyond this machine; "
                        f"set it (at least {MIN_ADMIN_TOKEN} random characters) or keep admin.host at 127.0.0.1")
    token_problem = admin_token_problem(admin.token.get_secret_value() if admin.token else None)
    if token_problem:  # set, it guards `bruce mcp serve` too, even with the page disabled
        problems.append(token_problem)
    problems += media_problems(config.media)
    try:
        loop_factory(config.runtime.event_loop)  # runtime.event_loop: uvloop where it cannot be loaded
    except ConfigError as exc:
        problems += exc.problems
    if problems:
        raise ConfigError(problems, source=source)


def check_start(config: Config, *, source: str | None = None) -> None:
    """``check_config`` and what start-up refuses about the enabled channels (``channel_problems``):
    ``bruce run`` and ``bruce config check``. Other commands do not need a bot token in their shell."""
    problems = channel_problems(config.channels)
    try:
        check_config(config, source=source)
    except ConfigError as exc:
        raise ConfigError([*exc.problems, *problems], source=source) from None
    if problems:
        raise ConfigError(problems, source=source)


def config_warnings(config: Config) -> list[str]:
    """What start-up accepts but is likely not what was meant, each naming its key
    (``bruce config check`` prints them; ``bruce doctor`` shows them as ``!`` lines)."""
    return media_warnings(config) + briefing_warnings(config)
