"""Instructions per cycle, counted by callgrind (``profile_claims.py --instructions``).

On a shared machine the time of a cycle moves by a tenth from one run to the next; the
instructions it executes do not. So this runs the same worker cycles as the rest of the
profile under ``valgrind --tool=callgrind`` -- twice, for a few and for many cycles, so that
starting Python and filling the fleet cancel out -- and says how many instructions one cycle
takes in the Python interpreter, in SQLite and in the C library (malloc, memcpy, the
mutexes). Time is the same in every run too: the fleet's clock moves 100 us at each reading,
however slowly valgrind runs. Counts are not time (a cache miss costs no instruction, a
``rep stos`` that clears a page costs one per iteration), but a change that saves
instructions saves time, and two builds can be told apart to within a percent.
"""

from __future__ import annotations

import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from shoal import Fleet
from shoal.model import Claim

__all__ = ["filled", "instructions", "next_cycle", "steps"]

#: (batch, few cycles, many cycles) measured.
_RUNS = ((1, 20, 220), (10, 10, 110))
_WARM_UP = 50
_COST_LINE = re.compile(r"^[0-9+\-*]")
_OBJECT = re.compile(r"^c?ob=\((\d+)\)(?: (.*))?$")


class StepClock:
    """A clock that moves 100 us each time it is read (and never waits)."""

    def __init__(self) -> None:
        self.t = 1_767_225_600.0

    def now(self) -> float:
        self.t += 1e-4
        return self.t

    def sleep(self, seconds: float) -> None:
        self.t += seconds


def filled(fleet: Fleet, total: int, batch: int) -> Claim | None:
    """``total`` pending tasks on ``fleet`` and one agent, ``solo``, holding its first
    ``batch`` of them: where every profiled run of worker cycles starts."""
    fleet.configure(max_agents=64)
    for start in range(0, total, 1000):
        fleet.post_many([{"title": f"t{i}"} for i in range(start, min(total, start + 1000))])
    fleet.register("solo", max_concurrent=10)
    return fleet.claim("solo", n=batch)


def next_cycle(fleet: Fleet, claim: Claim | None, batch: int) -> Claim | None:
    """One busy worker's call: finish what ``claim`` holds and claim the next ``batch``."""
    assert claim is not None
    if batch == 1:
        return fleet.complete(claim.leases[0], None, then_claim=1).next
    done = [(lease, None) for lease in claim.leases]
    return fleet.complete_many(done, then_claim=batch).next


def steps(batch: int, cycles: int, total: int) -> None:
    """The measured child: a fresh fleet of ``total`` tasks (the same in both runs, so that
    filling it cancels out), ``_WARM_UP`` cycles, then ``cycles`` more."""
    folder = Path(tempfile.mkdtemp(prefix="shoal-steps-"))
    try:
        fleet = Fleet.open(f"sqlite://{folder / 'fleet.db'}", clock=StepClock())
        claim: Claim | None = filled(fleet, total, batch)
        for _ in range(_WARM_UP + cycles):
            claim = next_cycle(fleet, claim, batch)
        fleet.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def instructions(script: str) -> None:
    """Print instructions per cycle at batch 1 and 10, by the program they ran in."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        print("\n(valgrind not found: --instructions needs it)")
        return
    folder = Path(tempfile.mkdtemp(prefix="shoal-callgrind-"))
    try:
        for batch, few, many in _RUNS:
            total = batch * (_WARM_UP + many + 2)
            counts = [_count(valgrind, script, batch, n, total, folder) for n in (few, many)]
            per = {
                name: (counts[1][name] - counts[0][name]) / (many - few)
                for name in set(counts[0]) | set(counts[1])
            }
            total = round(sum(per.values()))
            print(f"\n=== instructions per cycle, batch {batch} (callgrind) ===")
            print(f"    {total / 1e3:8.1f} k  in all ({total / batch / 1e3:.1f} k per task)")
            for name, count in sorted(per.items(), key=lambda item: -item[1]):
                if count >= 1000:
                    print(f"    {count / 1e3:8.1f} k  {name}")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _count(
    valgrind: str, script: str, batch: int, cycles: int, total: int, folder: Path
) -> dict[str, int]:
    out = folder / f"callgrind.{batch}.{cycles}"
    command = [valgrind, "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable]
    command += [script, "--steps", str(batch), str(cycles), str(total)]
    env = {**os.environ, "PYTHONHASHSEED": "0"}  # the same dicts and sets in every run
    subprocess.run(command, check=True, capture_output=True, env=env)
    return _by_object(out)


def _by_object(path: Path) -> dict[str, int]:
    """Instructions executed in each program (shared object) of a callgrind file: the
    costs of its own lines, not those it called (a ``calls=`` line's cost is inclusive)."""
    names: dict[str, str] = {}
    counts: collections.Counter[str] = collections.Counter()
    current, after_call = "?", False
    for line in path.read_text(errors="replace").splitlines():
        if _COST_LINE.match(line):
            if after_call:
                after_call = False
            else:
                fields = line.split()
                if len(fields) > 1 and fields[1].isdigit():
                    counts[current] += int(fields[1])
        elif line.startswith(("ob=", "cob=")):  # a name is given once, where first seen
            match = _OBJECT.match(line)
            if match:
                if match.group(2):
                    names[match.group(1)] = match.group(2).rsplit("/", 1)[-1]
                if line.startswith("ob="):
                    current = names.get(match.group(1), match.group(1))
        elif line.startswith("calls="):
            after_call = True
    return dict(counts)
