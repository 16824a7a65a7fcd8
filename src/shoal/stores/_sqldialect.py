"""What one SQL dialect says about itself: the part of ``SqlStore`` that differs between
SQLite and PostgreSQL (``_sqlstore``'s docstring lists what that is).

It stands apart from the store so that the store's transactions (``_sqltxbase``) can name
the dialect they run on without importing the store back: the store builds on its
transactions, never the reverse.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, ClassVar

from shoal.errors import StoreError
from shoal.stores.base import Capabilities

if TYPE_CHECKING:  # the stores' loggers load logging when they first log
    import logging

__all__ = ["Dialect"]


class Dialect:
    """What one SQL dialect says about itself; everything else is ``SqlStore``'s.

    The methods below that raise NotImplementedError are the ones each dialect writes."""

    #: The folder of its SQL (sql/<name>/queries.sql and migrations).
    name: ClassVar[str]
    #: Its statements for read-write and for read-only transactions (see ``_sql``).
    queries: ClassVar[dict[str, str]]
    read_queries: ClassVar[dict[str, str]]
    #: Writers run side by side, so the statements that exist for that are run.
    side_by_side: ClassVar[bool]
    #: Lists go to the driver as one JSON array (else as a list: an array).
    json_lists: ClassVar[bool]
    #: The pool steps run once per skill set and are merged here (SQLite: so that each
    #: reads one range of its partial index), else once for the list (PostgreSQL: LATERAL).
    pool_per_skillset: ClassVar[bool]
    #: Triggers keep the finished counts (done, dead, cancelled); else the store moves them
    #: itself, once per transaction (SqlTx, "finished counts").
    counts_by_trigger: ClassVar[bool]
    #: An agent's ``heard`` (last_seen while it should be heard from: migration 8) is a
    #: column written apart, only when it changes (SQLite rewrites an index whenever an
    #: UPDATE names its column), else the database generates it from the row.
    heard_apart: ClassVar[bool]
    #: What the driver takes for "no parameters".
    no_params: ClassVar[Any]
    #: Driver errors a verb may raise that ``translate`` turns into shoal errors.
    errors: ClassVar[tuple[type[Exception], ...]] = ()
    #: How long the event log waits for a gap in its ids to fill (see events_settled).
    event_grace: ClassVar[float] = 0.0

    capabilities: Capabilities
    log: logging.Logger
    #: Where the fleet is, for messages (a path, or a URL without its password).
    where: str
    #: The schema the fleet lives in, where the database has several.
    schema: str = ""
    #: What migrations act on and how its version is called, for the log.
    target: str
    version_word: str
    #: What to do about a fleet from a newer shoal.
    upgrade_hint: ClassVar[str]
    #: Keys of the advisory locks (dialects without them leave them 0) and the wake-up channel.
    steal_key: int = 0
    migrate_key: int = 0
    fleet_key: int = 0
    channel: str = ""

    # transactions ----------------------------------------------------------------------

    def connection(self, write: bool) -> AbstractContextManager[Any]:
        """A connection for one transaction (for a write: once it is this writer's turn)."""
        raise NotImplementedError

    def begin(self, conn: Any, write: bool, exclusive: bool) -> None:
        raise NotImplementedError

    def pipeline(self, conn: Any) -> AbstractContextManager[Any]:
        """Statements whose results can wait go out together (a no-op without a server)."""
        raise NotImplementedError

    def commit(self, conn: Any) -> None:
        raise NotImplementedError

    def rollback(self, conn: Any) -> None:
        raise NotImplementedError

    def committed(self) -> None:
        """After a write committed (and its turn ended)."""

    def direct_claim(self, conn: Any, sql: str, params: Mapping[str, Any]) -> list[Any] | None:
        """Run ``direct_claim`` as a transaction of its own: its rows, or None when it
        refused (and changed nothing). Only for dialects whose capabilities say
        ``direct_claims``."""
        raise NotImplementedError

    def failed(self, conn: Any) -> None:
        """After a driver error, before it is translated."""

    def translate(self, exc: Exception) -> Exception:
        """The shoal error for a driver error (or ``exc`` itself: a bug to report)."""
        return exc

    # running statements the dialect's way ------------------------------------------------

    def run_many(
        self, conn: Any, sql: str, fixed: Mapping[str, Any], names: Sequence[str], rows: Any
    ) -> None:
        """Run ``sql`` over ``rows`` (tuples of the parameters ``names``), with ``fixed``."""
        raise NotImplementedError

    def seqs(self, rows: list[Any], count: int) -> list[int]:
        """The queue positions ``next_seqs`` returned, in increasing order."""
        raise NotImplementedError

    # opening a fleet --------------------------------------------------------------------

    def opening(self) -> AbstractContextManager[Any]:
        """A connection to check, create or migrate the schema on, one opener at a time."""
        raise NotImplementedError

    def foreign(self) -> StoreError:
        """The error for a place that holds another program's data."""
        raise NotImplementedError

    def not_upgraded(self, version: int) -> tuple[type[StoreError], str, str]:
        """A fleet that is missing or old, opened without ``create``: the error to raise,
        what the place has, and the hint."""
        raise NotImplementedError

    def before_migrating(self, conn: Any) -> None:
        """Once the schema is known to be ours or empty, before any migration runs."""

    def begin_migration(self, conn: Any) -> None:
        raise NotImplementedError

    def run_script(self, conn: Any, script: str) -> None:
        raise NotImplementedError

    def end_migration(self, conn: Any, version: int) -> None:
        """The migrations ran: mark the fleet as at ``version`` (where not recorded yet)."""

    def abort_migration(self, conn: Any, version: int) -> None:
        """A migration failed: nothing of it stays."""

    def opened(self) -> None:
        """The schema is ready: finish opening."""

    def abandon(self, exc: BaseException) -> BaseException:
        """Opening failed: clean up; the error to raise instead of ``exc`` (or ``exc``)."""
        return exc

    # waiting and closing ----------------------------------------------------------------

    def wait_for_change(self, timeout: float) -> bool:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError
