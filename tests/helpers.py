"""Small helpers the tests share."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from shoal import Agent, Claim, Fleet, Lease, Task


def one(claim: Claim) -> tuple[Task, Lease]:
    """The single task and lease of a claim that must have found exactly one."""
    assert len(claim.leases) == 1, f"expected one task, got {claim}"
    return claim.tasks[0], claim.leases[0]


def claim_all(fleet: Fleet, agent: str) -> list[str]:
    """Claim and complete tasks one by one until none is left; their titles in order."""
    titles = []
    while claim := fleet.claim(agent):
        task, lease = one(claim)
        titles.append(task.title)
        fleet.complete(lease)
    return titles


def ids(tasks: Iterable[Task]) -> list[int]:
    return [t.id for t in tasks]


def post_many(fleet: Fleet, count: int, **kwargs: Any) -> list[int]:
    """``count`` tasks ``task 0``, ``task 1``... with the same ``post`` keywords; their ids.

    Posted as one batch, one write: on the git store each write is a commit and a push, and
    set-ups that posted their tasks one by one spent most of their git processes on it. In
    the pool and in a queue they are sent to, a batch keeps the listed order, as posts one
    by one do; only children of a held task (``parent``) would come in the other order, so
    those are still posted one at a time."""
    if "parent" in kwargs:
        return [fleet.post(f"task {i}", **kwargs).id for i in range(count)]
    return fleet.post_many([{"title": f"task {i}", **kwargs} for i in range(count)])


def snapshot(fleet: Fleet) -> dict[str, Any]:
    """Everything observable about a fleet, to prove a refused call changed nothing. Each
    task is read whole (a listing leaves payloads and results out)."""
    return {
        "tasks": [fleet.get(t.id).to_dict() for t in fleet.tasks(limit=10_000)],
        "agents": [a.to_dict() for a in fleet.agents()],
        "events": len(fleet.events(limit=1_000_000)),
        "settings": fleet.settings().to_dict(),
    }


def kinds(fleet: Fleet, since: int = 0, **filters: Any) -> list[str]:
    return [e.kind for e in fleet.events(since, **filters)]


def last_event_id(fleet: Fleet) -> int:
    found = fleet.events(0, limit=1_000_000)
    return found[-1].id if found else 0


def wait_until(condition: Callable[[], Any], what: str, timeout: float = 20.0) -> Any:
    """Poll ``condition`` (about something another process does) until it returns something
    true, and return that; fail after ``timeout`` seconds. Only for real processes: a
    fleet's own time is driven with the manual clock."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def damage_tasks_table(db: Path) -> None:
    """Overwrite the first bytes of a SQLite fleet's tasks table root page (past offset
    8192, so the header still reads), as a bad disk or a stray write would."""
    raw = sqlite3.connect(db)
    root = raw.execute("SELECT rootpage FROM sqlite_master WHERE name = 'tasks'").fetchone()[0]
    page = raw.execute("PRAGMA page_size").fetchone()[0]
    raw.close()
    assert (root - 1) * page >= 8192
    with open(db, "r+b") as handle:
        handle.seek((root - 1) * page)
        handle.write(b"\xff\xff\xff\xff")


#: Runs a command as another local user (nobody), the way a second person on the machine
#: would: ``setpriv`` needs root, which CI is.
ANOTHER_USER = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def as_another_user(
    *argv: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``argv`` run as another local user (uid 65534); skips the test where this process
    cannot switch users (not root, or no ``setpriv``)."""
    import pytest

    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("playing a second local user needs root and setpriv (CI has both)")
    return subprocess.run(
        [*ANOTHER_USER, *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd="/",
    )


def plant_agent(fleet: Fleet, agent_id: str, **fields: Any) -> Agent:
    """A live agent as an older shoal left it, under an id new registrations may not take
    (with a ``/``, or longer than 64 characters): its row written straight into the store,
    as the registration of that version wrote it."""
    now = fleet.clock.now()
    agent = Agent(agent_id, last_seen=now, registered_at=now, idle_since=now, **fields)
    with fleet._store.write(exclusive=True) as tx:
        tx.save_agent(agent)
    return fleet.agent(agent_id)
