"""A worker whose store goes away while it settles a task keeps the task's outcome: it
tries again every second while its lease may last, and the task ends done, once, with the
result the command printed. (Giving up at the first ``StoreUnavailable`` threw the work
away and left the task held -- renewed by the worker's own heartbeats -- by nobody.)

A real `shoal worker` process, a real PostgreSQL server stopped and started again under it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from shoal import Fleet, TaskState
from tests import pg
from tests.helpers import wait_until
from tests.workers import Proc, running

pytestmark = pytest.mark.slow


@pytest.fixture
def cluster() -> Iterator[pg.PrivateCluster]:
    try:
        started = pg.PrivateCluster()
    except RuntimeError as exc:
        if pg.required():
            pytest.fail(f"cannot start a private PostgreSQL cluster: {exc}")
        pytest.skip(f"cannot start a private PostgreSQL cluster: {exc}")
    try:
        yield started
    finally:
        started.remove()


def settle_trouble(worker: Proc, task_id: int) -> dict[str, Any] | None:
    """The worker's first word of trouble settling ``task_id``: tried again, or an error."""
    for line in worker.events():
        if line.get("task") == task_id and line.get("kind") in ("store-unavailable", "error"):
            return line
    return None


def test_a_worker_settles_its_task_once_the_store_is_back(
    cluster: pg.PrivateCluster, tmp_path: Path
) -> None:
    url = pg.fleet_url(cluster.url)
    with Fleet.init(url) as setup:
        task = setup.post("write the report")
    gate = tmp_path / "gate"
    os.mkfifo(gate)  # the command blocks reading it until the test lets it finish
    with running(url, "worker", "--agent", "ada", "--json", "--", "cat", str(gate)) as worker:
        worker.wait_for("claimed", task=task.id)
        cluster.stop("fast")  # the store vanishes while the task runs
        with gate.open("w") as feed:
            feed.write("the report")  # the command ends: the worker must settle now
        # A call finds the server gone at once, or after the pool's 30 s wait for a connection.
        first = wait_until(lambda: settle_trouble(worker, task.id), "a failed settle", 45)
        assert first["kind"] == "store-unavailable", first  # tried again, not given up
        cluster.start()
        done = worker.wait_for("done", "the task settled once the store is back", 60,
                               task=task.id)  # fmt: skip
        assert not done["already"]
        assert not worker.events("error"), worker.events("error")
    with Fleet.open(url) as after:
        settled = after.get(task.id)
        assert settled.state is TaskState.DONE
        assert settled.result == "the report"
        kinds = [e.kind for e in after.events(task=task.id)]
        assert kinds == ["posted", "claimed", "completed"]
