"""``shoal demo``: a supervisor grows a fleet of real worker processes, which work through a
skewed workload, steal, and leave when the work is done -- live.

Four kinds of agent each know a domain (research, infra, code, ci), as in a hub-and-spoke
fleet. Most of the work is routed to the research agent, iris: the overnight situation where
one agent is buried while the others have nothing. A ``Supervisor`` (what ``shoal
supervise`` runs) reads the assessment and starts ``shoal worker`` processes one by one, up
to the cap; each runs ``sleep`` for its task's duration, pulling work with the real claim --
its own queue, then the pool, then a steal from the tail of iris's queue. When the work runs
out they go idle and, being ephemeral, leave the fleet after its idle grace, and the demo
ends. Everything shown comes from the fleet's own event log; the summary too.
"""

from __future__ import annotations

import random
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click
from rich import box
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from shoal.errors import BadInput
from shoal.faces.cli.app import App, json_option, pass_app
from shoal.faces.cli.runtime import claimed_from, worker_argv
from shoal.fleet import Fleet
from shoal.model import Event
from shoal.runtime.supervisor import Supervisor, SupervisorEvent, WorkerSpec

__all__ = ["DemoSummary", "add_demo_commands", "run_demo", "summary_view"]

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
#: The demo stops its workers after this long whatever happens (it takes ~15 s).
DEADLINE = 50.0


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
    spawned: int = 0
    left_idle: int = 0  # workers that left by themselves once idle past the grace
    retired: int = 0  # workers the supervisor stopped because agents sat idle

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
            "workers_started": self.spawned,
            "workers_left_idle": self.left_idle,
            "workers_retired": self.retired,
        }


def _sleep_command() -> list[str]:
    """What each worker runs per task: sleep for the seconds in its payload."""
    found = shutil.which("sleep")
    if found is not None:
        return [found, "{payload[seconds]}"]
    return [sys.executable, "-c", "import sys, time; time.sleep(float(sys.argv[1]))",
            "{payload[seconds]}"]  # fmt: skip


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
        max_agents=agents,
        lease_ttl=30,
        heartbeat_timeout=10,
        idle_timeout=max(0.5, 1.5 / speed),
        busy_threshold=3,
        rebalance_interval=max(1.0, 2.0 / speed),
        idle_min_for_rebalance=max(0.2, 0.5 / speed),
        poll_base=0.05,
        poll_max=0.5,
    )
    # The buried agent is there from the start, with a queue; the others come when needed.
    buried, *_ = crew[0]
    fleet.register(buried, domains=crew[0][1], skills=crew[0][2], ephemeral=True)
    durations: dict[int, float] = {}
    routed: dict[str, float] = {name: 0.0 for name, *_ in crew}
    shares = [share for *_, share, _ in crew]
    for i in range(tasks):
        name, domains, skills, _, _ = rng.choices(crew, weights=shares)[0]
        domain = domains[0]
        simple = rng.random() < 0.5
        priority = rng.choice([8, 9]) if simple else rng.choice([2, 3, 5, 5, 6, 7])
        need = () if simple else (rng.choice(skills),)
        seconds = round(min(1.2, rng.lognormvariate(-1.6, 0.6)) / speed, 3)
        title = f"{rng.choice(JOBS[domain])} #{i + 1}"
        task = fleet.post(
            title,
            priority=priority,
            skills=need,
            domain=domain,
            to=buried if name == buried else None,  # the rest waits in the pool
            payload={"seconds": seconds},
        )
        durations[task.id] = seconds
        routed[name] += seconds
    colours = {name: colour for name, *_, colour in crew}
    started = time.monotonic()
    show = _Show(console, colours, time.time())
    if console is not None:
        console.print(
            Text.from_markup(
                f"[bold]shoal demo[/]: {tasks} tasks, most of them routed to [magenta]{buried}"
                f"[/]; a supervisor starts up to {agents} `shoal worker` processes as the "
                f"work calls for them.\nFleet: {url}\n"
            )
        )

    def namer(count: int, _wanted: tuple[str, ...]) -> WorkerSpec:
        name, domains, skills, *_ = crew[(count - 1) % len(crew)]
        if count > len(crew):  # a crashed-and-gone crew member's place, taken anew
            name = f"{name}{(count - 1) // len(crew) + 1}"
        return WorkerSpec(name, skills, domains)

    command = _sleep_command()
    sup = Supervisor(
        fleet,
        lambda spec: worker_argv(spec, command, drain=5.0),
        maximum=agents,
        minimum=0,
        interval=0.2,
        cooldown=max(0.3, 0.6 / speed),
        drain=5.0,
        namer=namer,
        listener=show.supervisor,
    )
    seen = 0
    deadline = started + DEADLINE
    try:
        while True:
            sup.step()
            for event in fleet.events(seen, limit=100_000):
                show.event(event)
                seen = event.id
            counts = fleet.status().counts
            open_work = sum(counts.get(s, 0) for s in ("pending", "claimed", "blocked"))
            if (not open_work and not sup.slots) or time.monotonic() > deadline:
                break
            time.sleep(sup.interval)
    finally:
        sup.shutdown()
    for event in fleet.events(seen, limit=100_000):
        show.event(event)
    history = fleet.events(0, limit=1_000_000)
    counts = fleet.status().counts
    fleet.close()
    heavy = max(routed, key=lambda k: routed[k])
    steals = [e for e in history if e.kind == "stolen"]
    moved = sum(1 for e in steals if e.data.get("by") == "rebalance")
    ends = [e for e in history if e.kind == "agent.terminated"]
    return DemoSummary(
        store=url,
        tasks=tasks,
        done=counts.get("done", 0),
        steals=len(steals) - moved,
        rebalanced=moved,
        makespan=_makespan(history),
        buried_agent=heavy,
        buried_alone=routed[heavy],
        ideal=sum(durations.values()) / len(crew),
        agents=_reports(history, {name: domains for name, domains, *_ in crew}),
        spawned=sup.spawned,
        left_idle=sum(1 for e in ends if str(e.data.get("why", "")).startswith("idle")),
        retired=sum(1 for e in ends if e.data.get("why") == "its worker was stopped"),
    )


class _Show:
    """The live lines: claims, steals, workers joining and leaving (from the event log),
    and what the supervisor does."""

    def __init__(self, console: Console | None, colours: dict[str, str], started: float):
        self.console, self.colours, self.started = console, colours, started

    def _line(self, agent: str, at: float | None = None) -> Text:
        line = Text(f"{(at or time.time()) - self.started:6.2f}s  ", style="dim")
        line.append(f"{agent:<10}", style=self.colours.get(agent, "bold"))
        return line

    def event(self, e: Event) -> None:
        if self.console is None or e.agent is None:
            return
        line = self._line(e.agent, e.at)
        if e.kind == "claimed":
            line.append(f" claims #{e.task_id:<3} {claimed_from(e.data.get('source'))}")
        elif e.kind == "stolen" and e.data.get("by") == "rebalance":
            line.append(f" gets #{e.task_id} from {e.data.get('from')} (rebalance)", "bold blue")
        elif e.kind == "stolen":
            line.append(f" STEALS #{e.task_id:<3} from {e.data.get('from')}", style="bold red")
        elif e.kind == "agent.idle":
            line.append(" is idle", style="yellow")
        elif e.kind == "agent.terminated":
            line.append(f" leaves the fleet ({e.data.get('why', '')})", style="yellow")
        else:
            return
        self.console.print(line)

    def supervisor(self, event: SupervisorEvent) -> None:
        if self.console is None or event.kind not in (
            "spawned",
            "restarted",
            "crashed",
            "stopping",
        ):
            return
        line = self._line("supervisor")
        line.append(f" {event.text}", style="bold cyan")
        self.console.print(line)


def _makespan(history: list[Event]) -> float:
    done = [e.at for e in history if e.kind == "completed"]
    claims = [e.at for e in history if e.kind in ("claimed", "stolen")]
    return max(done) - min(claims) if done and claims else 0.0


def _reports(history: list[Event], crew: dict[str, tuple[str, ...]]) -> list[AgentReport]:
    """Per agent, from the log: tasks done and stolen, time busy (claim to completion) and
    time idle (the rest of its time in the fleet)."""
    joined: dict[str, float] = {}
    left: dict[str, float] = {}
    claimed_at: dict[int, tuple[str, float]] = {}
    done: dict[str, int] = {}
    stolen: dict[str, int] = {}
    busy: dict[str, float] = {}
    end = history[-1].at if history else 0.0
    for e in history:
        if e.agent is None:
            continue
        if e.kind in ("agent.registered", "agent.updated"):
            joined.setdefault(e.agent, e.at)
        elif e.kind == "agent.terminated":
            left[e.agent] = e.at
        elif e.kind in ("claimed", "stolen") and e.data.get("by") != "rebalance":
            claimed_at[e.task_id or 0] = (e.agent, e.at)
            if e.kind == "stolen":
                stolen[e.agent] = stolen.get(e.agent, 0) + 1
        elif e.kind == "completed" and e.task_id in claimed_at:
            agent, since = claimed_at.pop(e.task_id)
            done[agent] = done.get(agent, 0) + 1
            busy[agent] = busy.get(agent, 0.0) + e.at - since
    reports = []
    for agent, since in joined.items():
        alive = left.get(agent, end) - since
        work = busy.get(agent, 0.0)
        reports.append(
            AgentReport(
                agent,
                crew.get(agent, ()),
                done.get(agent, 0),
                stolen.get(agent, 0),
                work,
                max(0.0, alive - work),
            )
        )
    return reports


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
        f"The supervisor started {summary.spawned} worker processes as the work called for "
        f"them; when it ran out, left on their own once idle: {summary.left_idle}; retired by "
        f"the supervisor: {summary.retired}.\n"
        f"Look around: shoal --store {summary.store} status  (or events, list)"
    )
    return Group(table, lines)


@click.command(short_help="Watch a small fleet work, steal and finish.")
@click.option("--agents", "agent_count", default=4, show_default=True, help="Agents to run.")
@click.option("--tasks", "task_count", default=80, show_default=True, help="Tasks to post.")
@click.option("--speed", default=1.0, show_default=True, help="Run faster (>1) or slower.")
@click.option("--seed", default=7, show_default=True, help="The workload's random seed.")
@click.option(
    "--dir",
    "folder",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where to create the demo's fleet (default: a new temporary folder).",
)
@click.option("--quiet", is_flag=True, help="Only the summary.")
@json_option
@pass_app
def demo(
    app: App,
    agent_count: int,
    task_count: int,
    speed: float,
    seed: int,
    folder: Path | None,
    quiet: bool,
) -> None:
    """Watch a fleet work: agents with domains share a skewed workload, steal, finish.
    e.g. `shoal demo`, `shoal demo --agents 6 --speed 4`.

    The demo always runs on a new fleet of its own, never on yours (--store and
    SHOAL_STORE are ignored), and says where it is so you can look around afterwards.
    """
    summary = run_demo(
        folder=folder,
        agents=agent_count,
        tasks=task_count,
        speed=speed,
        seed=seed,
        console=None if (quiet or app.json) else app.out,
    )
    app.emit(summary.to_dict(), summary_view(summary))


def add_demo_commands(group: click.Group) -> None:
    """Register ``shoal demo`` on the ``shoal`` group."""
    group.add_command(demo)
