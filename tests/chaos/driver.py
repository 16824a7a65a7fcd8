"""The chaos driver: a real fleet of worker processes under fire, then the audit.

A run posts tasks (with idempotency keys, so a post cut off by a fault is simply posted
again) to 16 worker processes -- most through the Python API (``tests/chaos/agent.py``),
some as ``shoal worker`` running a command -- and a ``shoal monitor``, while, at random
moments from a seeded generator, it:

* ``kill -9``s a worker (started again, under the same agent id or a new one) or the
  monitor (started again);
* freezes a worker with SIGSTOP for longer than the lease TTL, so its leases expire and
  others take its tasks, then thaws it: its late calls must be fenced off;
* on PostgreSQL, restarts the private cluster with ``pg_ctl restart -m immediate`` (a crash:
  every connection cut, recovery from the WAL);
* on SQLite, fills the small tmpfs the fleet lives on for a moment (disk full), when this
  machine lets the run mount one; otherwise that fault is skipped, and the run says why.

Then it stops the faults, lets the fleet finish every task, stops the processes, and audits
the store (``tests/chaos/audit.py``): every task done exactly once or recoverable, the
claim identity, and the event log consistent with the states.

``make chaos`` runs it (SEED, SOAK, STORE); ``python -m tests.chaos.driver --help``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shoal import Fleet, ShoalError
from shoal.validation import parse_duration
from tests import pg
from tests.chaos.audit import Audit, audit_fleet
from tests.workers import SHOAL

ROOT = Path(__file__).resolve().parents[2]  # the checkout: the agents import tests.chaos
LEASE_TTL = 3.0  # short, so frozen and killed workers' leases expire within the run
CLI_WORKERS = 4  # of the fleet, these run `shoal worker`; the rest the Python API
BACKLOG = 60  # the driver tops the fleet up to this many unfinished tasks
BATCH = 20
#: The tmpfs's size in MB per second of soak: the fleet's files grow by about 1.5 MB/s
#: under this load (the tmpfs is filled with ballast, in memory, only for a moment).
TMPFS_MB_PER_SECOND = 4


@dataclass
class Totals:
    """What a run did and what the audit found."""

    store: str
    seed: int
    seconds: float = 0.0
    posted: int = 0
    kills: int = 0
    monitor_kills: int = 0
    freezes: int = 0
    restarts: int = 0
    server_restarts: int = 0
    disk_full: int = 0
    disk_used_mb: float = 0.0
    store_errors: int = 0
    exits: int = 0  # processes that exited by themselves during the run, started again
    skipped: list[str] = field(default_factory=list)
    audit: Audit | None = None

    def to_dict(self) -> dict[str, Any]:
        found = self.audit.totals() if self.audit else {}
        return {
            "store": self.store,
            "seed": self.seed,
            "seconds": round(self.seconds, 1),
            "posted": self.posted,
            "done": found.get("done", 0),
            "kills": self.kills,
            "monitor_kills": self.monitor_kills,
            "freezes": self.freezes,
            "restarts": self.restarts,
            "server_restarts": self.server_restarts,
            "disk_full": self.disk_full,
            "disk_used_mb": self.disk_used_mb,
            "store_errors": self.store_errors,
            "exits": self.exits,
            **{k: v for k, v in found.items() if k not in ("posted", "done")},
            "skipped": self.skipped,
        }

    def line(self) -> str:
        d = self.to_dict()
        return (
            f"{d['store']} seed {d['seed']}, {d['seconds']}s: posted {d['posted']}, "
            f"done {d['done']}, kills {d['kills']} (+{d['monitor_kills']} monitor), "
            f"freezes {d['freezes']}, expiries {d.get('expiries', 0)}, "
            f"restarts {d['restarts']}, server restarts {d['server_restarts']}, "
            f"disk full {d['disk_full']}, claims {d.get('claims', 0)}, "
            f"failures {d.get('failures', 0)}, releases {d.get('releases', 0)}, "
            f"duplicates {d.get('duplicates', 0)}, lost {d.get('lost', 0)}, "
            f"inconsistent {d.get('inconsistent', 0)}"
        )


class Disk:
    """A small tmpfs for the SQLite fleet, to fill now and then; ``None`` when mounting is
    not allowed here (the reason is kept)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.ballast = folder / "ballast"

    @classmethod
    def mount(cls, folder: Path, size_mb: int) -> tuple[Disk | None, str]:
        folder.mkdir(parents=True, exist_ok=True)
        try:
            done = subprocess.run(
                ["mount", "-t", "tmpfs", "-o", f"size={size_mb}m,mode=0700", "tmpfs", folder],
                capture_output=True, text=True, timeout=30, check=False,
            )  # fmt: skip
        except OSError as exc:
            return None, f"disk full skipped: cannot run mount ({exc})"
        if done.returncode != 0:
            why = done.stderr.strip() or f"exit {done.returncode}"
            return None, f"disk full skipped: mounting a tmpfs is not permitted here ({why})"
        return cls(folder), ""

    def fill(self) -> None:
        """Take every free block (the fleet's next write that needs one fails)."""
        stat = os.statvfs(self.folder)
        with self.ballast.open("wb") as f, contextlib.suppress(OSError):
            chunk = b"\0" * (1 << 20)
            for _ in range(stat.f_bavail * stat.f_frsize // len(chunk) + 2):
                f.write(chunk)
            f.flush()
            os.fsync(f.fileno())

    def used_mb(self) -> float:
        """What the fleet's files take on the tmpfs now (its WAL grows under load)."""
        stat = os.statvfs(self.folder)
        return round((stat.f_blocks - stat.f_bfree) * stat.f_frsize / 2**20, 1)

    def free(self) -> None:
        self.ballast.unlink(missing_ok=True)

    def unmount(self) -> None:
        subprocess.run(["umount", "-l", self.folder], capture_output=True, check=False)


class Run:
    """One chaos run on one store; see the module docstring."""

    def __init__(
        self, store: str, url: str, seed: int, folder: Path, workers: int,
        cluster: pg.PrivateCluster | None = None, disk: Disk | None = None,
    ) -> None:  # fmt: skip
        self.url, self.folder, self.workers = url, folder, workers
        self.cluster, self.disk = cluster, disk
        self.rng = random.Random(seed)
        self.totals = Totals(store, seed)
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.names: dict[str, str] = {}  # slot -> agent id now running in it
        self.frozen: dict[str, subprocess.Popen[bytes]] = {}  # slot -> its stopped process
        self.keys: list[str] = []  # posts acknowledged
        self.todo: list[str] | None = None  # fault kinds not yet made
        self.unfinished: list[str] = []  # tasks left undone at the end, with their events
        self.pause = threading.Event()  # never set: waits that a stop does not cut short
        self.fleet = Fleet.init(url)
        self.fleet.configure(
            lease_ttl=LEASE_TTL, heartbeat_timeout=LEASE_TTL * 2, max_agents=10_000,
            max_attempts=10_000, failure_streak=0, retry_delay=0, retry_delay_max=0,
        )  # fmt: skip

    # ------------------------------------------------------------------ processes

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SHOAL_")}
        env["SHOAL_STORE"] = self.url
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
        return env

    def _spawn(self, slot: str) -> None:
        """Start the process of ``slot``: a worker (under its current agent id) or the
        monitor."""
        log = (self.folder / f"{slot}.log").open("ab")
        if slot == "monitor":
            argv = [*SHOAL, "monitor", "--interval", "1s", "--json"]
        elif int(slot[1:]) < CLI_WORKERS:
            argv = [*SHOAL, "worker", "--agent", self.names[slot], "--max-concurrent", "2",
                    "--drain", "5", "--json", "--", "printf", "done"]  # fmt: skip
        else:
            seed = str(self.rng.randrange(1 << 30))
            argv = [sys.executable, "-m", "tests.chaos.agent", self.url, self.names[slot], seed]
        self.procs[slot] = subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, env=self._env(), start_new_session=True
        )
        log.close()

    def start(self) -> None:
        for i in range(self.workers):
            self.names[f"w{i}"] = f"w{i}"
            self._spawn(f"w{i}")
        self._spawn("monitor")

    def _kill(self, slot: str) -> None:
        proc = self.procs[slot]
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
        self.frozen.pop(slot, None)

    def _thaw(self, slot: str, proc: subprocess.Popen[bytes]) -> None:
        """Let a frozen process go on (unless it was killed and replaced meanwhile)."""
        if self.frozen.get(slot) is proc:
            del self.frozen[slot]
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGCONT)

    def _thaw_all(self) -> None:
        for slot, proc in list(self.frozen.items()):
            self._thaw(slot, proc)

    def stop(self) -> None:
        """SIGTERM every process (workers drain and leave), then wait; kill what hangs."""
        self._thaw_all()
        for proc in self.procs.values():
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
        for slot, proc in self.procs.items():
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                print(f"  {slot} did not stop on SIGTERM; killed", file=sys.stderr)
                self._kill(slot)

    # ------------------------------------------------------------------ work and faults

    def top_up(self) -> None:
        """Post tasks while fewer than BACKLOG are unfinished; a failed post is retried by
        its key the next time round, so an acknowledged post is never lost nor doubled."""
        try:
            counts = self.fleet.status().counts
            unfinished = sum(counts.get(s, 0) for s in ("pending", "claimed", "blocked"))
            if unfinished >= BACKLOG:
                return
            base = len(self.keys)
            batch = [f"chaos-{base + i}" for i in range(BATCH)]
            body = "x" * self.rng.randrange(0, 1000)  # grows the file: disk full bites
            self.fleet.post_many([{"title": key, "key": key, "body": body} for key in batch])
        except ShoalError:
            self.totals.store_errors += 1
            return
        self.keys.extend(batch)

    def fault(self) -> None:
        """One fault, chosen at random among those this store and machine allow."""
        choices = ["kill"] * 4 + ["freeze"] * 2 + ["monitor"]
        if self.cluster is not None:
            choices.append("server")
        if self.disk is not None:
            choices.append("disk")
        if self.todo is None:  # each kind once first, in a random order, then at random
            self.todo = sorted(set(choices))
            self.rng.shuffle(self.todo)
        kind = self.todo.pop() if self.todo else self.rng.choice(choices)
        slot = f"w{self.rng.randrange(self.workers)}"
        if kind == "kill":
            slot = self._a_holder(slot)  # a holder: its lease expires or its heir fails it
            self._kill(slot)
            self.totals.kills += 1
            if self.totals.kills == 1 or self.rng.random() < 0.5:  # a new agent: its
                # predecessor's leases must expire (the first time always)
                self.names[slot] = f"{slot}-{self.totals.kills}"
            self._spawn(slot)
            self.totals.restarts += 1
        elif kind == "freeze" and slot not in self.frozen:
            self._freeze(slot)
        elif kind == "monitor":
            self._kill("monitor")
            self.totals.monitor_kills += 1
            self._spawn("monitor")
            self.totals.restarts += 1
        elif kind == "server" and self.cluster is not None:
            self.cluster.restart("immediate")
            self.totals.server_restarts += 1
        elif kind == "disk" and self.disk is not None:
            self.totals.disk_used_mb = max(self.totals.disk_used_mb, self.disk.used_mb())
            self.disk.fill()
            self._work_for(self.rng.uniform(0.5, 1.5))
            self.disk.free()
            self.totals.disk_full += 1

    def _freeze(self, fallback: str) -> None:
        """SIGSTOP a worker that holds a lease, for longer than the lease lasts: stopped
        with it, it cannot renew it, so the lease expires -- unless its completion was
        already on its way. (One that let its task go just before the signal is thawed at
        once and another tried; the fifth stays frozen, holding or not.)"""
        for attempt in range(5):
            slot = self._a_holder(fallback)
            proc = self.procs[slot]
            os.kill(proc.pid, signal.SIGSTOP)
            self.frozen[slot] = proc
            # Thawed by a timer, not by this loop: a frozen process may hold the store's
            # lock, and this loop may be waiting on it.
            thaw = threading.Timer(LEASE_TTL * 1.5, self._thaw, args=(slot, proc))
            thaw.daemon = True
            thaw.start()
            if attempt == 4 or slot in self._holders(frozen=True):
                self.totals.freezes += 1
                return
            self._thaw(slot, proc)

    def _a_holder(self, fallback: str) -> str:
        """A worker holding a task, waiting up to a second for one (while another frozen
        worker holds the SQLite writer's turn, nobody claims); else ``fallback``."""
        for _ in range(20):
            slots = self._holders()
            if slots:
                return self.rng.choice(slots)
            self.pause.wait(0.05)
        return fallback

    def _holders(self, frozen: bool = False) -> list[str]:
        """The slots of the workers that hold a task now (the frozen ones too, or not)."""
        with contextlib.suppress(ShoalError):
            holders = {t.agent for t in self.fleet.tasks(state="claimed", limit=1000)}
            slots = [s for s, name in sorted(self.names.items()) if name in holders]
            return [s for s in slots if frozen or s not in self.frozen]
        return []

    def _work_for(self, seconds: float) -> None:
        """Keep posting for ``seconds`` of real time, and start again any process that
        exited by itself (a `shoal worker` that could not register while the store was
        away exits 4, "try again")."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.top_up()
            for slot, proc in list(self.procs.items()):
                if proc.poll() is not None:
                    self.totals.exits += 1
                    self._spawn(slot)
            self.pause.wait(0.1)

    def soak(self, seconds: float, every: float) -> None:
        """Post and fault for ``seconds``: a fault every ``every`` seconds on average. A
        soak goes on past ``seconds`` (up to three times as long) until it has made each
        kind of fault once: on a loaded machine a restart takes seconds, and a short soak
        would otherwise end before its last kinds came up."""
        end = time.monotonic() + seconds
        overtime = time.monotonic() + 3 * seconds
        while time.monotonic() < end or (self.todo and time.monotonic() < overtime):
            self._work_for(min(self.rng.expovariate(1 / every), max(0.0, end - time.monotonic())))
            if time.monotonic() < end or self.todo:
                self.fault()

    def finish(self, limit: float) -> bool:
        """No more faults or posts: wait (up to ``limit`` s) until every task is done (the
        frozen thaw on their timers)."""
        end = time.monotonic() + limit
        while time.monotonic() < end:
            with contextlib.suppress(ShoalError):
                status = self.fleet.status()
                counts = status.counts
                # A lease past its end is not counted as claimed (it is shown as expired)
                # but its task is not done: it waits for the claim that takes it back.
                if not status.expired and not any(
                    counts.get(s, 0) for s in ("pending", "claimed", "blocked")
                ):
                    return True
            self.pause.wait(0.2)
        return False

    def _unfinished(self) -> list[str]:
        """What is left undone, with its history: the first thing to read when a run
        does not finish."""
        found = []
        for state in ("pending", "claimed", "blocked"):
            for task in self.fleet.tasks(state=state, limit=20):
                history = [f"{e.id}:{e.kind}:{e.agent}:{dict(e.data or {})}"
                           for e in self.fleet.events(task=task.id)]  # fmt: skip
                brief = {k: v for k, v in task.to_dict().items() if k != "body"}
                found.append(f"{brief} {history}")
        return found

    def close(self) -> Audit:
        with contextlib.suppress(ShoalError):
            self.unfinished = self._unfinished()
        self.stop()
        found = audit_fleet(self.fleet, self.keys)
        self.totals.posted = len(self.keys)
        self.totals.audit = found
        self.fleet.close()
        return found


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


Where = tuple[str, pg.PrivateCluster | None, Disk | None, str]


@contextlib.contextmanager
def fleet_for(store: str, folder: Path, seconds: float) -> Iterator[Where]:
    """(URL, cluster, disk, why a fault is skipped) of a new fleet on ``store``."""
    if store == "postgres":
        cluster = pg.PrivateCluster(port=free_port())
        try:
            yield pg.fleet_url(cluster.url), cluster, None, ""
        finally:
            cluster.remove()
        return
    disk, why = Disk.mount(folder / "disk", max(256, int(seconds * TMPFS_MB_PER_SECOND)))
    try:
        yield f"sqlite://{folder / 'disk' / 'fleet.db'}", None, disk, why
    finally:
        if disk is not None:
            disk.unmount()


def run(store: str, seed: int, seconds: float, workers: int = 16, every: float = 1.0,
        drain: float = 120.0, folder: Path | None = None) -> Totals:  # fmt: skip
    """One chaos run; returns its totals (``totals.audit`` says what was found)."""
    own = folder is None
    base = Path(tempfile.mkdtemp(prefix=f"shoal-chaos-{store}-")) if folder is None else folder
    began = time.monotonic()
    try:
        with fleet_for(store, base, seconds) as (url, cluster, disk, why):
            chaos = Run(store, url, seed, base, workers, cluster, disk)
            if why:
                chaos.totals.skipped.append(why)
            try:
                chaos.start()
                chaos.soak(seconds, every)
                drained = chaos.finish(drain)
            finally:
                found = chaos.close()
            if not drained:
                found.lost.append(f"the fleet did not finish its tasks within {drain:g}s: "
                                  + ", ".join(chaos.unfinished))  # fmt: skip
        chaos.totals.seconds = time.monotonic() - began
        return chaos.totals
    finally:
        if own:
            shutil.rmtree(base, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--soak", default="60s", help="how long to post and fault (e.g. 10m)")
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--every", type=float, default=1.0, help="mean seconds between faults")
    parser.add_argument("--json", action="store_true", help="print the totals as JSON")
    parser.add_argument("--keep", type=Path, help="run in this folder and keep its logs")
    args = parser.parse_args(argv)
    logging.getLogger("psycopg.pool").setLevel(logging.ERROR)  # a restart's broken conns
    seconds = parse_duration(args.soak, "--soak")
    stores = ["sqlite", "postgres"] if args.store == "both" else [args.store]
    failed = False
    for store in stores:
        folder = None
        if args.keep is not None:
            folder = args.keep / store
            folder.mkdir(parents=True, exist_ok=True)
        totals = run(store, args.seed, seconds, args.workers, args.every, folder=folder)
        assert totals.audit is not None
        print(json.dumps(totals.to_dict()) if args.json else totals.line(), flush=True)
        for why in totals.skipped:
            print(f"  {why}")
        for problem in totals.audit.problems()[:50]:
            print(f"  PROBLEM {problem}")
            failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
