"""``shoal demo``: a small fleet working through a skewed workload, live.

Four agents each own a domain (infra, research, code, ci), as in a hub-and-spoke fleet.
Most of the work is routed to the research agent -- the overnight situation where one
agent is buried while the others run dry. Each agent runs in its own thread with its own
connection to a SQLite fleet, pulling work with the real claim: its own queue first, then
the pool, then a steal from the tail of the busiest queue it is allowed to help with. A hub
thread reaps, rebalances and assesses on a short interval. At the end a summary shows who
did what, how much was stolen, and how long the buried agent alone would have needed.
"""

from __future__ import annotations

import random
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from shoal.errors import BadInput
from shoal.fleet import Fleet
from shoal.model import Task
from shoal.runtime.loop import AgentLoop, LoopStats

__all__ = ["DemoSummary", "run_demo", "summary_view"]

#: (agent, domains it knows, skills it has, share of the routed work, colour)
CREW = [
    ("iris", ("research",), ("web", "writing"), 0.55, "magenta"),
    ("forge", ("infra",), ("shell",), 0.15, "yellow"),
    ("spark", ("code", "research"), ("python", "web"), 0.15, "cyan"),
    ("loom", ("ci",), ("shell", "python"), 0.15, "green"),
]
JOBS = {
    "research": ["summarize paper", "compare vendors", "read the RFC", "survey prior art"],
    "infra": ["rotate certificates", "resize the cluster", "patch the bastion"],
    "code": ["fix the parser", "add retries to the client", "refactor the router"],
    "ci": ["speed up the test job", "pin the toolchain", "flaky test triage"],
}


@dataclass
class AgentReport:
    agent: str
    domains: tuple[str, ...]
    done: int
    stolen: int
    busy: float
    idle: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "agent": self.agent,
            "domains": list(self.domains),
            "done": self.done,
            "stolen": self.stolen,
            "busy_seconds": round(self.busy, 3),
            "idle_seconds": round(self.idle, 3),
        }


@dataclass
class DemoSummary:
    store: str
    tasks: int
    done: int
    steals: int
    rebalanced: int
    makespan: float
    buried_agent: str
    buried_alone: float
    ideal: float
    agents: list[AgentReport] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "store": self.store,
            "tasks": self.tasks,
            "done": self.done,
            "steals": self.steals,
            "rebalanced": self.rebalanced,
            "makespan_seconds": round(self.makespan, 3),
            "buried_agent": self.buried_agent,
            "buried_agent_alone_seconds": round(self.buried_alone, 3),
            "ideal_seconds": round(self.ideal, 3),
            "agents": [a.to_dict() for a in self.agents],
        }


def run_demo(
    *,
    folder: Path | None,
    agents: int = 4,
    tasks: int = 80,
    speed: float = 1.0,
    seed: int = 7,
    console: Console | None = None,
) -> DemoSummary:
    """Run the demo on a new SQLite fleet in ``folder`` (default: a new temporary folder)."""
    if not 1 <= agents <= len(CREW):
        raise BadInput(f"the demo runs 1 to {len(CREW)} agents, not {agents}")
    if speed <= 0 or tasks < 1:
        raise BadInput("--speed must be above 0 and --tasks at least 1")
    if folder is None:
        folder = Path(tempfile.mkdtemp(prefix="shoal-demo-"))
    target = folder.resolve() / "fleet.db"
    if target.exists():
        raise BadInput(
            f"{target} already exists; the demo only runs on a new fleet of its own",
            hint="give --dir an empty folder, or leave --dir out",
        )
    url = f"sqlite://{target}"
    crew = CREW[:agents]
    rng = random.Random(seed)
    fleet = Fleet.open(url)
    fleet.configure(
        max_agents=max(4, agents),
        lease_ttl=60,
        busy_threshold=3,
        rebalance_interval=max(1.0, 2.0 / speed),
        idle_min_for_rebalance=max(0.2, 0.5 / speed),
        poll_base=0.05,
        poll_max=0.2,
    )
    for name, domains, skills, _, _ in crew:
        fleet.register(name, domains=domains, skills=skills, role="worker")
    durations: dict[int, float] = {}
    routed: dict[str, float] = {name: 0.0 for name, *_ in crew}
    shares = [share for *_, share, _ in crew]
    for i in range(tasks):
        name, domains, skills, _, _ = rng.choices(crew, weights=shares)[0]
        domain = domains[0]
        simple = rng.random() < 0.5
        priority = rng.choice([8, 9]) if simple else rng.choice([2, 3, 5, 5, 6, 7])
        need = () if simple else (rng.choice(skills),)
        seconds = min(1.2, rng.lognormvariate(-1.6, 0.6)) / speed
        title = f"{rng.choice(JOBS[domain])} #{i + 1}"
        task = fleet.post(title, priority=priority, skills=need, domain=domain, to=name)
        durations[task.id] = seconds
        routed[name] += seconds
    colours = {name: colour for name, *_, colour in crew}
    started = time.monotonic()
    lock = threading.Lock()
    if console is not None:
        console.print(
            Text.from_markup(
                f"[bold]shoal demo[/]: {agents} agents, {tasks} tasks, most of them routed to "
                f"[magenta]iris[/]. Fleet: {url}\n"
            )
        )

    def say(agent: str, kind: str, task: Task | None, data: dict[str, Any]) -> None:
        if console is None or kind not in ("claimed", "failed", "lost"):
            return
        assert task is not None
        line = Text(f"{time.monotonic() - started:6.2f}s  ", style="dim")
        line.append(f"{agent:<6}", style=colours.get(agent, ""))
        source = data.get("source", "")
        if source == "steal":
            line.append(f" STEALS #{task.id:<3} from {data.get('from')}", style="bold red")
        else:
            line.append(f" claims #{task.id:<3} from {source:<5}")
        line.append(f"  p{task.priority} {task.domain or '-':<8} {task.title}", style="dim")
        with lock:
            console.print(line)

    reader = Fleet.open(url)

    def unfinished() -> bool:
        with lock:
            counts = reader.status().counts
        return counts.get("pending", 0) + counts.get("claimed", 0) + counts.get("blocked", 0) > 0

    stop = threading.Event()
    stats: dict[str, LoopStats] = {}

    def agent_thread(name: str) -> None:
        own = Fleet.open(url)
        loop = AgentLoop(
            own,
            name,
            lambda task: time.sleep(durations.get(task.id, 0.1)),
            stop=stop,
            listener=lambda kind, task, data: say(name, kind, task, data),
        )
        stats[name] = loop.run(until=lambda: not unfinished())
        own.close()

    moved = []

    def hub_thread() -> None:
        hub = Fleet.open(url)
        while not stop.wait(max(0.2, 0.5 / speed)):
            hub.reap()
            for move in hub.rebalance():
                moved.append(move)
                if console is not None:
                    line = Text(f"{time.monotonic() - started:6.2f}s  hub    ", style="dim")
                    line.append(
                        f" rebalance moves #{move.task_id} {move.from_agent} -> {move.to_agent}",
                        style="bold blue",
                    )
                    with lock:
                        console.print(line)
        hub.close()

    threads = [threading.Thread(target=agent_thread, args=(name,)) for name, *_ in crew]
    hub = threading.Thread(target=hub_thread)
    for t in threads:
        t.start()
    hub.start()
    for t in threads:
        t.join()
    stop.set()
    hub.join()
    makespan = time.monotonic() - started
    steals = sum(1 for e in reader.events(limit=1_000_000) if e.kind == "stolen")
    counts = reader.status().counts
    reader.close()
    fleet.close()
    buried = max(routed, key=lambda k: routed[k])
    return DemoSummary(
        store=url,
        tasks=tasks,
        done=counts.get("done", 0),
        steals=steals - len(moved),
        rebalanced=len(moved),
        makespan=makespan,
        buried_agent=buried,
        buried_alone=routed[buried],
        ideal=sum(durations.values()) / len(crew),
        agents=[
            AgentReport(
                name,
                domains,
                stats[name].done,
                stats[name].stolen,
                stats[name].busy_seconds,
                stats[name].idle_seconds,
            )
            for name, domains, *_ in crew
        ],
    )


def summary_view(summary: DemoSummary) -> Group:
    table = Table(title="who did what", box=box.SIMPLE_HEAVY, title_justify="left")
    for column in ("agent", "domains", "done", "stolen", "busy", "idle"):
        table.add_column(column)
    for a in summary.agents:
        table.add_row(
            a.agent,
            ",".join(a.domains),
            str(a.done),
            str(a.stolen),
            f"{a.busy:.1f}s",
            f"{a.idle:.1f}s",
        )
    lines = Text.from_markup(
        f"\n[bold]{summary.done}/{summary.tasks} tasks done[/] in {summary.makespan:.1f}s; "
        f"{summary.steals} stolen at claim time, {summary.rebalanced} moved by rebalance.\n"
        f"Without stealing, [magenta]{summary.buried_agent}[/] alone needed "
        f"{summary.buried_alone:.1f}s for the work routed to it; an even split is "
        f"{summary.ideal:.1f}s.\n"
        f"Look around: shoal --store {summary.store} events | status | list"
    )
    return Group(table, lines)
