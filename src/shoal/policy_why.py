"""Why a task waits and why an agent sits idle: the claim's own rules, read back.

A queue's users ask one question more than any other -- "why isn't my task running?" --
and the fleet knows the answer exactly, because a claim decides it: the claim cascade
(``_claiming``) asks ``policy`` whether an agent is paused or full, whether it has a task's
skills, whether the locality rules keep a task for its own domain, whether a steal is
allowed and within the caps. This module asks the same functions the same questions about
one task against every agent (``explain_task``), or about one agent (``explain_agent``),
and says which answer holds the work back, with a stable code and when it ends.

It never keeps a rule of its own. Where the claim had a rule inline, the rule became a
pure function both call (``StealFilter.refusal``, ``Locality.holding``,
``sizing.skills_missing``). ``tests/unit/test_why_claim.py`` holds the two together on
random fleets: an agent said to be able to take a task takes it or something before it in
the cascade; a task no one can take is taken by no claim.

The facts come from one read transaction (``fleet._whyverbs``), as the liveness rules make the
agents at ``now``: nothing here reads a store or a clock (docs/ARCHITECTURE.md, "Why a
task waits").

Codes, in the order they apply (each ``Reason`` also says whom and until when):

* ``running`` (a claimed task: holder, since, lease expiry, ``stalled``), ``lease_expired``;
  ``done``, ``dead``, ``cancelled``;
* ``dependencies`` -- blocked on tasks not done (``stuck`` when one is dead or cancelled);
* ``not_before``, ``retry_backoff`` -- pending, not ready until then;
* ``group_full`` -- its concurrency group holds its limit: which tasks hold it, on which
  agents, and the soonest of their leases' expiries (see ``group_reasons``);
* ``pinned`` -- only its agent may take it, and that agent cannot now; ``owner`` -- the
  agent whose queue holds it cannot take it now;
* ``not_stealable`` -- no other agent may steal it (pinned, stolen before, priority,
  skills, domain), ``owner_not_working``, ``steal_threshold``, ``steal_caps``;
* ``domain_wait``, ``locality_wait`` -- kept for its own domain's agents until then;
* ``missing_skills`` -- no live agent has its skills (``assess`` recommends spawning one);
* ``agents_paused``, ``agents_busy``, ``agents_offline`` -- its only candidates are so;
* ``no_agents`` -- nobody registered could take it.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from shoal import policy, sizing
from shoal._values import field, value
from shoal.model import Agent, QueueDepth, Task
from shoal.settings import Settings
from shoal.times import iso_time, parse_moment
from shoal.vocabulary import AgentStatus, ClaimSource, TaskState

__all__ = [
    "AgentWhy",
    "Facts",
    "Reason",
    "Taker",
    "TaskWhy",
    "agent_reasons",
    "explain_task",
    "group_reasons",
    "skillset_of",
    "verdict",
]

#: The claim steps in cascade order: an agent takes from an earlier step first.
STEP_ORDER = (ClaimSource.QUEUE, ClaimSource.POOL, ClaimSource.STEAL)


@value
class Reason:
    """One thing that holds work back: a stable ``code``, a line for people, and -- when
    they are known -- when it ends and began, and the agents, tasks and skills it is
    about. The line holds no time: a face shows ``until`` and ``since`` in its own way."""

    code: str
    text: str
    until: float | None = None
    since: float | None = None
    agents: tuple[str, ...] = ()
    tasks: tuple[int, ...] = ()
    skills: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "text": self.text,
            "until": iso_time(self.until),
            "since": iso_time(self.since),
            "agents": list(self.agents),
            "tasks": list(self.tasks),
            "skills": list(self.skills),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Reason:
        until, since = data.get("until"), data.get("since")
        return cls(
            code=str(data["code"]),
            text=str(data["text"]),
            until=parse_moment(until) if until else None,
            since=parse_moment(since) if since else None,
            agents=tuple(data.get("agents", ())),
            tasks=tuple(int(t) for t in data.get("tasks", ())),
            skills=tuple(data.get("skills", ())),
        )


@value
class Taker:
    """An agent whose claim could take the task now, by the claim step named."""

    agent: str
    step: ClaimSource
    status: AgentStatus

    def to_dict(self) -> dict[str, Any]:
        return {"agent": self.agent, "step": self.step.value, "status": self.status.value}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Taker:
        return cls(str(data["agent"]), ClaimSource(data["step"]), AgentStatus(data["status"]))


@value
class TaskWhy:
    """Why a task is where it is (``Fleet.why_task``): what holds it back and who could
    take it now, the likeliest first (its own agent, then idle agents). ``takers`` empty
    and ``reasons`` empty: nothing holds it and nobody can take it -- not a case the rules
    leave open, so it does not happen."""

    task: int
    title: str
    state: TaskState
    at: float
    agent: str | None = None  # its queue (pending, blocked) or its holder (claimed)
    reasons: tuple[Reason, ...] = ()
    takers: tuple[Taker, ...] = ()

    @property
    def next(self) -> Taker | None:
        return self.takers[0] if self.takers else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "title": self.title,
            "state": self.state.value,
            "at": iso_time(self.at),
            "agent": self.agent,
            "reasons": [r.to_dict() for r in self.reasons],
            "takers": [t.to_dict() for t in self.takers],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TaskWhy:
        return cls(
            task=int(data["task"]),
            title=str(data["title"]),
            state=TaskState(data["state"]),
            at=parse_moment(data["at"]),
            agent=data.get("agent"),
            reasons=tuple(Reason.from_dict(r) for r in data.get("reasons", ())),
            takers=tuple(Taker.from_dict(t) for t in data.get("takers", ())),
        )


@value
class AgentWhy:
    """Why an agent is idle or got nothing (``Fleet.why_agent``) -- or, if its claim would
    get work now, the task it would take (``next``) and by which step."""

    agent: str
    status: AgentStatus
    at: float
    reasons: tuple[Reason, ...] = ()
    next: int | None = None
    step: ClaimSource | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "agent": self.agent,
            "status": self.status.value,
            "at": iso_time(self.at),
            "reasons": [r.to_dict() for r in self.reasons],
            "next": self.next,
            "step": self.step.value if self.step is not None else None,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AgentWhy:
        step = data.get("step")
        return cls(
            agent=str(data["agent"]),
            status=AgentStatus(data["status"]),
            at=parse_moment(data["at"]),
            reasons=tuple(Reason.from_dict(r) for r in data.get("reasons", ())),
            next=data.get("next"),
            step=ClaimSource(step) if step else None,
        )


@value
class Facts:
    """What the claim would read, read once: agents as the liveness rules make them at
    ``now``, the live (not yet due) leases each holds, the skill sets, the queues a steal
    could rob (with the agents' statuses at ``now``) and the thieves of the steal window --
    and, for a task of a concurrency group with a limit, that limit (``limits``)."""

    now: float
    settings: Settings
    agents: Sequence[Agent]
    held: Mapping[str, Sequence[Task]]
    skillsets: Mapping[int, tuple[str, ...]]
    depths: Sequence[QueueDepth] = ()
    window: Sequence[str] = ()
    limits: Mapping[str, int] = field(default_factory=dict)
    _idle: list[Agent] = field(default_factory=list)
    _pairs: dict[str, frozenset[tuple[str, int]]] = field(default_factory=dict)
    _victims: list[str] = field(default_factory=list)
    _status: dict[str, AgentStatus] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._idle.extend(a for a in self.agents if a.status is AgentStatus.IDLE)
        # Every queue a steal may rob (its thief aside: a thief never robs itself). Who is
        # a victim does not depend on how ties are shuffled, only who comes first does.
        everyone = policy.claim_victims(self.depths, "", self.settings, random.Random(0))
        self._victims.extend(everyone)

    def locality(self, agent: Agent, domain: str | None, skillset: int) -> policy.Locality:
        """The locality rules of a claim by ``agent`` now, as ``_claiming.Holds`` makes
        them, for a task of ``domain`` and ``skillset``. ``policy.reserved_for`` is the union
        of what each idle agent but the claimer could take; only this task's pair of it
        matters to the rules, so it is worked out once per idle agent, not per claimer."""
        reserved = frozenset[tuple[str, int]]()
        if self.settings.domain_wait > 0 and domain is not None:
            if not self._pairs:  # what each idle agent could take, once
                for a in self._idle:
                    self._pairs[a.id] = policy.reserved_for([a], "", self.skillsets)
            pair = (domain, skillset)
            if any(pair in pairs for who, pairs in self._pairs.items() if who != agent.id):
                reserved = frozenset({pair})
        return policy.locality(agent, self.settings, self.now, reserved)

    def status(self, agent_id: str | None) -> AgentStatus | None:
        """An agent's status at ``now`` (None: not in the fleet, or terminated)."""
        if not self._status:
            self._status.update((a.id, a.status) for a in self.agents)
        return self._status.get(agent_id or "")

    def robbed(self, victim: str | None, thief: str) -> bool:
        """Whether ``thief``'s claim may steal from ``victim``'s queue (``claim_victims``)."""
        return victim is not None and victim != thief and victim in self._victims


def skillset_of(task: Task, skillsets: Mapping[int, tuple[str, ...]]) -> int:
    """The id of the skill set ``task`` requires (-1 if the fleet has none such)."""
    need = frozenset(task.skills)
    return next((sid for sid, have in skillsets.items() if frozenset(have) == need), -1)


#: How many of a full group's held tasks ``group_full`` names (soonest lease expiry first).
GROUP_HOLDERS_SHOWN = 5


def group_reasons(task: Task, facts: Facts) -> list[Reason]:
    """A pending task whose concurrency group holds its limit: the claim passes over it
    (``Holds`` leaves a full group's tasks out of every step) until one of the group's held
    tasks ends. The count is the claim's: ``policy.group_room`` over the leases not yet due
    (the claim's expire step ends the others). The holders are named, a few of them, and
    the soonest lease expiry bounds the wait unless its holder heartbeats or finishes."""
    group = task.group
    if group is None or group not in facts.limits:
        return []
    holders = [t for held in facts.held.values() for t in held if t.group == group]
    if policy.group_room(facts.limits, {group: len(holders)})[group] > 0:
        return []
    holders.sort(key=lambda t: (t.lease_expires or facts.now, t.id))
    shown = holders[:GROUP_HOLDERS_SHOWN]
    who = ", ".join(f"#{t.id} on {t.agent}" for t in shown)
    if len(holders) > len(shown):
        who += f" and {len(holders) - len(shown)} more"
    text = (
        f"its concurrency group {group} is full: {len(holders)} held of max "
        f"{facts.limits[group]} ({who}); it waits until one of them finishes"
    )
    ends = min((t.lease_expires for t in holders if t.lease_expires is not None), default=None)
    agents = tuple(sorted({t.agent for t in shown if t.agent is not None}))
    return [Reason("group_full", text, ends, agents=agents, tasks=tuple(t.id for t in shown))]


# --- one agent against one task -----------------------------------------------------------


@value
class _Verdict:
    """What one agent's claim would do with one task now: take it by ``step``, or not, for
    ``code`` (until ``until``)."""

    agent: Agent
    step: ClaimSource | None = None
    code: str = ""
    until: float | None = None


def verdict(agent: Agent, task: Task, facts: Facts) -> _Verdict:
    """Could ``agent``'s claim take the pending ``task`` now, and by which step? Asked in
    the claim's order: who may have it at all (its own queue; the pool and its skills; a
    steal: a victim at work past steal_threshold, then the steal rules), then the agent's
    pause and capacity, then the locality rules, then the steal caps.
    Readiness (``ready_at``) is the task's own and is left to the caller."""
    now, settings = facts.now, facts.settings
    if agent.status is AgentStatus.OFFLINE:
        return _Verdict(agent, code="offline")
    sid = skillset_of(task, facts.skillsets)
    if task.agent == agent.id:
        step = ClaimSource.QUEUE
    elif task.agent is None:
        step = ClaimSource.POOL
        if not policy.can_do(agent.skills, facts.skillsets.get(sid, task.skills)):
            return _Verdict(agent, code="skills")  # its skill set is not one it can do
    else:
        step = ClaimSource.STEAL
        if not facts.robbed(task.agent, agent.id):  # the steal step asks this first
            working = facts.status(task.agent) is AgentStatus.WORKING
            return _Verdict(agent, code="steal_threshold" if working else "owner_not_working")
        refused = policy.steal_filter(agent, settings, facts.skillsets).refusal(task)
        if refused is not None:
            return _Verdict(agent, code=refused)
    if agent.paused(now):
        return _Verdict(agent, code="paused", until=agent.paused_until)
    held = facts.held.get(agent.id, ())
    if policy.claim_room(len(held), agent.max_concurrent, 1) == 0:
        ends = min((t.lease_expires or now for t in held), default=None)
        return _Verdict(agent, code="busy", until=ends)
    if step is not ClaimSource.QUEUE:
        ready = policy.ready_time(task.ready_at, task.created_at)
        holding: dict[str, float] = {}
        if policy.might_hold(task.domain, ready, agent, settings, now):  # as Holds.pick
            holding = facts.locality(agent, task.domain, sid).holding(task.domain, sid, ready)
        if holding:
            code = max(holding, key=lambda rule: holding[rule])
            return _Verdict(agent, code=code, until=holding[code])
    if step is ClaimSource.STEAL and policy.steal_budget(facts.window, agent.id, settings) <= 0:
        return _Verdict(agent, code="steal_caps")
    return _Verdict(agent, step=step)


# --- one task against the fleet -----------------------------------------------------------


def explain_task(task: Task, facts: Facts, deps: Mapping[int, Task] | None = None) -> TaskWhy:
    """Why ``task`` waits (or runs, or ended), and who could take it now. ``deps``: the
    tasks it depends on (read for a blocked task)."""
    now = facts.now
    base = TaskWhy(task.id, task.title, task.state, now, task.agent)
    if task.state is TaskState.CLAIMED:
        return _replace(base, _running(task, facts), ())
    if task.state in (TaskState.DONE, TaskState.DEAD, TaskState.CANCELLED):
        text = {
            TaskState.DONE: "it is done",
            TaskState.DEAD: "it is dead: out of attempts (`shoal retry` brings it back)",
            TaskState.CANCELLED: "it was cancelled (`shoal retry` brings it back)",
        }[task.state]
        return _replace(base, [Reason(task.state.value, text, task.finished_at)], ())
    reasons: list[Reason] = []
    if task.state is TaskState.BLOCKED:
        reasons.append(_dependencies(task, deps or {}))
    elif task.ready_at is not None and task.ready_at > now:
        if task.attempts > 0 and task.error is not None:
            text = f"waits out its retry backoff after {task.attempts} failed attempt(s)"
            reasons.append(Reason("retry_backoff", text, task.ready_at))
        else:
            reasons.append(Reason("not_before", "not to start before then", task.ready_at))
    if task.state is TaskState.PENDING:  # a blocked task meets its group once freed
        reasons += group_reasons(task, facts)
    verdicts = [verdict(a, task, facts) for a in facts.agents]
    able = [v for v in verdicts if v.step is not None]
    takers: list[Taker] = []
    if not reasons:
        takers = [Taker(v.agent.id, v.step, v.agent.status) for v in able if v.step is not None]
        takers.sort(key=_likeliest)
    if task.state is TaskState.BLOCKED:  # where it goes once freed is not known yet
        reasons += [r for r in agent_reasons(task, verdicts, facts) if r.code == "missing_skills"]
    elif not takers:
        reasons += agent_reasons(task, verdicts, facts)
    else:  # it goes to its takers; say whom the locality rules keep it from meanwhile
        kept = ("domain_wait", "locality_wait")
        reasons += [r for r in agent_reasons(task, verdicts, facts) if r.code in kept]
    return _replace(base, reasons, takers)


def _replace(base: TaskWhy, reasons: Iterable[Reason], takers: Iterable[Taker]) -> TaskWhy:
    return TaskWhy(
        base.task, base.title, base.state, base.at, base.agent, tuple(reasons), tuple(takers)
    )


_STATUS_ORDER = {AgentStatus.IDLE: 0, AgentStatus.WAITING: 1, AgentStatus.WORKING: 2}


def _likeliest(taker: Taker) -> tuple[int, int, str]:
    """Its own agent first, then the pool's takers before thieves; idle agents (about to
    ask) before those between tasks, before those at work."""
    return (STEP_ORDER.index(taker.step), _STATUS_ORDER.get(taker.status, 3), taker.agent)


def _running(task: Task, facts: Facts) -> list[Reason]:
    now, holder = facts.now, task.agent or "?"
    if policy.lease_due(task, now):
        text = (
            f"{holder}'s lease ran out; the next claim anywhere ends it, and the task is "
            "pending again (or dead, out of attempts)"
        )
        return [Reason("lease_expired", text, task.lease_expires, task.claimed_at, (holder,))]
    text = f"running on {holder}; its lease runs out unless {holder} heartbeats"
    reasons = [Reason("running", text, task.lease_expires, task.claimed_at, (holder,))]
    if task.stalled_at is not None or policy.is_stalled(task, now, facts.settings):
        text = "stalled: running well past its expected duration"
        reasons.append(Reason("stalled", text, since=task.stalled_at, agents=(holder,)))
    return reasons


def _dependencies(task: Task, deps: Mapping[int, Task]) -> Reason:
    waiting = sorted(i for i, t in deps.items() if t.state is not TaskState.DONE)
    stuck = [i for i in waiting if deps[i].state in (TaskState.DEAD, TaskState.CANCELLED)]
    if stuck:
        text = (
            f"waits on {_ids(waiting)}, and {_ids(stuck)} ended without finishing: "
            "it stays blocked until that is retried (`shoal retry`)"
        )
        return Reason("stuck", text, tasks=tuple(waiting))
    return Reason("dependencies", f"waits for {_ids(waiting)} to be done", tasks=tuple(waiting))


def _ids(ids: Sequence[int]) -> str:
    return ", ".join(f"#{i}" for i in ids) or "its dependencies"


_NOT_STEALABLE = {
    "pinned": "it is pinned to its agent",
    "stolen_before": "it was stolen once already",
    "steal_min_priority": "its priority number is below steal_min_priority",
}


def agent_reasons(task: Task, verdicts: Sequence[_Verdict], facts: Facts) -> list[Reason]:
    """What keeps each agent from the task, grouped by rule, in the claim's order."""
    if not verdicts:
        return [Reason("no_agents", "no agent is registered")]
    reasons: list[Reason] = []
    by_code: dict[str, list[_Verdict]] = {}
    for v in verdicts:
        if v.step is None and (task.agent is None or v.agent.id != task.agent):
            by_code.setdefault(v.code, []).append(v)
    owner = next((v for v in verdicts if v.agent.id == task.agent), None)
    if task.agent is not None and (owner is None or owner.step is None):
        reasons.append(_owner(task, owner))
        task_rule = next((c for c in _NOT_STEALABLE if c in by_code), None)
        if task_rule is not None and task_rule != "pinned":
            text = f"no other agent may steal it: {_NOT_STEALABLE[task_rule]}"
            reasons.append(Reason("not_stealable", text))
            return reasons
        if task.pinned:
            return reasons
    able = sizing.able_agents(facts.agents)
    if not any(policy.can_do(a.skills, task.skills) for a in able):
        missing = sizing.skills_missing([task.skills], able)
        need = ", ".join(missing) if missing else "all of " + ", ".join(task.skills)
        text = f"no live agent has the skills it needs: {need}"
        if not task.skills:  # it needs none: there is no live agent at all
            text = "no live agent is there to take it (it needs no skills)"
        if sizing.spawn_room(facts.agents, facts.settings):
            text += "; `shoal assess` recommends spawning an agent"
            text += " with them" if task.skills else ""
        else:
            text += "; the fleet is full (max_agents): terminate an idle agent to make room"
        reasons.append(Reason("missing_skills", text, skills=tuple(missing or task.skills)))
    for code, make in _GROUPED:
        if code in by_code:
            reasons.append(make(by_code[code], task))
    return reasons


def _owner(task: Task, owner: _Verdict | None) -> Reason:
    name = task.agent or "?"
    code = "pinned" if task.pinned else "owner"
    lead = f"pinned to {name}" if task.pinned else f"in {name}'s queue"
    if owner is None:
        return Reason(code, f"{lead}, which is gone (terminated)", agents=(name,))
    state = {
        "offline": "which is offline (silent past heartbeat_timeout)",
        "paused": "which is paused",
        "busy": "which holds as many leases as it may (max_concurrent) until one ends",
    }.get(owner.code, f"which cannot take it now ({owner.code})")
    return Reason(code, f"{lead}, {state}", owner.until, agents=(name,))


def _who(vs: Sequence[_Verdict]) -> tuple[str, ...]:
    return tuple(sorted(v.agent.id for v in vs))


def _soonest(vs: Sequence[_Verdict]) -> float | None:
    return min((v.until for v in vs if v.until is not None), default=None)


def _names(vs: Sequence[_Verdict]) -> str:
    names = _who(vs)
    return ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")


def _grouped(code: str, text: str) -> Any:
    def make(vs: Sequence[_Verdict], task: Task) -> Reason:
        return Reason(
            code, text.format(who=_names(vs), domain=task.domain), _soonest(vs), agents=_who(vs)
        )

    return make


#: Each per-agent code, as one reason about all the agents it holds back.
_GROUPED = (
    ("domain", _grouped("not_stealable", "{who}: may not steal it (not of domain {domain})")),
    ("offline", _grouped("agents_offline", "{who}: offline")),
    ("paused", _grouped("agents_paused", "{who}: paused (the circuit breaker or a person)")),
    ("busy", _grouped("agents_busy", "{who}: busy, at max_concurrent, until a lease ends")),
    ("domain_wait", _grouped("domain_wait", "kept from {who} for an idle {domain} agent")),
    ("locality_wait", _grouped("locality_wait", "kept from {who} for domain {domain}")),
    (
        "owner_not_working",
        _grouped("owner_not_working", "{who}: no steal from an agent not at work"),
    ),
    (
        "steal_threshold",
        _grouped("steal_threshold", "{who}: its queue is not past steal_threshold"),
    ),
    ("steal_caps", _grouped("steal_caps", "{who}: steal caps reached for this window")),
)
