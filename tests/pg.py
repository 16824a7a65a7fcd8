"""PostgreSQL for the tests: the server named by ``SHOAL_TEST_POSTGRES_URL``, or a private
throwaway cluster made with this machine's ``initdb``/``pg_ctl`` on a unix socket in a
temporary folder, removed afterwards.

When neither is possible the PostgreSQL tests skip and say why -- unless
``SHOAL_REQUIRE_POSTGRES=1`` (set by ``.ci/run``, where PostgreSQL is always present), which
turns that skip into a failure.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psycopg

from shoal.stores.postgres import postgres_target

ENV_URL = "SHOAL_TEST_POSTGRES_URL"
ENV_REQUIRE = "SHOAL_REQUIRE_POSTGRES"


def required() -> bool:
    return os.environ.get(ENV_REQUIRE, "").strip().lower() in ("1", "true", "yes")


def find_binary(name: str) -> str | None:
    """``name`` on PATH, else in the usual Debian/Ubuntu place for the newest version."""
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return candidates[-1] if candidates else None


class PrivateCluster:
    """A PostgreSQL cluster of its own: started, restarted or killed by a test, then removed.

    PostgreSQL refuses to run as root; as root the cluster runs as the ``postgres`` user."""

    def __init__(self, port: int = 5432) -> None:
        initdb, pg_ctl = find_binary("initdb"), find_binary("pg_ctl")
        if initdb is None or pg_ctl is None:
            raise RuntimeError("no initdb/pg_ctl on this machine (install PostgreSQL)")
        self.initdb, self.pg_ctl = initdb, pg_ctl
        self.folder = Path(tempfile.mkdtemp(prefix="shoal-pg-"))
        self.data = self.folder / "data"
        self.port = port  # names the socket in the cluster's own folder (no TCP)
        self._as: list[str] = []
        if os.geteuid() == 0:
            runuser = shutil.which("runuser")
            if runuser is None:
                raise RuntimeError("running as root without runuser to drop to 'postgres'")
            shutil.chown(self.folder, user="postgres")
            self._as = [runuser, "-u", "postgres", "--"]
        self._run(self.initdb, "-D", str(self.data), "-A", "trust", "-U", "postgres",
                  "--no-sync", "-E", "UTF8")  # fmt: skip
        self.start()

    @property
    def url(self) -> str:
        return f"postgresql://postgres@{quote(str(self.folder), safe='')}:{self.port}/postgres"

    def _run(self, *argv: str) -> None:
        done = subprocess.run(
            [*self._as, *argv], capture_output=True, text=True, timeout=120, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"{argv[0]} failed: {done.stderr.strip() or done.stdout.strip()}")

    def start(self) -> None:
        options = (
            f"-k {self.folder} -c listen_addresses='' -p {self.port} -c fsync=off "
            "-c max_connections=200 -c shared_buffers=64MB"
        )
        self._run(self.pg_ctl, "-D", str(self.data), "-o", options, "-l",
                  str(self.folder / "log"), "-w", "-t", "60", "start")  # fmt: skip

    def stop(self, mode: str = "fast") -> None:
        self._run(self.pg_ctl, "-D", str(self.data), "-m", mode, "-w", "stop")

    def restart(self, mode: str = "fast") -> None:
        self.stop(mode)
        self.start()

    def remove(self) -> None:
        with contextlib.suppress(RuntimeError):
            self.stop("immediate")
        shutil.rmtree(self.folder, ignore_errors=True)


@contextlib.contextmanager
def server() -> Iterator[str]:
    """The URL of a PostgreSQL database for tests; raises RuntimeError (with the reason)
    when there is none."""
    url = os.environ.get(ENV_URL, "").strip()
    if url:
        with psycopg.connect(url, connect_timeout=5):
            pass
        yield url
        return
    cluster = PrivateCluster()
    try:
        yield cluster.url
    finally:
        cluster.remove()


def fleet_url(server_url: str, schema: str | None = None) -> str:
    """A fleet of its own on ``server_url``: a fresh schema."""
    schema = schema or f"t_{uuid.uuid4().hex[:16]}"
    joiner = "&" if "?" in server_url else "?"
    return f"{server_url}{joiner}schema={schema}"


def schema_conn(fleet_url: str) -> psycopg.Connection[tuple[Any, ...]]:
    """A plain connection into a test fleet's schema (parsed as the store parses it)."""
    conninfo, schema, _ = postgres_target(fleet_url)
    return psycopg.connect(conninfo, autocommit=True, options=f"-c search_path={schema}")


def drop_fleet(fleet_url: str) -> None:
    """Remove a test fleet's schema (and its tables)."""
    schema = postgres_target(fleet_url)[1]
    with schema_conn(fleet_url) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def empty_fleet(fleet_url: str) -> bool:
    """Make a used test fleet as a new one is -- every table but the migrations' emptied,
    every sequence restarted -- for another test to take; False (and nothing promised)
    when it cannot be done in a moment: a connection still holds a lock, or the schema is
    not at this shoal's version (a test changed it)."""
    from shoal.stores._sql import migration_count

    schema = postgres_target(fleet_url)[1]
    try:
        with schema_conn(fleet_url) as conn:
            conn.execute("SET lock_timeout = '2s'")
            version = conn.execute("SELECT max(version) FROM schema_migrations").fetchone()
            if version is None or version[0] != migration_count("postgres"):
                return False
            listed = conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = %s "
                "AND tablename <> 'schema_migrations'",
                (schema,),
            )
            tables = [row[0] for row in listed]
            listed = conn.execute(
                "SELECT sequencename FROM pg_sequences WHERE schemaname = %s", (schema,)
            )
            sequences = [row[0] for row in listed]
            with conn.transaction():
                names = ", ".join(f'"{schema}"."{t}"' for t in tables)
                conn.execute(f"TRUNCATE {names} RESTART IDENTITY CASCADE")
                for sequence in sequences:
                    conn.execute(f'ALTER SEQUENCE "{schema}"."{sequence}" RESTART')
    except psycopg.Error:
        return False
    return True
