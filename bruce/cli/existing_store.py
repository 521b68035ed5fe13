"""The owner's commands (``bruce pairing``, ``jobs``, ``usage``, ``budget``) work on the database
the daemon uses, and never make a new, empty one by mistake."""

from __future__ import annotations

import sys
from pathlib import Path

from bruce.clock import Clock
from bruce.config.schema import Config
from bruce.errors import StoreError
from bruce.store import Store

__all__ = ["open_existing"]


async def open_existing(config: Config, config_path: Path | None, clock: Clock) -> Store | None:
    """The config's database; None (and a line on stderr saying what to do) when there is none yet."""
    try:
        return await Store.open(config.storage.path, clock, create=False)
    except StoreError as exc:
        if config.storage.path.exists():
            raise
        print(f"bruce: {exc} (storage.path in {config_path or 'the config'}); start Bruce once with `bruce run`, "
              "or pass --config with the config file the daemon uses", file=sys.stderr)
        return None
