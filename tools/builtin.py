"""The built-in tools, as (contract, handler) pairs for the app to register."""

from __future__ import annotations

from bruce.config import Config
from bruce.contracts import ToolContract, ToolHandler
from tools.calculator import MATH_CALCULATE, math_calculate
from tools.clock import CLOCK_NOW, clock_now

__all__ = ["builtin_tools"]


def builtin_tools(config: Config) -> list[tuple[ToolContract, ToolHandler]]:
    return [(CLOCK_NOW, clock_now), (MATH_CALCULATE, math_calculate)]
