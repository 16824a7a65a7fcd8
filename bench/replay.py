"""Replay a simulated workload with real ``shoal worker`` processes, and hold the simulator
to it.

The simulator (``shoal.sim``) runs the real ``Fleet`` in virtual time, with no processes,
no store round trips and no wake-up delays. This replays one of its workloads for real: a
SQLite fleet, one ``shoal worker`` process per agent running ``sleep`` for each task's
length, the work posted when the workload says -- all with time compressed by a factor
(300x: a 4-hour night in under a minute). Every duration that steers scheduling is
scaled by the same factor (``domain_wait``, ``locality_wait``, the steal window
``rebalance_interval``, the polling waits; ``aging`` per minute grows by it), so the real
fleet makes the choices the simulated one would, on the same clock.

Each workload runs under ``shoal`` and under ``pull+wake`` (one shared pool, no steals, no
locality rules, workers woken by the store's change notification: SQLite's data_version),
and the same seed runs in the simulator. The table puts them side by side: makespan over
the lower bound, eligible idleness (judged by the simulator's own rules from the real
event log: ``_replay_account``) and idle-to-work p99 (in the workload's time), and each
task's overhead -- its run from claim to completion beyond its ``sleep`` (real time).

The fork-join workload's tasks spawn children and wait on them, which ``sleep`` does not:
its agents are ``bench/_forkjoin_worker.py``, a real process per agent running shoal's
``Worker`` with a handler that sleeps, posts the children and defers on them as the
simulated agent does through the same API. It runs under shoal only (a shared queue's join
is a task posted when the last child is done, which no worker can post without a race),
and its account is the makespan: eligible idleness and overheads are left out (``-``). No
cold start is replayed. Usage::

    .venv/bin/python bench/replay.py                         # overnight + lognormal, ~4 min
    .venv/bin/python bench/replay.py forkjoin                # shoal on the tree, ~2.5 min
    .venv/bin/python bench/replay.py pareto --tasks 100 --compress 300 --json out.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from _replay_account import Account, Posted, account
from shoal import BadInput, Fleet, Task, TaskState, sim
from shoal.settings import SETTINGS, Settings
from shoal.sim.baselines import Baseline
from shoal.sim.metrics import percentile
from shoal.sim.workloads import Workload, build

POLICIES = ("shoal", "pull+wake")
#: Settings that are durations of the fleet's scheduling, scaled by the compression.
SCALED = ("domain_wait", "locality_wait", "rebalance_interval", "poll_base", "poll_max")
SCRIPT = Path(sys.executable).with_name("shoal")
SHOAL = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "shoal.faces.cli"]
#: Time compression by workload, so the default replay takes under 5 minutes: the night
#: (about 50 s a policy) ends with its last arrival, so a task's overhead (tens of real ms,
#: each worth compress x that of workload time) barely moves it; a batch's makespan is the
#: sum of its tasks, overheads included, so it is compressed less (about 80 s a policy).
DEFAULT_COMPRESS = {"overnight": 300.0, "forkjoin": 60.0}
#: The tree's parts last a minute or two, so it is compressed least: a second a part.
FORKJOIN_WORKER = Path(__file__).with_name("_forkjoin_worker.py")
BATCH_COMPRESS = 175.0
#: Seconds: a median task shorter than this, real time, is swamped by its overhead.
SHORTEST_SLEEP = 0.5
START_TIMEOUT = 60.0  # seconds for every worker to register
DONE_FACTOR = 3.0  # a run that takes this many times its simulated makespan is stuck


@dataclass(frozen=True, slots=True)
class Replayed:
    """One workload under one policy, for real and simulated."""

    workload: str
    policy: str
    seed: int
    tasks: int
    compress: float
    real_ratio: float
    sim_ratio: float
    real_eligible: float
    sim_eligible: float
    real_idle_to_work_p99: float  # seconds of workload time
    sim_idle_to_work_p99: float
    overhead_p50_ms: float
    overhead_p99_ms: float
    wall_seconds: float
    load: tuple[float, float]  # the 1-minute load average before and after

    def to_dict(self) -> dict[str, Any]:
        return {k: (round(v, 5) if isinstance(v, float) else v) for k, v in _fields(self)}


def _fields(r: Replayed) -> Iterator[tuple[str, Any]]:
    for name in r.__dataclass_fields__:
        yield name, getattr(r, name)


def scaled_settings(baseline: Baseline, compress: float) -> tuple[dict[str, Any], list[str]]:
    """The fleet settings of ``baseline``, with its scheduling durations divided by
    ``compress`` (and ``aging``, per minute, multiplied): the settings and a note of each
    that had to stop at its minimum."""
    base = Settings().replace(**baseline.settings)
    values: dict[str, Any] = {**baseline.settings}
    notes = []
    for name in SCALED:
        wanted = getattr(base, name) / compress
        if wanted == 0:
            values[name] = 0
            continue
        floor = SETTINGS[name].minimum
        values[name] = max(wanted, floor)
        if wanted < floor:
            notes.append(f"{name} {wanted:.4f} s -> {floor:g} s (its minimum)")
    values["aging"] = base.aging * compress
    return values, notes


@contextmanager
def workers(url: str, work: Workload) -> Iterator[list[subprocess.Popen[bytes]]]:
    """One ``shoal worker`` per agent, running ``sleep`` for each task; stopped at the end."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHOAL_")}
    env["SHOAL_STORE"] = url
    procs = []
    try:
        for agent in work.agents:
            domains = [arg for d in agent.domains for arg in ("--domain", d)]
            command = [*SHOAL, "worker", "--agent", agent.id, *domains, "--drain", "0"]
            command += ["--", "sleep", "{payload[s]}"]
            if _forks(work):
                command = [sys.executable, str(FORKJOIN_WORKER), url, agent.id]
            procs.append(
                subprocess.Popen(
                    command,
                    env=env,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                )
            )
        yield procs
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _wait_registered(
    fleet: Fleet, work: Workload, procs: Sequence[subprocess.Popen[bytes]]
) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    wanted = {a.id for a in work.agents}
    while {a.id for a in fleet.agents() if a.status.value == "idle"} < wanted:
        for proc in procs:
            if proc.poll() is not None:
                err = proc.stderr.read().decode() if proc.stderr else ""
                raise SystemExit(f"a worker exited before the replay began:\n{err}")
        if time.monotonic() > deadline:
            raise SystemExit("the workers did not all register within a minute")
        time.sleep(0.1)


def replay(
    work: Workload, policy: str, seed: int, compress: float, folder: Path
) -> tuple[Replayed, list[str]]:
    """Run ``work`` under ``policy`` with real workers, and the simulator beside it."""
    baseline = sim.BASELINES[policy]
    simulated = sim.simulate(work, baseline, seed).metrics
    path = folder / f"{work.name}-{len(work.tasks)}-{policy}.db"  # a new fleet each run
    if path.exists():
        raise SystemExit(f"{path} is left from an earlier run: give a new folder")
    url = f"sqlite://{path}"
    fleet = Fleet.init(url)
    settings, notes = scaled_settings(baseline, compress)
    fleet.configure(max_agents=len(work.agents), **settings)
    load_before = os.getloadavg()[0]
    began_wall = time.monotonic()
    with workers(url, work) as procs:
        _wait_registered(fleet, work, procs)
        start = time.time()
        posted, sleeps = _post_all(fleet, work, baseline, compress, start)
        limit = start + DONE_FACTOR * simulated.makespan / compress + 30
        total = len(work.tasks) if _forks(work) else len(posted)
        while len(fleet.tasks(state=TaskState.DONE, limit=100_000)) < total:
            if time.time() > limit:
                raise SystemExit(f"{work.name} under {policy} did not finish in time")
            time.sleep(0.2)
    events = _all_events(fleet)
    agents = fleet.agents()
    if _forks(work):  # the makespan alone: the account follows posted tasks, not children
        found = Account(start, max(e.at for e in events if e.kind == "completed"))
    else:
        found = account(events, posted, agents, fleet.settings(), start, sleeps)
    fleet.close()
    return _figures(work, policy, seed, compress, found, simulated, began_wall, load_before), notes


def _post_all(
    fleet: Fleet, work: Workload, baseline: Baseline, compress: float, start: float
) -> tuple[dict[int, Posted], dict[int, float]]:
    """Post each root task at its arrival moment (compressed), where ``baseline`` puts it."""
    by_time: dict[float, list[int]] = {}
    for index in work.roots:
        by_time.setdefault(work.tasks[index].arrival or 0.0, []).append(index)
    posted: dict[int, Posted] = {}
    sleeps: dict[int, float] = {}
    for when, indices in sorted(by_time.items()):
        delay = start + when / compress - time.time()
        if delay > 0:
            time.sleep(delay)
        specs = [work.tasks[i] for i in indices]
        batch = []
        for spec, index in zip(specs, indices, strict=True):
            to = spec.home if spec.queued and baseline.honours_queues else None
            seconds = round(spec.duration / compress, 4)
            args: dict[str, Any] = {
                "title": spec.title,
                "priority": spec.priority,
                "domain": spec.domain,
                "to": to,
                "payload": _tree(work, index, compress) if spec.children else {"s": seconds},
            }
            if spec.estimate is not None:
                args["expected_duration"] = max(spec.estimate / compress, 0.001)
            batch.append(args)
        for task_id, args in zip(fleet.post_many(batch), batch, strict=True):
            task = Task(task_id, args["title"], TaskState.PENDING, args["priority"])
            posted[task_id] = Posted(replace(task, domain=args["domain"]), args["to"])
            sleeps[task_id] = args["payload"]["s"]
    return posted, sleeps


def _forks(work: Workload) -> bool:
    """Whether ``work``'s tasks spawn children (fork-join): its agents run a handler."""
    return any(t.children for t in work.tasks)


def _tree(work: Workload, index: int, compress: float) -> dict[str, Any]:
    """Task ``index`` and all it spawns, as the payload ``_forkjoin_worker`` reads: its
    title, first part and join in seconds (compressed), and its children's trees."""
    spec = work.tasks[index]
    return {
        "t": spec.title,
        "s": round(spec.duration / compress, 4),
        "j": round(spec.join / compress, 4),
        "c": [_tree(work, c, compress) for c in spec.children],
    }


def _all_events(fleet: Fleet) -> list[Any]:
    events: list[Any] = []
    since = 0
    while True:
        page = fleet.events(since, limit=1000)
        if not page:
            return events
        events += page
        since = page[-1].id


def _figures(
    work: Workload,
    policy: str,
    seed: int,
    compress: float,
    found: Account,
    simulated: sim.Metrics,
    began_wall: float,
    load_before: float,
) -> Replayed:
    bound = work.lower_bound()
    agents = len(work.agents)
    makespan = (found.end - found.start) * compress
    counted = not _forks(work)  # a fork-join replay's account is its makespan alone
    return Replayed(
        workload=work.name,
        policy=policy,
        seed=seed,
        tasks=len(work.tasks),
        compress=compress,
        real_ratio=makespan / bound,
        sim_ratio=simulated.ratio,
        real_eligible=found.eligible_share(agents) if counted else math.nan,
        sim_eligible=simulated.eligible_idle_while_waiting,
        real_idle_to_work_p99=found.idle_to_work_p99() * compress if counted else math.nan,
        sim_idle_to_work_p99=simulated.eligible_idle_to_work_p99,
        overhead_p50_ms=percentile(found.overheads, 50) * 1000 if counted else math.nan,
        overhead_p99_ms=percentile(found.overheads, 99) * 1000 if counted else math.nan,
        wall_seconds=time.monotonic() - began_wall,
        load=(load_before, os.getloadavg()[0]),
    )


LEGEND = (
    "x: time compression; ÷ bound: makespan over max(T1/P, T_inf), real (in workload time) "
    "and simulated; eligible: agent-time free while work it could take waited; idle→work "
    "p99 in workload seconds; overhead: a task's claim-to-completion beyond its sleep, "
    "real ms; load: 1-minute load average before/after"
)


def table(rows: Sequence[Replayed]) -> str:
    head = (
        f"{'workload':10} {'policy':10} {'x':>6} {'÷ bound real':>12} {'sim':>6} {'Δ':>7} "
        f"{'eligible real':>13} {'sim':>6} {'idle→work p99 real':>18} {'sim':>6} "
        f"{'overhead p50/p99':>16} {'load':>9}"
    )
    lines = [head, "─" * len(head)]
    for r in rows:
        if math.isnan(r.real_eligible):  # a fork-join replay: its makespan alone
            lines.append(
                f"{r.workload:10} {r.policy:10} {r.compress:6.0f} {r.real_ratio:12.3f} "
                f"{r.sim_ratio:6.3f} {r.real_ratio - r.sim_ratio:+7.3f} {'-':>13} "
                f"{r.sim_eligible:6.2%} {'-':>18} {r.sim_idle_to_work_p99:5.1f}s "
                f"{'-':>16} {r.load[0]:4.1f}/{r.load[1]:.1f}"
            )
            continue
        lines.append(
            f"{r.workload:10} {r.policy:10} {r.compress:6.0f} {r.real_ratio:12.3f} "
            f"{r.sim_ratio:6.3f} {r.real_ratio - r.sim_ratio:+7.3f} "
            f"{r.real_eligible:13.2%} {r.sim_eligible:6.2%} "
            f"{r.real_idle_to_work_p99:17.1f}s {r.sim_idle_to_work_p99:5.1f}s "
            f"{r.overhead_p50_ms:7.1f}/{r.overhead_p99_ms:.1f} ms "
            f"{r.load[0]:4.1f}/{r.load[1]:.1f}"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> list[Replayed]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workloads", nargs="*", default=["overnight", "lognormal"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tasks", type=int, help="batch and stream sizes (default 200)")
    parser.add_argument("--agents", type=int, help="resize the fleet (not overnight)")
    parser.add_argument("--compress", type=float,
                        help="time compression (default: 300 overnight, 175 the rest)")  # fmt: skip
    parser.add_argument("-p", "--policy", action="append", choices=POLICIES)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    if args.compress is not None and args.compress < 1:
        parser.error("--compress must be at least 1 (1: real time)")
    policies = args.policy or list(POLICIES)
    rows: list[Replayed] = []
    folder = Path(tempfile.mkdtemp(prefix="shoal-replay-"))
    print(f"seed {args.seed}, SQLite in {folder}; time compressed by the factor shown: every "
          "scheduling duration divided by it, aging multiplied", flush=True)  # fmt: skip
    try:
        for name in args.workloads:
            whole = name in ("overnight", "forkjoin")  # the night, and the fib(12) tree
            tasks = args.tasks if args.tasks is not None or whole else 200
            try:
                work = build(name, args.seed, tasks=tasks, agents=args.agents)
            except BadInput as e:
                parser.error(str(e))
            compress = args.compress or DEFAULT_COMPRESS.get(name, BATCH_COMPRESS)
            median = statistics.median(t.duration for t in work.tasks) / compress
            if median < SHORTEST_SLEEP:
                print(f"  note: at {compress:g}x the median task sleeps {median * 1000:.0f} ms: "
                      "a task's overhead (tens of ms) is no longer small beside it")  # fmt: skip
            for policy in policies:
                if _forks(work) and policy != "shoal":
                    print(f"  note: {name} is replayed under shoal only (see the docstring)")
                    continue
                row, notes = replay(work, policy, args.seed, compress, folder)
                for note in notes:
                    print(f"  note: {note}", flush=True)
                print(f"  {name} under {policy}: {row.wall_seconds:.0f} s", flush=True)
                rows.append(row)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(table(rows))
    print(LEGEND)
    if args.json is not None:
        args.json.write_text(json.dumps([r.to_dict() for r in rows], indent=2) + "\n")
    return rows


if __name__ == "__main__":
    main()
