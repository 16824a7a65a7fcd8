"""The board's files: how a fleet is laid out in the git store, and read back.

A person reading the branch sees::

    README.md             what this branch is, and not to edit it by hand
    fleet.json            counters and the skill sets tasks have required
    settings.json         the settings that differ from the defaults
    meta.json             the fleet's small records (hashed access tokens...)
    schedules.json        the schedules of recurring tasks, by id
    agents/<id>.json      one per agent (the id percent-encoded where it has / or :)
    tasks/<h>/<id>.json   one per task: its fields, what it waits on, its lease
                          (<h> is the id's hundreds: tasks/4200/4213.json)
    events/<f>/<n>.jsonl  the event log, a hundred events a file, one event a line, a
                          hundred files a folder (<n>, <f>: the first event id in each)

Tasks and events sit in folders of a hundred because every commit writes a new copy of
each folder it changes: flat, a board of a thousand tasks would add a 36 KB tree to every
write; in folders, two small ones.

Every file is JSON with a stable key order and a final newline, so a diff between two
commits shows exactly what an operation changed. Moments are epoch seconds, as the other
stores keep them. A task's ``store`` holds what only the store needs: its skill set, its
pool key, and its place in a queue (``seq``, signed as ``policy.queue_place`` gives it,
``"signed": true``; a file without that mark was written before places had a sign, and
is read the way the SQL stores' migration 0007 converts their tasks). Lease tokens are
in the task files: whoever can read the repository can act as any agent -- the git store
trusts everyone with access to it (SECURITY.md).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import fields
from typing import Any
from urllib.parse import quote, unquote

from shoal.model import Agent, AgentStatus, Event, Schedule, Task, TaskState
from shoal.settings import Settings
from shoal.stores._gitcheck import Malformed, check_kinds, finite, parse, reading
from shoal.stores._memdata import Data, Row
from shoal.text import safe
from shoal.validation import AGENT_ID
from shoal.vocabulary import ScheduleState

__all__ = [
    "EVENTS_PER_FILE",
    "FORMAT",
    "agent_file",
    "agent_path",
    "apply_changes",
    "commit_message",
    "dump",
    "event_path",
    "event_segment",
    "events_file",
    "initial_files",
    "is_board_file",
    "load",
    "small_files",
    "task_file",
    "task_path",
]

#: The layout's version, in fleet.json: a newer shoal may read an older board, not the
#: other way round.
FORMAT = 1
#: Every write rewrites the newest file of the log: small files keep each commit small.
EVENTS_PER_FILE = 100

_README = """\
# A shoal fleet

This branch is a fleet of shoal, the work-stealing task coordinator: each task is a file in
`tasks/`, each agent a file in `agents/`, and every change is one commit by the agent that
made it. Read it, diff it, review it -- but change it only through shoal
(`shoal --store git+<this repository's URL>#<branch> ...`): shoal pushes only on top of the
tip it read, so a hand-made commit here is not lost, but it is not checked either.
"""


def dump(value: Any) -> bytes:
    return (json.dumps(value, indent=2, ensure_ascii=False) + "\n").encode()


# -- paths -------------------------------------------------------------------------------


#: Files a folder holds, for tasks and for the event log's files.
PER_FOLDER = 100


def task_path(task_id: int) -> str:
    return f"tasks/{task_id // PER_FOLDER * PER_FOLDER}/{task_id}.json"


def agent_path(agent_id: str) -> str:
    return f"agents/{quote(agent_id, safe='@._-')}.json"


#: The small files at the top of the board that ``load`` reads.
SMALL_FILES = ("fleet.json", "settings.json", "meta.json", "schedules.json")


def board_kind(path: str) -> str | None:
    """What ``path`` holds on the board: ``small`` (one of ``SMALL_FILES``), ``task``,
    ``agent`` or ``events``; None for anything else a person keeps on the branch, which
    shoal never reads."""
    if path in SMALL_FILES:
        return "small"
    if path.startswith("tasks/") and path.endswith(".json"):
        return "task"
    if path.startswith("agents/") and path.endswith(".json"):
        return "agent"
    if path.startswith("events/") and path.endswith(".jsonl"):
        return "events"
    return None


def is_board_file(path: str) -> bool:
    """Whether shoal reads ``path``: the layout's files, and nothing else on the branch."""
    return board_kind(path) is not None


def event_segment(event_id: int) -> int:
    """The file an event is kept in, by its id: events 1-1000 in the first, and so on."""
    return (event_id - 1) // EVENTS_PER_FILE


def event_path(segment: int) -> str:
    folder = segment // PER_FOLDER * PER_FOLDER * EVENTS_PER_FILE + 1
    return f"events/{folder:09d}/{segment * EVENTS_PER_FILE + 1:09d}.jsonl"


def _first_number(path: str, suffix: str) -> int:
    """The number a task's or an event file's name starts with (``tasks/4200/4213.json``:
    4213)."""
    return int(path.rsplit("/", 1)[-1][: -len(suffix)])


# -- one entity to its file ---------------------------------------------------------------


def _plain(value: Any) -> Any:
    if isinstance(value, TaskState | AgentStatus | ScheduleState):
        return value.value
    if isinstance(value, tuple):
        return list(value)
    return value


def _schedule_fields(schedule: Schedule) -> dict[str, Any]:
    out = {f.name: _plain(getattr(schedule, f.name)) for f in fields(Schedule)}
    return {**out, "task": dict(schedule.task)}


def task_file(row: Row, deps: Iterable[int]) -> bytes:
    task = row.task
    out = {f.name: _plain(getattr(task, f.name)) for f in fields(Task)}
    out["after"] = sorted(deps)
    out["lease_token"] = row.token
    out["store"] = {
        "skillset": row.skillset,
        "pool_key": row.pool_key,
        "seq": row.seq,
        "signed": True,
    }
    return dump(out)


def agent_file(agent: Agent) -> bytes:
    return dump(
        {f.name: _plain(getattr(agent, f.name)) for f in fields(Agent) if f.name != "queued"}
    )


def event_line(event: Event) -> str:
    return json.dumps(
        {
            "id": event.id,
            "at": event.at,
            "kind": event.kind,
            "task_id": event.task_id,
            "agent": event.agent,
            "data": dict(event.data),
        },
        ensure_ascii=False,
    )


def events_file(events: Iterable[Event]) -> bytes:
    return "".join(event_line(e) + "\n" for e in events).encode()


def small_files(data: Data) -> dict[str, bytes]:
    """The files every operation may touch: counters, skill sets, settings, meta."""
    return {
        "fleet.json": dump(
            {
                "format": FORMAT,
                "last_task_id": data.last_task_id,
                "last_event_id": data.last_event_id,
                "seq": data.seq,
                "skillsets": {str(k): list(v) for k, v in sorted(data.skillsets.items())},
            }
        ),
        "settings.json": dump(data.settings.overrides()),
        "meta.json": dump(dict(sorted(data.meta.items()))),
        "schedules.json": dump({str(k): _schedule_fields(s) for k, s in data.schedules.items()}),
    }


def initial_files() -> dict[str, bytes]:
    return {"README.md": _README.encode(), **small_files(Data())}


# -- files back to a fleet ---------------------------------------------------------------


def load(files: Mapping[str, bytes]) -> Data:
    """The fleet these files hold (``files``: path -> content)."""
    data = Data()
    with reading("fleet.json"):
        fleet = parse(files["fleet.json"], "fleet.json")
        if int(fleet.get("format", 0)) > FORMAT:
            raise Malformed(
                f"the board was written by a newer shoal (layout {fleet['format']}, "
                f"this one reads up to {FORMAT})"
            )
        data.last_task_id = int(fleet["last_task_id"])
        data.last_event_id = int(fleet["last_event_id"])
        data.seq = int(fleet["seq"])
        data.skillsets = {int(k): tuple(v) for k, v in fleet["skillsets"].items()}
    with reading("settings.json"):
        data.settings = Settings.from_mapping(
            parse(files.get("settings.json", b"{}"), "settings.json")
        )
    with reading("meta.json"):
        meta = parse(files.get("meta.json", b"{}"), "meta.json")
        data.meta = {str(k): str(v) for k, v in meta.items()}
    with reading("schedules.json"):
        kept = parse(files.get("schedules.json", b"{}"), "schedules.json")
        data.schedules = {int(k): _schedule(v) for k, v in kept.items()}
    tasks: list[tuple[Row, list[int], bool]] = []
    for path, content in files.items():
        with reading(path):
            kind = board_kind(path)
            if kind == "task":
                tasks.append(_task_row(parse(content, path), path))
            elif kind == "agent":
                agent = _agent(parse(content, path), path)
                data.agents[agent.id] = agent
            elif kind == "events":
                data.events.extend(_events_at(path, content)[1])
    data.events.sort(key=lambda e: e.id)
    for row, after, _ in sorted(tasks, key=lambda t: t[0].task.id):
        _add_task(data, row, after)
    _sign_places(data, [row for row, _, signed in tasks if not signed])
    _keep_counters_ahead(data, data.tasks)
    return data


def _sign_places(data: Data, rows: Iterable[Row]) -> None:
    """Give the queued tasks of files written before places had a sign the place they would
    have now -- the rule of the SQL stores' migration 0007: the work others sent an agent
    goes behind, oldest first; its own (a child of a task it holds or held, a task it
    started) stays in front. Run once every row is in ``data``: it looks at parents."""
    for row in rows:
        task = row.task
        queued = task.state in (TaskState.PENDING, TaskState.BLOCKED) and task.agent is not None
        if not queued or row.seq <= 0 or task.claimed_at is not None:
            continue
        parent = data.tasks.get(task.parent) if task.parent is not None else None
        if parent is None or parent.task.agent != task.agent:
            row.seq = -row.seq


def _keep_counters_ahead(data: Data, task_ids: Iterable[int]) -> None:
    """Raise the counters to the highest task (of ``task_ids``) and event on the board. A
    person may lower ``last_task_id`` in fleet.json, or add a task file past it, by hand:
    the next post would then take an id a task already has and write over its file -- a
    task lost without a word. Ids are never reused, so a counter behind them is wrong."""
    data.last_task_id = max(data.last_task_id, max(task_ids, default=0))
    if data.events:
        data.last_event_id = max(data.last_event_id, data.events[-1].id)


def _task_row(raw: dict[str, Any], path: str) -> tuple[Row, list[int], bool]:
    """The row of a task file, what it waits on, and whether its place is signed."""
    known = {f.name for f in fields(Task)}
    values = {k: v for k, v in raw.items() if k in known}
    values["state"] = TaskState(values["state"])
    values["skills"] = tuple(values.get("skills") or ())
    values["labels"] = tuple(values.get("labels") or ())
    check_kinds(Task, values, path)
    task = Task(**values)
    if task_path(task.id) != path:
        raise Malformed(f"{path} holds task {task.id}")
    store = raw["store"]
    pool_key = finite(store["pool_key"], "store.pool_key")
    row = Row(task, int(store["skillset"]), pool_key, int(store["seq"]))
    row.token = raw.get("lease_token")
    return row, [int(i) for i in raw.get("after") or ()], store.get("signed") is True


#: Statuses a board written by an older shoal may hold, and what they are called now: a
#: pause was ``overloaded`` before it was a status of its own.
_OLD_STATUSES = {"overloaded": AgentStatus.PAUSED}


def _agent(raw: dict[str, Any], path: str) -> Agent:
    known = {f.name for f in fields(Agent)}
    values = {k: v for k, v in raw.items() if k in known}
    values["status"] = _OLD_STATUSES.get(values["status"]) or AgentStatus(values["status"])
    values["skills"] = tuple(values.get("skills") or ())
    values["domains"] = tuple(values.get("domains") or ())
    check_kinds(Agent, values, path)
    agent = Agent(**values)
    if agent_path(agent.id) != path:
        raise Malformed(f"{path} holds agent {agent.id!r}")
    if not AGENT_ID.fullmatch(agent.id):  # e.g. "..": no id shoal registers, a path if used
        raise Malformed(f"{path} holds agent {agent.id!r}, which is not an agent id")
    return agent


def _events_at(path: str, content: bytes) -> tuple[int, list[Event]]:
    """The events file at ``path``: its segment and its events. It must be where its
    segment's file goes, and hold only that segment's events, once each: a copy a person
    left under another name used to be read as more events, and every write after it
    wrote the doubles back into the log's file -- one more copy of each per write."""
    segment = event_segment(_first_number(path, ".jsonl"))
    if event_path(segment) != path:
        raise Malformed(f"{path} is not where the event log keeps a file")
    lines = enumerate(content.splitlines(), 1)
    log = [_event(parse(line, f"{path} line {n}")) for n, line in lines if line.strip()]
    ids = [e.id for e in log]
    if any(event_segment(i) != segment for i in ids) or len(set(ids)) != len(ids):
        raise Malformed(f"{path} holds events that are not its own, or one twice")
    return segment, log


def _event(raw: dict[str, Any]) -> Event:
    return Event(
        int(raw["id"]),
        finite(raw["at"], "at"),
        str(raw["kind"]),
        raw["task_id"],
        raw["agent"],
        raw["data"],
    )


# -- what a commit says --------------------------------------------------------------------

_VERBS = {
    "posted": "post",
    "claimed": "claim",
    "stolen": "claim",
    "completed": "complete",
    "failed": "fail",
    "expired": "expire",
    "dead": "bury",
    "released": "release",
    "deferred": "defer",
    "cancelled": "cancel",
    "retried": "retry",
    "ready": "free",
    "stuck": "mark stuck",
    "returned": "return",
    "stalled": "mark stalled",
    "reprioritized": "reprioritize",
    "edited": "edit",
}


#: The events whose agent is the one that acted (a post names the queue it went to, an
#: expiry the agent that lost the lease: the fleet did those).
_ACTS = {"claimed", "stolen", "completed", "failed", "released", "deferred"}


def _say(event: Event) -> str:
    agent = safe(event.agent, one_line=True) if event.agent else None
    verb = _VERBS.get(event.kind)
    if verb is None:  # agent.* and fleet-wide events: the kind says it
        return f"{event.kind.replace('.', ' ')} {agent}" if agent else event.kind
    said = f"{verb} {event.task_id}"
    if agent and event.kind in _ACTS:
        said += f" by {agent}"
    elif agent and event.kind in ("posted", "returned", "retried", "ready"):
        said += f" to {agent}"
    if event.kind == "stolen" and event.data.get("from"):
        said += f" (steal from {safe(str(event.data['from']), one_line=True)})"
    return said


def commit_message(events: list[Event], touched: Iterable[str]) -> tuple[str, str]:
    """(message, author) of the commit for one operation: what its events say happened --
    ``claim 42 by alice (steal from bob)`` -- by the agent that did it; an operation that
    logged nothing (a heartbeat) is named by the files it changed."""
    if events:
        said = list(dict.fromkeys(_say(e) for e in events))
        head = "; ".join(said[:3]) + (f" (and {len(said) - 3} more)" if len(said) > 3 else "")
        actors = (e.agent for e in events if e.agent and (e.kind in _ACTS or "." in e.kind))
        author = next(actors, None) or "shoal"
        body = "\n".join(f"{e.id} {e.kind} task={e.task_id} agent={e.agent}" for e in events)
        return f"{head}\n\n{safe(body)}", safe(author, one_line=True)
    paths = sorted(touched)
    agents = [unquote(p[len("agents/") : -len(".json")]) for p in paths if p.startswith("agents/")]
    if agents:  # an agent's touch without an event: a heartbeat (or its lease renewals)
        names = [safe(a, one_line=True) for a in agents]
        return f"heartbeat {', '.join(names)}", names[0]
    return f"update {', '.join(paths[:5])}" + (" ..." if len(paths) > 5 else ""), "shoal"


def apply_changes(data: Data, changed: Mapping[str, bytes | None]) -> None:
    """Bring ``data`` forward by the files one or more commits changed (path -> new
    content, None: deleted), keeping its indexes, keys and dependency links right -- the
    same fleet ``load`` would read from the new commit, without reading the rest. A file
    it cannot read is a ``Malformed`` naming it, and leaves ``data`` part-way: the caller
    reads the whole board again next time."""
    known_task_id = data.last_task_id  # at or above every task in memory (see below)
    if any(p in changed for p in SMALL_FILES):
        small = small_files(data)
        merged = {p: changed.get(p, small[p]) or b"{}" for p in small}
        fresh = load(merged)  # no tasks, agents or events: only the small files
        data.last_task_id, data.last_event_id, data.seq = (
            fresh.last_task_id,
            fresh.last_event_id,
            fresh.seq,
        )
        data.skillsets, data.settings, data.meta = fresh.skillsets, fresh.settings, fresh.meta
        data.schedules = fresh.schedules
    segments: dict[int, list[Event]] = {}
    added: list[int] = []
    unsigned: list[Row] = []
    for path, content in changed.items():
        with reading(path):
            kind = board_kind(path)
            if kind == "task":
                task_id = _first_number(path, ".json")
                _drop_task(data, task_id)
                if content is not None:
                    row, after, signed = _task_row(parse(content, path), path)
                    _add_task(data, row, after)
                    added.append(task_id)
                    if not signed:
                        unsigned.append(row)
            elif kind == "agent":
                agent_id = unquote(path[len("agents/") : -len(".json")])
                data.agents.pop(agent_id, None)
                if content is not None:
                    agent = _agent(parse(content, path), path)
                    data.agents[agent.id] = agent
            elif kind == "events":
                segment, log = _events_at(path, content or b"")
                segments[segment] = log
    _sign_places(data, unsigned)
    if segments:
        kept = [e for e in data.events if event_segment(e.id) not in segments]
        data.events = sorted(
            [*kept, *(e for log in segments.values() for e in log)], key=lambda e: e.id
        )
    # Only a counter that went back (a hand edit, a branch forced back) needs every task
    # looked at; otherwise the tasks this change added are all that can be past it.
    lowered = data.last_task_id < known_task_id
    _keep_counters_ahead(data, data.tasks if lowered else added)


def _schedule(raw: dict[str, Any]) -> Schedule:
    return Schedule(**{**raw, "state": ScheduleState(raw["state"])})


def _drop_task(data: Data, task_id: int) -> None:
    old = data.tasks.pop(task_id, None)
    if old is None:
        return
    data.index.move(task_id, old, None)
    if old.task.key is not None and data.keys.get(old.task.key) == task_id:
        del data.keys[old.task.key]
    for dep in data.deps.pop(task_id, ()):
        waiting = [i for i in data.dependents.get(dep, ()) if i != task_id]
        if waiting:
            data.dependents[dep] = waiting
        else:
            data.dependents.pop(dep, None)


def _add_task(data: Data, row: Row, after: list[int]) -> None:
    task_id = row.task.id
    data.tasks[task_id] = row
    data.index.move(task_id, None, row)
    if row.task.key is not None:
        data.keys[row.task.key] = task_id
    if after:
        data.deps[task_id] = after
        for dep in after:
            data.dependents.setdefault(dep, []).append(task_id)
