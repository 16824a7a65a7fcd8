"""Shared fixtures. The contract suite runs every test on every store: add a store by adding
its name to STORES and a branch to ``store_url``."""

from __future__ import annotations

import contextlib
import random
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from shoal import Fleet, ManualClock
from tests import pg

STORES = ["memory", "sqlite", "postgres", "git"]


def make_url(kind: str, folder: Path) -> str:
    """A new fleet's URL for a store that needs no server."""
    if kind == "memory":
        return f"memory://test-{uuid.uuid4().hex}"  # named, so a second Fleet can share it
    if kind == "sqlite":
        return f"sqlite://{folder / 'fleet.db'}"
    if kind == "git":
        return git_board(folder)
    raise ValueError(kind)


def git_board(folder: Path) -> str:
    """A new bare repository in ``folder`` to hold a git store, and its store URL."""
    board = folder / "board.git"
    subprocess.run(["git", "init", "--quiet", "--bare", str(board)], check=True)
    return f"git+file://{board}"


@pytest.fixture(scope="session", autouse=True)
def git_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The git store's private clones go under this session's temporary folder (and so do
    those of the processes the tests start), not under the user's cache."""
    folder = tmp_path_factory.mktemp("git-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SHOAL_GIT_CACHE", str(folder))
        yield folder


@pytest.fixture(scope="session", autouse=True)
def state_folder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Servers' private files (sign-in secrets, MCP token files, notes of running servers)
    go under this session's temporary folder, for the processes the tests start too."""
    folder = tmp_path_factory.mktemp("state")
    folder.chmod(0o700)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SHOAL_STATE_DIR", str(folder))
        yield folder


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """A PostgreSQL database for this test session (see tests/pg.py); skips with the reason
    when there is none, or fails if SHOAL_REQUIRE_POSTGRES is set."""
    with contextlib.ExitStack() as stack:
        try:
            url = stack.enter_context(pg.server())
        except (RuntimeError, OSError, pg.psycopg.Error) as exc:
            reason = f"no PostgreSQL for the tests: {exc}"
            if pg.required():
                pytest.fail(f"{reason} ({pg.ENV_REQUIRE} is set)")
            pytest.skip(f"{reason}; set {pg.ENV_URL} or install PostgreSQL's initdb/pg_ctl")
        yield url


@pytest.fixture
def postgres_url(postgres_server: str) -> Iterator[str]:
    """A fresh fleet (its own schema) on the session's PostgreSQL, dropped afterwards."""
    url = pg.fleet_url(postgres_server)
    yield url
    pg.drop_fleet(url)


@pytest.fixture(params=STORES)
def store_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def store_url(store_kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if store_kind == "postgres":
        return str(request.getfixturevalue("postgres_url"))
    return make_url(store_kind, tmp_path)


@pytest.fixture(params=["sqlite", "postgres"])
def shared_store(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    """(kind, URL) of a new fleet on each store that processes (or hosts) can share."""
    kind = str(request.param)
    if kind == "postgres":
        return kind, str(request.getfixturevalue("postgres_url"))
    return kind, make_url(kind, tmp_path)


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


#: The tiers that start real processes: tests/processes races and kills them; tests/faces
#: drives the installed ``shoal`` script and MCP server through their real clients, a
#: process (or a server) per call. Each of their tests is marked ``slow``.
PROCESS_TIERS = (Path(__file__).parent / "processes", Path(__file__).parent / "faces")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test of the process tiers ``slow``: `make test-fast` (``-m "not slow"``)
    runs the in-process tiers -- unit, contract, stores -- in about a minute, and leaves the
    process tiers to `make test`, the README's test command."""
    for item in items:
        if any(tier in item.path.parents for tier in PROCESS_TIERS):
            item.add_marker(pytest.mark.slow)
