"""The transitions every Fleet verb is built from, inside the caller's transaction.

A verb of ``Fleet`` checks its input, opens one store transaction and composes these: look
up a live agent or a held task (refusing with the words a user needs), end a lease as a
failure or an expiry, free the dependents of a finished task, send an agent's queue back to
the pool, trip or reset the circuit breaker, note that an agent was seen. Each writes its
own events, so a verb is exactly as logged as the transitions it makes (invariant I5:
docs/ARCHITECTURE.md, "Invariants"). Decisions -- which queue a task returns to, how long a
backoff is, whether an agent is silent -- are ``policy``'s; these only apply them to the
store.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from typing import Any

from shoal import policy
from shoal._values import replace
from shoal.errors import (
    DependencyCycle,
    InvalidTransition,
    LeaseLost,
    UnknownAgent,
    UnknownTask,
)
from shoal.limits import SCAN_BATCH
from shoal.model import Agent, Lease, Task
from shoal.settings import Settings
from shoal.stores.base import StoreTx
from shoal.times import iso_time
from shoal.validation import as_task_ids
from shoal.vocabulary import AgentStatus, EventKind, TaskState

__all__ = [
    "after_letting_go",
    "agent_data",
    "count_failure",
    "end_lease",
    "end_streak",
    "expire_due",
    "flag_stuck",
    "held_task",
    "live_agent",
    "need_task",
    "present_status",
    "refuse_cycle",
    "refuse_ended",
    "release_dependents",
    "release_held",
    "resume_agent",
    "return_queue",
    "terminate",
    "touch",
    "unknown_agent",
    "wait_words",
    "why_lost",
    "with_idle_since",
]


def live_agent(tx: StoreTx, agent_id: str, *, lock: bool = False) -> Agent:
    agent = tx.get_agent(agent_id, lock=lock)
    if agent is None:
        raise unknown_agent(agent_id)
    if agent.status is AgentStatus.TERMINATED:
        raise UnknownAgent(
            f"agent {agent_id!r} is terminated",
            hint=f"register it again (`shoal register {agent_id}`) to start a new incarnation",
        )
    return agent


def touch(tx: StoreTx, agent: Agent, now: float, status: AgentStatus) -> None:
    """Record that the agent was seen, and its status after a claim.

    ``last_seen`` is written at most once per ``SEEN_RESOLUTION`` seconds when nothing
    else changes: liveness is judged over heartbeat_timeout (90 s), so a busy agent does
    not pay a write per claim for it.
    """
    idle_since = policy.idle_since_after(agent.status, agent.idle_since, status, now)
    fresh = now - agent.last_seen < policy.SEEN_RESOLUTION
    if status is not agent.status or idle_since != agent.idle_since or not fresh:
        tx.save_agent(replace(agent, status=status, idle_since=idle_since, last_seen=now))
    if status is AgentStatus.IDLE and agent.status is not AgentStatus.IDLE:
        tx.append_event(now, EventKind.AGENT_IDLE, None, agent.id, {"from": agent.status.value})
    elif agent.status is AgentStatus.OFFLINE and status is not AgentStatus.OFFLINE:
        data = {"from": "offline", "to": status.value}  # it is back
        tx.append_event(now, EventKind.AGENT_STATUS, None, agent.id, data)


def present_status(tx: StoreTx, agent: Agent, now: float) -> AgentStatus:
    """The status of an agent that is back: working if it holds leases, else waiting --
    or still paused, if its pause has not run out."""
    if agent.paused(now):
        return AgentStatus.PAUSED
    return AgentStatus.WORKING if tx.held_leases(agent.id) else AgentStatus.WAITING


def after_letting_go(
    tx: StoreTx, agent_id: str | None, now: float, *, completed: bool = False
) -> None:
    """After an agent's lease ends: waiting (between tasks) once it holds nothing. A
    completion ends its failure streak; a paused agent stays paused, an offline one
    offline (coming back takes a seat: ``_liveness``)."""
    context = tx.claim_context(agent_id, now) if agent_id else None
    if context is None:
        return
    agent = context.agent
    if agent.status is AgentStatus.TERMINATED:
        return
    if completed:
        agent = end_streak(tx, agent)
    if agent.status in (AgentStatus.PAUSED, AgentStatus.OFFLINE):
        return  # an offline agent comes back by a claim or a heartbeat, which find it a seat
    status = AgentStatus.WORKING if context.held else AgentStatus.WAITING
    touch(tx, agent, now, status)


def held_task(tx: StoreTx, lease: Lease, now: float, done_ok: bool = False) -> Task:
    """The task ``lease`` covers, if the lease is still good; else ``LeaseLost``."""
    found = tx.leased_task(lease.task_id)
    if found is None:
        raise UnknownTask(
            f"task {lease.task_id} does not exist", hint="check the id (see `shoal list`)"
        )
    task, token = found
    if token is None or token != lease.token:
        raise LeaseLost(why_lost(task, lease), hint="claim a new task with `shoal claim`")
    if task.state is TaskState.DONE and done_ok:
        return task
    if task.state is not TaskState.CLAIMED:
        raise LeaseLost(
            f"lease lost: task {task.id} is {task.state.value} now",
            hint="the lease ended; claim a new task",
        )
    assert task.lease_expires is not None
    if task.lease_expires <= now:
        ago = now - task.lease_expires
        raise LeaseLost(
            f"lease lost: your lease on task {task.id} expired {ago:.0f}s ago and the task "
            "is going back to pending",
            hint="heartbeat more often than lease_ttl, or post with a longer lease_ttl; "
            "claim a new task",
        )
    return task


def release_dependents(tx: StoreTx, task_id: int, now: float) -> list[int]:
    """A task is done: dependents waiting on nothing else become pending, in the same
    transaction, in the queue they were bound for -- own work in front, work sent by others
    at the place it was posted at (``policy.place_when_ready``) -- or in the pool, if that
    agent has gone away (offline or terminated) and the task is not pinned to it."""
    places = dict(tx.release_dependents(task_id))
    freed = sorted(places)
    if not freed:
        return freed
    tasks = tx.get_tasks(freed)
    present: dict[str, bool] = {}
    for dep in freed:
        task = tasks[dep]
        dest = task.agent
        if dest is not None and not task.pinned:
            if dest not in present:
                agent = tx.get_agent(dest)
                present[dest] = agent is not None and policy.is_present(agent)
            if not present[dest]:
                dest = None
        tx.ready_task(dep, dest, policy.place_when_ready(places[dep], tx.next_seq()), now)
        tx.append_event(now, EventKind.READY, dep, dest, {"after": task_id})
    return freed


def end_lease(
    tx: StoreTx,
    task: Task,
    now: float,
    settings: Settings,
    *,
    retry: bool,
    kind: EventKind,
    error: str | None,
    rng: random.Random,
    backoff: bool = False,
) -> TaskState:
    """A claim that failed or expired: back to pending while attempts last, else dead.

    With ``backoff`` (a reported failure) the task is ready again only after its retry
    backoff. An expired lease is retried at once: its agent died or hung, which says
    nothing against the task, and a dead agent's work should come back promptly.
    """
    state = policy.state_after_failure(task, settings, retry)
    data: dict[str, Any] = {"attempt": task.attempts, "error": error}
    if state is TaskState.PENDING:
        ready = now
        if backoff:
            ready += policy.retry_backoff(task.attempts, task.retry_delay, settings, rng)
            data["ready_at"] = iso_time(ready)
        dest = policy.return_queue(task)
        place = policy.queue_place(True, tx.next_seq())  # work it started: in front
        tx.requeue_task(task.id, dest, place, False, error, now, ready)
        tx.append_event(now, kind, task.id, task.agent, data)
    else:
        tx.bury_task(task.id, error, now)
        tx.append_event(now, EventKind.DEAD, task.id, task.agent, {**data, "cause": kind})
        flag_stuck(tx, task.id, TaskState.DEAD, now)
    return state


def flag_stuck(tx: StoreTx, task_id: int, state: TaskState, now: float) -> None:
    """Tasks blocked on one that just died or was cancelled will wait until it is
    retried: say so in their history (they stay blocked; `retry` frees them)."""
    for dep in tx.dependents_of(task_id):
        waiting = tx.get_task(dep)
        if waiting is not None and waiting.state is TaskState.BLOCKED:
            data = {"on": task_id, "because": state.value}
            tx.append_event(now, EventKind.STUCK, dep, waiting.agent, data)


def expire_due(
    tx: StoreTx, now: float, settings: Settings, limit: int | None, rng: random.Random
) -> tuple[list[int], list[int]]:
    """The claim's expire step (and the reap's): every lease past its expiry ends, as a
    failed attempt -- at most ``limit`` of them (None: all, in batches)."""
    expired: list[int] = []
    dead: list[int] = []
    while True:
        batch = tx.expired_leases(now, limit or SCAN_BATCH)
        for task in batch:
            error = f"lease expired (held by {task.agent})"
            state = end_lease(
                tx, task, now, settings, retry=True, kind=EventKind.EXPIRED, error=error, rng=rng
            )
            (expired if state is TaskState.PENDING else dead).append(task.id)
        if limit is not None or len(batch) < SCAN_BATCH:
            return expired, dead


def return_queue(tx: StoreTx, agent: Agent, now: float, why: str) -> list[int]:
    """An agent is going away: its queue, and the blocked work bound for it, goes to the
    pool -- all but the tasks pinned to it, which wait for it to come back."""
    returned = []
    while True:
        bound = tx.bound_tasks(agent.id, SCAN_BATCH)
        for task in bound:
            tx.move_task(task.id, None, 0, False, now)  # the pool orders by pool_key
            tx.append_event(now, EventKind.RETURNED, task.id, agent.id, {"why": why})
            returned.append(task.id)
        if len(bound) < SCAN_BATCH:
            return returned


def terminate(tx: StoreTx, agent: Agent, now: float, why: str) -> None:
    release_held(tx, agent.id, now, why)
    return_queue(tx, agent, now, why)
    # A pause outlives the agent: registering the id again finds it still running.
    gone = replace(agent, status=AgentStatus.TERMINATED, idle_since=None)
    tx.save_agent(replace(gone, last_seen=now))
    tx.append_event(now, EventKind.AGENT_TERMINATED, None, agent.id, {"why": why})


def release_held(tx: StoreTx, agent_id: str, now: float, why: str) -> list[int]:
    """Give back every task ``agent_id`` holds, untouched (no attempt counted)."""
    released = []
    for task, _ in tx.held_leases(agent_id):
        dest = policy.return_queue(task)
        place = policy.queue_place(True, tx.next_seq())  # work it started: in front
        tx.requeue_task(task.id, dest, place, True, None, now, now)
        tx.append_event(now, EventKind.RELEASED, task.id, agent_id, {"why": why})
        released.append(task.id)
    return released


def count_failure(tx: StoreTx, agent_id: str, now: float, settings: Settings) -> None:
    """One more failure in a row for ``agent_id``; at ``failure_streak``, the circuit
    breaker pauses it for ``pause_cooldown`` and sends its queue back to the pool."""
    agent = tx.get_agent(agent_id, lock=True)
    if agent is None or agent.status is AgentStatus.TERMINATED:
        return
    agent = replace(agent, failures=agent.failures + 1)
    if not policy.breaker_trips(agent.failures, settings) or agent.paused(now):
        tx.save_agent(agent)
        return
    until = now + settings.pause_cooldown
    offline = agent.status is AgentStatus.OFFLINE  # stays so: coming back takes a seat
    status = AgentStatus.OFFLINE if offline else AgentStatus.PAUSED
    paused = replace(agent, status=status, paused_until=until, idle_since=None)
    tx.save_agent(paused)
    data = {"failures": agent.failures, "until": iso_time(until), "from": agent.status.value}
    tx.append_event(now, EventKind.AGENT_PAUSED, None, agent_id, data)
    return_queue(tx, agent, now, "agent paused")


def end_streak(tx: StoreTx, agent: Agent) -> Agent:
    """A completion: the agent's failure count starts over (``policy.streak_ends``)."""
    if not policy.streak_ends(agent):
        return agent
    ended = replace(agent, failures=0)
    tx.save_agent(ended)
    return ended


def resume_agent(tx: StoreTx, agent: Agent, now: float, by: str) -> Agent:
    """End an agent's pause: it may claim again, its failure count starts over."""
    status = agent.status
    if status is AgentStatus.PAUSED:
        status = AgentStatus.WORKING if tx.held_leases(agent.id) else AgentStatus.WAITING
    resumed = replace(agent, status=status, failures=0, paused_until=None)
    tx.save_agent(resumed)
    tx.append_event(now, EventKind.AGENT_RESUMED, None, agent.id, {"by": by})
    return resumed


def refuse_cycle(tx: StoreTx, task_id: int, deps: Iterable[int]) -> None:
    """Refuse dependencies through which ``task_id`` would end up waiting on itself."""
    seen: set[int] = set()
    frontier = list(deps)
    while frontier:
        current = frontier.pop()
        if current == task_id:
            raise DependencyCycle(
                f"task {task_id} cannot wait on {', '.join(map(str, deps))}: "
                "that would make it wait on itself",
                hint="drop the dependency that leads back to this task",
            )
        if current not in seen:
            seen.add(current)
            frontier += tx.deps_of(current)


def need_task(tx: StoreTx, task_id: int) -> Task:
    (task_id,) = as_task_ids([task_id], "task id")
    task = tx.get_task(task_id)
    if task is None:
        raise UnknownTask(f"there is no task {task_id}", hint="check the id (see `shoal list`)")
    return task


def refuse_ended(deps: Iterable[Task]) -> None:
    """Waiting on a dead or cancelled task would wait forever (unless someone retries it)."""
    ended = [d for d in deps if d.state in (TaskState.DEAD, TaskState.CANCELLED)]
    if ended:
        which = ", ".join(f"{d.id} ({d.state.value})" for d in ended)
        raise InvalidTransition(
            f"cannot wait on tasks that will never finish: {which}",
            hint="retry them first (`shoal retry ID`), or leave them out of `after`",
        )


def wait_words(seconds: float) -> str:
    """A wait for people: 45s, 4m, 2h."""
    if seconds < 90:
        return f"{max(seconds, 0):.0f}s"
    if seconds < 5400:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"


def unknown_agent(agent_id: str) -> UnknownAgent:
    return UnknownAgent(
        f"there is no agent {agent_id!r} in this fleet",
        hint=f"register it first: `shoal register {agent_id}` (see `shoal agents`)",
    )


def with_idle_since(agent: Agent, before: Agent, now: float) -> Agent:
    """``agent`` with the idle_since bookkeeping of a change from ``before``."""
    since = policy.idle_since_after(before.status, before.idle_since, agent.status, now)
    return replace(agent, idle_since=since)


def agent_data(agent: Agent) -> dict[str, Any]:
    return {
        "role": agent.role,
        "skills": list(agent.skills),
        "domains": list(agent.domains),
        "max_concurrent": agent.max_concurrent,
        "manager": agent.manager,
        "ephemeral": agent.ephemeral,
        "incarnation": agent.incarnation,
    }


def why_lost(task: Task, lease: Lease) -> str:
    """Words for a lease whose token is not the task's current one, saying what became of
    the task (not guessing why: a typo and an expired lease look the same from here). They
    name neither the agent that holds the task nor any token: a caller guessing tokens
    learns only that this one is not the lease."""
    if task.state is TaskState.CLAIMED:
        return (
            f"lease lost: task {task.id} is not held under that token (check the token; if "
            "your lease ran out, the task was claimed again)"
        )
    if task.state is TaskState.DONE:
        return f"lease lost: task {task.id} was already completed under another lease"
    return f"lease lost: task {task.id} is {task.state.value} now; that token is not its lease"
