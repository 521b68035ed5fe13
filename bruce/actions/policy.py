"""When a tool may run: decided from its contract's risk, tightened (never loosened) by config.

| risk      | shown to the model | runs without asking | approval            |
|-----------|--------------------|---------------------|---------------------|
| low       | yes                | yes                 | -                   |
| medium    | yes                | yes                 | -                   |
| high      | yes                | no                  | the user, in chat   |
| critical  | yes                | no                  | the owner, locally  |
| forbidden | no                 | never               | refused (denied)    |

``tools.overrides.<name>`` can set ``enabled: false`` (hidden and refused) or
``require_confirmation: true``; there is no key that loosens anything.
"""

from __future__ import annotations

from dataclasses import dataclass

from bruce.config.schema import ToolOverride
from bruce.contracts import Risk, ToolContract

__all__ = ["Policy", "effective_policy"]


@dataclass(frozen=True, slots=True)
class Policy:
    visible: bool  # in the definitions sent to the model
    needs_confirmation: bool
    step_up: bool  # approval only through an authenticated local path
    refusal: str | None  # why a call is refused outright, or None


def effective_policy(contract: ToolContract, override: ToolOverride | None = None) -> Policy:
    override = override or ToolOverride()
    if contract.risk is Risk.FORBIDDEN:
        return Policy(False, True, True, f"The tool {contract.name} is forbidden.")
    if not override.enabled:
        return Policy(False, True, True, f"The tool {contract.name} is disabled by the owner's configuration.")
    needs_confirmation = (
        contract.confirmation
        or not contract.autonomous
        or contract.risk in (Risk.HIGH, Risk.CRITICAL)
        or override.require_confirmation
    )
    step_up = contract.step_up or contract.risk is Risk.CRITICAL
    return Policy(True, needs_confirmation or step_up, step_up, None)
