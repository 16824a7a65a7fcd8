"""The verbs an agent uses while it works, of ``Fleet``: the leases it holds, its heartbeat,
the claim, and finishing work (complete, fail, release, defer).

``Fleet`` inherits them (``_verbbase`` says why it is built of parts). Each verb checks its
input, then opens one transaction and runs the claim cascade (``_claiming``), the liveness
settling (``_liveness``) and the named transitions (``_transitions``) inside it. The claim
and a completion that claims next first take the schedules' look (``ScheduleVerbs``, which
this part builds on): recurring tasks fallen due are posted before the claim reads the pool.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from shoal import policy
from shoal.clock import monotonic
from shoal.clock import wait as wait_for
from shoal.errors import BadInput, LeaseLost, UnknownTask
from shoal.fleet._agents import heartbeat_in
from shoal.fleet._claiming import claim_direct, claim_in
from shoal.fleet._conflicts import rerun_on_conflict
from shoal.fleet._liveness import SettleFirst, settle_in
from shoal.fleet._scheduleverbs import ScheduleVerbs
from shoal.fleet._transitions import (
    after_letting_go,
    count_failure,
    end_lease,
    held_task,
    live_agent,
    need_task,
    refuse_cycle,
    refuse_ended,
    release_dependents,
)
from shoal.model import BatchCompletion, Claim, Completion, Lease, Task
from shoal.stores.base import Finishing, StoreTx
from shoal.validation import (
    as_task_ids,
    check_agent_id,
    check_lease,
    check_n,
    check_result,
    check_text,
    check_wait,
)
from shoal.vocabulary import ClaimReason, EventKind, TaskState

__all__ = ["LeaseVerbs"]

_Result = TypeVar("_Result")


class LeaseVerbs(ScheduleVerbs):
    """``leases``, ``heartbeat``, ``claim``, ``complete``, ``complete_many``, ``fail``,
    ``release`` and ``defer``; the lease tokens, and the claim cascade with this fleet's
    randomness."""

    @staticmethod
    def _token() -> str:
        # A lease token fences off stale holders, and over MCP it is also the proof that a
        # caller may act on a task it does not hold (I8): an MCP client sees the tokens of
        # the tasks it claims, so they must not let it guess anyone else's. They come from
        # the OS's generator (``os.urandom``, which is all ``secrets.token_hex`` calls, without
        # importing hmac and hashlib for it), never from a seeded one whose state a few
        # hundred outputs give away; it costs about a microsecond a claim.
        return os.urandom(8).hex()

    # ------------------------------------------------------------------ leases

    def leases(self, agent_id: str) -> list[Lease]:
        """The leases ``agent_id`` holds now, oldest claim first (read only: nothing is
        renewed). For a face that acts for the agent it has already checked."""
        check_agent_id(agent_id)
        with self._store.read() as tx:
            agent = live_agent(tx, agent_id)
            return [
                Lease(task.id, agent.id, token, task.lease_expires or 0.0)
                for task, token in tx.held_leases(agent.id)
            ]

    @rerun_on_conflict
    def heartbeat(self, agent_id: str) -> list[Lease]:
        """Say the agent is alive and extend every lease it holds; returns the renewed leases.

        A lease that has already expired is not renewed: its task goes back to pending. An
        agent coming back from offline needs a free seat under max_agents, else
        ``FleetFull`` (it stays offline; docs/ARCHITECTURE.md, "Liveness and seats").
        """
        check_agent_id(agent_id)

        def beat(settle: bool) -> list[Lease]:
            with self._store.write() as tx:
                return heartbeat_in(tx, self.clock.now(), agent_id, self.rng, settle=settle)

        return self._settling(beat, refuse=True)

    # ------------------------------------------------------------------ the claim

    @rerun_on_conflict
    def claim(self, agent_id: str, n: int = 1, *, wait: float | str = 0.0) -> Claim:
        """Take up to ``n`` tasks for ``agent_id`` by the claim cascade (module docstring).

        Returns the leases and their tasks, or none with the reason: ``busy`` (at
        max_concurrent), ``paused`` (the circuit breaker holds the agent; ``retry_at`` says
        until when) or ``empty`` (nothing this agent can do now; ``retry_at``, if set, says
        when something it passed over is free to take). With ``wait`` > 0 an empty claim
        waits up to that many seconds for the fleet to change and tries again.

        Agents silent past heartbeat_timeout are written down offline first, their queues
        back in the pool for this claim to find; an agent coming back from offline needs a
        free seat under max_agents, else ``FleetFull`` (docs/ARCHITECTURE.md, "Liveness and
        seats").
        """
        check_agent_id(agent_id)
        n = check_n(n)
        deadline = monotonic(self.clock) + check_wait(wait)
        while True:
            self._post_due_lazily()  # recurring tasks that fell due (_scheduleverbs)
            direct = claim_direct(self._store, agent_id, n, self.clock.now(), self._token)
            if direct is not None:
                return direct[1]
            claim = self._settling(
                lambda settle: self._claim_once(agent_id, n, settle), refuse=True
            )
            remaining = deadline - monotonic(self.clock)
            if claim or claim.reason is not ClaimReason.EMPTY or remaining <= 0:
                return claim
            pause = min(remaining, 1.0)
            if claim.retry_at is not None:  # work passed over is free to take then
                pause = min(pause, max(0.0, claim.retry_at - self.clock.now()))
            wait_for(self.clock, self._store.wait_for_change, pause)

    def _claim_once(self, agent_id: str, n: int, settle: bool) -> Claim:
        with self._store.write() as tx:
            claim = self._claim(tx, agent_id, n, self.clock.now(), strict=True, settle=settle)
        assert claim is not None
        return claim

    def _claim(
        self,
        tx: StoreTx,
        agent_id: str,
        n: int,
        now: float,
        *,
        strict: bool,
        completed: bool = False,
        settle: bool = True,
    ) -> Claim | None:
        """The claim cascade (``_claiming.claim_in``) with this fleet's randomness and
        tokens."""
        return claim_in(
            tx,
            agent_id,
            n,
            now,
            strict=strict,
            rng=self.rng,
            token=self._token,
            completed=completed,
            settle=settle,
        )

    def _settling(self, run: Callable[[bool], _Result], *, refuse: bool) -> _Result:
        """``run(True)``; if it asked for the fleet-wide part of liveness first
        (``_liveness.SettleFirst``: a silent agent to mark offline, or its own agent back
        from offline), that part in an exclusive transaction of its own, then ``run(False)``.
        An agent that found no seat is refused ``FleetFull`` if ``refuse``; else (a
        completion, which must stand) the call runs again and the agent stays offline."""
        try:
            return run(True)
        except SettleFirst as first:
            with self._store.write(exclusive=True) as tx:
                refusal = settle_in(tx, self.clock.now(), first.agent_id)
            if refusal is not None and refuse:
                raise refusal from None
        return run(False)

    # ------------------------------------------------------------------ finishing work

    @rerun_on_conflict
    def complete(self, lease: Lease, result: Any = None, *, then_claim: int = 0) -> Completion:
        """Finish a task. With ``then_claim`` > 0, claim the agent's next tasks in the same
        transaction (one commit per task for a busy worker).

        A second complete with the same lease reports ``already_done`` and changes nothing;
        a stale or foreign lease raises ``LeaseLost``.
        """
        check_lease(lease)
        check_result(result)
        if then_claim:
            check_n(then_claim)
            self._post_due_lazily()
        finishing = [Finishing(lease.task_id, lease.token, result)]
        direct = claim_direct(
            self._store, lease.agent, then_claim, self.clock.now(), self._token, finishing
        )
        if direct is not None:
            ((task,), claimed) = direct
            return Completion(task, False, (), claimed if then_claim else None)

        def finish(settle: bool) -> Completion:
            with self._store.write() as tx:
                now = self.clock.now()
                finished = tx.finish_leased(finishing, now)
                if not finished:  # not a live lease: say why, or recognise a repeat
                    return Completion(held_task(tx, lease, now, done_ok=True), already_done=True)
                ((task_id, holder, has_dependents, written),) = finished
                tx.append_event(now, EventKind.COMPLETED, task_id, holder, None)
                released = release_dependents(tx, task_id, now) if has_dependents else []
                next_claim = None
                if then_claim:
                    next_claim = self._claim(
                        tx, holder or "", then_claim, now, strict=False, completed=True,
                        settle=settle,
                    )  # fmt: skip
                else:
                    after_letting_go(tx, holder, now, completed=True)
                done = written or need_task(tx, task_id)  # nothing after the finish changes it
                return Completion(done, False, tuple(released), next_claim)

        return self._settling(finish, refuse=False)

    @rerun_on_conflict
    def complete_many(
        self, outcomes: Sequence[tuple[Lease, Any]], *, then_claim: int = 0
    ) -> BatchCompletion:
        """Finish several tasks in one transaction; each lease is checked on its own.

        Leases that are lost are reported in ``lost`` and do not stop the others. With
        ``then_claim``, the agent that held the finished tasks claims its next ones in the
        same transaction (if none finished, nothing is claimed: ``next`` is None).
        """
        if not outcomes and not then_claim:
            return BatchCompletion()
        for lease, result in outcomes:
            check_lease(lease)
            check_result(result)
        if then_claim:
            check_n(then_claim)
            self._post_due_lazily()
        agents = {lease.agent for lease, _ in outcomes if lease.agent}
        if len(agents) > 1:
            raise BadInput("complete_many takes the leases of one agent at a time")
        items = [Finishing(lease.task_id, lease.token, result) for lease, result in outcomes]
        if len(agents) == 1 and len({lease.task_id for lease, _ in outcomes}) == len(outcomes):
            direct = claim_direct(
                self._store, next(iter(agents)), then_claim, self.clock.now(), self._token, items
            )
            if direct is not None:
                finished_tasks, claimed = direct
                ids = tuple(task.id for task in finished_tasks)
                return BatchCompletion(ids, next=claimed if then_claim else None)
        return self._settling(
            lambda settle: self._complete_many_once(outcomes, items, then_claim, settle),
            refuse=False,
        )

    def _complete_many_once(
        self,
        outcomes: Sequence[tuple[Lease, Any]],
        items: Sequence[Finishing],
        then_claim: int,
        settle: bool,
    ) -> BatchCompletion:
        completed: list[int] = []
        already: list[int] = []
        lost: list[tuple[int, str]] = []
        released: list[int] = []
        with self._store.write() as tx:
            now = self.clock.now()
            holder: str | None = None  # who really holds them, not what the leases claim
            finished = {done.task_id: done for done in tx.finish_leased(items, now)}
            for lease, _ in outcomes:
                if lease.task_id not in finished:  # not a live lease: say why, or a repeat
                    try:
                        task = held_task(tx, lease, now, done_ok=True)
                    except LeaseLost as exc:
                        lost.append((lease.task_id, exc.message))
                    else:
                        already.append(task.id)
                    continue
                done = finished.pop(lease.task_id)
                agent, has_dependents = done.holder, done.has_dependents
                if holder is not None and agent is not None and agent != holder:
                    raise BadInput("complete_many takes the leases of one agent at a time")
                holder = agent or holder
                tx.append_event(now, EventKind.COMPLETED, lease.task_id, agent, None)
                completed.append(lease.task_id)
                if has_dependents:
                    released += release_dependents(tx, lease.task_id, now)
            next_claim = None
            if then_claim and holder is not None and completed:
                next_claim = self._claim(
                    tx, holder, then_claim, now, strict=False, completed=True, settle=settle
                )
            elif then_claim and holder is not None:
                next_claim = self._claim(tx, holder, then_claim, now, strict=False, settle=settle)
            elif completed:
                after_letting_go(tx, holder, now, completed=True)
        return BatchCompletion(
            tuple(completed), tuple(already), tuple(lost), tuple(released), next_claim
        )

    @rerun_on_conflict
    def fail(self, lease: Lease, error: str = "", *, retry: bool = True) -> Task:
        """Report that the task failed. It goes back to pending while attempts remain (and
        ``retry`` is true), ready again after a retry backoff (``policy.retry_backoff``),
        else it is dead. Returns the task as it now is.

        The failure also counts against the agent: ``failure_streak`` failures in a row
        pause it (the circuit breaker), and its queue goes back to the pool.
        """
        check_lease(lease)
        error = check_text(error, "error", 100_000)
        with self._store.write() as tx:
            now = self.clock.now()
            settings = tx.load_settings()
            task = held_task(tx, lease, now)
            end_lease(
                tx,
                task,
                now,
                settings,
                retry=retry,
                kind=EventKind.FAILED,
                error=error,
                rng=self.rng,
                backoff=True,
            )
            if task.agent is not None:
                count_failure(tx, task.agent, now, settings)
            after_letting_go(tx, task.agent, now)
            return need_task(tx, task.id)

    @rerun_on_conflict
    def release(self, lease: Lease) -> Task:
        """Give a task back untouched: pending again (pool, or its pinned agent), and the
        attempt is not counted."""
        check_lease(lease)
        with self._store.write() as tx:
            now = self.clock.now()
            task = held_task(tx, lease, now)
            place = policy.queue_place(True, tx.next_seq())  # work it started: in front
            tx.requeue_task(task.id, policy.return_queue(task), place, True, None, now, now)
            tx.append_event(now, EventKind.RELEASED, task.id, task.agent, None)
            after_letting_go(tx, task.agent, now)
            return need_task(tx, task.id)

    @rerun_on_conflict
    def defer(self, lease: Lease, after: Sequence[int]) -> Task:
        """Put a held task aside until the tasks in ``after`` are done (a continuation).

        The task is ``blocked`` until then, and comes back to the same agent's queue as a
        ready join: the agent takes it when it has nothing else -- nothing in its queue, in
        the pool or to steal -- the first freed first, and an agent that runs dry may take
        it if its own agent is busy (the claim's joins step). The attempt is not counted.
        Typical use: post children with ``parent=``, then defer on them (fork-join).
        """
        check_lease(lease)
        deps = as_task_ids(after, "after")
        if not deps:
            raise BadInput("defer needs at least one task id in `after`")
        with self._store.write() as tx:
            now = self.clock.now()
            task = held_task(tx, lease, now)
            found = tx.get_tasks(deps, share=True)
            missing = [d for d in deps if d not in found]
            if missing:
                raise UnknownTask(f"unknown dependencies: {', '.join(map(str, missing))}")
            refuse_ended(found.values())
            refuse_cycle(tx, task.id, deps)
            existing = set(tx.deps_of(task.id))
            new_deps = [d for d in deps if d not in existing]
            if new_deps:
                tx.add_deps(task.id, new_deps)
            waiting = sum(1 for d in deps if found[d].state is not TaskState.DONE)
            holder = task.agent
            assert holder is not None
            data = {"after": list(deps), "waiting_on": waiting}
            place = policy.join_place(tx.next_seq())  # a join: after all else it could do
            if waiting:  # numbered again when it is freed (policy.place_when_ready)
                tx.block_task(task.id, holder, place, waiting, now)
            else:
                tx.requeue_task(task.id, holder, place, True, None, now, now)
            tx.append_event(now, EventKind.DEFERRED, task.id, holder, data)
            after_letting_go(tx, holder, now)
            return need_task(tx, task.id)
