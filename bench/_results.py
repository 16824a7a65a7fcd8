"""The benchmarks' results file: every figure under a stable dotted name, the targets some
of them are held to, and what was measured where. Scripts read this; people read the table
printed beside it and the Markdown that ``bench/table.py`` renders from it.

The file::

    {"meta":    {"command", "started", "cpus", "cpus_usable", "loadavg_start", "python",
                 "shoal", "store", "peers": {name: version}, "repeat", ...},
     "figures": {name: number},
     "targets": {name: {"target": ">= 0.6", "pass": bool}}}

A name is ``store[.measurement][.batchB][.procsN][.waitersW][.pendingP].quantity``, built by
``figure_name`` alone, so the same measurement has the same name in every run and a script
can rely on it: ``sqlite.batch1.procs4.shoal_per_s``, ``postgres.claim.batch1.procs64.p99_ms``.
A quantity ends in its unit (``_per_s``, ``_ms``) unless it is a ratio (``ratio_vs_huey``,
``share_of_raw``, ``claim_growth``); docs/benchmarks.md lists them. A target is a bound on
the figure of the same name, in the figure's own unit.
"""

from __future__ import annotations

import json
import math
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REQUIRED_META = (
    "command",
    "started",
    "cpus",
    "cpus_usable",
    "loadavg_start",
    "python",
    "shoal",
    "store",
    "peers",
    "repeat",
)
CONFIG = ("batch", "procs", "waiters", "pending")  # in the order a name gives them
_WORD = re.compile(r"[a-z][a-z0-9_]*")
_CONFIG = re.compile(rf"({'|'.join(CONFIG)})([0-9]+)")
_BOUND = re.compile(r"(<=|>=)\s*(-?[0-9.]+(?:e-?[0-9]+)?)")
_COMPARE: dict[str, Callable[[float, float], bool]] = {"<=": operator.le, ">=": operator.ge}


def figure_name(
    store: str,
    measurement: str | None = None,
    *,
    batch: int | None = None,
    procs: int | None = None,
    waiters: int | None = None,
    pending: int | None = None,
    quantity: str,
) -> str:
    """The one way a figure is named: the store, what was measured, its configuration in a
    fixed order (each part only if it applies), and the quantity with its unit."""
    words = [store, *([measurement] if measurement else []), quantity]
    if bad := [w for w in words if not _WORD.fullmatch(w) or _CONFIG.fullmatch(w)]:
        raise ValueError(f"figure name parts must be lower-case words, not {bad}")
    values = (batch, procs, waiters, pending)
    config = [
        f"{key}{value}" for key, value in zip(CONFIG, values, strict=True) if value is not None
    ]
    return ".".join([*words[:-1], *config, quantity])


@dataclass(frozen=True)
class Name:
    """A figure's name taken apart: what ``figure_name`` was given."""

    store: str
    measurement: str | None
    config: dict[str, int]
    quantity: str


def parse_name(name: str) -> Name:
    """The parts of a name ``figure_name`` made (the table renderer reads rows off them)."""
    parts = name.split(".")
    if len(parts) < 2:
        raise ValueError(f"not a figure name: {name!r}")
    store, *middle, quantity = parts
    config: dict[str, int] = {}
    words = []
    for part in middle:
        if match := _CONFIG.fullmatch(part):
            config[match.group(1)] = int(match.group(2))
        else:
            words.append(part)
    if len(words) > 1:
        raise ValueError(f"not a figure name: {name!r}")
    parsed = Name(store, words[0] if words else None, config, quantity)
    rebuilt = figure_name(store, parsed.measurement, quantity=quantity, **config)
    if rebuilt != name:
        raise ValueError(f"not a figure name: {name!r}")
    return parsed


def passes(value: float, target: str) -> bool:
    """Whether ``value`` meets a target such as ``">= 0.5"`` or ``"<= 10"``."""
    match = _BOUND.fullmatch(target.strip())
    if match is None:
        raise ValueError(f"a target is '>= N' or '<= N', not {target!r}")
    return _COMPARE[match.group(1)](value, float(match.group(2)))


@dataclass
class Figures:
    """The figures of one run as they are measured, refusing a name twice: two figures
    under one name would make the file say less than the run measured."""

    values: dict[str, float] = field(default_factory=dict)
    targets: dict[str, dict[str, Any]] = field(default_factory=dict)

    def put(self, name: str, value: float | None, target: str | None = None) -> bool | None:
        """Record ``value`` under ``name`` (nothing if it was not measured) and, with a
        target, whether it meets it; return that verdict (None without one)."""
        if name in self.values:
            raise ValueError(f"figure {name!r} recorded twice")
        if value is None or not math.isfinite(value):
            return None
        self.values[name] = value
        if target is None:
            return None
        verdict = passes(value, target)
        self.targets[name] = {"target": target, "pass": verdict}
        return verdict


@dataclass(frozen=True)
class Results:
    """One results file, read back."""

    meta: dict[str, Any]
    figures: dict[str, float]
    targets: dict[str, dict[str, Any]]


def write_results(path: Path, meta: Mapping[str, Any], figures: Figures) -> None:
    """Write the file (names sorted, so two runs diff line by line)."""
    if missing := [key for key in REQUIRED_META if key not in meta]:
        raise ValueError(f"results meta lacks {missing}")
    report = {
        "meta": dict(meta),
        "figures": dict(sorted(figures.values.items())),
        "targets": dict(sorted(figures.targets.items())),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2) + "\n", "utf-8")


def read_results(path: Path) -> Results:
    """Read a file ``write_results`` wrote, with a clear message for one it did not."""
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise SystemExit(f"{path}: not a readable results file ({exc})") from exc
    if not isinstance(data, dict) or not {"meta", "figures", "targets"} <= data.keys():
        raise SystemExit(f"{path}: a results file has 'meta', 'figures' and 'targets'")
    figures = data["figures"]
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in figures.values()):
        raise SystemExit(f"{path}: every figure must be a number")
    if unknown := sorted(set(data["targets"]) - set(figures)):
        raise SystemExit(f"{path}: targets for figures it does not have: {unknown}")
    return Results(data["meta"], figures, data["targets"])
