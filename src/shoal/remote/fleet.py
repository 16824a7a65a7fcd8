"""``RemoteFleet``: a ``Fleet`` whose verbs are calls to a hub's HTTP API.

An agent on a host that cannot reach the fleet's database joins it through ``shoal serve``
on a host that can: ``shoal --store https://hub:8765 claim --agent ada``, or ``shoal worker
--store https://hub:8765 ...``, with ``$SHOAL_API_TOKEN`` holding an agent token. Every
verb is one request whose route calls the same ``Fleet`` verb on the hub, so the checks,
the transaction and the errors are the hub's; this class only carries the arguments there
and decodes the answer into the same model values (``decode``), and a refusal into the
same error (``client``).

What does not cross: verbs with no route raise ``NotOverHTTP`` (a ``BadInput``) saying
where to run them instead. ``post_many`` in particular is refused rather than looped: its
promise is one transaction, all or none, and a loop of posts would break it halfway on the
first refusal. ``defer``, ``prune``, ``probe``, ``complete_many`` and the access tokens are
the others. ``wait_for_change`` has no push from the hub: it polls the event log, backing
off while nothing happens.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any, NoReturn, TypeVar
from urllib.parse import quote

from shoal.access import Credential
from shoal.clock import Clock
from shoal.errors import BadInput, ShoalError
from shoal.fleet import Fleet
from shoal.model import (
    Agent,
    Assessment,
    BatchCompletion,
    Claim,
    Completion,
    Event,
    FleetStatus,
    Group,
    Lease,
    Move,
    Probe,
    PruneReport,
    ReapReport,
    Registration,
    Schedule,
    Task,
    TaskDetail,
)
from shoal.policy_why import AgentWhy, TaskWhy
from shoal.remote import decode
from shoal.remote.client import TOKEN_ENV, ApiClient, NotOverHTTP
from shoal.settings import Settings
from shoal.validation import check_wait
from shoal.vocabulary import AgentStatus, TaskState

__all__ = ["RemoteFleet"]

#: ``wait_for_change`` looks at the hub's event log this often at first, backing off to
#: ``MAX_GAP`` while nothing happens (an idle worker then asks twice a second at most).
MIN_GAP = 0.2
MAX_GAP = 2.0

T = TypeVar("T")


class _NoStore:
    """Stands where a local fleet keeps its store: any use of it is a verb this class did
    not carry over, refused in words rather than failing on a missing attribute."""

    def __init__(self, url: str) -> None:
        self._url = url

    def __getattr__(self, name: str) -> NoReturn:
        raise NotOverHTTP(
            f"that is not available over the HTTP API ({self._url})",
            hint="run it on a host that reaches the fleet's store (its sqlite:// or "
            "postgresql:// URL)",
        )


def _names(values: Iterable[str] | str | None) -> list[str]:
    """Skills or domains as a list (the hub splits commas, as the local fleet does)."""
    if values is None:
        return []
    return [values] if isinstance(values, str) else list(values)


def _path(*parts: str | int) -> str:
    return "/" + "/".join(quote(str(p), safe="") for p in parts)


class RemoteFleet(Fleet):
    """A fleet reached through a hub's ``/api/v1`` (``shoal serve``); the same verbs and
    values as ``Fleet``, one request each. Safe to share between threads (one pool of
    connections)."""

    def __init__(
        self, client: ApiClient, clock: Clock | None = None, rng: random.Random | None = None
    ) -> None:
        super().__init__(_NoStore(client.shown), clock=clock, rng=rng)  # type: ignore[arg-type]
        self._api = client
        self._watch = threading.Lock()
        self._cursor: int | None = None  # the last event id wait_for_change has seen
        self._gap = MIN_GAP
        self._next_look = 0.0

    @classmethod
    def open(
        cls,
        url: str | None = None,
        *,
        clock: Clock | None = None,
        rng: random.Random | None = None,
        create: bool = True,
        read_only: bool = False,
        token: str | None = None,
    ) -> RemoteFleet:
        """The fleet a hub serves at ``url`` (``https://hub:8765``), with ``token`` (else
        ``$SHOAL_API_TOKEN``). Nothing is sent until the first verb. ``create`` and
        ``read_only`` are the hub's business: its fleet exists, and what a token may do is
        its role's."""
        if not url:
            raise BadInput("a remote fleet needs the hub's URL", hint="e.g. https://hub:8765")
        return cls(ApiClient(url, token or os.environ.get(TOKEN_ENV)), clock=clock, rng=rng)

    @classmethod
    def init(cls, url: str | None = None, *, clock: Clock | None = None) -> Fleet:
        raise NotOverHTTP(
            "a fleet is created where its store is, not over the HTTP API",
            hint="run shoal init on the hub's host, then shoal serve there",
        )

    @property
    def url(self) -> str:
        return self._api.url

    @property
    def where(self) -> str:
        """The hub's URL fit to show: no user name or password."""
        return self._api.shown

    @property
    def created(self) -> bool:
        return False

    def close(self) -> None:
        self._api.close()

    def __repr__(self) -> str:
        return f"RemoteFleet({self._api.shown!r})"

    # ------------------------------------------------------------------ posting work

    def post(
        self,
        title: str,
        *,
        body: str = "",
        payload: Any = None,
        priority: int | str = 5,
        skills: Iterable[str] | str | None = None,
        domain: str | None = None,
        to: str | None = None,
        after: Sequence[int] | None = None,
        parent: int | None = None,
        pinned: bool = False,
        expected_duration: float | str | None = None,
        lease_ttl: float | str | None = None,
        max_attempts: int | None = None,
        key: str | None = None,
        not_before: float | str | datetime | None = None,
        retry_delay: float | str | None = None,
        group: str | None = None,
        labels: Iterable[str] | str | None = None,
        posted_by: str | None = None,
    ) -> Task:
        """``Fleet.post`` through the API. ``posted_by`` is not sent: the server records
        the agent of the token it was given, and no other."""
        moment = not_before.isoformat() if isinstance(not_before, datetime) else not_before
        fields = {
            "title": title,
            "body": body,
            "payload": payload,
            "priority": priority,
            "skills": _names(skills),
            "domain": domain,
            "to": to,
            "after": list(after or ()),
            "parent": parent,
            "pinned": pinned,
            "expected_duration": expected_duration,
            "lease_ttl": lease_ttl,
            "max_attempts": max_attempts,
            "key": key,
            "not_before": moment,
            "retry_delay": retry_delay,
            "group": group,
            "labels": [labels] if isinstance(labels, str) else list(labels or ()),
        }
        return self._decode(decode.task, self._api.post("/tasks", fields), "post")

    def post_many(self, tasks: Iterable[Mapping[str, Any]]) -> list[int]:
        raise _not_here(
            "posting many tasks in one transaction (all or none)",
            "run the import on a host that reaches the fleet's store, or post the tasks one "
            "by one with shoal add",
        )

    # ------------------------------------------------------------------ reading tasks

    def by_key(self, key: str) -> Task | None:
        found = self._api.get("/tasks", {"key": key, "limit": 1})
        tasks = self._decode(_tasks, found, "by_key")
        return tasks[0] if tasks else None

    def get(self, task_id: int) -> Task:
        found = self._api.get(_path("tasks", task_id), {"events": 0})
        return self._decode(decode.task, found, "get")

    def show(self, task_id: int, *, events: int = 50) -> TaskDetail:
        found = self._api.get(_path("tasks", task_id), {"events": events})
        return self._decode(decode.task_detail, found, "show")

    def tasks(
        self,
        *,
        state: TaskState | str | None = None,
        agent: str | None = None,
        limit: int = 100,
        before: int | None = None,
        label: str | None = None,
    ) -> list[Task]:
        wanted = None if state is None else str(state)
        query = {"state": wanted, "agent": agent, "limit": limit, "before": before}
        if label is not None:
            query["label"] = label
        return self._decode(_tasks, self._api.get("/tasks", query), "tasks")

    def ready(self, agent: str | None = None, *, limit: int = 20) -> list[Task]:
        found = self._api.get("/ready", {"agent": agent, "limit": limit})
        return self._decode(_tasks, found, "ready")

    # ------------------------------------------------------------------ agents

    def register(
        self,
        agent_id: str,
        *,
        role: str = "worker",
        skills: Iterable[str] | str | None = None,
        domains: Iterable[str] | str | None = None,
        max_concurrent: int = 1,
        manager: bool = False,
        ephemeral: bool = False,
    ) -> Registration:
        body = {
            "id": agent_id,
            "role": role,
            "skills": _names(skills),
            "domains": _names(domains),
            "max_concurrent": max_concurrent,
            "manager": manager,
            "ephemeral": ephemeral,
        }
        return self._decode(decode.registration, self._api.post("/agents", body), "register")

    def why_task(self, task_id: int) -> TaskWhy:
        found = self._api.get(_path("tasks", task_id, "why"))
        return self._decode(TaskWhy.from_dict, found, "why_task")

    def why_agent(self, agent_id: str) -> AgentWhy:
        found = self._api.get(_path("agents", agent_id, "why"))
        return self._decode(AgentWhy.from_dict, found, "why_agent")

    def agent(self, agent_id: str) -> Agent:
        return self._decode(decode.agent, self._api.get(_path("agents", agent_id)), "agent")

    def agents(self) -> list[Agent]:
        found = self._api.get("/agents")
        return self._decode(lambda rows: [decode.agent(a) for a in rows], found, "agents")

    def set_status(
        self,
        agent_id: str,
        status: AgentStatus | str,
        *,
        why: str | None = None,
        release: bool = False,
    ) -> Agent:
        body = {"status": str(status), "why": why, "release": release}
        found = self._api.post(_path("agents", agent_id, "status"), body)
        return self._decode(decode.agent, found, "set_status")

    def resume(self, agent_id: str) -> Agent:
        found = self._api.post(_path("agents", agent_id, "resume"))
        return self._decode(decode.agent, found, "resume")

    def pause(self, agent_id: str, *, for_: float | str = 3600.0) -> Agent:
        found = self._api.post(_path("agents", agent_id, "pause"), {"for": for_})
        return self._decode(decode.agent, found, "pause")

    def probe(self) -> Probe:
        raise _not_here("probing the store", "run shoal doctor on the hub's host")

    def leases(self, agent_id: str) -> list[Lease]:
        found = self._api.get(_path("agents", agent_id, "leases"))
        return self._decode(lambda rows: [decode.lease(r) for r in rows], found, "leases")

    def heartbeat(self, agent_id: str) -> list[Lease]:
        """Renew the agent's leases. The hub's answer leaves the tokens out; when it renewed
        any, they are read from the agent's leases (a second request), so a caller can act
        on them as on a local fleet's."""
        found = self._api.post(_path("agents", agent_id, "heartbeat"))
        renewed: list[Lease] = self._decode(
            lambda data: [decode.lease(r) for r in data["renewed"]], found, "heartbeat"
        )
        if any(not lease.token for lease in renewed):
            tokens = {lease.task_id: lease.token for lease in self.leases(agent_id)}
            renewed = [replace(lease, token=tokens.get(lease.task_id, "")) for lease in renewed]
        return renewed

    # ------------------------------------------------------------------ the claim

    def claim(self, agent_id: str, n: int = 1, *, wait: float | str = 0.0) -> Claim:
        """The hub's claim; with ``wait`` it holds the request (a long poll) up to that long,
        and this side waits for its answer that much longer."""
        seconds = check_wait(wait)
        found = self._api.post(
            _path("agents", agent_id, "claim"), {"n": n, "wait": seconds}, wait=seconds
        )
        return self._decode(decode.claim, found, "claim")

    # ------------------------------------------------------------------ finishing work

    def complete(self, lease: Lease, result: Any = None, *, then_claim: int = 0) -> Completion:
        body = {"token": lease.token, "result": result, "then_claim": then_claim}
        found = self._api.post(_path("tasks", lease.task_id, "complete"), body)
        return self._decode(decode.completion, found, "complete")

    def complete_many(
        self, outcomes: Sequence[tuple[Lease, Any]], *, then_claim: int = 0
    ) -> BatchCompletion:
        raise _not_here(
            "completing many tasks in one transaction",
            "complete them one by one (Fleet.complete)",
        )

    def fail(self, lease: Lease, error: str = "", *, retry: bool = True) -> Task:
        body = {"token": lease.token, "error": error, "retry": retry}
        found = self._api.post(_path("tasks", lease.task_id, "fail"), body)
        return self._decode(decode.task, found, "fail")

    def release(self, lease: Lease) -> Task:
        found = self._api.post(_path("tasks", lease.task_id, "release"), {"token": lease.token})
        return self._decode(decode.task, found, "release")

    def defer(self, lease: Lease, after: Sequence[int]) -> Task:
        raise _not_here(
            "deferring a task",
            "finish or release it here, or defer it on a host that reaches the fleet's store",
        )

    def cancel(self, task_id: int, *, note: str | None = None, met: bool = False) -> Task:
        if note is not None or met:
            raise _not_here(
                "cancelling a task as closed at its source (what shoal import does)",
                "run the import on a host that reaches the fleet's store",
            )
        found = self._api.post(_path("tasks", task_id, "cancel"))
        return self._decode(decode.task, found, "cancel")

    def retry(self, task_id: int) -> Task:
        found = self._api.post(_path("tasks", task_id, "retry"))
        return self._decode(decode.task, found, "retry")

    def set_priority(self, task_id: int, priority: int | str) -> Task:
        found = self._api.post(_path("tasks", task_id, "priority"), {"priority": priority})
        return self._decode(decode.task, found, "set_priority")

    # ------------------------------------------------------------------ schedules

    def schedule(
        self,
        title: str,
        *,
        every: float | str | None = None,
        cron: str | None = None,
        tz: str | None = None,
        start: float | str | datetime | None = None,
        **task: Any,
    ) -> Schedule:
        when = start.timestamp() if isinstance(start, datetime) else start
        given = {"every": every, "cron": cron, "tz": tz, "start": when, **task}
        if "skills" in given:
            given["skills"] = _names(given["skills"])
        body = {"title": title, **{k: v for k, v in given.items() if v is not None}}
        return self._decode(decode.schedule, self._api.post("/schedules", body), "schedule")

    def schedules(self) -> list[Schedule]:
        found = self._api.get("/schedules")
        return self._decode(lambda rows: [decode.schedule(r) for r in rows], found, "schedules")

    def get_schedule(self, schedule_id: int) -> Schedule:
        found = self._api.get(_path("schedules", schedule_id))
        return self._decode(decode.schedule, found, "get_schedule")

    def pause_schedule(self, schedule_id: int) -> Schedule:
        return self._schedule_verb(schedule_id, "pause")

    def resume_schedule(self, schedule_id: int) -> Schedule:
        return self._schedule_verb(schedule_id, "resume")

    def cancel_schedule(self, schedule_id: int) -> Schedule:
        return self._schedule_verb(schedule_id, "cancel")

    def _schedule_verb(self, schedule_id: int, verb: str) -> Schedule:
        found = self._api.post(_path("schedules", schedule_id, verb))
        return self._decode(decode.schedule, found, f"{verb}_schedule")

    def post_due(self) -> list[int]:
        return list(self.reap().posted)  # the hub posts what is due as it reaps

    def edit(self, task_id: int, **changes: Any) -> Task:
        found = self._api.post(_path("tasks", task_id, "edit"), changes)
        return self._decode(decode.task, found, "edit")

    # ------------------------------------------------------------------ the hub's jobs

    def rebalance(self, *, dry_run: bool = False) -> list[Move]:
        found = self._api.post("/rebalance", {"dry_run": dry_run})
        return self._decode(lambda d: [decode.move(m) for m in d["moves"]], found, "rebalance")

    def reap(self) -> ReapReport:
        return self._decode(decode.reap_report, self._api.post("/reap"), "reap")

    def assess(self) -> Assessment:
        return self._decode(decode.assessment, self._api.post("/assess"), "assess")

    def prune(
        self,
        older_than: float | str | None = None,
        *,
        batch: int = 0,
        limit: int | None = None,
        dry_run: bool = False,
        squash: bool = False,
    ) -> PruneReport:
        """Nothing to do when nothing is asked (no ``older_than``, and the fleet keeps all
        its history), as on a local fleet: so the hub's pass (``shoal monitor``) runs here.
        Pruning itself is refused: it is the hub's host's job."""
        if older_than is None and not squash and not self.settings().history_retention:
            return PruneReport(dry_run=dry_run)
        raise _not_here(
            "pruning history", "run shoal prune on a host that reaches the fleet's store"
        )

    def status(self) -> FleetStatus:
        return self._decode(decode.fleet_status, self._api.get("/status"), "status")

    def events(
        self,
        since: int = 0,
        *,
        task: int | None = None,
        agent: str | None = None,
        limit: int = 1000,
        newest: bool = False,
    ) -> list[Event]:
        query = {"since": since, "task": task, "agent": agent, "limit": limit}
        if newest:
            query["newest"] = "true"
        found = self._api.get("/events", query)
        return self._decode(lambda d: [decode.event(e) for e in d["events"]], found, "events")

    def wait_for_change(self, timeout: float) -> bool:
        """Whether the hub's event log grew within ``timeout`` seconds. It is looked at
        every ``MIN_GAP`` seconds at first, then ever less often (up to ``MAX_GAP``) while
        it does not grow; a hub that does not answer counts as no change."""
        deadline = time.monotonic() + max(timeout, 0.0)
        while True:
            now = time.monotonic()
            with self._watch:
                due = now >= self._next_look
                if due:
                    self._next_look = now + self._gap  # one thread looks at a time
            if due:
                changed = self._look()
                with self._watch:
                    self._gap = MIN_GAP if changed else min(self._gap * 2, MAX_GAP)
                    self._next_look = time.monotonic() + self._gap
                if changed:
                    return True
            with self._watch:
                pause = min(deadline, self._next_look) - time.monotonic()
            if time.monotonic() >= deadline:
                return False
            time.sleep(max(pause, 0.0))

    def _look(self) -> bool:
        """Whether events came after the last one seen (the first look only finds it)."""
        try:
            newest = self.events(self._cursor or 0, limit=1, newest=True)
        except ShoalError:
            return False
        if not newest:
            if self._cursor is None:
                self._cursor = 0
            return False
        first, self._cursor = self._cursor is None, newest[-1].id
        return not first

    # ------------------------------------------------------------------ settings

    def settings(self) -> Settings:
        return self._decode(decode.settings, self._api.get("/settings"), "settings")

    def configure(self, /, **changes: object) -> Settings:
        found = self._api.post("/settings", changes)
        return self._decode(decode.settings, found, "configure")

    # ------------------------------------------------------------------ concurrency groups

    def set_group(self, name: str, max: int) -> Group:
        found = self._api.post(_path("groups", name), {"max": max})
        return self._decode(decode.group, found, "set_group")

    def clear_group(self, name: str) -> Group:
        found = self._api.post(_path("groups", name, "clear"))
        return self._decode(decode.group, found, "clear_group")

    def groups(self) -> list[Group]:
        found = self._api.get("/groups")
        return self._decode(lambda d: [decode.group(g) for g in d["groups"]], found, "groups")

    # ------------------------------------------------------------------ access tokens

    def create_token(
        self, role: str, *, agent: str | None = None, name: str = ""
    ) -> tuple[Credential, str]:
        raise _not_here("making access tokens", _TOKENS_THERE)

    def tokens(self) -> list[Credential]:
        raise _not_here("listing access tokens", _TOKENS_THERE)

    def revoke_token(self, token_id: str) -> Credential:
        raise _not_here("revoking access tokens", _TOKENS_THERE)

    def authenticate(self, token: str) -> Credential | None:
        raise _not_here("checking access tokens", _TOKENS_THERE)

    # ------------------------------------------------------------------ decoding

    def _decode(self, how: Callable[[Any], T], data: Any, verb: str) -> T:
        return decode.checked(how, data, f"{verb} ({self._api.shown})")


def _not_here(what: str, instead: str) -> NotOverHTTP:
    return NotOverHTTP(f"{what} is not available over the HTTP API", hint=instead)


_TOKENS_THERE = (
    "tokens are managed where the fleet's store is: shoal token create|list|revoke on the "
    "hub's host"
)


def _tasks(rows: Any) -> list[Task]:
    return [decode.task(row) for row in rows]
