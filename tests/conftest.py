"""Shared fixtures. The contract suite runs every test on every store: add a store by adding
its name to STORES and a branch to ``make_url``."""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from shoal import Fleet, ManualClock

STORES = ["memory", "sqlite"]


def make_url(kind: str, folder: Path) -> str:
    if kind == "memory":
        return f"memory://test-{uuid.uuid4().hex}"  # named, so a second Fleet can share it
    if kind == "sqlite":
        return f"sqlite://{folder / 'fleet.db'}"
    raise ValueError(kind)


@pytest.fixture(params=STORES)
def store_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def store_url(store_kind: str, tmp_path: Path) -> str:
    return make_url(store_kind, tmp_path)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def open_fleet(store_url: str, clock: ManualClock) -> Iterator[Callable[..., Fleet]]:
    """Open more handles on the fleet under test (another process would do the same)."""
    opened: list[Fleet] = []

    def opener(seed: int = 0) -> Fleet:
        fleet = Fleet.open(store_url, clock=clock, rng=random.Random(seed))
        opened.append(fleet)
        return fleet

    yield opener
    for fleet in opened:
        fleet.close()


@pytest.fixture
def fleet(open_fleet: Callable[..., Fleet]) -> Fleet:
    return open_fleet()
