"""What one ``shoal`` call costs against starting Python itself.

Agents call the CLI in loops (``eval "$(shoal claim --format env)" && ... && shoal done``),
so a call's price is mostly the interpreter's start and the imports. This times, in one
run and in turns (so a busy spell of a shared machine hits every command alike), a bare
``python -c pass`` of the same virtualenv and four everyday calls on a small SQLite fleet:
``shoal list`` piped, ``shoal claim --agent ada --format env``, ``shoal done`` of that
claim, and ``shoal status --json``. It prints each median (with the lowest and highest)
and its ratio to the bare start; the target is a ratio of at most 6 (docs/benchmarks.md,
*The CLI's start*). Usage::

    .venv/bin/python bench/cli_startup.py [--rounds 15] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

#: The ratio to a bare Python start each command is held to.
TARGET_RATIO = 6.0
COMMANDS = ("python -c pass", "list", "claim", "done", "status --json")


def _shoal() -> list[str]:
    """The ``shoal`` entry point of this interpreter's environment (what an agent runs)."""
    script = Path(sys.executable).with_name("shoal")
    return [str(script)] if script.exists() else [sys.executable, "-m", "shoal.faces.cli"]


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed(argv: Sequence[str], env: dict[str, str]) -> tuple[float, float, str]:
    """Wall seconds and CPU seconds of one call with stdout piped (as in ``$(...)`` or
    ``| wc``). The CPU time moves less than the wall time when others share the machine."""
    cpu, start = _cpu(), time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    elapsed, cpu = time.perf_counter() - start, _cpu() - cpu
    if done.returncode != 0:
        raise SystemExit(f"{shlex.join(argv)} exited {done.returncode}: {done.stderr.strip()}")
    return elapsed, cpu, done.stdout


def _fleet(root: Path, tasks: int) -> dict[str, str]:
    """A fresh SQLite fleet with one agent and ``tasks`` tasks; the environment to use it."""
    env = {**os.environ, "SHOAL_STORE": f"sqlite:///{root / 'fleet.db'}", "NO_COLOR": "1"}
    env.pop("SHOAL_AGENT", None)
    # As installed: Python keeps the compiled modules (pip writes them at install time).
    # Without them every call compiles shoal from source, and the figures say nothing.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    shoal = _shoal()
    subprocess.run([*shoal, "init"], env=env, check=True, capture_output=True)
    subprocess.run([*shoal, "register", "ada"], env=env, check=True, capture_output=True)
    lines = "".join(json.dumps({"title": f"task {i}"}) + "\n" for i in range(tasks))
    (root / "tasks.jsonl").write_text(lines)
    subprocess.run(
        [*shoal, "import", "jsonl", str(root / "tasks.jsonl")],
        env=env,
        check=True,
        capture_output=True,
    )
    return env


def measure(rounds: int) -> dict[str, dict[str, list[float]]]:
    """Wall and CPU seconds per call of each command, ``rounds`` times, the commands taking
    turns (the order rotated each round so that none always follows the same one)."""
    shoal = _shoal()
    times: dict[str, dict[str, list[float]]] = {n: {"wall": [], "cpu": []} for n in COMMANDS}
    with tempfile.TemporaryDirectory(prefix="shoal-cli-bench-") as tmp:
        env = _fleet(Path(tmp), tasks=rounds + 20)
        argvs = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "list": [*shoal, "list"],
            "claim": [*shoal, "claim", "--agent", "ada", "--format", "env"],
            "status --json": [*shoal, "status", "--json"],
        }
        for argv in argvs.values():  # warm the page cache and the bytecode caches
            if "claim" not in argv:
                _timed(argv, env)
        for r in range(rounds):
            # claim before done (done finishes what claim took); the rest rotate around them
            order = ["python -c pass", "list", "claim", "done", "status --json"]
            order = order[r % len(order) :] + order[: r % len(order)]
            if order.index("done") < order.index("claim"):
                order.remove("done")
                order.insert(order.index("claim") + 1, "done")
            held: dict[str, str] = {}
            for name in order:
                if name == "done":
                    argv = [*shoal, "done", held["SHOAL_TASK"], "--token", held["SHOAL_LEASE"]]
                else:
                    argv = argvs[name]
                wall, cpu, out = _timed(argv, env)
                times[name]["wall"].append(wall)
                times[name]["cpu"].append(cpu)
                if name == "claim":
                    held = _env_of(out)
    return times


def _env_of(out: str) -> dict[str, str]:
    """The NAME=value pairs of ``--format env`` output."""
    pairs = {}
    for line in out.splitlines():
        name, _, value = line.removeprefix("export ").partition("=")
        pairs[name] = shlex.split(value)[0] if value else ""
    return pairs


def summary(times: dict[str, dict[str, list[float]]]) -> dict[str, dict[str, float]]:
    """Per command: the median wall and CPU milliseconds, the lowest and highest wall, and
    the medians' ratios to the bare start's."""
    base = {kind: statistics.median(times["python -c pass"][kind]) for kind in ("wall", "cpu")}
    return {
        name: {
            "median_ms": round(statistics.median(t["wall"]) * 1000, 1),
            "min_ms": round(min(t["wall"]) * 1000, 1),
            "max_ms": round(max(t["wall"]) * 1000, 1),
            "cpu_median_ms": round(statistics.median(t["cpu"]) * 1000, 1),
            "ratio_vs_python": round(statistics.median(t["wall"]) / base["wall"], 2),
            "cpu_ratio_vs_python": round(statistics.median(t["cpu"]) / base["cpu"], 2),
        }
        for name, t in times.items()
    }


SHOWN = {
    "python -c pass": "python -c pass",
    "list": "shoal list | ...",
    "claim": "shoal claim --agent ada --format env",
    "done": "shoal done ID --token TOKEN",
    "status --json": "shoal status --json",
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15, help="calls of each command")
    parser.add_argument("--json", type=Path, metavar="FILE", help="write the figures here")
    args = parser.parse_args(argv)
    load = os.getloadavg()
    started = datetime.now(UTC).isoformat(timespec="seconds")
    figures = summary(measure(args.rounds))
    print(f"{'command':<38}{'wall ms':>9}{'min':>8}{'max':>8}{'x python':>10}"
          f"{'cpu ms':>8}{'x python':>10}")  # fmt: skip
    for name, f in figures.items():
        print(
            f"{SHOWN[name]:<38}{f['median_ms']:>9.1f}{f['min_ms']:>8.1f}{f['max_ms']:>8.1f}"
            f"{f['ratio_vs_python']:>10.2f}{f['cpu_median_ms']:>8.1f}{f['cpu_ratio_vs_python']:>10.2f}"
        )
    missed = [n for n, f in figures.items() if f["ratio_vs_python"] > TARGET_RATIO]
    end_load = os.getloadavg()
    print(f"medians of {args.rounds} rounds; load average {load[0]:.2f} at the start, "
          f"{end_load[0]:.2f} at the end, on {os.cpu_count()} CPUs")  # fmt: skip
    verdict = f"missed by {', '.join(missed)}" if missed else "met"
    print(f"target, each wall median <= {TARGET_RATIO:g}x python -c pass: {verdict}")
    if args.json:
        meta = {
            "command": shlex.join(["python", "bench/cli_startup.py", *(argv or sys.argv[1:])]),
            "started": started,
            "cpus": os.cpu_count(),
            "loadavg_start": [round(x, 2) for x in load],
            "loadavg_end": [round(x, 2) for x in end_load],
            "python": platform.python_version(),
            "rounds": args.rounds,
            "target_ratio": TARGET_RATIO,
        }
        args.json.write_text(json.dumps({"meta": meta, "figures": figures}, indent=2) + "\n")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
