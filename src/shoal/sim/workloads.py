"""Workloads: who is in the fleet, what work arrives when, and how long it takes.

A workload is plain data, drawn from a seeded random generator, so a run is the same for
the same seed. Each task says when it arrives, how long it runs, its domain and priority,
and the agent a router would send it to (``home``). Where the work goes under each baseline
is the baseline's business (see ``baselines``); the workload only says whether the task was
*dealt to an agent* (``queued``: it sits in that agent's queue from the start, as routed
or assigned work does) or *addressed to a domain* (it goes to the pool, tagged with it).

A task may fork: when its first part (``duration``) is done it spawns ``children`` and
waits on them, then runs its ``join`` part -- a fork-join node. ``T1`` (all the work) and
``T_inf`` (the longest chain, counting arrival times) make the lower bound
``max(T1 / P, T_inf)`` that no scheduler can beat.

The workloads:

* ``overnight`` -- the hub-and-spoke night of five agents, each with a domain. At 02:00
  the queues hold what the router pushed: the research agent is buried, the CI agent has
  an hour of work. New work arrives through the night, addressed to domains. Half of the
  research backlog is simple (priority 8, no skills: anyone may do it).
* ``lognormal`` / ``pareto`` -- a batch dealt out in equal counts to every agent at once;
  durations are skewed (lognormal), or heavy-tailed (Pareto, alpha 1.5). Each task is
  posted with an ``expected_duration`` that is off by a lognormal error (sigma 0.5: half
  the estimates are more than 40% off), as a person's or a model's guess would be; only
  ``order = longest_first`` reads it.
* ``affinity`` -- a day of work arriving as a Poisson stream at 80% of the fleet's
  capacity, over four domains with two agents each and a skewed mix (35/25/20/20). Running
  a task outside one's domain costs a fixed warm-up.
* ``forkjoin`` -- a Fibonacci tree: fib(n) splits, spawns fib(n-1) and fib(n-2), waits on
  them and joins; leaves just run.

The cold start
--------------
A coding or research agent working in its own domain has the repository checked out, the
tools installed and the context loaded; one that takes another domain's task starts cold.
The ``cold_start`` factor models that: a task with a domain, run by an agent outside it,
takes ``cold_start`` times its duration longer (0.25: a 40-minute task takes 50), on top of
the workload's fixed ``warmup``. The join part of a fork-join task is the same task
resumed, and its context is with the agent that ran its first part: run by another agent,
it starts cold too. It is 0 unless a run sets it (``shoal sim --set cold_start=25%``), so
the published figures stay as they were; it applies to every baseline alike, because it
is a property of the work, not of the scheduler. Other work without a domain (the
batches, fork-join's first parts and leaves) runs as long on any agent.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from shoal.errors import BadInput

__all__ = [
    "MODEL_SETTINGS",
    "WORKLOADS",
    "AgentSpec",
    "TaskSpec",
    "Workload",
    "affinity",
    "build",
    "forkjoin",
    "get",
    "lognormal",
    "overnight",
    "pareto",
    "split_model",
]

MINUTE = 60.0
HOUR = 3600.0


@dataclass(frozen=True, slots=True)
class AgentSpec:
    """An agent of the simulated fleet: its id and the domains it knows."""

    id: str
    domains: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class TaskSpec:
    """One task of a workload (see the module docstring). Times are seconds from the start."""

    title: str
    duration: float
    arrival: float | None = 0.0  # None: spawned by a parent, not posted from outside
    domain: str | None = None
    priority: int = 5
    home: str | None = None  # the agent a router sends it to
    queued: bool = False  # dealt to ``home``'s queue (True) or addressed to a domain (False)
    children: tuple[int, ...] = ()  # indices of the tasks it spawns when ``duration`` is done
    join: float = 0.0  # work after its children are done
    estimate: float | None = None  # the expected_duration it is posted with


@dataclass(frozen=True, slots=True)
class Workload:
    """A fleet and its work. ``start`` is the wall-clock time the run begins at."""

    name: str
    agents: tuple[AgentSpec, ...]
    tasks: tuple[TaskSpec, ...]
    start: float = 1_767_225_600.0  # 2026-01-01T00:00:00Z
    warmup: float = 0.0  # seconds added to a task run by an agent outside its domain
    description: str = ""
    cold_start: float = 0.0  # ... and this fraction of its duration (module docstring)

    def off_domain_cost(self, duration: float) -> float:
        """Seconds a part of a task that takes ``duration`` runs longer on an agent that
        starts it cold (outside its domain; a join away from its first part): the fixed
        warm-up and the cold start."""
        return self.warmup + self.cold_start * duration

    @property
    def roots(self) -> tuple[int, ...]:
        """The tasks posted from outside (arrival not None), by index."""
        return tuple(i for i, t in enumerate(self.tasks) if t.arrival is not None)

    @property
    def work(self) -> float:
        """T1: the total work, without warm-ups."""
        return sum(t.duration + t.join for t in self.tasks)

    @property
    def span(self) -> float:
        """T_inf: the longest chain of work, from the start, arrival times included."""
        memo: dict[int, float] = {}

        def chain(i: int) -> float:  # the longest path through task i and what it spawns
            if i not in memo:
                t = self.tasks[i]
                below = max((chain(c) for c in t.children), default=0.0)
                memo[i] = t.duration + below + t.join
            return memo[i]

        return max(((self.tasks[i].arrival or 0.0) + chain(i) for i in self.roots), default=0.0)

    def lower_bound(self) -> float:
        """No schedule on these agents finishes sooner than max(T1 / P, T_inf)."""
        return max(self.work / len(self.agents), self.span)


def _lognormal(rng: random.Random, median: float, sigma: float) -> float:
    return median * math.exp(rng.gauss(0.0, sigma))


# ---------------------------------------------------------------------- the overnight night

#: The five agents of the hub-and-spoke fleet, each with its domain.
NIGHT_CREW = (
    AgentSpec("arc", ("ops",)),
    AgentSpec("spark", ("protocol",)),
    AgentSpec("iris", ("research",)),
    AgentSpec("loom", ("ci",)),
    AgentSpec("forge", ("infra",)),
)
_NIGHT_START = 1_773_108_000.0  # 2026-03-10T02:00:00Z


def overnight(seed: int = 0, *, agents: int | None = None, tasks: int | None = None) -> Workload:
    """The night of the hub-and-spoke fleet (module docstring). Sizes are fixed."""
    _no_sizes("overnight", agents, tasks)
    rng = random.Random(f"overnight-{seed}")
    owner = {a.domains[0]: a.id for a in NIGHT_CREW}
    specs: list[TaskSpec] = []

    def backlog(domain: str, count: int, hours: float | None, simple: float) -> None:
        """``count`` tasks already in the queue of the domain's agent at 02:00."""
        durations = [_lognormal(rng, 8 * MINUTE, 0.5) for _ in range(count)]
        if hours is not None:  # pin how long the queue lasts: the night's story
            scale = hours * HOUR / sum(durations)
            durations = [d * scale for d in durations]
        for n, duration in enumerate(durations):
            easy = rng.random() < simple
            specs.append(
                TaskSpec(
                    title=f"{domain} backlog {n + 1}" + (" (simple)" if easy else ""),
                    duration=duration,
                    domain=domain,
                    priority=8 if easy else rng.choice((3, 5, 5, 6)),
                    home=owner[domain],
                    queued=True,
                )
            )

    backlog("research", 20, None, 0.5)  # iris: buried
    backlog("ci", 6, 62 / 60, 0.2)  # loom: runs dry at 03:02, just after the router's round
    backlog("protocol", 8, None, 0.2)
    backlog("infra", 7, None, 0.2)
    backlog("ops", 6, None, 0.2)
    # New work through the night, addressed to domains; research gets most of it.
    mix = ["research"] * 4 + ["protocol", "ci", "infra", "ops"] * 1 + ["protocol", "infra"]
    at = 0.0
    n = 0
    while True:
        at += rng.expovariate(6 / HOUR)
        if at > 4 * HOUR:
            break
        domain = rng.choice(mix)
        n += 1
        specs.append(
            TaskSpec(
                title=f"{domain} arrival {n}",
                duration=_lognormal(rng, 8 * MINUTE, 0.5),
                arrival=at,
                domain=domain,
                priority=rng.choice((5, 5, 6, 8)),
                home=owner[domain],
            )
        )
    return Workload(
        "overnight",
        NIGHT_CREW,
        tuple(specs),
        start=_NIGHT_START,
        description="5 agents by domain; the research queue is buried, CI runs dry near 03:00",
    )


# ---------------------------------------------------------------------- batches


#: How far a batch task's estimate is off: its true length times exp(N(0, sigma)).
ESTIMATE_ERROR = 0.5


def _batch(
    name: str, draw: Callable[[random.Random], float], seed: int, agents: int, tasks: int
) -> Workload:
    rng = random.Random(f"{name}-{seed}")
    guess = random.Random(f"{name}-{seed}-estimates")  # apart, so lengths stay those of rng
    crew = tuple(AgentSpec(f"a{i:02d}") for i in range(agents))
    lengths = [draw(rng) for _ in range(tasks)]
    specs = tuple(
        TaskSpec(
            f"{name} {n + 1}",
            length,
            home=crew[n % agents].id,
            queued=True,
            estimate=_lognormal(guess, length, ESTIMATE_ERROR),
        )
        for n, length in enumerate(lengths)
    )
    what = f"{tasks} tasks dealt evenly to {agents} agents at once"
    return Workload(name, crew, specs, description=what)


def lognormal(seed: int = 0, *, agents: int | None = None, tasks: int | None = None) -> Workload:
    """A batch with lognormal durations (median 5 min, sigma 1)."""
    return _batch(
        "lognormal", lambda r: _lognormal(r, 5 * MINUTE, 1.0), seed, agents or 8, tasks or 400
    )


def pareto(seed: int = 0, *, agents: int | None = None, tasks: int | None = None) -> Workload:
    """A batch with Pareto durations (alpha 1.5, at least 2 min): a few huge tasks."""
    return _batch(
        "pareto", lambda r: 2 * MINUTE * r.paretovariate(1.5), seed, agents or 8, tasks or 400
    )


# ---------------------------------------------------------------------- affinity

_AFFINITY_DOMAINS = (("code", 0.35), ("research", 0.25), ("infra", 0.20), ("ci", 0.20))


def affinity(seed: int = 0, *, agents: int | None = None, tasks: int | None = None) -> Workload:
    """Work arriving over a day in four skewed domains; off-domain work costs a warm-up.

    ``agents`` is rounded up to a multiple of four (one share of agents per domain);
    ``tasks`` sets how many arrive (the rate keeps the load at 80%).
    """
    per_domain = max(1, math.ceil((agents or 8) / len(_AFFINITY_DOMAINS)))
    crew = tuple(
        AgentSpec(f"{domain}-{k + 1}", (domain,))
        for domain, _ in _AFFINITY_DOMAINS
        for k in range(per_domain)
    )
    rng = random.Random(f"affinity-{seed}")
    median, sigma = 10 * MINUTE, 0.5
    mean = median * math.exp(sigma**2 / 2)
    rate = 0.8 * len(crew) / mean  # arrivals per second at 80% load
    count = tasks or round(rate * 8 * HOUR)
    names = [d for d, _ in _AFFINITY_DOMAINS]
    weights = [w for _, w in _AFFINITY_DOMAINS]
    turn = dict.fromkeys(names, 0)
    specs = []
    at = 0.0
    for n in range(count):
        domain = rng.choices(names, weights)[0]
        home = f"{domain}-{turn[domain] % per_domain + 1}"  # the router's round robin
        turn[domain] += 1
        specs.append(
            TaskSpec(
                f"{domain} {n + 1}",
                _lognormal(rng, median, sigma),
                arrival=at,
                domain=domain,
                home=home,
            )
        )
        at += rng.expovariate(rate)
    what = f"{count} tasks over 4 domains (35/25/20/20) at 80% load; 5 min warm-up off-domain"
    return Workload("affinity", crew, tuple(specs), warmup=5 * MINUTE, description=what)


# ---------------------------------------------------------------------- fork-join


def forkjoin(
    seed: int = 0, *, agents: int | None = None, tasks: int | None = None, n: int = 12
) -> Workload:
    """fib(n) as a fork-join tree (``tasks`` picks the smallest n with at least that many
    nodes). Leaves run about 2 min; a split and a join about 1 min each (+-20%)."""
    if tasks is not None:
        n = 1
        while _fib_nodes(n) < tasks:
            n += 1
    rng = random.Random(f"forkjoin-{seed}")
    crew = tuple(AgentSpec(f"a{i:02d}") for i in range(agents or 8))
    specs: list[TaskSpec] = []

    def node(k: int, arrival: float | None) -> int:
        index = len(specs)
        specs.append(TaskSpec(f"fib({k})", 0.0))  # a placeholder, filled in below
        if k < 2:
            specs[index] = TaskSpec(
                f"fib({k})", _lognormal(rng, 2 * MINUTE, 0.2), arrival, home=crew[0].id
            )
            return index
        children = (node(k - 1, None), node(k - 2, None))
        specs[index] = TaskSpec(
            f"fib({k})",
            _lognormal(rng, MINUTE, 0.2),
            arrival,
            home=crew[0].id,
            children=children,
            join=_lognormal(rng, MINUTE, 0.2),
        )
        return index

    node(n, 0.0)
    what = f"fib({n}): {len(specs)} tasks that spawn children and wait on them"
    return Workload("forkjoin", crew, tuple(specs), description=what)


def _fib_nodes(n: int) -> int:
    a, b = 1, 1  # nodes of fib(0), fib(1)
    for _ in range(n - 1):
        a, b = b, a + b + 1
    return b if n >= 1 else a


def _no_sizes(name: str, agents: int | None, tasks: int | None) -> None:
    if agents is not None or tasks is not None:
        raise BadInput(
            f"the {name} workload has a fixed fleet and night; it takes no --agents or --tasks",
            hint="drop --agents/--tasks, or pick lognormal, pareto, affinity or forkjoin",
        )


WorkloadMaker = Callable[..., Workload]

#: Every workload by name, in the order the standard comparison shows them.
WORKLOADS: dict[str, WorkloadMaker] = {
    "overnight": overnight,
    "lognormal": lognormal,
    "pareto": pareto,
    "affinity": affinity,
    "forkjoin": forkjoin,
}


#: Settings of the workload model that a run may give with the fleet's (``--set``).
MODEL_SETTINGS = ("cold_start",)
_COLD_START_MAX = 10.0  # 1000%: past that the figure means nothing anyway


def _cold_start(value: object) -> float:
    """A cold-start factor: a fraction (``0.25``) or a percentage (``"25%"``), 0..10."""
    text = str(value).strip()
    try:
        factor = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        factor = math.nan
    if not 0 <= factor <= _COLD_START_MAX:  # NaN fails this too
        raise BadInput(
            f"cold_start must be a fraction from 0 to 10 or a percentage, not {value!r}",
            hint="e.g. cold_start=0.25 or cold_start=25% (a task run outside its domain takes "
            "25% longer)",
        )
    return factor


def split_model(
    settings: Mapping[str, object] | None,
) -> tuple[dict[str, float], dict[str, object]]:
    """Separate the workload model's settings (``MODEL_SETTINGS``, checked here) from the
    fleet's (checked by the fleet): ``({"cold_start": 0.25}, {"order": ...})``."""
    model: dict[str, float] = {}
    fleet: dict[str, object] = {}
    for name, value in (settings or {}).items():
        if name == "cold_start":
            model[name] = _cold_start(value)
        else:
            fleet[name] = value
    return model, fleet


def get(name: str) -> WorkloadMaker:
    """The maker of the workload called ``name``, or a clear error listing the ones there are."""
    maker = WORKLOADS.get(name)
    if maker is None:
        raise BadInput(
            f"there is no workload called {name!r}",
            hint=f"pick one of: {', '.join(WORKLOADS)}",
        )
    return maker


def build(
    name: str, seed: int = 0, *, agents: int | None = None, tasks: int | None = None
) -> Workload:
    """The workload called ``name`` for ``seed``; ``agents`` and ``tasks`` resize it."""
    maker = get(name)
    for what, value in (("agents", agents), ("tasks", tasks)):
        if value is not None and not 1 <= value <= 100_000:
            raise BadInput(f"{what} must be between 1 and 100000, not {value}")
    return maker(seed, agents=agents, tasks=tasks)
