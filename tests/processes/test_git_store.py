"""The git store with real processes, each through a private clone of its own (its own
``SHOAL_GIT_CACHE``, as agents on separate hosts have): a race that drains a fleet exactly
once and leaves a history that proves it, a ``kill -9`` between a commit and its push, a
push that landed but whose answer was lost, a damaged or diverged clone that the next
command clones again, and remotes that cannot be reached."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from shoal import Fleet, TaskState
from tests import procs
from tests.conftest import git_board
from tests.helpers import wait_until
from tests.soak import sized, soak
from tests.workers import SHOAL

BRANCH = "shoal"


# -- helpers: the board's repository, the CLI with a clone of its own -------------------------


def git(repo: Path, *args: str, stdin: bytes | None = None) -> bytes:
    """``git args`` on the bare repository ``repo``; its output (it must succeed)."""
    done = subprocess.run(
        ["git", f"--git-dir={repo}", *args], input=stdin, capture_output=True, check=False
    )
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout


def board_of(url: str) -> Path:
    return Path(url.removeprefix("git+file://"))


def clone_in(cache: Path) -> Path:
    """The one private clone a process made under ``cache``."""
    clones = [p for p in cache.glob("*.git") if p.is_dir()]
    assert len(clones) == 1, clones
    return clones[0]


def cli_env(cache: Path) -> dict[str, str]:
    """The environment of a ``shoal`` command with its own clone under ``cache``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHOAL_")}
    env.pop("GIT_SSH_COMMAND", None)  # git's and shoal's defaults, as a user would have
    env["SHOAL_GIT_CACHE"] = str(cache)
    return env


def shoal(
    cache: Path, url: str, *args: str, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """Run the installed ``shoal`` on ``url`` through a clone under ``cache``."""
    return subprocess.run(
        [*SHOAL, "--store", url, *args],
        capture_output=True,
        text=True,
        env=cli_env(cache),
        timeout=timeout,
        check=False,
    )


@dataclass
class Commit:
    sha: str
    parents: list[str]
    author: str
    subject: str
    #: tasks/<hundreds>/<id>.json files the commit wrote: task id -> the file's new blob.
    tasks: dict[int, str] = field(default_factory=dict)


def history(board: Path) -> list[Commit]:
    """The branch's commits, oldest first, with the task files each one wrote."""
    out = git(
        board,
        "log",
        "--reverse",
        "--raw",
        "--no-abbrev",
        "--no-renames",
        "--format=%x1e%H %P%x1f%an%x1f%s%x1f",
        BRANCH,
    ).decode()
    commits = []
    for chunk in out.split("\x1e")[1:]:
        head, author, subject, raw = chunk.split("\x1f")
        sha, *parents = head.split()
        commit = Commit(sha, parents, author, subject)
        for line in raw.splitlines():
            if not line.startswith(":"):
                continue
            meta, path = line.split("\t")
            if path.startswith("tasks/"):
                assert meta.split()[4] != "D", f"{commit.subject}: deleted {path}"
                commit.tasks[int(path.rsplit("/", 1)[-1][: -len(".json")])] = meta.split()[3]
        commits.append(commit)
    return commits


def read_blobs(board: Path, blobs: set[str]) -> dict[str, dict[str, Any]]:
    """The JSON of these blobs, read in one ``git cat-file --batch``."""
    order = sorted(blobs)
    out = git(board, "cat-file", "--batch", stdin="".join(f"{b}\n" for b in order).encode())
    files, at = {}, 0
    for blob in order:
        end = out.index(b"\n", at)
        size = int(out[at:end].split()[2])
        files[blob] = json.loads(out[end + 1 : end + 1 + size])
        at = end + 1 + size + 1
    return files


def walk_claims(board: Path) -> tuple[list[tuple[int, str]], dict[int, str], int]:
    """Walk the branch from its first commit and check, at every commit, what "no task to
    two agents at once" means in git: one line of commits (never a merge); a task claimed
    only while nobody holds it, in a commit that says ``claim N by X`` by X; left only by
    its holder's completion (``complete N by X``). Returns every claim (task, agent) in
    order, the tasks held at the tip (task -> agent) and the number of commits."""
    commits = history(board)
    for before, commit in itertools.pairwise(commits):
        assert commit.parents == [before.sha], f"{commit.sha} is not on one line of history"
    files = read_blobs(board, {blob for c in commits for blob in c.tasks.values()})
    holder: dict[int, tuple[str, str]] = {}  # task -> (agent, lease token) while claimed
    claims: list[tuple[int, str]] = []
    for commit in commits:
        for task_id, blob in sorted(commit.tasks.items()):
            task = files[blob]
            held = holder.get(task_id)
            if task["state"] == "claimed":
                now = (task["agent"], task["lease_token"])
                assert held in (None, now), (
                    f"task {task_id} claimed by {now[0]} in {commit.sha[:12]} "
                    f"({commit.subject!r}) while {held[0] if held else '?'} held it"
                )
                if held is None:
                    holder[task_id] = now
                    claims.append((task_id, task["agent"]))
                    assert f"claim {task_id} by {task['agent']}" in commit.subject, commit
                    assert commit.author == task["agent"], commit
            elif held is not None:
                assert task["state"] == "done" and task["agent"] == held[0], (commit, task)
                assert f"complete {task_id} by {held[0]}" in commit.subject, commit
                del holder[task_id]
    return claims, {t: agent for t, (agent, _) in holder.items()}, len(commits)


def test_the_history_walk_catches_a_task_claimed_by_two_agents_at_once(tmp_path: Path) -> None:
    """The race's proof has teeth: a commit, made by hand, that hands a held task to
    another agent is caught."""
    url = git_board(tmp_path)
    board = board_of(url)
    fleet = Fleet.open(url)
    for name in ("ada", "bob"):
        fleet.register(name)
    fleet.post("contested")
    fleet.claim("ada")
    assert walk_claims(board)[:2] == ([(1, "ada")], {1: "ada"})
    task = json.loads(git(board, "show", f"{BRANCH}:tasks/0/1.json"))
    task.update(agent="bob", lease_token="f" * 16)
    content = (json.dumps(task, indent=2) + "\n").encode()
    message = b"claim 1 by bob"
    stream = b"".join(
        [
            f"commit refs/heads/{BRANCH}\n".encode(),
            b"author bob <bob@shoal> 1800000000 +0000\n",
            b"committer bob <bob@shoal> 1800000000 +0000\n",
            f"data {len(message)}\n".encode() + message + b"\n",
            f"from {BRANCH}^0\n".encode(),
            f"M 100644 inline tasks/0/1.json\ndata {len(content)}\n".encode() + content + b"\n",
        ]
    )
    git(board, "fast-import", "--quiet", stdin=stream)
    with pytest.raises(AssertionError, match=r"task 1 claimed by bob in \w+ .* while ada held"):
        walk_claims(board)
    fleet.close()


# -- six processes, each with its own clone, race over the tasks ---------------------------

#: 60 tasks, 200 in `make soak` (tests/soak.py): each is a claim and a completion, each of
#: those a commit and a push that five other clones race.
RACERS, TASKS = 6, sized(60, 200)


@soak
def test_six_clones_racing_over_the_tasks_do_each_once_and_the_history_proves_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = git_board(tmp_path)
    board = board_of(url)
    fleet = Fleet.open(url)
    fleet.configure(max_agents=RACERS)
    fleet.post_many([{"title": f"task {i}"} for i in range(TASKS)])
    began = time.monotonic()
    reports = procs.race(
        procs.drain_own_clone,
        [(str(tmp_path / f"clone-of-w{i}"), url, f"w{i}") for i in range(RACERS)],
    )
    took = time.monotonic() - began
    # Each process really had a clone of its own.
    assert len({clone_in(tmp_path / f"clone-of-w{i}") for i in range(RACERS)}) == RACERS

    # Every task done exactly once: by the processes' own account, the fleet's and the log's.
    done = Counter(task for r in reports for task in r["done"])
    assert sorted(done) == list(range(1, TASKS + 1)), "a task was lost"
    assert set(done.values()) == {1}, "a task was handed out twice"
    status = fleet.status()
    assert status.counts["done"] == TASKS and status.counts["pending"] == 0
    events = fleet.events(limit=100_000)
    completions = Counter(e.task_id or 0 for e in events if e.kind == "completed")
    assert sorted(completions) == list(range(1, TASKS + 1))
    assert set(completions.values()) == {1}
    claimed_in_log = sorted(
        (e.task_id or 0, e.agent or "") for e in events if e.kind in ("claimed", "stolen")
    )

    # The branch's history says the same, commit by commit.
    claims, held, commits = walk_claims(board)
    assert not held, f"tasks still claimed at the tip: {held}"
    assert sorted(claims) == claimed_in_log, "a claim in the log has no commit, or one more"
    assert sorted(t for t, _ in claims) == list(range(1, TASKS + 1))

    with capsys.disabled():
        shares = ", ".join(f"{r['agent']} {len(r['done'])}" for r in reports)
        print(
            f"\n  git store: {RACERS} processes (own clones), {TASKS} tasks in {took:.1f} s, "
            f"{commits} commits, {sum(r['conflicts'] for r in reports)} pushes turned "
            f"away, {sum(r['escaped'] for r in reports)} WriteConflicts out of Fleet; "
            f"tasks each: {shares}"
        )
    # Every process got a share: a writer that just won waits its turn while others are
    # busy (policy.turn_wait), so no one wins every race while the rest run out of
    # re-runs. (A WriteConflict that still escapes is retried by the caller, as exit 4
    # says; it is printed above, not asserted, since a loaded machine may stretch a race.)
    assert all(r["done"] for r in reports), shares
    fleet.close()


# -- kill -9 between the commit and the push -----------------------------------------------

#: A pre-push hook that hands the test what is being pushed, then stalls the push (git runs
#: it after making the commit, before sending anything to the remote).
#: A ``git`` that stops at the push: it writes the commit it was asked to push to a marker,
#: then waits to be killed. (A clone's pre-push hook did this once; the store runs no hook.)
HELD_PUSH = """#!/bin/sh
for arg in "$@"; do
  case "$arg" in
    push) pushing=1 ;;
    *:refs/heads/*) if [ -n "$pushing" ]; then
        echo "pushing ${{arg%%:*}}" > "{marker}.part"
        mv "{marker}.part" "{marker}"
        exec sleep 120
      fi ;;
  esac
done
exec {git} "$@"
"""


def test_a_process_killed_between_its_commit_and_its_push_leaves_the_board_untouched(
    tmp_path: Path,
) -> None:
    url = git_board(tmp_path)
    board = board_of(url)
    fleet = Fleet.open(url)
    for name in ("bob", "alice"):
        fleet.register(name)
    fleet.post_many([{"title": f"job {i}"} for i in range(3)])
    cache = tmp_path / "bob-cache"
    assert shoal(cache, url, "status", "--json").returncode == 0  # bob's clone is made
    clone = clone_in(cache)
    marker = tmp_path / "pushing"
    held = tmp_path / "held-push"
    held.mkdir()
    (held / "git").write_text(HELD_PUSH.format(marker=marker, git=shutil.which("git")))
    (held / "git").chmod(0o755)
    tip = git(board, "rev-parse", BRANCH).decode().strip()

    env = cli_env(cache)
    env["PATH"] = f"{held}:{env['PATH']}"
    claimer = subprocess.Popen(
        [*SHOAL, "--store", url, "claim", "--agent", "bob", "--json"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        start_new_session=True,  # its own process group: shoal and the held push
    )
    try:
        wait_until(marker.exists, "bob's push to start", timeout=30)
    finally:
        os.killpg(claimer.pid, signal.SIGKILL)
        claimer.wait(timeout=30)
    assert claimer.returncode == -signal.SIGKILL

    # The commit was made in bob's clone -- and only there.
    pushed = marker.read_text().split()[1]
    assert git(clone, "cat-file", "-t", pushed).decode().strip() == "commit"
    assert (
        git(clone, "log", "-1", "--format=%an %s", pushed).decode().startswith("bob claim 1 by bob")
    )
    assert git(board, "rev-parse", BRANCH).decode().strip() == tip, "the board moved"
    gone = subprocess.run(["git", f"--git-dir={board}", "cat-file", "-e", pushed], check=False)
    assert gone.returncode != 0, "the killed push sent its commit to the remote"
    assert git(board, "for-each-ref", "--format=%(refname)").decode().split() == [
        f"refs/heads/{BRANCH}"
    ]
    leftovers = [p for p in board.rglob("*") if p.name.endswith(".lock") or "incoming" in p.name]
    assert not leftovers, leftovers

    # The task is still pending, in no one's hands, and another agent claims it.
    task = fleet.get(1)
    assert task.state is TaskState.PENDING and task.agent is None and task.attempts == 0
    assert [e.kind for e in fleet.events(task=1)] == ["posted"]
    alice = shoal(tmp_path / "alice-cache", url, "claim", "--agent", "alice", "--json")
    assert alice.returncode == 0, alice.stderr
    assert json.loads(alice.stdout)["task"]["id"] == 1

    # bob's clone, with the real git again, works as before: it claims, and completes.
    again = shoal(cache, url, "claim", "--agent", "bob", "--json")
    assert again.returncode == 0, again.stderr
    claim = json.loads(again.stdout)
    assert claim["task"]["id"] == 2
    finished = shoal(
        cache, url, "done", "2", "--token", claim["lease"]["token"], "--result", "ok", "--json"
    )
    assert finished.returncode == 0, finished.stderr

    # Nothing half-applied: the counts agree with the tasks, and every write is one commit.
    tasks = fleet.tasks(limit=100)
    assert {t.id: (t.state, t.agent) for t in tasks} == {
        1: (TaskState.CLAIMED, "alice"),
        2: (TaskState.DONE, "bob"),
        3: (TaskState.PENDING, None),
    }
    counts = {k: v for k, v in fleet.status().counts.items() if v}
    assert counts == dict(Counter(t.state.value for t in tasks))
    subjects = git(board, "log", "--format=%s", f"{tip}..{BRANCH}").decode().splitlines()
    assert subjects == ["complete 2 by bob", "claim 2 by bob", "claim 1 by alice"]
    fleet.close()


# -- a damaged or diverged clone is cloned again, with a warning ----------------------------


def _garble_every_object(clone: Path, board: Path) -> None:
    for path in (clone / "objects").rglob("*"):
        if path.is_file() and path.parent.name != "info":
            path.chmod(0o600)
            path.write_bytes(b"not an object\n" * 8)


def _truncate_the_pack(clone: Path, board: Path) -> None:
    packs = list((clone / "objects" / "pack").glob("*.pack"))
    assert packs, "the clone has no pack to damage"
    for pack in packs:
        pack.chmod(0o600)
        with pack.open("r+b") as f:
            f.truncate(pack.stat().st_size // 2)


def _delete_the_objects(clone: Path, board: Path) -> None:
    shutil.rmtree(clone / "objects")


def _track_a_made_up_commit(clone: Path, board: Path) -> None:
    (clone / "refs" / "remotes" / "origin" / BRANCH).write_text("ab" * 20 + "\n")
    (clone / "packed-refs").unlink(missing_ok=True)


def _clone_another_fleet(clone: Path, board: Path) -> None:
    """Point the clone at another board, and fill it from there: a clone of another fleet."""
    other = git_board(board.parent / "other")
    Fleet.open(other).post("a task of another fleet")
    git(clone, "config", "remote.origin.url", other.removeprefix("git+"))
    git(clone, "fetch", "--quiet", "origin", f"+refs/heads/{BRANCH}:refs/remotes/origin/{BRANCH}")


DAMAGE: dict[str, Callable[[Path, Path], None]] = {
    "garbled objects": _garble_every_object,
    "truncated pack": _truncate_the_pack,
    "objects deleted": _delete_the_objects,
    "tracks a made-up commit": _track_a_made_up_commit,
    "a clone of another fleet": _clone_another_fleet,
}


#: A hook of the board's repository that, once armed (the file ``{arm}`` exists), kills the
#: receiving git right after it moved the branch and before it could tell the pusher: the
#: pusher's connection drops although its commit landed.
#: With ``{after}``, the hook first lays another commit on top, as an agent pushing right
#: after would.
DROP_AFTER_LANDING = """#!/bin/sh
if [ "$1" = committed ] && [ -e {arm} ]; then
  rm -f {arm}
  read old new ref
  {after}
  kill -9 $PPID
fi
exit 0
"""
ANOTHER_ON_TOP = (
    "export GIT_AUTHOR_NAME=carol GIT_AUTHOR_EMAIL=carol@example.com "
    "GIT_COMMITTER_NAME=carol GIT_COMMITTER_EMAIL=carol@example.com; "
    'next=$(git commit-tree -p "$new" -m "another agent" "$new^{tree}") && '
    'git update-ref "$ref" "$next" "$new"'
)


def a_board_that_drops_a_push(tmp_path: Path, after: str) -> tuple[str, Fleet, Path]:
    """A board with agent bob and one task, whose ``DROP_AFTER_LANDING`` hook (running
    ``after`` first) is armed for the next push: its URL, a fleet on it, the arming file."""
    url = git_board(tmp_path)
    fleet = Fleet.open(url)
    fleet.register("bob")
    fleet.post("the only job")
    arm = tmp_path / "arm"
    hook = board_of(url) / "hooks" / "reference-transaction"
    hook.write_text(DROP_AFTER_LANDING.format(arm=arm, after=after))
    hook.chmod(0o755)
    arm.touch()
    return url, fleet, arm


@pytest.mark.parametrize("after", ["", ANOTHER_ON_TOP], ids=["tip", "moved-on"])
def test_a_push_whose_answer_is_lost_after_it_landed_is_reported_as_done(
    tmp_path: Path, after: str
) -> None:
    url, fleet, arm = a_board_that_drops_a_push(tmp_path, after)
    board = board_of(url)

    done = shoal(tmp_path / "bob-cache", url, "claim", "--agent", "bob", "--json")

    assert not arm.exists(), "the hook never dropped a push: the test tried nothing"
    assert done.returncode == 0, done.stdout + done.stderr
    claim = json.loads(done.stdout)
    assert claim["task"]["id"] == 1
    assert "it landed" in done.stderr  # said in the log, not hidden
    history = git(board, "log", "-3", "--format=%an %s", BRANCH).decode().splitlines()
    top = ["carol another agent"] if after else []
    assert history[: len(top) + 2] == [*top, "bob claim 1 by bob", "shoal post 1"]
    # The lease bob was told of is the one on the board: it completes the task.
    finished = shoal(
        tmp_path / "bob-cache", url, "done", "1", "--token", claim["lease"]["token"], "--json"
    )
    assert finished.returncode == 0, finished.stderr
    assert fleet.get(1).state is TaskState.DONE


def test_a_push_whose_landing_cannot_be_checked_says_it_may_have_landed(
    tmp_path: Path,
) -> None:
    away = tmp_path / "away.git"
    # The remote takes the push, then vanishes before answering (and before the check).
    url, _fleet, _arm = a_board_that_drops_a_push(tmp_path, f'mv "$(pwd)" {away}')
    board = board_of(url)

    done = shoal(tmp_path / "bob-cache", url, "claim", "--agent", "bob", "--json")

    assert done.returncode == 4, done.stdout + done.stderr
    error = json.loads(done.stdout)["error"]
    assert error["code"] == "store_unavailable"
    assert "may have reached it" in error["hint"]
    assert "nothing was changed" not in error["hint"]
    away.rename(board)  # the remote is back: the next command reads what landed
    (board / "hooks" / "reference-transaction").unlink()
    status = shoal(tmp_path / "bob-cache", url, "show", "1", "--json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["agent"] == "bob"


@pytest.mark.parametrize("damage", DAMAGE)
def test_a_damaged_or_diverged_clone_is_cloned_again_and_the_command_says_so(
    tmp_path: Path, damage: str
) -> None:
    url = git_board(tmp_path)
    board = board_of(url)
    fleet = Fleet.open(url)
    fleet.post_many([{"title": f"job {i}"} for i in range(150)])  # enough to make a pack
    cache = tmp_path / "cache"
    assert shoal(cache, url, "add", "one more").returncode == 0  # a clone, and a commit in it
    clone = clone_in(cache)
    DAMAGE[damage](clone, board)

    first = shoal(cache, url, "status", "--json")
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["counts"]["pending"] == 151  # this fleet, read whole
    warnings = [line for line in first.stderr.splitlines() if " WARNING " in line]
    assert len(warnings) == 1, first.stderr
    assert str(clone) in warnings[0] and "cloning it again" in warnings[0], warnings[0]
    assert "(no message)" not in warnings[0]

    # The new clone is sound: the next command is quiet, and writes through it land.
    added = shoal(cache, url, "add", "after the repair", "--json")
    assert added.returncode == 0 and added.stderr == "", added.stderr
    assert json.loads(added.stdout)["id"] == 152
    assert git(board, "log", "-1", "--format=%s", BRANCH).decode().strip() == "post 152"
    assert fleet.status().counts["pending"] == 152
    git(clone, "fsck", "--no-progress")  # the clone made again is whole
    fleet.close()


# -- a remote that cannot be reached --------------------------------------------------------

#: (store URL, or a path under the test's folder; exit code per README; error code; words of
#: the message). A path that holds no repository is no fleet there (exit 2, as SQLite's is);
#: a host that does not answer is a store that is unavailable (exit 4: retry).
UNREACHABLE = {
    "no such path": ("{tmp}/missing/board.git", 2, "store_not_found", "no git repository at"),
    "a folder, not a repository": ("{tmp}/folder", 2, "store_not_found", "no git repository"),
    "unknown ssh host": (
        "git+ssh://nonexistent.invalid/x.git",
        4,
        "store_unavailable",
        "Could not resolve hostname",
    ),
    "closed ssh port": (
        "git+ssh://127.0.0.1:1/x.git",
        4,
        "store_unavailable",
        "Connection refused",
    ),
}


@pytest.mark.parametrize("where", UNREACHABLE)
def test_an_unreachable_remote_fails_fast_and_clearly_and_changes_nothing(
    tmp_path: Path, where: str
) -> None:
    if "ssh" in where and shutil.which("ssh") is None:
        pytest.skip("no ssh client on this machine")
    target, code, error, words = UNREACHABLE[where]
    (tmp_path / "folder").mkdir()
    url = target.format(tmp=tmp_path)
    if not url.startswith("git+"):
        url = f"git+file://{url}"
    cache = tmp_path / "cache"

    def files() -> list[Path]:  # what is on disk, but for the private clones' cache
        return sorted(p for p in tmp_path.rglob("*") if p != cache and cache not in p.parents)

    before = files()
    for command in (["status", "--json"], ["add", "a task", "--json"], ["init", "--json"]):
        began = time.monotonic()
        done = shoal(cache, url, *command, timeout=60)
        took = time.monotonic() - began
        assert took < 20, f"`shoal {command[0]}` took {took:.1f} s to give up"
        assert done.returncode == code, (command, done.returncode, done.stderr, done.stdout)
        said = json.loads(done.stdout)["error"]
        assert said["code"] == error and words in said["message"], said
        assert said["hint"], said
        if error == "store_not_found":  # the hint's commands can be pasted as they are
            assert f"shoal init --store {url}`" in said["hint"], said
    assert files() == before, "a refused command left files behind"
