"""clock.now: the current date and time in a given IANA timezone (default: the assistant's)."""

from __future__ import annotations

from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from bruce.contracts import Risk, ToolContext, ToolContract
from bruce.errors import ToolInputInvalid

__all__ = ["CLOCK_NOW", "clock_now"]

CLOCK_NOW = ToolContract(
    name="clock.now",
    activity="Checking the time",
    description="Current date, time, weekday and UTC offset, in the user's timezone or an IANA timezone you name.",
    category="time",
    risk=Risk.LOW,
    autonomous=True,
    confirmation=False,
    idempotent=False,
    input_schema={
        "type": "object",
        "properties": {
            "timezone": {"type": "string", "description": "IANA timezone such as Europe/Lisbon; omit for the user's own."}
        },
        "additionalProperties": False,
    },
    output_schema={
        "type": "object",
        "properties": {
            "iso": {"type": "string"},
            "date": {"type": "string"},
            "time": {"type": "string"},
            "weekday": {"type": "string"},
            "timezone": {"type": "string"},
            "utc_offset": {"type": "string"},
        },
        "required": ["iso", "date", "time", "weekday", "timezone", "utc_offset"],
    },
    permissions=(),
    side_effects="none: reads the clock only; repeating it is harmless",
    audit_event="clock.read",
    failure_modes=("invalid_args",),
    timeout_s=2.0,
    guideline=(
        "Time: the current date and time are in <temporal_context>; use clock_now for another timezone "
        "or a fresh reading."
    ),
)


async def clock_now(args: dict[str, Any], ctx: ToolContext) -> dict[str, str]:
    name = args.get("timezone")
    try:
        zone = ZoneInfo(name) if name else ctx.zone
    except (ZoneInfoNotFoundError, ValueError, OSError):  # OSError: a name too long for a file name
        raise ToolInputInvalid(f"unknown timezone {str(name)[:60]!r}; use an IANA name such as America/Sao_Paulo") from None
    local = ctx.clock.now().astimezone(zone)
    offset = local.strftime("%z")
    return {
        "iso": local.isoformat(timespec="seconds"),
        "date": local.strftime("%Y-%m-%d"),
        "time": local.strftime("%H:%M:%S"),
        "weekday": local.strftime("%A"),
        "timezone": zone.key,
        "utc_offset": f"{offset[:3]}:{offset[3:]}",
    }
