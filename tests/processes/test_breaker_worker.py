"""The circuit breaker with a real worker running a real command that fails every time, on
SQLite and PostgreSQL: the agent is paused after five failures, and the backlog is spared."""

from __future__ import annotations

import threading

from shoal import AgentStatus, Fleet, ManualClock, TaskState
from shoal.runtime.worker import CommandHandler, Worker
from tests.helpers import post_many, wait_until


def paused(fleet: Fleet, agent: str) -> bool:
    return any(a.id == agent and a.status is AgentStatus.PAUSED for a in fleet.agents())


def test_a_command_that_always_fails_pauses_its_agent_and_spares_the_backlog(
    shared_store: tuple[str, str], clock: ManualClock
) -> None:
    _, url = shared_store
    fleet = Fleet.open(url, clock=clock)
    fleet.configure(max_attempts=3, idle_timeout=0.3)
    post_many(fleet, 50)
    events: list[str] = []
    worker = Worker(
        Fleet.open(url, clock=clock),
        "ada",
        CommandHandler(["sh", "-c", "exit 1"]),
        ephemeral=True,  # a paused worker is not idle: it must not leave (and lose the pause)
        listener=lambda kind, data: events.append(kind),
    )
    thread = threading.Thread(target=worker.run)
    thread.start()
    try:
        wait_until(lambda: paused(fleet, "ada"), "the breaker to trip")
        wait_until(lambda: "paused" in events, "the worker to say it is paused")
        thread.join(1.0)  # well past idle_timeout (the worker's idle clock is wall time)
        assert thread.is_alive() and "left" not in events  # it waits out the pause
    finally:
        worker.stop()
        thread.join(30)
    tasks = fleet.tasks(limit=100)
    failed = [t for t in tasks if t.attempts]
    untouched = [t for t in tasks if t.attempts == 0 and t.state is TaskState.PENDING]
    assert len(failed) == 5 and len(untouched) == 45  # five attempts spent, not 150
    assert all(t.state is TaskState.PENDING and t.attempts == 1 for t in failed)
    # The clock has not moved: every failed task is still waiting out its backoff.
    assert all(t.waiting(clock.now()) for t in failed)
    fleet.register("bob")
    assert fleet.claim("bob").tasks[0].id in {t.id for t in untouched}  # others take the rest
    fleet.close()
