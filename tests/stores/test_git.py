"""The git store's own promises, beyond the contract suite: the board is files a person can
read and a history that says who did what; a process that only reads the files another
changed holds exactly the fleet a fresh clone reads; history squashes on request; and a
broken board, URL or branch is refused clearly, changing nothing."""

from __future__ import annotations

import json
import random
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from shoal import BadInput, Fleet, InvalidStoreURL, ManualClock, StoreNotFound
from shoal.errors import StoreDamaged, StoreUnavailable, WriteConflict
from shoal.stores._gitlayout import agent_path, small_files, task_file
from shoal.stores._memdata import Data
from shoal.stores.git import POLL_MAX, GitStore, parse_git_url
from tests.conftest import git_board
from tests.helpers import one, plant_agent

HOUR = 3600.0


def git(board: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(board), *args], capture_output=True, text=True, check=True
    )
    return done.stdout


def board_of(url: str) -> Path:
    return Path(url[len("git+file://") :].partition("#")[0])


@pytest.fixture
def url(tmp_path: Path) -> str:
    return git_board(tmp_path)


def open_on(url: str, clock: ManualClock, cache: Path, seed: int = 0) -> Fleet:
    """A Fleet with its own private clone (as another process or host would have)."""
    return Fleet(GitStore(url, cache=cache), clock=clock, rng=random.Random(seed))


def fleet_image(data: Data) -> dict[str, Any]:
    """Everything a fleet in memory holds, written out: files, keys, links and indexes."""
    return {
        "tasks": {i: task_file(r, data.deps.get(i, ())) for i, r in data.tasks.items()},
        "agents": {a: repr(agent) for a, agent in data.agents.items()},
        "events": [
            (e.id, e.at, str(e.kind), e.task_id, e.agent, dict(e.data)) for e in data.events
        ],
        "small": small_files(data),
        "keys": dict(data.keys),
        "dependents": {k: sorted(v) for k, v in data.dependents.items() if v},
        "placed": {k: sorted(v) for k, v in data.index.placed.items() if v},
        "pool": {k: v for k, v in data.index.pool.items() if v},
        "longest": {k: v for k, v in data.index.longest.items() if v},
    }


def test_the_board_is_files_a_person_reads_and_every_change_a_commit_by_its_agent(
    url: str, clock: ManualClock, tmp_path: Path
) -> None:
    fleet = open_on(url, clock, tmp_path / "a")
    fleet.configure(max_agents=10)
    fleet.register("ada", skills=["py"])
    plant_agent(fleet, "team/bob", skills=("py",))  # an id an older version took: a "/"
    fleet.set_status("team/bob", "working")
    first = fleet.post("write the parser", skills=["py"], to="team/bob", priority=9)
    fleet.post("write the tests", skills=["py"], to="team/bob", priority=9)
    stolen, lease = one(fleet.claim("ada"))
    fleet.complete(lease, {"lines": 120})
    board = board_of(url)

    as_filed = json.loads(git(board, "show", f"shoal:tasks/0/{stolen.id}.json"))
    assert as_filed["state"] == "done"
    assert as_filed["agent"] == "ada"
    assert as_filed["result"] == {"lines": 120}
    assert git(board, "show", f"shoal:{agent_path('team/bob')}").startswith("{")
    assert "agents/team%2Fbob.json" in git(board, "ls-tree", "-r", "--name-only", "shoal")
    log = git(board, "log", "--format=%an|%s", "shoal").splitlines()
    assert log[1] == f"ada|claim {stolen.id} by ada (steal from team/bob)", log
    assert log[0] == f"ada|complete {stolen.id} by ada"
    assert log[-1] == "shoal|start the fleet"
    assert f"shoal|post {first.id} to team/bob" in log
    # One commit per operation: start, configure, 2 registrations, status, 2 posts, claim,
    # complete.
    assert len(log) == 9
    # The private clone keeps no ref of its own per process (it would pin old objects).
    store = fleet._store
    assert isinstance(store, GitStore)
    assert git(store._clone.path, "for-each-ref", "refs/shoal") == ""


def test_a_clone_that_reads_only_changed_files_holds_what_a_fresh_clone_reads(
    url: str, clock: ManualClock, tmp_path: Path
) -> None:
    """Two agents' processes take turns; after every operation the one that only brought
    in the other's changed files must hold exactly the fleet a new clone reads in full."""
    ours = open_on(url, clock, tmp_path / "ours", seed=1)
    theirs = open_on(url, clock, tmp_path / "theirs", seed=2)
    ours.configure(max_agents=10)
    for name in ("ada", "bob", "cy"):
        ours.register(name, skills=["py"], max_concurrent=3)
    rng = random.Random(7)
    leases: list[Any] = []
    posted: list[int] = []
    for step in range(60):
        actor = (ours, theirs)[step % 2]
        roll = rng.random()
        if roll < 0.35:
            after = [rng.choice(posted)] if posted and rng.random() < 0.3 else []
            to = rng.choice(["ada", None])
            try:
                posted.append(actor.post(f"task {step}", skills=["py"], after=after, to=to).id)
            except BadInput:  # ada went offline with the hour: to the pool then
                posted.append(actor.post(f"task {step}", skills=["py"], after=after).id)
        elif roll < 0.6:
            leases += actor.claim(rng.choice(["ada", "bob", "cy"])).leases
        elif roll < 0.8 and leases:
            actor.complete(leases.pop(rng.randrange(len(leases))))
        elif roll < 0.9 and leases:
            actor.fail(leases.pop(rng.randrange(len(leases))), "flaky")
        else:
            clock.advance(HOUR)
            actor.reap()
            leases.clear()  # every lease ran out with the hour
        fresh = GitStore(url, cache=tmp_path / "fresh")  # reads every file of the tip
        for follower in (ours, theirs):
            follower.status()  # brings it to the tip, reading only what changed
            store = follower._store
            assert isinstance(store, GitStore)
            assert fleet_image(store._data) == fleet_image(fresh._data), step
    clock.advance(48 * HOUR)
    ours.prune(older_than="1h")  # events files rewritten, task files deleted
    theirs.status()
    store = theirs._store
    assert isinstance(store, GitStore)
    assert fleet_image(store._data) == fleet_image(GitStore(url, cache=tmp_path / "last")._data)


def test_prune_squash_leaves_one_commit_and_every_clone_follows(
    url: str, clock: ManualClock, tmp_path: Path
) -> None:
    fleet = open_on(url, clock, tmp_path / "a")
    other = open_on(url, clock, tmp_path / "b")
    fleet.register("ada")
    for i in range(5):
        fleet.post(f"t{i}", to="ada")
        fleet.complete(one(fleet.claim("ada"))[1])
    live = fleet.post("still to do")
    other.status()
    board = board_of(url)
    assert int(git(board, "rev-list", "--count", "shoal")) > 10
    clock.advance(10 * HOUR)

    report = fleet.prune(older_than="1h", squash=True)

    assert report.tasks == 5
    assert report.squashed is not None
    assert git(board, "rev-list", "shoal").split() == [report.squashed]
    assert "squash the fleet's history" in git(board, "log", "-1", "--format=%s", "shoal")
    # The other clone, which knew the old history, carries on from the new one.
    task, lease = one(other.claim("ada"))
    assert task.id == live.id
    other.complete(lease)
    assert fleet.get(live.id).state.value == "done"
    # The squash, ada back after ten silent hours (a commit of its own), the claim, the
    # completion.
    assert int(git(board, "rev-list", "--count", "shoal")) == 4


def test_squash_is_refused_where_there_is_no_history_and_with_a_dry_run(
    url: str, clock: ManualClock, tmp_path: Path
) -> None:
    with (
        Fleet.open(f"sqlite://{tmp_path / 'fleet.db'}") as sqlite,
        pytest.raises(BadInput, match="only the git store"),
    ):
        sqlite.prune(older_than="1h", squash=True)
    fleet = open_on(url, clock, tmp_path / "a")
    before = git(board_of(url), "rev-parse", "shoal")
    with pytest.raises(BadInput, match="do not go together"):
        fleet.prune(older_than="1h", squash=True, dry_run=True)
    assert git(board_of(url), "rev-parse", "shoal") == before


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("git+ftp://host/board.git", "not a git remote"),
        ("git+file://", "names no repository"),
        ("git+file:///tmp/board.git#bad..branch", "not a branch name"),
        ("git+file:///tmp/board.git#-x", "not a branch name"),
        ("git+file:///tmp/board.git#a/.b", "not a branch name"),
        ("git+file:///tmp/board.git#a.", "not a branch name"),
        ("git+file:///tmp/board.git#x.lock/y", "not a branch name"),
        ("git+file:///tmp/board.git#a//b", "not a branch name"),
        ("git+file:///tmp/board.git#HEAD", "not a branch name"),
    ],
)
def test_a_malformed_git_url_is_refused_with_the_forms_that_work(url: str, words: str) -> None:
    with pytest.raises(InvalidStoreURL, match=words) as raised:
        parse_git_url(url)
    assert raised.value.hint


def test_a_password_in_the_url_never_shows_in_a_message(tmp_path: Path) -> None:
    url = "git+https://ada:s3cret-token@127.0.0.1:9/board.git"
    with pytest.raises(StoreUnavailable, match="cannot reach the git remote") as raised:
        GitStore(url, cache=tmp_path / "c")
    said = f"{raised.value} {getattr(raised.value, 'hint', '')}"
    assert "s3cret-token" not in said
    assert "127.0.0.1:9" in said


def test_a_branch_that_does_not_exist_is_not_made_when_asked_only_to_open(
    url: str, tmp_path: Path
) -> None:
    with pytest.raises(StoreNotFound, match="has no branch 'elsewhere'") as raised:
        GitStore(f"{url}#elsewhere", create=False, cache=tmp_path / "c")
    assert "shoal init" in (raised.value.hint or "")
    assert git(board_of(url), "branch", "--list") == ""


def test_a_hand_broken_task_file_is_reported_with_what_to_do_and_changes_nothing(
    url: str, clock: ManualClock, tmp_path: Path
) -> None:
    fleet = open_on(url, clock, tmp_path / "a")
    task = fleet.post("fine")
    board = board_of(url)
    work = tmp_path / "hand"
    subprocess.run(["git", "clone", "-q", "-b", "shoal", str(board), str(work)], check=True)
    (work / "tasks" / "0" / f"{task.id}.json").write_text("{ not json")
    git(work, "-c", "user.name=me", "-c", "user.email=me@x", "commit", "-qam", "oops")
    git(work, "push", "-q", "origin", "shoal")
    tip = git(board, "rev-parse", "shoal")

    for opener in (lambda: open_on(url, clock, tmp_path / "b"), lambda: fleet):
        with pytest.raises(StoreDamaged, match="cannot be read") as raised:
            opener().post("another")
        assert "git revert" in (raised.value.hint or "")
    assert git(board, "rev-parse", "shoal") == tip


def test_a_waiting_agent_wakes_soon_after_another_host_posts(url: str, tmp_path: Path) -> None:
    waiting = Fleet(GitStore(url, cache=tmp_path / "waiter"))
    waiting.register("ada")
    poster = Fleet(GitStore(url, cache=tmp_path / "poster"))
    got: list[Any] = []
    started = time.monotonic()
    waiter = threading.Thread(target=lambda: got.append(waiting.claim("ada", wait=30)))
    waiter.start()
    task = poster.post("arrives while ada waits")
    waiter.join(timeout=30)
    assert got and got[0].tasks[0].id == task.id
    assert time.monotonic() - started < POLL_MAX + 3  # one poll interval at most, and slack


def test_polling_backs_off_while_nothing_changes(url: str, tmp_path: Path) -> None:
    store = GitStore(url, cache=tmp_path / "c")
    polls = 0
    look = store._clone.remote_tip

    def counted() -> str | None:
        nonlocal polls
        polls += 1
        return look()

    store._clone.remote_tip = counted  # type: ignore[method-assign]
    assert store.wait_for_change(0.6) is False
    # 50, 100, 200 ms... apart: a handful of looks in 0.6 s, not one every 50 ms (12).
    assert 3 <= polls <= 6, polls
    assert store.wait_for_change(0.1) is False
    Fleet(GitStore(url, cache=tmp_path / "other")).post("news")
    assert store.wait_for_change(5) is True


def test_a_lock_a_killed_push_left_on_the_remote_is_named_with_the_fix(
    url: str, clock: ManualClock, tmp_path: Path
) -> None:
    store = GitStore(url, cache=tmp_path / "c")
    store.conflict_retries = 3  # type: ignore[misc]
    fleet = Fleet(store, clock=clock)
    fleet.post("before")
    lock = board_of(url) / "refs" / "heads" / "shoal.lock"
    lock.write_text("")
    tip = git(board_of(url), "rev-parse", "shoal")
    with pytest.raises(WriteConflict, match=r"shoal\.lock") as raised:
        fleet.post("while locked")
    assert "delete that file" in (raised.value.hint or "")
    assert git(board_of(url), "rev-parse", "shoal") == tip
    lock.unlink()
    assert fleet.post("after").title == "after"
    assert [t.title for t in fleet.tasks()] == ["after", "before"]
