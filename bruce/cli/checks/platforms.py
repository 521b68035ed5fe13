"""``bruce doctor``'s checks of the chat platforms (each bot token, asked of the platform; who may
talk to Bruce), of a running daemon (over its console socket) and of the MCP servers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bruce.cli.checks.findings import Finding, Mark, fill, named, variable
from bruce.clock import local_time
from bruce.config.schema import ChannelSection, Config

__all__ = ["DISCORD_API", "TELEGRAM_API", "check_channels", "check_daemon", "check_mcp"]

TELEGRAM_API = "https://api.telegram.org"
DISCORD_API = "https://discord.com/api/v10"  # discord.py's Route.BASE


async def _get(url: str, headers: Mapping[str, str], timeout_s: float) -> tuple[int, Any] | str:
    """(status, JSON body or None), or why no answer came; the URL (it may hold a token) is never shown."""
    import aiohttp

    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_s)) as session:
            async with session.get(url, headers=dict(headers)) as response:
                try:
                    body = await response.json(content_type=None)
                except ValueError:
                    body = None
                return response.status, body
    except TimeoutError:
        return f"no answer within {timeout_s:g} s"
    except aiohttp.ClientConnectorError as exc:
        return f"cannot connect to {exc.host}:{exc.port}"
    except (aiohttp.ClientError, ValueError):
        return "the request failed"


async def _token_works(name: str, section: ChannelSection, token: str, timeout_s: float) -> tuple[bool, str]:
    base = getattr(section, "api_base", None)
    if name == "telegram":
        result = await _get(f"{(base or TELEGRAM_API).rstrip('/')}/bot{token}/getMe", {}, timeout_s)
    else:
        result = await _get(f"{(base or DISCORD_API).rstrip('/')}/users/@me", {"Authorization": f"Bot {token}"},
                            timeout_s)
    if isinstance(result, str):
        return False, result
    status, body = result
    if status == 200 and isinstance(body, dict):
        me = body.get("result", body) if name == "telegram" else body
        username = me.get("username") if isinstance(me, dict) else None
        return True, f"bot @{username}" if username else "accepted"
    said = body.get("description") or body.get("message") if isinstance(body, dict) else None
    return False, f"refused ({status}{': ' + str(said)[:80] if said else ''})"


async def _channel(name: str, section: ChannelSection, raw: Any, timeout_s: float) -> list[Finding]:
    keys: tuple[str | int, ...] = ("channels", name, "token")
    secret = getattr(section, "token", None)
    var = variable(raw, *keys)
    found = []
    if secret is None or not secret.get_secret_value():
        found.append(Finding(Mark.FAIL, f"{name}: no token" + (f" (${var} is empty)" if var else ""),
                             fill(var, "the bot token", f"channels.{name}.token")))
    else:
        token = secret.get_secret_value()
        ok, said = await _token_works(name, section, token, timeout_s)
        source = named(raw, keys, token)
        found.append(Finding(Mark.OK, f"{name}: token from {source} works ({said})") if ok else
                     Finding(Mark.FAIL, f"{name}: token from {source} {said}",
                             f"put the bot's current token in {source if var else f'channels.{name}.token'}"))
    if not section.allowed_users and section.pairing:
        found.append(Finding(Mark.WARN, f"{name}: allowed_users is empty: only paired users can talk to Bruce",
                             f"approve yourself with `bruce pairing approve CODE`, or add your id to "
                             f"channels.{name}.allowed_users"))
    elif not section.allowed_users:
        found.append(Finding(Mark.FAIL, f"{name}: allowed_users is empty: nobody can talk to Bruce",
                             f"add your user id to channels.{name}.allowed_users"))
    else:
        found.append(Finding(Mark.OK, f"{name}: {len(section.allowed_users)} allowed user(s)"))
    return found


async def check_channels(config: Config, raw: Any, timeout_s: float) -> list[Finding]:
    found: list[Finding] = []
    for name, section in config.channels.sections().items():
        if not section.enabled:
            found.append(Finding(Mark.SKIP, f"{name}: disabled"))
        else:
            found += await _channel(name, section, raw, timeout_s)
    return found


async def check_daemon(config: Config) -> list[Finding]:
    """A running daemon, asked over its console socket when each channel last received."""
    from bruce.cli.daemon import daemon_health

    health = await daemon_health(config)
    if health is None:
        return [Finding(Mark.SKIP, f"daemon: none answers at {config.console.socket_path}")]
    found = [Finding(Mark.OK, f"daemon: running, console socket {config.console.socket_path}")]
    for name, when in sorted(health.items()):
        if when is None:
            found.append(Finding(Mark.WARN, f"{name}: nothing received from the platform yet",
                                 "check the daemon's log (telegram.poll_failed, telegram.conflict)"))
        else:
            found.append(Finding(Mark.OK, f"{name}: last received from the platform at "
                                             f"{local_time(when, config.assistant.zone, seconds=True)}"))
    return found


def check_mcp(config: Config) -> list[Finding]:
    servers = getattr(config, "mcp_servers", None)
    if not servers:
        return [Finding(Mark.SKIP, "MCP: none configured")]
    return [Finding(Mark.SKIP, f"MCP: {len(servers)} server(s) configured; not checked by doctor yet")]
