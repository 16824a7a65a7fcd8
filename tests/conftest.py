"""Shared fixtures. The contract suite runs every test on every store: add a store by adding
its name to STORES and a branch to ``store_url``."""

from __future__ import annotations

import contextlib
import random
import shutil
import subprocess
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from shoal import Fleet, ManualClock
from shoal.stores._gitcache import cache_root, clone_path
from shoal.stores._gitguard import split_credentials
from shoal.stores.git import parse_git_url
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
    """A new bare repository in ``folder`` to hold a git store, and its store URL.

    The board does not run ``git gc --auto`` after each push it takes (``receive.autogc``
    off, written straight into its config rather than by one more ``git config``): that
    is the remote's own housekeeping, which no test looks at, and it was one git process
    of the dozen each write of the git store costs."""
    board = folder / "board.git"
    subprocess.run(["git", "init", "--quiet", "--bare", str(board)], check=True)
    with open(board / "config", "a", encoding="utf-8") as config:
        config.write("[receive]\n\tautogc = false\n")
    return f"git+file://{board}"


def private_clone(url: str) -> Path:
    """Where the git store keeps its private clone of the board at ``url`` (this session's
    ``SHOAL_GIT_CACHE``), as the store itself names it."""
    remote, branch = parse_git_url(url)
    return clone_path(split_credentials(remote).url, branch, cache_root())


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


@pytest.fixture(scope="session")
def postgres_spares(postgres_server: str) -> Iterator[list[str]]:
    """Fleets of this worker's tests, emptied after use, for the next test to take: making
    a schema and running every migration cost each PostgreSQL test of the contract suite
    more than the test itself. Dropped at the end of the session."""
    spares: list[str] = []
    yield spares
    for url in spares:
        pg.drop_fleet(url)


@pytest.fixture
def recycled_postgres_url(postgres_spares: list[str], postgres_server: str) -> Iterator[str]:
    """A fleet (a schema) on the session's PostgreSQL as a new one is: migrated, every table
    empty, every sequence at its start -- a spare emptied after an earlier test, or a new
    schema. Emptied again afterwards (dropped if it cannot be)."""
    url = postgres_spares.pop() if postgres_spares else pg.fleet_url(postgres_server)
    yield url
    if pg.empty_fleet(url):
        postgres_spares.append(url)
    else:
        pg.drop_fleet(url)


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new SQLite fleet's file, made once per worker: a test's fleet starts as a copy of
    it, instead of creating the schema again."""
    path = tmp_path_factory.mktemp("sqlite-template") / "fleet.db"
    Fleet.open(f"sqlite://{path}", create=True).close()
    return path


@dataclass(frozen=True)
class GitTemplate:
    """A new git store made once per worker: its board, and the private clone the store
    made of it (already holding the board's first commit)."""

    board: Path
    clone: Path

    def copy(self, folder: Path) -> str:
        """A copy of the board in ``folder``, and of the private clone where the store
        looks for the copy's: its store URL. Opening it then checks the clone and fetches
        nothing new, instead of making the clone (five git processes) and fetching the
        board's whole history into it."""
        board = folder / "board.git"
        shutil.copytree(self.board, board, symlinks=True)  # mode bits too: the clone is private
        url = f"git+file://{board}"
        clone = private_clone(url)
        shutil.copytree(self.clone, clone, symlinks=True)
        config = clone / "config"
        text = config.read_text(encoding="utf-8")
        assert f"file://{self.board}\n" in text, "the template clone tracks another board"
        config.write_text(text.replace(f"file://{self.board}\n", f"file://{board}\n"))
        return url


@pytest.fixture(scope="session")
def git_template(tmp_path_factory: pytest.TempPathFactory) -> GitTemplate:
    """A new git store's board and private clone, made once per worker, for the same."""
    url = git_board(tmp_path_factory.mktemp("git-template"))
    Fleet.open(url, create=True).close()
    return GitTemplate(Path(url.removeprefix("git+file://")), private_clone(url))


@pytest.fixture
def store_url(store_kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """A new, empty fleet on the store under test (the contract suite's fleets)."""
    return made_fleet_url(store_kind, tmp_path, request)


def made_fleet_url(store_kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """A new, empty fleet of ``store_kind``, already made: a copy of the worker's SQLite
    fleet or git board, a PostgreSQL schema emptied after an earlier test; its URL."""
    if store_kind == "postgres":
        return str(request.getfixturevalue("recycled_postgres_url"))
    if store_kind == "sqlite":
        sqlite_file: Path = request.getfixturevalue("sqlite_template")
        shutil.copy2(sqlite_file, tmp_path / "fleet.db")  # mode bits too: the file is private
    if store_kind == "git":  # a copy of a board made once: its first commit already pushed
        template: GitTemplate = request.getfixturevalue("git_template")
        return template.copy(tmp_path)
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


#: The order the tiers run in, the longest tests first: pytest-xdist hands each worker the
#: next test as it frees (`make test`'s ``--dist load --maxschedchunk 2``), so a race of
#: sixteen processes that started last would be the whole run's tail; the contract suite's
#: thousands of short tests come last and even the workers out. A tier not named runs
#: after these.
TIER_ORDER = ("processes", "chaos", "fuzz", "web/browser", "faces", "web", "unit", "stores")


def _tier(item: pytest.Item) -> int:
    here = item.path.relative_to(Path(__file__).parent).as_posix()
    for place, tier in enumerate(TIER_ORDER):
        if here.startswith(f"{tier}/"):
            return place
    return len(TIER_ORDER)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test of the process tiers ``slow``, and every test run on the git store
    (the contract suite's, and the git store's own in tests/stores/test_git*.py): each git
    store write is a commit and a push by real ``git`` processes, so the contract
    suite on git alone took longer than every other in-process test together. `make
    test-fast` (``-m "not slow"``) runs the in-process tiers -- unit, contract, stores -- on
    the memory, SQLite and PostgreSQL stores in under a minute; `make test`, the README's
    test command, runs everything, the contract suite on every store. Then put the tiers
    in ``TIER_ORDER`` (a stable sort: a module's tests stay together, in their order)."""
    for item in items:
        callspec = getattr(item, "callspec", None)
        on_git = callspec is not None and "git" in (
            callspec.params.get("store_kind"),
            callspec.params.get("kind"),
        )
        on_git = on_git or item.path.name.startswith("test_git")  # tests/stores/test_git*.py
        if on_git or any(tier in item.path.parents for tier in PROCESS_TIERS):
            item.add_marker(pytest.mark.slow)
    items.sort(key=_tier)
