"""``shoal doctor``: is this fleet healthy, and if not, what to run to fix it.

Each check prints one line (✔ passed, ✘ failed, - not checked) with what it found, and
under a failure the command or action that fixes it. The exit code says how it went, in
the CLI's usual terms: 0 every check passed; 3 the fleet is usable but something needs a
person (a conflict-like state: dead tasks, a paused agent, a bad lock file...); and when the
store itself cannot be used, the code of that error (2 a bad URL, no fleet there, a file
that is not a fleet or another schema; 4 a store that did not answer, which retrying may
fix; 5 a damaged file, or a fleet file that is a link or not shoal's, or a git store's
cache folder or clone another user could write).

Doctor only looks: it changes nothing in the fleet (its write probe is a transaction that
writes nothing), so it is safe to run against a fleet at work. The one thing it may remove
is the mark a SQLite fleet found damaged carries (``fleet.db.damaged``, which keeps writers
away): when the file passes SQLite's own check again -- repaired, or restored from a
backup -- doctor says so and takes the mark away. Faces reach the store only through
``Fleet``, so the file checks of a SQLite fleet (its lock file, the modes of its files, the
disk it is on, SQLite's integrity check on a read-only connection of doctor's own) read the
path from the store URL and look at the files directly.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import stat
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import quote, urlsplit

import click

from shoal.errors import BadInput, SchemaMismatch, ShoalError, exit_code_for
from shoal.faces.cli.app import json_flag
from shoal.faces.output import json_text
from shoal.fleet import Fleet
from shoal.model import AgentStatus, FleetStatus, Task
from shoal.text import safe
from shoal.validation import NEW_AGENT_ID

__all__ = ["MIN_FREE_BYTES", "MIN_FREE_SHARE", "Check", "add_doctor_commands", "doctor"]

#: A SQLite fleet's disk fails the check with less free space than this...
MIN_FREE_BYTES = 100 * 1024 * 1024
#: ...or than this share of the disk: SQLite needs room to grow its WAL and checkpoint it.
MIN_FREE_SHARE = 0.01
#: The exit code of a failed check that is not a store error: the fleet needs a person.
EXIT_UNHEALTHY = 3
#: How many ids or agents a finding names before it says "and N more".
_NAMED = 5


@dataclass(frozen=True)
class Check:
    """One line of the report: what was checked, whether it passed, and how to fix it."""

    name: str
    ok: bool
    finding: str
    fix: str | None = None
    #: The exit code this failure calls for (a store error's own code, else 3).
    exit_code: int = EXIT_UNHEALTHY
    #: Not run (it does not apply yet, or shoal cannot check it); never fails the report.
    skipped: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "ok": self.ok, "finding": self.finding, "fix": self.fix}


def _failed(name: str, error: ShoalError) -> Check:
    """A check that a shoal error stopped: its message is the finding, its hint the fix."""
    fix = error.hint or "see the message; then run `shoal doctor` again"
    return Check(name, False, error.message, fix, exit_code_for(error))


class _Shared(Protocol):
    """What doctor needs of the CLI's shared object: the --store URL and the --json flag."""

    store: str | None
    json: bool


# ---------------------------------------------------------------------- the store


def _open(url: str | None) -> tuple[Fleet | None, list[Check]]:
    """Open the fleet without creating it; a failure to open is the finding. A schema from
    another version means the store answered, so only the schema check fails."""
    if (url or "").strip().startswith("memory:"):
        error = BadInput(
            "a memory:// fleet lives inside one process: doctor would examine a new, empty one",
            hint="point --store (or SHOAL_STORE) at a fleet on disk or on a server",
        )
        return None, [_failed("store", error)]
    try:
        fleet = Fleet.open(url, create=False)
    except SchemaMismatch as exc:
        reached = Check("store", True, "the store answered (not probed further: see schema)")
        fix = exc.hint or "run `shoal init` to upgrade the fleet's schema"
        return None, [reached, Check("schema", False, exc.message, fix, exit_code_for(exc))]
    except ShoalError as exc:
        return None, [_failed("store", exc)]
    return fleet, [_probe(fleet), Check("schema", True, "the fleet's schema is current")]


def _probe(fleet: Fleet) -> Check:
    """Reachable and writable: read the settings, then write (``Fleet.probe`` records when
    the fleet was last probed), so a read-only file or server fails here."""
    try:
        fleet.settings()
        fleet.probe()
    except ShoalError as exc:
        return _failed("store", exc)
    path = _sqlite_file(fleet.url)
    if path is not None:
        for place in (path, path.parent):
            if not os.access(place, os.W_OK):
                return Check(
                    "store",
                    False,
                    f"{place} is not writable by this user: every claim would fail",
                    f"`chmod u+w {place}` (SQLite also writes its -wal and -shm files "
                    "beside the database), or run shoal as the fleet's owner",
                )
    return Check("store", True, f"reachable and writable at {fleet.where}")


def _sqlite_file(url: str | None) -> Path | None:
    """The database file of a ``sqlite:`` URL, read the way the store reads it (None for
    another store, or no URL)."""
    if not url or not url.strip().startswith("sqlite:"):
        return None
    parts = urlsplit(url.strip())
    raw = (parts.netloc + parts.path) if parts.netloc else parts.path
    if not raw or raw.endswith("/"):
        return None
    return Path("/" + raw.lstrip("/")) if raw.startswith("/") else Path.cwd() / raw


# ---------------------------------------------------------------------- SQLite files


def _lock_check(db: Path) -> Check:
    """The writer queue's file beside the database (``fleet.db.lock``, or ``.lock-flock``
    where the fair queue is not available). Writers of every process map it, so a symlink,
    a stranger's file or a world-writable one lets someone else wedge or misdirect them."""
    lock = Path(f"{db}.lock")
    if not os.path.lexists(lock) and os.path.lexists(f"{lock}-flock"):
        lock = Path(f"{lock}-flock")
    if not os.path.lexists(lock):
        return Check("lock_file", True, f"{lock} is not there yet; the next writer makes it")
    info = os.lstat(lock)
    reset = f"stop the fleet's shoal processes, then `rm {lock}` (the next one makes it anew)"
    if stat.S_ISLNK(info.st_mode):
        target = os.readlink(lock)
        return Check("lock_file", False, f"{lock} is a symlink (to {target})", reset)
    if not stat.S_ISREG(info.st_mode):
        return Check("lock_file", False, f"{lock} is not a regular file", reset)
    if info.st_uid != os.geteuid():
        return Check(
            "lock_file",
            False,
            f"{lock} belongs to uid {info.st_uid}, not to this user (uid {os.geteuid()})",
            f"`chown {os.geteuid()} {lock}` as its owner or root, or {reset}",
        )
    if info.st_mode & stat.S_IWOTH:
        mode = stat.S_IMODE(info.st_mode)
        return Check(
            "lock_file",
            False,
            f"{lock} is writable by every user (mode {mode:04o}): anyone could wedge the writers",
            f"`chmod o-w {lock}`",
        )
    return Check("lock_file", True, f"{lock} is a regular file of yours, not world-writable")


#: The files of a SQLite fleet beside its database, by suffix (the store names them so).
_FLEET_FILES = ("", "-wal", "-shm", ".lock", ".lock-flock")
#: The mark left beside a database found damaged (see shoal.stores._files).
_DAMAGED = ".damaged"


def _modes_check(db: Path, before: list[str]) -> Check:
    """The fleet's files are readable by their owner alone: the database holds every lease
    token. shoal makes them 0600 (and ``.shoal/`` 0700) and narrows older ones when a
    writer opens the fleet -- doctor's own opening included, so ``before`` is what was
    loose before it opened the fleet; a file of another user's stays as it is."""
    loose = _loose_files(db)
    if not loose and before:
        return Check(
            "file_modes",
            True,
            f"were open to other users, now narrowed to the owner alone: {_names(before)}",
        )
    if not loose:
        return Check("file_modes", True, "the fleet's files are readable by their owner only")
    return Check(
        "file_modes",
        False,
        f"open to other users, who could read every lease token: {_names(loose)}",
        f"`chmod 600 {db}*` as their owner (and `chmod 700` its .shoal folder); a shoal "
        "command that writes to the fleet, run by its owner, also narrows its files",
    )


def _loose_files(db: Path) -> list[str]:
    """The fleet's files (and its .shoal folder) that others may read or write."""
    loose: list[str] = []
    for suffix in _FLEET_FILES:
        place = Path(f"{db}{suffix}")
        try:
            info = os.lstat(place)
        except FileNotFoundError:
            continue
        if stat.S_ISREG(info.st_mode) and stat.S_IMODE(info.st_mode) & 0o077:
            loose.append(f"{place} ({stat.S_IMODE(info.st_mode):04o})")
    folder = db.parent
    if folder.name == ".shoal" and stat.S_IMODE(os.stat(folder).st_mode) & 0o077:
        loose.append(f"{folder}/ ({stat.S_IMODE(os.stat(folder).st_mode):04o})")
    return loose


def _integrity_check(db: Path) -> Check:
    """SQLite's own check of the database (``PRAGMA quick_check``), on a read-only
    connection: it finds damage that a query might meet only later. A fleet marked damaged
    whose file now passes (repaired or restored) has the mark taken away."""
    marker = Path(f"{db}{_DAMAGED}")
    try:
        conn = sqlite3.connect(f"file:{quote(str(db))}?mode=ro", uri=True, timeout=5)
        try:
            rows = [r[0] for r in conn.execute("PRAGMA quick_check").fetchall()]
        finally:
            conn.close()
    except sqlite3.Error as exc:
        rows = [str(exc)]
    restore = (
        f"stop every shoal process of the fleet, restore {db} from a backup and delete its "
        f"-wal and -shm files (or recover what SQLite can: `sqlite3 {db} .recover | sqlite3 "
        "fixed.db`), then run `shoal doctor` again"
    )
    if rows != ["ok"]:
        found = "; ".join(rows[:3]) + (f" and {len(rows) - 3} more" if len(rows) > 3 else "")
        if "locked" in found or "busy" in found:
            return Check("integrity", True, f"not checked: {found}", skipped=True)
        return Check("integrity", False, f"{db} is damaged: {found}", restore, exit_code=5)
    if os.path.lexists(marker):
        try:
            marker.unlink()
        except OSError as exc:
            return Check(
                "integrity",
                False,
                f"{db} passes SQLite's check, but its damage mark {marker} stays: {exc.strerror}",
                f"`rm {marker}`",
            )
        return Check(
            "integrity",
            True,
            f"{db} passes SQLite's check now; the mark an earlier error left was taken away, "
            "so writers may use it again",
        )
    return Check("integrity", True, "the database passes SQLite's quick_check")


def _disk_check(db: Path) -> Check:
    """Room on the disk that holds the database: a full disk fails every write."""
    folder = db.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    usage = shutil.disk_usage(folder)
    share = usage.free / usage.total if usage.total else 0.0
    finding = f"{_size(usage.free)} free of {_size(usage.total)} ({share:.0%}) at {folder}"
    if usage.free < MIN_FREE_BYTES or share < MIN_FREE_SHARE:
        low = f"{_size(MIN_FREE_BYTES)} or {MIN_FREE_SHARE:.0%}"
        return Check(
            "disk_space",
            False,
            f"only {finding}, under {low}: SQLite needs room to grow its WAL",
            f"free space on the disk that holds {folder}, or move the fleet to a larger one",
        )
    return Check("disk_space", True, finding)


def _size(count: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if count < 1024 or unit == "TB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    raise AssertionError("unreachable")


# ---------------------------------------------------------------------- PostgreSQL


#: Seconds the server's clock may differ from this host's before doctor says so.
MAX_SKEW = 5.0


def _clock_check(fleet: Fleet) -> Check:
    """Leases are stamped and judged by the clocks of the hosts that claim and reap, so a
    host whose clock is off the server's (and so off the other hosts') makes leases expire
    early or late. The server's clock is the common reference."""
    try:
        skew = fleet.probe().skew
    except ShoalError as exc:
        return _failed("clock_skew", exc)
    if skew is None:
        return Check("clock_skew", True, "not checked: this store has no server", skipped=True)
    finding = (
        f"the server's clock is {abs(skew):.2f}s {'ahead of' if skew > 0 else 'behind'} this host's"
    )
    if abs(skew) > MAX_SKEW:
        return Check(
            "clock_skew",
            False,
            f"{finding} (more than {MAX_SKEW:g}s): leases would expire early or late",
            "synchronise the clocks of this host and the server (chrony or systemd-timesyncd)",
        )
    return Check("clock_skew", True, finding)


# ---------------------------------------------------------------------- fleet state


def _state_checks(fleet: Fleet) -> list[Check]:
    """The fleet's work: leases nobody reaps, agents the breaker paused, dead and stalled
    tasks. All read from one snapshot, at this process's clock."""
    try:
        status = fleet.status()
        stall_factor = fleet.settings().stall_factor
    except ShoalError as exc:
        return [_failed("fleet_state", exc)]
    now = fleet.clock.now()
    claimed = [task for load in status.agents for task in load.held]
    return [
        _stale_leases(list(status.expired), now),
        _paused_agents(status),
        _dead_tasks(status),
        _stalled_tasks(claimed, now, stall_factor),
        _old_agent_ids(status),
    ]


def _stale_leases(claimed: list[Task], now: float) -> Check:
    """A lease that ran out means its agent died or hung: the task is not running, and the
    next claim anywhere takes it back (no monitor needed), but someone may want to know."""
    stale = [t for t in claimed if t.lease_expires is not None and t.lease_expires < now]
    if not stale:
        return Check("stale_leases", True, "no claimed task holds an expired lease")
    return Check(
        "stale_leases",
        False,
        f"{_count(stale, 'claimed task')} past {'its lease' if len(stale) == 1 else 'their leases'}"
        f" ({_ids(stale)}), held by {_names(sorted({t.agent or '?' for t in stale}))}: not "
        f"running; the next claim takes {'it' if len(stale) == 1 else 'them'} back",
        "`shoal reap` takes them back now; check why those agents stopped heartbeating",
    )


def _paused_agents(status: FleetStatus) -> Check:
    """A paused agent (by the circuit breaker or a person) claims nothing until its pause
    ends; ``status`` already shows a pause that ran out as over."""
    paused = sorted(a.agent.id for a in status.agents if a.agent.status is AgentStatus.PAUSED)
    if not paused:
        return Check("paused_agents", True, "no agent is paused")
    resume = "; ".join(f"`shoal agent resume {agent}`" for agent in paused[:_NAMED])
    return Check(
        "paused_agents",
        False,
        f"{_count(paused, 'agent')} paused (by the circuit breaker, after failing in a row, "
        f"or by request): {_names(paused)}",
        f"see why (`shoal events --agent {paused[0]}`); fix what made it fail, then {resume}",
    )


def _dead_tasks(status: FleetStatus) -> Check:
    """Dead tasks ran out of attempts; nothing retries them, and their dependents wait."""
    dead = status.counts.get("dead", 0)
    if not dead:
        return Check("dead_tasks", True, "no task is dead")
    behind = f"; {len(status.stuck)} blocked behind them" if status.stuck else ""
    return Check(
        "dead_tasks",
        False,
        f"{dead} task{'s are' if dead != 1 else ' is'} dead (out of attempts){behind}",
        "see why with `shoal list --state dead`, fix it, then `shoal retry --state dead`",
    )


def _stalled_tasks(claimed: list[Task], now: float, stall_factor: float) -> Check:
    """A task running far past its expected duration may have a hung agent."""
    stalled = [t for t in claimed if t.stalled_at is not None or _overdue(t, now, stall_factor)]
    if not stalled:
        return Check("stalled_tasks", True, "no claimed task runs past its expected duration")
    first = stalled[0].id
    return Check(
        "stalled_tasks",
        False,
        f"{_count(stalled, 'task')} running past {stall_factor:g}x its expected duration "
        f"({_ids(stalled)})",
        f"look at its agent (`shoal show {first}`); if it is hung, stop its worker (the task "
        f"comes back when its lease expires) or `shoal cancel {first}`",
    )


def _old_agent_ids(status: FleetStatus) -> Check:
    """Live agents an older version registered under ids new ones may not take (a ``/``,
    more than 64 characters): they keep working, but such an id is a path in a URL, so each
    should move to a new one."""
    old = sorted(
        a.agent.id
        for a in status.agents
        if a.agent.status is not AgentStatus.TERMINATED and not NEW_AGENT_ID.fullmatch(a.agent.id)
    )
    if not old:
        return Check("agent_ids", True, "every live agent's id is letters, digits and . _ - @ :")
    shown = [safe(a, one_line=True) for a in old]
    first = shown[0]
    return Check(
        "agent_ids",
        False,
        f"{_count(old, 'live agent')} registered under an id new agents may not take (only "
        f"letters, digits and . _ - @ :, at most 64): {_names(shown)}",
        "they keep working until you move them: start each agent's worker under a new id, "
        f"then `shoal set-status '{first}' terminated` for the old one",
    )


def _overdue(task: Task, now: float, stall_factor: float) -> bool:
    """Stalled by the fleet's rule, though no reap has flagged it yet."""
    if task.expected_duration is None or task.claimed_at is None:
        return False
    return now - task.claimed_at > stall_factor * task.expected_duration


def _count(items: list[Any], noun: str) -> str:
    return f"1 {noun} is" if len(items) == 1 else f"{len(items)} {noun}s are"


def _ids(tasks: list[Task]) -> str:
    return _names([str(t.id) for t in tasks], "task ")


def _names(names: list[str], prefix: str = "") -> str:
    shown = ", ".join(names[:_NAMED])
    more = f" and {len(names) - _NAMED} more" if len(names) > _NAMED else ""
    return f"{prefix}{shown}{more}"


# ---------------------------------------------------------------------- the report


def run_checks(url: str | None) -> list[Check]:
    """Every check that applies to the fleet at ``url`` (None: SHOAL_STORE or the nearest
    .shoal/fleet.db). The file checks of a SQLite fleet run even when it cannot be opened:
    a full disk or a bad lock file may be why."""
    url = url or os.environ.get("SHOAL_STORE", "").strip() or None
    given = _sqlite_file(url) if url else _nearest_fleet()
    # First, so that a fleet marked damaged and since restored opens again below, and
    # so that the modes are seen as they were before this opening narrowed them.
    integrity = _integrity_check(given) if given is not None and _is_file(given) else None
    loose = _loose_files(given) if given is not None and _is_file(given) else []
    fleet, checks = _open(url)
    try:
        db = _sqlite_file(fleet.url) if fleet is not None else given
        if db is not None and _is_file(db):
            checks += [_lock_check(db), _disk_check(db), _modes_check(db, loose)]
            checks.append(integrity if integrity is not None else _integrity_check(db))
        if fleet is not None:
            if fleet.url.startswith(("postgres:", "postgresql:")):
                checks.append(_clock_check(fleet))
            checks += _state_checks(fleet)
    finally:
        if fleet is not None:
            fleet.close()
    damaged = any(c.name == "integrity" and not c.ok for c in checks)
    return [_not_circular(check) if damaged else check for check in checks]


def _not_circular(check: Check) -> Check:
    """A store error met while opening a damaged fleet advises running `shoal doctor` --
    the command being run. Its integrity check has the finding and the fix: point there."""
    if check.name != "integrity" and check.fix and check.fix.startswith("run `shoal doctor`"):
        return replace(check, fix="see the integrity check below: it says what to do")
    return check


def _nearest_fleet() -> Path | None:
    """``.shoal/fleet.db`` in the nearest folder that has one, as the store finds it when
    no URL is given (doctor looks at its files before opening it)."""
    here = Path.cwd().resolve()
    for folder in (here, *here.parents):
        candidate = folder / ".shoal" / "fleet.db"
        if candidate.is_file():
            return candidate
    return None


def _is_file(path: Path) -> bool:
    """A regular file, not through a link (a link is the store check's to report)."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def exit_code(checks: list[Check]) -> int:
    """0 when all pass; else a store error's code if one stopped doctor, else 3."""
    failed = [c for c in checks if not c.ok]
    store_errors = [c.exit_code for c in failed if c.exit_code != EXIT_UNHEALTHY]
    return store_errors[0] if store_errors else (EXIT_UNHEALTHY if failed else 0)


def report_lines(checks: list[Check]) -> list[str]:
    """The human report: a line per check, a fix under each failure, and a verdict."""
    passed, failed_mark, skipped_mark = _marks()
    lines = []
    for check in checks:
        mark = skipped_mark if check.skipped else passed if check.ok else failed_mark
        lines.append(f"{mark} {check.name.replace('_', ' ')}: {check.finding}")
        if not check.ok and check.fix:
            lines.append(f"    fix: {check.fix}")
    failures = sum(1 for c in checks if not c.ok)
    run = sum(1 for c in checks if not c.skipped)
    verdict = f"{failures} of {run} checks failed" if failures else f"all {run} checks passed"
    return [*lines, verdict]


def _marks() -> tuple[str, str, str]:
    """✔ and ✘ where stdout can encode them; plain words where it cannot (a pipe under
    an ASCII or Latin-1 locale), so the report never fails to print."""
    try:
        "✔✘".encode(sys.stdout.encoding or "ascii")
    except (UnicodeEncodeError, LookupError):
        return "ok", "FAIL", "-"
    return "✔", "✘", "-"


def _echo(text: str) -> None:
    """Print the whole report in one write; a reader that went away (``| head``) is not an
    error of doctor's, so the exit code still tells the result."""
    try:
        click.echo(text)
        sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


@click.command(short_help="Check the fleet's health and say how to fix what is wrong.")
@json_flag('Print {"ok", "checks": [{"name", "ok", ...}]}.')
@click.pass_obj
def doctor(shared: _Shared) -> None:
    """Check the fleet: the store answers and takes writes, its schema is current, (SQLite)
    its lock file is sound, its disk has room, its files are private and the database
    passes SQLite's integrity check, (git) its private clone's folder is this user's
    alone and every board file reads back, (PostgreSQL) the server's clock, and its
    work: expired leases nobody reaped, agents the circuit breaker paused, dead and stalled
    tasks. Each failure comes with the command that fixes it. Changes nothing.

    \b
    Exit: 0 all passed, 3 something needs a fix, 2 no usable fleet there (a bad URL, no
    fleet, another schema), 4 the store did not answer (retry), 5 the fleet's file is
    damaged or unsafe (restore it from a backup).
    e.g.  shoal doctor && echo healthy;  shoal doctor --json | jq '.checks[] | select(.ok|not)'
    """
    checks = run_checks(shared.store)
    if shared.json:
        data = {"ok": all(c.ok for c in checks), "checks": [c.to_dict() for c in checks]}
        _echo(json_text(data, pretty=sys.stdout.isatty()))  # compact in a pipe
    else:
        _echo(safe("\n".join(report_lines(checks))))  # findings may quote stored text
    code = exit_code(checks)
    if code:
        sys.exit(code)


def add_doctor_commands(group: click.Group) -> None:
    """Register ``doctor`` on the ``shoal`` group."""
    group.add_command(doctor)
