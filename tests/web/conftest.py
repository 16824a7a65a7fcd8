"""Fixtures of the web face's tests: a fleet on each shared store, and the app over it
through a real HTTP client (Starlette's TestClient speaks HTTP to the ASGI app)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from shoal import Fleet, ManualClock
from shoal.faces.exposure import Exposure, allowed_hosts
from shoal.faces.web import create_app
from tests.conftest import made_fleet_url

LOOPBACK = Exposure("127.0.0.1", 8765, None, allowed_hosts("127.0.0.1", ()))
#: The sign-in secret of the apps the tests make: what proves the owner of an open fleet.
OWNER = "the-owners-sign-in-secret-0123456789abcdef"


@pytest.fixture(params=["sqlite", "postgres"])
def shared_store(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    """(kind, URL) of a new fleet on SQLite and on PostgreSQL, as tests/conftest.py's, but
    already made: a copy of the worker's SQLite fleet, or a PostgreSQL schema emptied after
    an earlier test (as the contract suite's). Every test here opens the fleet rather than
    starting one, and a schema migrated per test cost PostgreSQL more than many a test."""
    kind = str(request.param)
    return kind, made_fleet_url(kind, tmp_path, request)


@pytest.fixture
def web_fleet(shared_store: tuple[str, str], clock: ManualClock) -> Iterator[Fleet]:
    """A new fleet on SQLite and on PostgreSQL, on the manual clock."""
    fleet = Fleet.open(shared_store[1], create=True, clock=clock)
    yield fleet
    fleet.close()


@pytest.fixture
def make_client(web_fleet: Fleet) -> Iterator[Callable[..., TestClient]]:
    """Clients of one app over ``web_fleet``; ``make_client(token)`` sends that token, and
    ``make_client()`` the owner's sign-in secret (``OWNER``), as the owner's CLI does;
    ``make_client("")`` sends nothing."""
    app = create_app(web_fleet, LOOPBACK, local_secret=OWNER)
    made: list[TestClient] = []

    def make(token: str | None = None, exposure: Exposure = LOOPBACK) -> TestClient:
        served = app if exposure is LOOPBACK else create_app(web_fleet, exposure)
        client = TestClient(served, base_url="http://127.0.0.1:8765")
        sent = OWNER if token is None else token
        if sent:
            client.headers["Authorization"] = f"Bearer {sent}"
        made.append(client)
        return client

    yield make
    for client in made:
        client.close()


@pytest.fixture
def client(make_client: Callable[..., TestClient]) -> TestClient:
    """The owner's client of an open fleet (no token made: the sign-in secret acts as
    admin)."""
    return make_client()
