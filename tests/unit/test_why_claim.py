"""``why`` and the claim tell one story: on random small fleets, what ``Fleet.why_task``
and ``Fleet.why_agent`` say an agent's claim would do is what the claim does.

For one agent A, after a random history on a manual clock:

* every task ``why_task`` says A could take now by step S: A's claim takes something, by S
  or an earlier step of the cascade (the task, or a better one);
* the task A's claim takes lists A among its takers, by the step the claim used -- so a
  task ``why`` says no one can take is taken by no claim;
* ``why_agent(A)`` names the very task the claim takes from the queue or the pool (a
  steal's victim is drawn at random among ties, so only the step is held there), and says
  nothing when the claim gets nothing.
"""

from __future__ import annotations

import random
import tempfile

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from shoal.errors import ShoalError
from shoal.fleet import Fleet
from shoal.policy_why import STEP_ORDER
from shoal.testing import ManualClock
from shoal.vocabulary import ClaimSource, TaskState

STEAL = ClaimSource.STEAL

AGENTS = ("a0", "a1", "a2", "a3")
SKILLS = ("go", "py")
DOMAINS = ("x", "y")

skills = st.lists(st.sampled_from(SKILLS), max_size=2, unique=True)
domains = st.lists(st.sampled_from(DOMAINS), max_size=2, unique=True)

agent_spec = st.tuples(skills, domains, st.integers(1, 2))
task_spec = st.fixed_dictionaries(
    {
        "priority": st.integers(1, 9),
        "skills": st.lists(st.sampled_from(SKILLS), max_size=1),
        "domain": st.sampled_from([None, *DOMAINS]),
        "to": st.sampled_from([None, *AGENTS, *AGENTS[:2]]),
        "pinned": st.sampled_from([False, False, True]),
        "not_before": st.sampled_from([None, None, 5.0, 40.0]),
        "after": st.sampled_from([False, False, False, True]),
        "group": st.sampled_from([None, "g", "g"]),
    }
)
action = st.one_of(
    st.tuples(st.just("claim"), st.integers(0, 3)),
    st.tuples(st.just("claim"), st.integers(0, 3)),
    st.tuples(st.just("fail"), st.integers(0, 3)),
    st.tuples(st.just("done"), st.integers(0, 3)),
    st.tuples(st.just("pause"), st.integers(0, 3)),
    st.tuples(st.just("wait"), st.sampled_from([1.0, 10.0, 30.0])),
    st.tuples(st.just("claim_each"), st.just(0)),
)
knobs = st.fixed_dictionaries(
    {
        "domain_wait": st.sampled_from([0.0, 20.0]),
        "locality_wait": st.sampled_from([0.0, 15.0]),
        "steal_threshold": st.integers(0, 1),
        "steal_min_priority": st.sampled_from([1, 5]),
        "max_steals_per_agent": st.sampled_from([0, 1, 5]),
        "retry_delay": st.sampled_from([0.0, 8.0]),
        "group_max": st.sampled_from([0, 1, 1, 2]),  # 0: group g has no limit
    }
)


def _build(
    knob: dict[str, float],
    agents: list[tuple[list[str], list[str], int]],
    tasks: list[dict],
    url: str = "memory://",
) -> tuple[Fleet, ManualClock]:
    clock = ManualClock()
    fleet = Fleet.open(url, create=True, clock=clock, rng=random.Random(7))
    knob = dict(knob)
    group_max = int(knob.pop("group_max", 0))
    fleet.configure(heartbeat_timeout=86400, lease_ttl=86400, failure_streak=2, **knob)
    if group_max:
        fleet.set_group("g", group_max)
    names = AGENTS[: len(agents)]
    for name, (sk, dom, most) in zip(names, agents, strict=False):
        fleet.register(name, skills=sk, domains=dom, max_concurrent=most)
    posted: list[int] = []
    for spec in tasks:
        to = spec["to"] if spec["to"] in names else None
        nb = clock.now() + spec["not_before"] if spec["not_before"] else None
        fields = {
            "priority": spec["priority"],
            "skills": spec["skills"],
            "domain": spec["domain"],
            "not_before": nb,
            "after": posted[-1:] if spec["after"] and posted else None,
            "group": spec.get("group"),
        }
        try:
            task = fleet.post("t", to=to, pinned=bool(to) and spec["pinned"], **fields)
        except ShoalError:  # its agent lacks its skills: to the pool
            task = fleet.post("t", **fields)
        posted.append(task.id)
        clock.advance(1.0)
    return fleet, clock


def _act(fleet: Fleet, clock: ManualClock, n: int, steps: list[tuple[str, object]]) -> None:
    names = AGENTS[:n]
    for verb, arg in steps:
        if verb == "wait":
            clock.advance(float(arg))  # type: ignore[arg-type]
            continue
        if verb == "claim_each":  # every agent at work at once: victims for a steal
            for each in names:
                fleet.claim(each)
            continue
        name = names[int(arg) % n]  # type: ignore[call-overload]
        try:
            if verb == "claim":
                fleet.claim(name)
            elif verb == "pause":
                fleet.pause(name, for_=25.0)
            elif fleet.leases(name):
                lease = fleet.leases(name)[0]
                if verb == "done":
                    fleet.complete(lease, then_claim=1)
                else:
                    fleet.fail(lease, "boom")
        except ShoalError:
            pass


fleets = {
    "knob": knobs,
    "agents": st.lists(agent_spec, min_size=2, max_size=4),
    "tasks": st.lists(task_spec, max_size=10),
    "steps": st.lists(action, max_size=12),
    "who": st.integers(0, 3),
    "others_first": st.booleans(),
}


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(**fleets)
def test_why_and_the_claim_agree(knob, agents, tasks, steps, who, others_first) -> None:
    _agree("memory://", knob, agents, tasks, steps, who, others_first)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(**fleets)
def test_why_and_the_claim_agree_on_sqlite(knob, agents, tasks, steps, who, others_first) -> None:
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite://{folder}/fleet.db"
        _agree(url, knob, agents, tasks, steps, who, others_first)


def _agree(url, knob, agents, tasks, steps, who, others_first) -> None:  # type: ignore[no-untyped-def]
    fleet, clock = _build(knob, agents, tasks, url)
    with fleet:
        _check(fleet, clock, len(agents), steps, who, others_first)


def _check(fleet, clock, n, steps, who, others_first) -> None:  # type: ignore[no-untyped-def]
    _act(fleet, clock, n, steps)
    agent = AGENTS[who % n]
    if others_first:  # the others at work before this one asks: victims for a steal
        for other in AGENTS[:n]:
            if other != agent:
                fleet.claim(other)
    whys = {t.id: fleet.why_task(t.id) for t in fleet.tasks(limit=100)}
    thieves = sorted(k.agent for w in whys.values() for k in w.takers if k.step is STEAL)
    if thieves and others_first:  # steals are rare in random fleets: look at one
        agent = thieves[0]
    said = fleet.why_agent(agent)
    offered = {
        tid: taker.step for tid, w in whys.items() for taker in w.takers if taker.agent == agent
    }
    claim = fleet.claim(agent)
    event(f"claim: {claim.grants[0].source if claim.grants else claim.reason}")
    for code in {r.code for w in whys.values() for r in w.reasons} | {r.code for r in said.reasons}:
        event(f"reason: {code}")
    if offered:
        assert claim.grants, (offered, said, claim)
        best = min(STEP_ORDER.index(step) for step in offered.values())
        assert STEP_ORDER.index(claim.grants[0].source) <= best
    for grant in claim.grants:
        steps_said = [t.step for t in whys[grant.task.id].takers if t.agent == agent]
        assert steps_said == [grant.source], (whys[grant.task.id], grant)
    if claim.grants:
        grant = claim.grants[0]
        assert said.step is grant.source, (said, grant)
        if grant.source is not ClaimSource.STEAL:
            assert said.next == grant.task.id
    else:
        assert said.next is None and said.reasons, said
    for tid, w in whys.items():  # a task said to be waiting for time is not taken
        if w.state is TaskState.PENDING and any(
            r.code in ("not_before", "retry_backoff") for r in w.reasons
        ):
            assert all(g.task.id != tid for g in claim.grants)
        if any(r.code == "group_full" for r in w.reasons):  # nor one its group holds back
            assert all(g.task.id != tid for g in claim.grants), (w, claim)
            assert not w.takers, w
    if said.next is None and any(r.code == "group_full" for r in said.reasons):
        assert not claim.grants, (said, claim)


def test_a_steal_is_foretold() -> None:
    """The steal step, which random fleets reach seldom: a busy peer's tail, by steal."""
    queued = {"priority": 5, "skills": [], "domain": None, "to": "a0", "pinned": False}
    queued |= {"not_before": None, "after": False, "group": None}
    knob = {"steal_threshold": 0, "max_steals_per_agent": 5}
    fleet, _ = _build(knob, [([], [], 1), ([], [], 1)], [queued] * 3)
    fleet.claim("a0")
    assert [t.to_dict() for t in fleet.why_task(3).takers] == [
        {"agent": "a1", "step": "steal", "status": "idle"}
    ]
    said = fleet.why_agent("a1")
    claim = fleet.claim("a1")
    assert (
        (said.next, said.step)
        == (3, ClaimSource.STEAL)
        == (claim.grants[0].task.id, claim.grants[0].source)
    )
    fleet.configure(max_steals_per_agent=1)
    assert [r.code for r in fleet.why_agent("a1").reasons] == ["capacity"]
    fleet.complete(fleet.leases("a1")[0])
    assert "steal_caps" in [r.code for r in fleet.why_agent("a1").reasons]
    assert "steal_caps" in [r.code for r in fleet.why_task(2).reasons]
    assert not fleet.claim("a1").grants


def test_a_full_group_names_a_few_holders_and_the_soonest_expiry() -> None:
    """Seven held of group g's seven places, on two agents with different lease lengths:
    the waiting task names five holders, soonest expiry first, and the rest by count; a
    blocked task of the group says only what it waits on; once a holder finishes, the
    waiting task is taken."""
    clock = ManualClock()
    fleet = Fleet.open("memory://", create=True, clock=clock)
    fleet.configure(heartbeat_timeout=86400, lease_ttl=600)
    start = clock.now()
    fleet.register("a0", max_concurrent=4)
    fleet.register("a1", max_concurrent=4)
    fleet.set_group("g", 7)
    first = [fleet.post(f"t{i}", group="g", lease_ttl=900).id for i in range(4)]
    fleet.claim("a0", 4)
    clock.advance(1)
    soon = [fleet.post(f"s{i}", group="g").id for i in range(3)]
    fleet.claim("a1", 3)
    waiting = fleet.post("waits", group="g").id
    blocked = fleet.post("after", group="g", after=[waiting]).id
    why = fleet.why_task(waiting)
    reason = why.reasons[0]
    assert [r.code for r in why.reasons] == ["group_full", "agents_busy"]  # a0 has no room
    assert not why.takers
    assert reason.tasks == (*soon, *first[:2]) and reason.agents == ("a0", "a1")
    assert "7 held of max 7" in reason.text and "and 2 more" in reason.text
    assert reason.until == start + 1 + 600  # a1's leases, taken a second later, end first
    assert [r.code for r in fleet.why_task(blocked).reasons] == ["dependencies"]
    assert [r.code for r in fleet.why_agent("a1").reasons] == ["group_full"]
    fleet.complete(fleet.leases("a0")[0])
    assert fleet.why_task(waiting).next is not None
    assert [g.task.id for g in fleet.claim("a0").grants] == [waiting]
