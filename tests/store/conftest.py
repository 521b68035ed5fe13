"""A real store on a file of the test's own, opened at the fake clock's time."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from bruce.store import Store
from tests.fakes.clock import FakeClock


@pytest.fixture
async def store(tmp_path, clock: FakeClock) -> AsyncIterator[Store]:
    opened = await Store.open(tmp_path / "bruce.db", clock)
    try:
        yield opened
    finally:
        await opened.close()
