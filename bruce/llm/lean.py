"""What litellm keeps after its import that Bruce can never use, let go of once it is loaded.

litellm 1.110's ``litellm.utils`` parses the Anthropic tokenizer's JSON at import and keeps the
parsed tree (``json_data``, about 13 MB of Python objects) only to serialise it into
``claude_json_str``, the string its tokenizer is built from. Bruce counts no tokens
(``disable_token_counter``: providers report usage), and even litellm's own tokenizer reads the
string, never the tree; dropping the tree gives back about 5 MiB of RSS (7.5 MiB with a
``malloc_trim``). The figures are in ``docs/benchmarks.md`` ("litellm's import").

Checked against litellm 1.110 only: on any other version nothing is touched (the plain import
is what runs), because another release may read the tree or keep it under another name.
"""

from __future__ import annotations

import sys
from importlib.metadata import PackageNotFoundError, version

import structlog

__all__ = ["CHECKED_VERSION", "release_unused"]

log = structlog.get_logger(__name__)

CHECKED_VERSION = "1.110"  # the litellm minor version this module was measured and tested with


def release_unused() -> bool:
    """Drop what litellm's import kept that no call Bruce makes reads; True when it did.
    Does nothing (False) on a litellm version other than ``CHECKED_VERSION`` or when the
    attribute is not where that version keeps it."""
    if _minor(_version()) != CHECKED_VERSION:
        return False
    utils = sys.modules.get("litellm.utils")
    if utils is None or not isinstance(getattr(utils, "claude_json_str", None), str):
        return False
    if not isinstance(getattr(utils, "json_data", None), dict):
        return False
    setattr(utils, "json_data", None)  # noqa: B010 (mypy does not know the module's attribute)
    log.debug("llm.litellm_trimmed", released="litellm.utils.json_data")
    return True


def _version() -> str:
    try:
        return version("litellm")
    except PackageNotFoundError:
        return ""


def _minor(version: str) -> str:
    return ".".join(version.split(".")[:2])
