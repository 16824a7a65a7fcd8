"""The operator's and the hub's verbs of ``Fleet``: acting on tasks from outside, the
hub's jobs, history, the fleet's status and log, its settings, and its access tokens.

``Fleet`` inherits them (``_verbbase`` says why it is built of parts). None is an agent's
own work: ``cancel``, ``set_priority`` and ``retry`` act on tasks for a person; the hub's
jobs (``rebalance``, ``reap``, ``assess``) have their bodies in ``_claiming`` and ``_hub``,
``prune`` in ``_pruning``, the token verbs in ``_tokens``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from shoal import policy
from shoal._values import replace
from shoal.errors import BadInput, InvalidTransition
from shoal.fleet._claiming import rebalance_in
from shoal.fleet._conflicts import rerun_on_conflict
from shoal.fleet._hub import assess_in, reap_in, status_in
from shoal.fleet._schedules import post_due_in
from shoal.fleet._transitions import after_letting_go, flag_stuck, need_task, release_dependents
from shoal.fleet._verbbase import FleetBase
from shoal.limits import MAX_EVENTS, MAX_PRUNE_BATCH, PRUNE_BATCH
from shoal.model import (
    Assessment,
    Event,
    FleetStatus,
    Group,
    Move,
    PruneReport,
    ReapReport,
    Task,
)
from shoal.settings import Settings
from shoal.stores.base import StoreTx, TaskEdit
from shoal.task_checks import check_edit
from shoal.validation import (
    MAX_ID,
    NEW_AGENT_ID,
    as_task_ids,
    check_agent_id,
    check_count,
    check_group,
    check_group_limit,
    check_joining_agent_id,
    check_text,
    parse_priority,
)
from shoal.vocabulary import EventKind, TaskState

if TYPE_CHECKING:  # access (hashlib, hmac) and _pruning load with their verbs alone
    from shoal.access import Credential
    from shoal.fleet._pruning import Pruned

__all__ = ["OperatorVerbs"]


#: How much of a title an ``edited`` event keeps (a title may be 1000 characters).
_EVENT_TITLE = 200


def _edited(task: Task, changed: dict[str, Any]) -> dict[str, Any]:
    """The ``edited`` event's data: each changed field's ``from`` and ``to``. The log holds
    no body (it may be large): a changed body is told by its length in characters; a long
    title is cut. Both are the poster's untrusted text, escaped wherever they are shown."""
    out: dict[str, Any] = {}
    for name, value in changed.items():
        old = getattr(task, name)
        if name == "body":
            out[name] = {"from_chars": len(old), "to_chars": len(value)}
        elif name == "title":
            out[name] = {"from": _cut(old), "to": _cut(value)}
        else:
            plain = (list(old), list(value)) if isinstance(old, tuple) else (old, value)
            out[name] = {"from": plain[0], "to": plain[1]}
    return {"changed": out}


def _met(tx: StoreTx, task_id: int) -> bool:
    """The task's last event is a cancel with ``met``: its dependents were let go."""
    last = tx.events(0, task_id, None, 1, newest=True)
    return bool(last) and last[0].kind == EventKind.CANCELLED and bool(last[0].data.get("met"))


def _cut(text: str) -> str:
    return text if len(text) <= _EVENT_TITLE else text[: _EVENT_TITLE - 1] + "…"


class _DryRun(Exception):
    """Raised inside a write transaction to roll back a dry run."""


class OperatorVerbs(FleetBase):
    """Cancel, reprioritize, edit and retry tasks; the hub's jobs; prune; status, events and
    settings; access tokens."""

    # ------------------------------------------------------------------ operating on tasks

    @rerun_on_conflict
    def cancel(self, task_id: int, *, note: str | None = None, met: bool = False) -> Task:
        """Cancel a task that is not finished. A holder's lease on it is revoked. ``note``
        says why, in the ``cancelled`` event. With ``met``, its work was settled elsewhere
        (an imported issue closed at its source): the tasks waiting on it stop waiting, as
        for a done task, and it may not be retried (they would count it twice)."""
        why = check_text(note, "note", 1000, line=True) if note is not None else None
        with self._store.write(exclusive=True) as tx:
            now = self.clock.now()
            task = need_task(tx, task_id)
            if task.state.finished:
                raise InvalidTransition(
                    f"task {task_id} is already {task.state.value}; there is nothing to cancel",
                    hint="`shoal retry` brings back a dead or cancelled task",
                )
            tx.cancel_task(task_id, now)
            data: dict[str, Any] = {"was": task.state.value}
            data |= {"note": why} if why else {}
            data |= {"met": True} if met else {}
            tx.append_event(now, EventKind.CANCELLED, task_id, task.agent, data)
            if met:
                release_dependents(tx, task_id, now)
            else:
                flag_stuck(tx, task_id, TaskState.CANCELLED, now)
            if task.state is TaskState.CLAIMED:
                after_letting_go(tx, task.agent, now)
            return need_task(tx, task_id)

    @rerun_on_conflict
    def set_priority(self, task_id: int, priority: int | str) -> Task:
        """Give a task that is not finished a new priority (1..9 or a name); claims rank it
        by the new one from now on, with the age it already had."""
        number = parse_priority(priority)
        with self._store.write(exclusive=True) as tx:
            now = self.clock.now()
            task = need_task(tx, task_id)
            if task.state.finished:
                raise InvalidTransition(
                    f"task {task_id} is already {task.state.value}; its priority no longer matters",
                    hint="`shoal retry` brings back a dead or cancelled task first",
                )
            if task.priority == number:
                return task
            key = policy.pool_key(number, task.created_at, tx.load_settings().aging)
            tx.set_priority(task_id, number, key, now)
            tx.append_event(
                now,
                EventKind.REPRIORITIZED,
                task_id,
                task.agent,
                {"from": task.priority, "to": number},
            )
            return need_task(tx, task_id)

    @rerun_on_conflict
    def edit(self, task_id: int, **changes: Any) -> Task:
        """Change what a task not yet finished says or how it ranks: any of ``title``,
        ``body``, ``priority``, ``skills``, ``domain``, ``labels`` and ``expected_duration``
        (None clears a domain or an expected duration). A held task keeps the fields that
        chose its holder (``policy.ROUTING_FIELDS``): changing them is refused, and then
        nothing changes. One ``edited`` event says what changed; an edit that changes
        nothing writes nothing."""
        checked = check_edit(changes)
        with self._store.write(exclusive=True) as tx:
            now = self.clock.now()
            task = need_task(tx, task_id)
            if task.state.finished:
                raise InvalidTransition(
                    f"task {task_id} is already {task.state.value}; there is nothing to edit",
                    hint="`shoal retry` brings back a dead or cancelled task first",
                )
            changed = {k: v for k, v in checked.items() if getattr(task, k) != v}
            routing = [k for k in policy.ROUTING_FIELDS if k in changed]
            if routing and task.state is TaskState.CLAIMED:
                raise InvalidTransition(
                    f"task {task_id} is held by {task.agent}; its {' and '.join(routing)} "
                    "chose who may hold it and cannot change while it runs",
                    hint="edit its title, body, priority, labels or expected duration now; "
                    "its skills or domain once it is released or back in the pool",
                )
            if not changed:
                return task
            new = replace(task, **changed)
            key = policy.pool_key(new.priority, task.created_at, tx.load_settings().aging)
            edit = TaskEdit(
                new.title,
                new.body,
                new.priority,
                key,
                new.skills,
                new.domain,
                new.labels,
                new.expected_duration,
            )
            tx.edit_task(task_id, edit, now)
            tx.append_event(now, EventKind.EDITED, task_id, task.agent, _edited(task, changed))
            return need_task(tx, task_id)

    @rerun_on_conflict
    def retry(self, task_id: int) -> Task:
        """Make a task claimable now: a dead (or cancelled) task comes back to pending with
        fresh attempts; a pending task waiting out its retry backoff or its ``not_before``
        skips the rest of the wait (retry now)."""
        with self._store.write(exclusive=True) as tx:
            now = self.clock.now()
            task = need_task(tx, task_id)
            if task.waiting(now):
                assert task.ready_at is not None
                tx.set_ready_at(task_id, now)
                data = {"was": "pending", "skipped": round(task.ready_at - now, 3)}
                tx.append_event(now, EventKind.RETRIED, task_id, task.agent, data)
                return need_task(tx, task_id)
            if task.state is TaskState.CANCELLED and _met(tx, task_id):
                raise InvalidTransition(
                    f"task {task_id} was closed at its source, and the tasks that waited on "
                    "it went on without it; it is not retried",
                    hint="post the work again as a new task (`shoal add`)",
                )
            if task.state not in (TaskState.DEAD, TaskState.CANCELLED):
                raise InvalidTransition(
                    f"task {task_id} is {task.state.value}; only dead or "
                    "cancelled tasks, or pending ones waiting to be ready, are retried",
                    hint="a pending or claimed task is still live; wait for it or cancel it first",
                )
            deps = tx.get_tasks(tx.deps_of(task_id))
            waiting = sum(1 for d in deps.values() if d.state is not TaskState.DONE)
            state = TaskState.BLOCKED if waiting else TaskState.PENDING
            dest = task.agent if task.pinned else None
            key = policy.pool_key(task.priority, task.created_at, tx.load_settings().aging)
            place = policy.queue_place(False, tx.next_seq())  # as if posted to it now
            tx.revive_task(task_id, state, dest, place, waiting, key, now)
            tx.append_event(
                now,
                EventKind.RETRIED,
                task_id,
                dest,
                {"was": task.state.value, "state": state.value},
            )
            return need_task(tx, task_id)

    # ------------------------------------------------------------------ the hub's jobs

    @rerun_on_conflict
    def rebalance(self, *, dry_run: bool = False) -> list[Move]:
        """Move queued tasks from overloaded agents to agents idle for a while.

        Agents idle at least ``idle_min_for_rebalance`` receive, busiest compatible victim
        first, the lowest-priority stealable tasks of queues deeper than ``busy_threshold``,
        within the steal caps. Moved tasks are marked stolen and never move again. With
        ``dry_run`` nothing changes and the moves that would be made are returned.
        """
        moves: list[Move] = []
        try:
            with self._store.write(exclusive=True) as tx:
                moves = rebalance_in(tx, self.clock.now(), self.rng)
                if dry_run:
                    raise _DryRun
        except _DryRun:
            pass
        return moves

    @rerun_on_conflict
    def reap(self) -> ReapReport:
        """One monitor pass: expire leases, mark silent agents offline (their queues go back
        to the pool), terminate ephemeral agents idle (or offline) too long, flag stalled
        tasks, post the occurrences of schedules that fell due."""
        with self._store.write(exclusive=True) as tx:
            now = self.clock.now()
            report = reap_in(tx, now, self.rng)
            return replace(report, posted=tuple(post_due_in(tx, now)))

    @rerun_on_conflict
    def assess(self) -> Assessment:
        """Assess the workload and recommend spawning or retiring agents (and with what
        skills). The result is kept as the fleet's last assessment."""
        with self._store.write(exclusive=True) as tx:
            now = self.clock.now()
            return assess_in(tx, now)

    def prune(
        self,
        older_than: float | str | None = None,
        *,
        batch: int = PRUNE_BATCH,
        limit: int | None = None,
        dry_run: bool = False,
        squash: bool = False,
    ) -> PruneReport:
        """Delete history: tasks that finished (done, dead, cancelled) more than
        ``older_than`` ago (seconds, or "30d"), with their events, and events of no task
        as old. Without ``older_than``: the fleet's ``history_retention`` (0 keeps all).

        Never live work, never the steal window, never a dead or cancelled task a live one
        waits on (``_pruning`` says what stays and why). Runs in batches of ``batch`` tasks,
        one short transaction each, so claims go on meanwhile; ``limit`` stops after about
        that many tasks and events of no task (the report says ``more``). ``dry_run``
        counts what would go and changes nothing.

        ``squash`` (the git store only) then replaces the branch's history by one commit
        holding the fleet as it is, so what was pruned stops taking room in the repository
        too (``squash_history``).
        """
        if squash and dry_run:
            raise BadInput(
                "--squash and --dry-run do not go together",
                hint="look first with --dry-run, then squash",
            )
        from shoal.fleet._pruning import squasher  # prune's rules: loaded by prune

        squash_history = squasher(self._store) if squash else None
        report = self._prune(older_than, batch=batch, limit=limit, dry_run=dry_run)
        return report if squash_history is None else replace(report, squashed=squash_history())

    def _prune(
        self, older_than: float | str | None, *, batch: int, limit: int | None, dry_run: bool
    ) -> PruneReport:
        from shoal.fleet._pruning import prune_age, prune_cutoff

        age = None if older_than is None else prune_age(older_than)
        batch = check_count(batch, "batch", 1, MAX_PRUNE_BATCH)
        limit = None if limit is None else check_count(limit, "limit", 1, MAX_ID)
        with self._store.read() as tx:
            settings = tx.load_settings()
            age = settings.history_retention if age is None else age
            if not age:
                return PruneReport(dry_run=dry_run)
            cutoff = prune_cutoff(self.clock.now(), age, settings)
            if dry_run:
                tasks, events = tx.prune_preview(cutoff)
                return PruneReport(cutoff, tasks, events, dry_run=True)
        tasks = events = rows = 0
        while True:
            got = self._prune_batch(cutoff, batch)
            tasks, events = tasks + got.tasks, events + got.events
            rows += got.tasks + got.untasked
            if not got.more:
                return PruneReport(cutoff, tasks, events)
            if limit is not None and rows >= limit:
                return PruneReport(cutoff, tasks, events, more=True)

    @rerun_on_conflict
    def _prune_batch(self, cutoff: float, batch: int) -> Pruned:
        """One batch of ``prune``: fleet-wide, so nothing changes under it (``_pruning``)."""
        from shoal.fleet._pruning import prune_batch_in

        with self._store.write(exclusive=True) as tx:
            return prune_batch_in(tx, self.clock.now(), cutoff, batch)

    def status(self) -> FleetStatus:
        """A snapshot: agents with their load and current tasks, queue depths, counts by
        state, capacity, stalled tasks and the last assessment."""
        with self._store.read() as tx:
            now = self.clock.now()
            return replace(status_in(tx, now), groups=tuple(groups_in(tx, now)))

    def pending_by_domain(self) -> dict[str | None, int]:
        """Pending tasks counted by domain (None: of no domain), for dashboards and metrics."""
        with self._store.read() as tx:
            return tx.pending_by_domain()

    def events(
        self,
        since: int = 0,
        *,
        task: int | None = None,
        agent: str | None = None,
        limit: int = 1000,
        newest: bool = False,
    ) -> list[Event]:
        """The log, oldest first: events after id ``since``, optionally of one task or agent.
        With ``newest``, the last ``limit`` of those (still oldest first: a tail)."""
        since = check_count(since, "since", 0, MAX_ID)
        limit = check_count(limit, "limit", 1, MAX_EVENTS)
        (task_id,) = as_task_ids([task], "task") if task is not None else (None,)
        if agent is not None:
            check_agent_id(agent)
        with self._store.read() as tx:
            found = tx.events(since, task_id, agent, limit, newest)
        return found[::-1] if newest else found

    def wait_for_change(self, timeout: float) -> bool:
        """Block until the fleet may have changed (or ``timeout`` seconds pass)."""
        return self._store.wait_for_change(timeout)

    # ------------------------------------------------------------------ settings

    def settings(self) -> Settings:
        with self._store.read() as tx:
            return tx.load_settings()

    @rerun_on_conflict
    def configure(self, /, **changes: object) -> Settings:
        """Change fleet settings at run time; each value is checked, and all or none apply.

        Changing ``aging`` re-keys every waiting task in the same transaction (roughly a
        second per quarter of a million tasks), and claims wait for it.
        """
        with self._store.write(exclusive=True) as tx:
            now = self.clock.now()
            old = tx.load_settings()
            new = old.replace(**changes)
            if new == old:
                return new
            tx.save_settings(new)
            if new.aging != old.aging:
                tx.rekey_pool({i: policy.pool_key(p, c, new.aging) for i, p, c in tx.keyed_tasks()})
            diff = {k: v for k, v in new.to_dict().items() if old.to_dict()[k] != v}
            tx.append_event(now, EventKind.CONFIGURED, None, None, diff)
            return new

    # ------------------------------------------------------------------ concurrency groups

    @rerun_on_conflict
    def set_group(self, name: str, max: int) -> Group:
        """Let at most ``max`` tasks of group ``name`` be held at once, fleet-wide, from
        the next claim on (tasks held already stay). The claim enforces it in its own
        transaction (docs/ARCHITECTURE.md, "Concurrency groups")."""
        group, most = check_group(name), check_group_limit(max)
        with self._store.write(exclusive=True) as tx:
            tx.set_group_limit(group, most)
            data = {"group": group, "max": most}
            now = self.clock.now()
            tx.append_event(now, EventKind.CONFIGURED, None, None, data)
            return _group_in(tx, group, now)

    @rerun_on_conflict
    def clear_group(self, name: str) -> Group:
        """Lift group ``name``'s limit: its tasks are claimed like any others again."""
        group = check_group(name)
        with self._store.write(exclusive=True) as tx:
            if not tx.set_group_limit(group, None):
                raise BadInput(
                    f"group {group!r} has no limit; nothing to clear",
                    hint="`shoal group list` shows the groups with a limit",
                )
            data = {"group": group, "max": None}
            now = self.clock.now()
            tx.append_event(now, EventKind.CONFIGURED, None, None, data)
            return _group_in(tx, group, now)

    def groups(self) -> list[Group]:
        """Every group with a limit or a task held, by name: its limit and held count."""
        with self._store.read() as tx:
            return groups_in(tx, self.clock.now())

    # ------------------------------------------------------------------ access tokens

    @rerun_on_conflict
    def create_token(
        self, role: str, *, agent: str | None = None, name: str = ""
    ) -> tuple[Credential, str]:
        """A new access token for ``shoal serve`` (``shoal.access``): its description, and
        the secret, which the fleet does not keep and nobody can show again. An ``agent``
        token names the one agent it may act as."""
        from shoal.access import parse_role
        from shoal.fleet._tokens import create_token_in

        kind = parse_role(role)
        if (agent is None) == (kind == "agent"):
            raise BadInput(
                "an agent token names its agent, and only an agent token does",
                hint="shoal token create --role agent --agent ID, or leave --agent out",
            )
        if agent is not None:
            check_agent_id(agent)
        label = check_text(name, "token name", 200, line=True)
        with self._store.write(exclusive=True) as tx:
            if agent is not None and not NEW_AGENT_ID.fullmatch(agent):
                check_joining_agent_id(agent, tx.get_agent(agent))  # as register would
            return create_token_in(tx, self.clock.now(), kind, agent, label)

    def tokens(self) -> list[Credential]:
        """The fleet's access tokens, oldest first (never their secrets)."""
        with self._store.read() as tx:
            from shoal.fleet._tokens import tokens_in

            return tokens_in(tx)

    @rerun_on_conflict
    def revoke_token(self, token_id: str) -> Credential:
        """End the token ``token_id``: from the next request on, it opens nothing."""
        from shoal.access import check_token_id
        from shoal.fleet._tokens import revoke_token_in

        check_token_id(token_id)
        with self._store.write(exclusive=True) as tx:
            return revoke_token_in(tx, token_id)

    def authenticate(self, token: str) -> Credential | None:
        """The credential ``token`` proves, or None if it is not one of the fleet's."""
        from shoal.fleet._tokens import authenticate_in

        with self._store.read() as tx:
            return authenticate_in(tx, token)


def groups_in(tx: StoreTx, now: float) -> list[Group]:
    """The groups with a limit or a task held at ``now``, by name (``Fleet.groups``,
    ``status``): a task whose lease is due holds no room, as for the claim."""
    limits, held = tx.group_limits(), tx.held_by_group(now)
    return [Group(n, limits.get(n), held.get(n, 0)) for n in sorted({*limits, *held})]


def _group_in(tx: StoreTx, name: str, now: float) -> Group:
    return Group(name, tx.group_limits().get(name), tx.held_by_group(now).get(name, 0))
