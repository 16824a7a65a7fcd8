"""A person edits the board by hand and pushes (as a reviewed pull request would): whatever
they push, the fleet either goes on working with no task lost or doubled, or is refused
with a clear message that changes nothing. Each test pushes with real git from a person's
own working clone, and reads the board through two fleets: one that had it in memory
before the edit (it reads only the changed files) and a fresh one (it reads them all)."""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from shoal import Fleet, ManualClock
from shoal.errors import StoreDamaged
from shoal.stores.git import GitStore
from tests.conftest import git_board
from tests.workers import SHOAL


def git(*args: str, cwd: Path) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout


def hand_edit(url: str, work: Path, edit: Callable[[Path], None]) -> None:
    """Clone the board's branch into ``work``, let ``edit`` change the files, and push the
    change as a person would (an ordinary commit on top of the tip)."""
    board = url.removeprefix("git+file://")
    subprocess.run(
        ["git", "clone", "--quiet", "--branch", "shoal", board, str(work)],
        check=True,
        capture_output=True,
    )
    edit(work)
    git("add", "-A", cwd=work)
    git(
        "-c",
        "user.name=A Person",
        "-c",
        "user.email=p@example.com",
        "commit",
        "-qm",
        "by hand",
        cwd=work,
    )
    git("push", "--quiet", "origin", "shoal", cwd=work)


def open_on(url: str, clock: ManualClock, cache: Path) -> Fleet:
    return Fleet(GitStore(url, cache=cache), clock=clock, rng=random.Random(0))


@pytest.fixture
def url(tmp_path: Path) -> str:
    return git_board(tmp_path)


def test_files_beside_the_board_are_never_read_whatever_they_are(
    url: str, clock: ManualClock, tmp_path: Path
) -> None:
    """A submodule, a name that is not UTF-8 and a big binary outside the layout: the board
    reads on (they used to end every command with exit 70 or exit 5)."""
    before = open_on(url, clock, tmp_path / "before")
    before.post("keep me")

    def add_strangers(work: Path) -> None:
        (work / "notes").mkdir()
        with open(bytes(work) + b"/notes/\xff.txt", "wb") as odd:  # a name that is not UTF-8
            odd.write(b"\x89PNG\xff")
        (work / "tasks" / "0" / "picture.png").write_bytes(bytes(range(256)) * 64)
        inner = work / "notes" / "sub"
        inner.mkdir()
        git("init", "-q", cwd=inner)
        git(
            "-c",
            "user.name=p",
            "-c",
            "user.email=p@x",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "x",
            cwd=inner,
        )

    hand_edit(url, tmp_path / "work", add_strangers)
    tree = git("ls-tree", "-r", "shoal", cwd=Path(url.removeprefix("git+file://")))
    assert "commit" in tree and "picture.png" in tree  # the submodule and the binary landed
    fresh = open_on(url, clock, tmp_path / "fresh")
    assert [t.title for t in before.tasks()] == [t.title for t in fresh.tasks()] == ["keep me"]
    assert before.post("and me").id == 2
    assert fresh.post("and me too").id == 3


def lower_the_counters(work: Path) -> None:
    fleet = json.loads((work / "fleet.json").read_text())
    fleet["last_task_id"] = 1
    fleet["last_event_id"] = 1
    (work / "fleet.json").write_text(json.dumps(fleet, indent=2) + "\n")


def add_a_task_past_the_counter(work: Path) -> None:
    task = json.loads((work / "tasks" / "0" / "2.json").read_text())
    task.update(id=3, title="added by hand")
    (work / "tasks" / "0" / "3.json").write_text(json.dumps(task, indent=2) + "\n")


@pytest.mark.parametrize("edit", [lower_the_counters, add_a_task_past_the_counter])
def test_a_hand_edit_of_the_counters_never_makes_a_post_overwrite_a_task(
    url: str, clock: ManualClock, tmp_path: Path, edit: Callable[[Path], None]
) -> None:
    """fleet.json's counters lowered by hand (or a task file added past them) used to give
    the next post an id a task already had: its file was written over, the task lost."""
    before = open_on(url, clock, tmp_path / "before")
    before.post("one")
    before.post("two")
    hand_edit(url, tmp_path / "work", edit)
    fresh = open_on(url, clock, tmp_path / "fresh")
    had = {t.id: t.title for t in fresh.tasks()}
    new = [before.post("three").id, fresh.post("four").id]
    assert not set(new) & set(had)
    titles = {t.id: t.title for t in open_on(url, clock, tmp_path / "last").tasks()}
    assert titles == {**had, new[0]: "three", new[1]: "four"}
    ids = [e.id for e in fresh.events(limit=100)]
    assert len(ids) == len(set(ids))


def rewrite(path: Path, **changes: Any) -> None:
    value = json.loads(path.read_text())
    value.update(changes)
    path.write_text(json.dumps(value, indent=2) + "\n")


def refused_changing_nothing(
    url: str,
    clock: ManualClock,
    tmp_path: Path,
    edit: Callable[[Path], None],
    named: str,
    act: Callable[[Fleet], object],
) -> None:
    """After a person's ``edit``, a fleet that was open before it fails ``act`` and a fresh
    one fails to open, both with StoreDamaged naming ``named``; the branch did not move."""
    before = open_on(url, clock, tmp_path / "before")
    before.register("ada")
    before.post("one")
    hand_edit(url, tmp_path / "work", edit)
    board = Path(url.removeprefix("git+file://"))
    tip = git("rev-parse", "shoal", cwd=board)
    with pytest.raises(StoreDamaged, match=named):
        act(before)
    with pytest.raises(StoreDamaged, match=named):
        open_on(url, clock, tmp_path / "fresh")
    assert git("rev-parse", "shoal", cwd=board) == tip


def a_dot_dot_agent(work: Path) -> None:
    """An agent file, where its id says it goes, for the id ``..``: no version of shoal
    registers it, and in a URL's path it is the step up (issue 28, L5)."""
    agent = json.loads((work / "agents" / "ada.json").read_text())
    (work / "agents" / "...json").write_text(json.dumps({**agent, "id": ".."}) + "\n")


@pytest.mark.parametrize(
    ("edit", "named"),
    [
        (lambda w: rewrite(w / "tasks" / "0" / "1.json", priority="high"), "priority"),
        (lambda w: rewrite(w / "tasks" / "0" / "1.json", attempts=True), "attempts"),
        (lambda w: rewrite(w / "tasks" / "0" / "1.json", skills=["py", 3]), "skills"),
        (lambda w: rewrite(w / "agents" / "ada.json", max_concurrent="2"), "max_concurrent"),
        (lambda w: rewrite(w / "agents" / "ada.json", id="bob"), "holds agent 'bob'"),
        (a_dot_dot_agent, "holds agent '..', which is not an agent id"),
    ],
    ids=[
        "priority-name",
        "attempts-bool",
        "skill-number",
        "max-concurrent-text",
        "agent-id",
        "agent-dot-dot",
    ],
)
def test_a_hand_edit_that_parses_but_holds_a_wrong_value_is_refused_changing_nothing(
    url: str, clock: ManualClock, tmp_path: Path, edit: Callable[[Path], None], named: str
) -> None:
    """A value of the wrong kind (``"priority": "high"``) used to load, and every claim
    after it failed with an internal error; an agent file renamed inside was taken by a
    fleet reading only the changes, and refused by a fresh one. Both refuse it now (exit
    5), naming the file, and nothing is written."""
    refused_changing_nothing(url, clock, tmp_path, edit, named, lambda fleet: fleet.claim("ada"))


def copy_the_log_elsewhere(work: Path) -> None:
    (work / "events" / "copy").mkdir()
    log = work / "events" / "000000001" / "000000001.jsonl"
    (work / "events" / "copy" / "000000001.jsonl").write_bytes(log.read_bytes())


def move_an_event_to_another_file(work: Path) -> None:
    log = work / "events" / "000000001" / "000000001.jsonl"
    first, *rest = log.read_bytes().splitlines(keepends=True)
    log.write_bytes(b"".join(rest))
    (work / "events" / "000000001" / "000000101.jsonl").write_bytes(first)


@pytest.mark.parametrize(
    ("edit", "named"),
    [
        (copy_the_log_elsewhere, "events/copy/000000001.jsonl is not where"),
        (move_an_event_to_another_file, "000000101.jsonl holds events that are not its own"),
        (lambda w: (w / "settings.json").write_text('{"lease_ttl": "soon"}'), "settings.json"),
    ],
    ids=["log-copied", "event-moved", "bad-setting"],
)
def test_a_hand_edit_of_the_log_or_the_settings_is_refused_as_a_damaged_board(
    url: str, clock: ManualClock, tmp_path: Path, edit: Callable[[Path], None], named: str
) -> None:
    """A copy of the log's file under another name used to be read as more events, and
    each write after it put one more copy of every event into the log; a bad value in
    settings.json was reported as the caller's bad input (exit 2), naming no file. Both
    are a damaged board now (exit 5), the file named, nothing written."""
    refused_changing_nothing(url, clock, tmp_path, edit, named, lambda fleet: fleet.post("two"))


def a_pool_key_of_text(work: Path) -> None:
    task = work / "tasks" / "0" / "1.json"
    rewrite(task, store={**json.loads(task.read_text())["store"], "pool_key": "inf"})


def a_huge_moment_in_the_log(work: Path) -> None:
    log = work / "events" / "000000001" / "000000001.jsonl"
    first, *rest = log.read_text().splitlines(keepends=True)
    event = json.loads(first)
    line = json.dumps({**event, "at": 0.5}).replace("0.5", "1e999")
    log.write_text("".join([line + "\n", *rest]))


@pytest.mark.parametrize(
    ("edit", "named"),
    [
        (
            lambda w: rewrite(w / "tasks" / "0" / "1.json", lease_expires=math.inf),
            "tasks/0/1.json: lease_expires is Infinity",
        ),
        (
            lambda w: rewrite(w / "agents" / "ada.json", last_heartbeat=-math.inf),
            "agents/ada.json: last_heartbeat is -Infinity",
        ),
        (lambda w: rewrite(w / "fleet.json", seq=math.nan), "fleet.json: seq is NaN"),
        (a_pool_key_of_text, "tasks/0/1.json cannot be read: store.pool_key is 'inf'"),
        (a_huge_moment_in_the_log, "000000001.jsonl line 1: at is 1e999"),
    ],
    ids=["lease-infinity", "heartbeat-minus-infinity", "seq-nan", "pool-key-text", "at-1e999"],
)
def test_a_number_no_store_keeps_is_refused_naming_the_file(
    url: str, clock: ManualClock, tmp_path: Path, edit: Callable[[Path], None], named: str
) -> None:
    """NaN, Infinity or a number too large for a float, written by hand: Python's json
    reads them, and a lease until Infinity never expired, ``shoal list`` failed on it
    with an internal error (exit 70), and the counters' NaN was refused naming no file.
    Each is a damaged board now (exit 5), the file and field named, nothing written."""
    refused_changing_nothing(url, clock, tmp_path, edit, named, lambda fleet: fleet.claim("ada"))


@pytest.mark.parametrize(("value", "shown"), [(math.inf, "Infinity"), (math.nan, "NaN")])
def test_the_cli_and_doctor_name_the_hand_edited_file_and_the_fix(
    url: str, clock: ManualClock, tmp_path: Path, value: float, shown: str
) -> None:
    """A held lease's end edited by hand, as the issue found it: with ``Infinity`` the
    lease never expired and ``list`` showed it as sound, with ``NaN`` ``list`` failed with
    an internal error (exit 70, "a bug in shoal"); doctor found all fine, or said nothing
    of the file."""
    before = open_on(url, clock, tmp_path / "before")
    before.register("ada")
    before.post("one")
    before.claim("ada")
    hand_edit(
        url, tmp_path / "work", lambda w: rewrite(w / "tasks" / "0" / "1.json", lease_expires=value)
    )
    env = {**os.environ, "SHOAL_GIT_CACHE": str(tmp_path / "cli"), "SHOAL_STORE": url}
    for args in (["list"], ["status"], ["doctor"]):
        done = subprocess.run([*SHOAL, *args], capture_output=True, text=True, env=env, check=False)
        said = done.stdout + done.stderr
        assert done.returncode == 5, said
        assert f"tasks/0/1.json: lease_expires is {shown}" in said
        assert "git log -p shoal -- tasks/0/1.json" in said


def test_a_branch_a_person_forces_back_in_history_is_said_aloud(
    url: str, clock: ManualClock, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A person force-pushes the branch back past a claim: the claim is undone, and the
    task goes to the next agent (git cannot keep a rewritten history's work; README says
    never to do it). The holder's process says what happened, so that its refused
    completion has a reason in its log."""
    holder = open_on(url, clock, tmp_path / "holder")
    holder.register("ada")
    holder.post("one")
    board = Path(url.removeprefix("git+file://"))
    before_claim = git("rev-parse", "shoal", cwd=board).strip()
    holder.claim("ada")
    git("update-ref", "refs/heads/shoal", before_claim, cwd=board)  # the force-push
    with caplog.at_level("WARNING", logger="shoal.stores.git"):
        holder.heartbeat("ada")
    assert "went back in its history" in caplog.text


def test_a_task_deleted_by_hand_leaves_the_ones_waiting_on_it_stuck_and_shown(
    url: str, clock: ManualClock, tmp_path: Path
) -> None:
    """A person deletes a task file that another task waits on: the waiting task can
    never start, and status and assess name it as stuck (they used to fail with an
    internal error, KeyError), so that a person can cancel or retry it."""
    before = open_on(url, clock, tmp_path / "before")
    first = before.post("first")
    then = before.post("then", after=[first.id])
    hand_edit(url, tmp_path / "work", lambda w: (w / "tasks" / "0" / "1.json").unlink())
    for fleet in (before, open_on(url, clock, tmp_path / "fresh")):
        assert list(fleet.status().stuck) == [then.id]
        fleet.assess()
    before.cancel(then.id)


def test_a_board_whose_agent_was_paused_under_the_old_word_reads_it_as_paused(
    url: str, clock: ManualClock, tmp_path: Path
) -> None:
    """A board written before a pause was status ``paused`` holds ``overloaded``: the agent
    is read paused, claims nothing until its pause ends, and is written back as paused."""
    before = open_on(url, clock, tmp_path / "before")
    before.register("bob")
    before.pause("bob", for_="1h")

    def old_word(work: Path) -> None:
        (path,) = (work / "agents").rglob("*.json")
        data = json.loads(path.read_text())
        assert data["status"] == "paused"
        path.write_text(json.dumps({**data, "status": "overloaded"}))

    hand_edit(url, tmp_path / "work", old_word)
    for fleet in (before, open_on(url, clock, tmp_path / "fresh")):
        assert fleet.agent("bob").status.value == "paused"
        assert fleet.claim("bob").reason == "paused"
    clock.advance(3600)
    assert before.claim("bob").reason == "empty"  # the pause ended; written back as over
