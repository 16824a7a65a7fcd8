"""Markdown tables from benchmark results files, for the README and for reading a run.

    .venv/bin/python bench/table.py RESULTS.json [...]                     # print them
    .venv/bin/python bench/table.py --write-readme README.md RESULTS.json  # or replace
                                                      # README's part between the markers

The figures in the README are this script's output and nothing else, so they are always
the ones a named run measured, with the command, the date and the machine beside them.
Rows are read off the figures' names (``_results.parse_name``): a throughput row per batch
and process count, a latency row per statistic, and anything the layout does not know
(``bench/scale.py``'s figures, say) in a plain table of names and values, so every figure
in a file is shown.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from _results import Name, Results, parse_name, read_results

START, END = "<!-- bench:start -->", "<!-- bench:end -->"
STORES = {"sqlite": "SQLite", "postgres": "PostgreSQL"}
STATS = ("p50", "p99", "max")
BACKLOG_KINDS = (("claim", "claim()"), ("complete_then_claim", "complete(then_claim=1)"))


# ---------------------------------------------------------------------- cells


def rate(value: float) -> str:
    return f"{value:,.0f}/s"


def millis(value: float) -> str:
    return f"{value:,.0f} ms" if value >= 100 else f"{value:.3g} ms"


def times(value: float) -> str:
    return f"{value:.2f}x"


def share(value: float) -> str:
    return f"{value:.0%}"


def bound(target: str, unit: str) -> str:
    """``>= 0.5`` as the table says it: ``≥ 50%``, ``≥ 1x``, ``≤ 10 ms``."""
    op, _, number = target.partition(" ")
    sign = {">=": "≥", "<=": "≤"}.get(op, op)
    value = float(number)
    shown = {"%": f"{value:.0%}", "x": f"{value:g}x", "ms": f"{value:g} ms"}[unit]
    return f"{sign} {shown}"


def unit_of(quantity: str) -> str:
    if quantity.endswith("_ms"):
        return "ms"
    return "%" if quantity.startswith("share_of") else "x"


def number(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"


def plural(count: int, word: str) -> str:
    return f"{count:,} {word}{'' if count == 1 else 'es' if word.endswith('s') else 's'}"


# ---------------------------------------------------------------------- one file


@dataclass
class Rendering:
    """One results file on its way to Markdown: the figures not yet shown are what the
    last table lists."""

    results: Results
    names: dict[str, Name]
    left: set[str] = field(default_factory=set)

    @classmethod
    def of(cls, results: Results) -> Rendering:
        names = {}
        for name in results.figures:
            try:
                names[name] = parse_name(name)
            except ValueError:
                continue  # shown as it is, in the last table
        return cls(results, names, set(results.figures))

    def take(self, name: str) -> float | None:
        """The figure, marked as shown (None if the run did not measure it)."""
        self.left.discard(name)
        return self.results.figures.get(name)

    def cell(self, name: str, spread: bool = False) -> str:
        """A figure as a table cell: formatted by its unit, with the range of its runs
        and its target's verdict when it has them."""
        value = self.take(name)
        if value is None:
            return "—"
        quantity = name.rsplit(".", 1)[-1]
        unit = "/s" if quantity.endswith("_per_s") else unit_of(quantity)
        text = {"/s": rate, "ms": millis, "x": times, "%": share}[unit](value)
        low, high = self.take(f"{name}_min"), self.take(f"{name}_max")
        if spread and low is not None and high is not None and low != high:
            text += f" ({low:,.0f}-{high:,.0f})"
        if (target := self.results.targets.get(name)) is not None:
            verdict = "pass" if target["pass"] else "**miss**"
            text += f" ({bound(target['target'], unit)}: {verdict})"
        return text

    def configs(self, measurement: str | None, *keys: str) -> list[tuple[int, ...]]:
        """The configurations the file has figures for under ``measurement``, in order."""
        found = {
            tuple(n.config[k] for k in keys)
            for n in self.names.values()
            if n.measurement == measurement and set(n.config) == set(keys)
        }
        return sorted(found)


def header(results: Results) -> str:
    """Which run this was: the store and its settings, the date, the command, the machine
    and its load, the versions, and how the throughputs were taken."""
    meta = results.meta
    store = STORES.get(meta.get("store", ""), meta.get("store", "?"))
    settings = []
    if meta.get("durability"):
        settings.append(f"`synchronous={meta['durability']}`")
    if meta.get("sqlite"):
        settings.append(f"SQLite {meta['sqlite']}")
    if meta.get("server"):
        settings.append(str(meta["server"]).removeprefix("PostgreSQL "))
    load = meta.get("loadavg_start") or [float("nan")]
    versions = [f"shoal {meta.get('shoal', '?')}"]
    versions += [f"{k} {v}" for k, v in (meta.get("peers") or {}).items()]
    versions.append(f"Python {meta.get('python', '?')}")
    lines = [
        f"**{store}**" + (f" ({'; '.join(settings)})" if settings else "") + ", measured "
        f"{str(meta.get('started', '?'))[:10]} by `{meta.get('command', '?')}` on "
        f"{meta.get('cpus', '?')} CPUs ({meta.get('cpus_usable', '?')} usable, load average "
        f"{load[0]:.1f} at the start): {', '.join(versions)}."
    ]
    runs = f"the median of {meta.get('repeat', '?')} runs, their range in parentheses"
    if "tasks_per_processing_run" in meta:
        runs = f"{meta['tasks_per_processing_run']:,} tasks per run, {runs}"
    lines.append(f"Throughput: {runs}.")
    if meta.get("quick"):
        lines.append("A `--quick` run: small counts, so the figures are rough.")
    if meta.get("problems"):
        lines.append(f"**Problems found**: {'; '.join(meta['problems'])}.")
    return " ".join(lines)


def markdown_table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    if not rows:
        return []
    align = ["---", *["---:"] * (len(head) - 1)]
    return [
        f"| {' | '.join(head)} |",
        f"|{'|'.join(align)}|",
        *(f"| {' | '.join(row)} |" for row in rows),
        "",
    ]


def peer_of(results: Results) -> str:
    peers = results.meta.get("peers") or {}
    return next(iter(peers), "peer")


def throughput_table(r: Rendering, store: str) -> list[str]:
    """shoal, the peer and their ratio per batch and process count; on SQLite the raw loop
    and shoal's share of it as well; then the enqueue rows."""
    peer = peer_of(r.results)
    raw = any(n.quantity == "raw_per_s" for n in r.names.values())
    head = ["throughput", "shoal", peer, f"shoal / {peer}"]
    head += ["raw SQLite", "shoal / raw"] if raw else []
    rows = []
    for batch, procs in r.configs(None, "batch", "procs"):
        at = f"{store}.batch{batch}.procs{procs}"
        row = [
            f"batch {batch}, {plural(procs, 'process')}",
            r.cell(f"{at}.shoal_per_s", spread=True),
            r.cell(f"{at}.{peer}_per_s", spread=True),
            r.cell(f"{at}.ratio_vs_{peer}"),
        ]
        if raw:
            row += [r.cell(f"{at}.raw_per_s", spread=True), r.cell(f"{at}.share_of_raw")]
        rows.append(row)
    for (batch,) in r.configs(None, "batch"):
        r.take(f"{store}.batch{batch}.share_of_raw")  # the lowest of the rows above
    blank = ["—"] * (len(head) - 4)
    if f"{store}.enqueue.shoal_per_s" in r.results.figures:
        rows.append(
            [
                "enqueue, one `post` per transaction",
                r.cell(f"{store}.enqueue.shoal_per_s", spread=True),
                r.cell(f"{store}.enqueue.{peer}_per_s", spread=True),
                r.cell(f"{store}.enqueue.ratio_vs_{peer}"),
                *blank,
            ]
        )
    if f"{store}.post_many.shoal_per_s" in r.results.figures:
        rows.append(
            [
                "enqueue, `post_many` of 1,000",
                r.cell(f"{store}.post_many.shoal_per_s", spread=True),
                "—",
                "—",
                *blank,
            ]
        )
    return markdown_table(head, rows)


def cpu_table(r: Rendering, store: str) -> list[str]:
    """The worker processes' own CPU per task, each system's, per configuration."""
    systems = [
        s
        for s in ("shoal", peer_of(r.results), "raw")
        if any(n.quantity == f"{s}_cpu_per_task_ms" for n in r.names.values())
    ]
    rows = [
        [
            f"batch {batch}, {plural(procs, 'process')}",
            *(r.cell(f"{store}.batch{batch}.procs{procs}.{s}_cpu_per_task_ms") for s in systems),
        ]
        for batch, procs in r.configs(None, "batch", "procs")
    ]
    names = {"raw": "raw SQLite"}
    return markdown_table(["worker CPU per task", *(names.get(s, s) for s in systems)], rows)


def latency_table(r: Rendering, store: str) -> list[str]:
    """Claim latency under contention, idle to work, and claim latency against the
    backlog: shoal beside the peer (and the raw loop, where it ran)."""
    peer = peer_of(r.results)
    raw = any(n.quantity.startswith("raw_") and n.measurement for n in r.names.values())
    systems = [("", "shoal"), (f"{peer}_", peer)] + ([("raw_", "raw SQLite")] if raw else [])
    rows = []
    for batch, procs in r.configs("claim", "batch", "procs"):
        at = f"{store}.claim.batch{batch}.procs{procs}"
        for stat in STATS:
            cells = [r.cell(f"{at}.{prefix}{stat}_ms") for prefix, _ in systems]
            rows.append([f"claim {stat}, batch {batch}, {plural(procs, 'process')}", *cells])
    for (waiters,) in r.configs("idle_to_work", "waiters"):
        at = f"{store}.idle_to_work.waiters{waiters}"
        for stat in STATS:
            cells = [r.cell(f"{at}.{prefix}{stat}_ms") for prefix, _ in systems]
            rows.append([f"idle to work {stat}, {waiters} waiting", *cells])
    pending = [p for (p,) in r.configs("backlog", "pending")]
    for kind, what in BACKLOG_KINDS:
        names = [f"{store}.backlog.pending{count}.{kind}_p50_ms" for count in pending]
        if not any(name in r.results.figures for name in names):
            continue  # a run that did not measure this kind
        for count in pending:
            at = f"{store}.backlog.pending{count}"
            rows.append(
                [
                    f"{what} p50, {count:,} pending",
                    r.cell(f"{at}.{kind}_p50_ms"),
                    r.cell(f"{at}.{peer}_p50_ms"),
                    *[""] * raw,
                ]
            )
        if len(pending) == 2:
            rows.append(
                [
                    f"{what} p50, {pending[1]:,} / {pending[0]:,} pending",
                    r.cell(f"{store}.backlog.{kind}_growth"),
                    r.cell(f"{store}.backlog.{peer}_growth"),
                    *[""] * raw,
                ]
            )
    return markdown_table(["latency", *(label for _, label in systems)], rows)


def rest_table(r: Rendering) -> list[str]:
    """Every figure no table above showed, by name."""
    rows = [
        [f"`{name}`", number(r.results.figures[name]), _verdict(r.results, name)]
        for name in sorted(r.left)
    ]
    return markdown_table(["figure", "value", "target"], rows)


def _verdict(results: Results, name: str) -> str:
    target = results.targets.get(name)
    if target is None:
        return ""
    return f"{target['target']}: {'pass' if target['pass'] else '**miss**'}"


def render(results: Results, source: str) -> str:
    """One results file as Markdown: the run's line, then its tables."""
    r = Rendering.of(results)
    store = results.meta.get("store", "")
    lines = [f"<!-- generated by bench/table.py from {source} -->", header(results), ""]
    if store in STORES:
        lines += throughput_table(r, store)
        lines += latency_table(r, store)
        lines += cpu_table(r, store)
    lines += rest_table(r)
    return "\n".join(lines).rstrip("\n") + "\n"


# ---------------------------------------------------------------------- the README


def replace_between_markers(text: str, generated: str) -> str:
    """``text`` with what lies between the markers replaced by ``generated``."""
    start, end = text.find(START), text.find(END)
    if start < 0 or end < start:
        raise ValueError(f"needs a {START} line and, after it, a {END} line")
    return text[: start + len(START)] + "\n" + generated.rstrip("\n") + "\n" + text[end:]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Markdown tables from bench/claims.py (or bench/scale.py) --json files."
    )
    parser.add_argument("results", nargs="+", type=Path, help="results files, in this order")
    parser.add_argument(
        "--write-readme",
        type=Path,
        default=None,
        metavar="README",
        help=f"replace the part of this file between {START} and {END} instead of printing",
    )
    args = parser.parse_args(argv)
    generated = "\n".join(render(read_results(path), path.as_posix()) for path in args.results)
    if args.write_readme is None:
        sys.stdout.write(generated)
        return 0
    try:
        text = args.write_readme.read_text("utf-8")
        args.write_readme.write_text(replace_between_markers(text, generated), "utf-8")
    except (OSError, ValueError) as exc:
        print(f"{args.write_readme}: {exc}", file=sys.stderr)
        return 2
    print(f"{args.write_readme}: the benchmark tables now come from {len(args.results)} file(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
