"""The claim's rules between real `shoal worker` processes, on SQLite and on PostgreSQL: an
agent that joins while another is busy with work queued behind it takes that work in its
first claim -- within a second, not at the next rebalance five minutes later; and work held
for its own domain is taken the moment the hold ends."""

from __future__ import annotations

import signal
from typing import Any

import pytest

from shoal import Fleet, TaskState
from tests.helpers import wait_until
from tests.workers import running

pytestmark = pytest.mark.slow


def test_a_new_agent_steals_a_busy_agents_queued_task_at_once(
    shared_store: tuple[str, str], record_property: Any
) -> None:
    kind, url = shared_store
    fleet = Fleet.init(url)
    # Polling alone would take 5 s at least, and the rebalance 5 minutes: only the claim's own
    # steal can be this fast.
    fleet.configure(poll_base=5, poll_max=60)
    running_task = fleet.post("long job", payload={"s": 60})
    with running(url, "worker", "--agent", "alpha", "--json", "--",
                 "sleep", "{payload[s]}") as alpha:  # fmt: skip
        alpha.wait_for("claimed", task=running_task.id)
        queued = fleet.post("next job", to="alpha")  # behind the long one
        assert fleet.agent("alpha").queued == 1
        with running(url, "worker", "--agent", "beta", "--json", "--", "true") as beta:
            beta.wait_for("claimed", task=queued.id, timeout=10)
            wait_until(lambda: fleet.get(queued.id).state is TaskState.DONE, "beta's work")
            beta.signal(signal.SIGTERM)
            assert beta.wait() == 0, beta.text()
        alpha.signal(signal.SIGTERM)
        alpha.wait_for("draining")
        alpha.signal(signal.SIGTERM)  # and release the long job at once
        assert alpha.wait() == 0, alpha.text()
    joined = next(e for e in fleet.events(agent="beta") if e.kind == "agent.registered")
    stolen = next(e for e in fleet.events(task=queued.id) if e.kind == "stolen")
    latency = stolen.at - joined.at
    record_property(f"join_to_steal_seconds_{kind}", round(latency, 4))
    print(f"{kind}: beta registered and stole alpha's queued task {latency * 1000:.0f} ms later")
    assert stolen.agent == "beta" and stolen.data == {"source": "steal", "attempt": 1,
                                                        "from": "alpha"}  # fmt: skip
    assert latency < 1.0
    assert fleet.get(running_task.id).state is TaskState.PENDING  # released, never stolen
    fleet.close()


def test_a_waiting_worker_takes_held_work_the_moment_its_hold_ends(
    shared_store: tuple[str, str],
) -> None:
    """Delay scheduling between real processes: the CI worker leaves the research task alone
    for locality_wait, then takes it at once -- woken by the claim's retry_at, not by its
    next poll five seconds on."""
    kind, url = shared_store
    fleet = Fleet.init(url)
    fleet.configure(poll_base=5, poll_max=60, locality_wait=1.5, domain_wait=0)
    with running(url, "worker", "--agent", "loom", "--domain", "ci", "--json", "--",
                 "true") as loom:  # fmt: skip
        loom.wait_for("idle")
        paper = fleet.post("paper", domain="research")
        loom.wait_for("claimed", task=paper.id, timeout=10)
        loom.signal(signal.SIGTERM)
        assert loom.wait() == 0, loom.text()
    claimed = next(e for e in fleet.events(task=paper.id) if e.kind == "claimed")
    waited = claimed.at - paper.created_at
    print(f"{kind}: held for {waited:.2f} s (locality_wait 1.5 s)")
    assert 1.5 <= waited < 3.0
    fleet.close()
