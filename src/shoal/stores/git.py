"""The git store: the fleet is a branch of a git repository, and a claim is a push.

``git+file:///path/to/board.git``, ``git+ssh://host/path.git`` or ``git+https://host/path.git``,
with an optional ``#branch`` (default ``shoal``). No server of shoal's own: any git remote
the agents can push to is the board, its history is the fleet's audit trail, and people
read it (or review it) like any other repository. ``_gitlayout`` says what the files are.

How a write works -- optimistic concurrency, with git's atomic ref update as the
compare-and-swap:

1. fetch the branch into a private bare clone (``_gitcli``) and bring the fleet this
   process holds in memory up to its tip, reading only the files that changed;
2. run the operation exactly as the memory store runs it (this *is* the memory store's
   transaction, over the loaded fleet), noting which tasks and agents it touched;
3. write those files into one commit on top of the tip, by the agent that acted, with a
   message a person understands (``claim 42 by alice (steal from bob)``);
4. push it without force. The remote takes it only if the tip is still the one read; if
   another agent pushed first the push is turned away, the in-memory change is rolled back
   and ``WriteConflict`` makes ``Fleet`` run the whole operation again on the new state --
   where it may now find nothing -- after a jittered pause. Nothing is ever merged.

A process killed between its commit and its push leaves only an unreferenced commit in its
own clone: the board never saw it, and the next process starts from the remote's tip.

Agents waiting for work poll the remote's tip (``git ls-remote``, no objects) at an
interval that starts short and doubles while nothing changes, up to a cap.
"""

from __future__ import annotations

import bisect
import fcntl
import os
import random
import re
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from shoal import policy
from shoal._log import get_logger
from shoal.errors import (
    InvalidStoreURL,
    StoreDamaged,
    StoreNotFound,
    StoreUnavailable,
    WriteConflict,
)
from shoal.model import Event
from shoal.stores._gitcache import (
    cache_root,
    clone_path,
    open_clone_lock,
    refuse_unsafe_cache,
    refuse_unsafe_clone,
)
from shoal.stores._gitcheck import Malformed
from shoal.stores._gitcli import GitClone, GitFailed, no_repository
from shoal.stores._gitguard import PROTOCOLS, split_credentials
from shoal.stores._gitlayout import (
    EVENTS_PER_FILE,
    agent_file,
    agent_path,
    apply_changes,
    commit_message,
    event_path,
    event_segment,
    events_file,
    initial_files,
    is_board_file,
    load,
    small_files,
    task_file,
    task_path,
)
from shoal.stores._memdata import Data
from shoal.stores.base import Capabilities, DirectOutcome, Finishing
from shoal.stores.memory import _MemoryTx
from shoal.text import shown_url

__all__ = ["GitStore", "parse_git_url"]

log = get_logger(__name__)

DEFAULT_BRANCH = "shoal"
#: Polling the remote while an agent waits: the first pause, and the cap it doubles up to.
POLL_BASE = 0.05
POLL_MAX = 2.0
#: Writes between two ``git gc --auto`` in the private clone (each write leaves a handful of
#: loose objects there; gc itself decides whether there are enough to pack).
COLLECT_EVERY = 100
_BRANCH_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,99}")


def parse_git_url(url: str) -> tuple[str, str]:
    """(the remote git understands, the branch) of a ``git+...`` store URL."""
    rest = url[len("git+") :]
    remote, _, branch = rest.partition("#")
    branch = branch or DEFAULT_BRANCH
    scheme = urlsplit(remote).scheme
    if scheme not in PROTOCOLS:
        raise InvalidStoreURL(
            f"store URL {shown_url(url)!r} is not a git remote shoal can use",
            hint="write git+file:///path/to/board.git, git+ssh://host/path.git or "
            "git+https://host/path.git, with #branch to pick a branch (default shoal)",
        )
    if scheme == "file" and not urlsplit(remote).path:
        raise InvalidStoreURL(
            f"store URL {shown_url(url)!r} names no repository",
            hint="write git+file:///path/to/board.git",
        )
    if "@" in branch:  # a '#' in a password: the rest of it is no branch, and not shown
        raise InvalidStoreURL(
            f"store URL {shown_url(url)!r} has a '#' before its host",
            hint="write a '#' in a user name or password as %23; #branch comes last",
        )
    if not _is_branch_name(branch):
        raise InvalidStoreURL(
            f"{branch!r} in store URL {shown_url(url)!r} is not a branch name shoal accepts",
            hint="use letters, digits and . _ / - after the #, e.g. #shoal",
        )
    return remote, branch


def _is_branch_name(branch: str) -> bool:
    """Whether git takes ``branch`` as a branch name (``git check-ref-format --branch``'s
    rules, over the few characters shoal allows). A name git refuses used to pass here and
    fail at the first fetch as a remote that "cannot be reached" (exit 4, "retry"), when
    no retry can help; ``HEAD`` would make a branch that every ``git log HEAD`` confuses."""
    parts = branch.split("/")
    return (
        bool(_BRANCH_RE.fullmatch(branch))
        and branch != "HEAD"
        and ".." not in branch
        and not branch.endswith(".")
        and all(part and not part.startswith(".") and not part.endswith(".lock") for part in parts)
    )


def _refuse_a_missing_folder(remote: str) -> None:
    """A ``file://`` remote whose folder does not exist is no fleet at that place (exit 2,
    as a SQLite path with no file is), not a remote that failed to answer -- and nothing,
    not even a private clone, is made for it."""
    parts = urlsplit(remote)
    if parts.scheme != "file":
        return
    if not Path(parts.path).exists() and not Path(unquote(parts.path)).exists():
        raise no_repository(remote)


def _event_id(event: Event) -> int:
    return event.id


class _GitTx(_MemoryTx):
    """The memory store's transaction, noting which tasks and agents it touched so that
    only their files are written."""

    def __init__(self, data: Data, writable: bool) -> None:
        super().__init__(data, writable)
        self.touched_tasks: set[int] = set()
        self.touched_agents: set[str] = set()

    def _note(self, mapping: dict[Any, Any], key: Any) -> None:
        if mapping is self.d.tasks or mapping is self.d.deps:
            self.touched_tasks.add(key)
        elif mapping is self.d.agents:
            self.touched_agents.add(key)

    def _put(self, mapping: dict[Any, Any], key: Any, value: Any) -> None:
        self._note(mapping, key)
        super()._put(mapping, key, value)

    def _pop(self, mapping: dict[Any, Any], key: Any) -> None:
        self._note(mapping, key)
        super()._pop(mapping, key)


class GitStore:
    """A fleet on a branch of a git repository. See the module docstring."""

    # Many processes and hosts share it, it outlives them; waiting agents poll.
    capabilities = Capabilities(shared=True, durable=True, notifies=False, fair=False)
    #: A lost push is common under contention (every write moves the one branch): the
    #: operation is run again up to this many times, with jittered, growing pauses.
    conflict_retries = 60

    def __init__(self, url: str, *, create: bool = True, cache: Path | None = None) -> None:
        self.url = url
        remote, branch = parse_git_url(url)
        self._cache = cache or cache_root()
        path = clone_path(split_credentials(remote).url, branch, self._cache)
        self._clone = GitClone(remote, branch, path)
        self._lock = threading.RLock()
        self._data = Data()
        self._sha: str | None = None
        self._small: dict[str, bytes] = {}
        self._scratch = f"refs/shoal/scratch/{os.getpid()}-{id(self):x}"
        #: Pushes turned away since this store was opened (the benchmark reports them).
        self.conflicts = 0
        # When other writers were last seen, when this one last won a push, and how long
        # that write took (``_take_turns``).
        self._others_at = self._won_at = self._took = 0.0
        self._rng = random.Random()
        self._write_time = 0.05  # a write's time lately, won or lost (conflict_pause)
        self._commits = 0  # commits this store made, lost pushes too (COLLECT_EVERY)
        self.created = False
        _refuse_a_missing_folder(remote)
        self._prepare_clone()
        with self._lock:
            if self._refresh_or_none() is None:
                if not create:
                    raise StoreNotFound(
                        f"the git remote {shown_url(remote)} has no branch {branch!r}",
                        hint=f"run `shoal init --store {shown_url(url)}` to start a fleet there",
                    )
                self._start_board()

    # -- the clone and the board's tip -----------------------------------------------------

    def _prepare_clone(self) -> None:
        """The private clone exists, is sound, and nobody else could have written it
        (``_gitcache``): made or made again under a lock, so two processes of this host
        never build it at once."""
        path = self._clone.path
        try:
            refuse_unsafe_cache(self._cache)
            fd = open_clone_lock(path)
        except OSError as exc:
            raise self._no_cache(exc) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            refuse_unsafe_clone(path)
            self._clone.ensure()
        except OSError as exc:
            raise self._no_cache(exc) from exc
        except GitFailed as exc:
            raise self._no_cache(exc) from exc
        finally:
            os.close(fd)

    def _no_cache(self, exc: Exception) -> StoreUnavailable:
        """The private clone cannot be made or written (a read-only or full disk, a cache
        folder of another user): this host's trouble, not the board's -- it used to end
        the command with an internal error (exit 70)."""
        said = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return StoreUnavailable(
            f"cannot write the private clone of the board at {self._clone.path}: {said}",
            hint="free some space or make that folder writable, or point SHOAL_GIT_CACHE at "
            "a folder this user can write; nothing was changed on the board",
        )

    def _refresh_or_none(self) -> str | None:
        """Fetch, and bring the fleet in memory to the remote's tip; the tip, or None when
        the remote has no such branch. A damaged clone is cloned again once, with a
        warning."""
        for attempt in range(2):
            try:
                tip = self._clone.fetch(self._sha)
                if tip is not None and tip != self._sha:
                    logged = self._data.last_event_id if self._sha is not None else 0
                    if self._sha is not None:  # someone else pushed since we looked
                        self._others_at = time.monotonic()
                    self._load(tip)
                    self._warn_if_rewound(logged)
                return tip
            except GitFailed as exc:  # a board file shoal cannot read is StoreDamaged at once
                if attempt or not (exc.broken_clone or exc.ref_locked):
                    raise self._damaged(exc) from exc
                log.warning(
                    "the local clone of the board at %s is damaged (%s); cloning it again",
                    self._clone.path,
                    exc,
                )
                self._clone.reclone()
                self._sha = None
        raise AssertionError("unreachable")

    def _warn_if_rewound(self, logged: int) -> None:
        """Say so when the branch went back in its history: its log ends before the last
        event this process read. Only a person does that (``git push --force`` or a reset
        of the branch on the remote); shoal never does (a squash keeps every counter).
        What was recorded after the old tip is undone -- a claim made there is no lease
        any more, and its task is handed out again -- so the holder learns why its next
        ``complete`` is refused rather than only that it was."""
        now = self._data.last_event_id
        if now < logged:
            log.warning(
                "the branch %r of %s went back in its history (its log ends at event %d, "
                "it ended at %d): someone force-pushed or reset it; what was recorded "
                "after that is undone, and the leases taken there are lost",
                self._clone.branch,
                shown_url(self._clone.remote),
                now,
                logged,
            )

    def _refresh(self) -> None:
        if self._refresh_or_none() is None:
            raise StoreNotFound(
                f"the branch {self._clone.branch!r} is gone from {shown_url(self._clone.remote)}",
                hint="someone deleted it; restore it with git (its old tip is in the reflog "
                "of any clone) or start a new fleet with `shoal init`",
            )

    def _damaged(self, exc: Exception) -> StoreDamaged:
        branch = self._clone.branch
        path = exc.path if isinstance(exc, Malformed) else None
        if path is None:
            hint = (
                f"look at the latest commits of the branch (`git log {branch}`); "
                "if a hand edit broke a file, `git revert` that commit"
            )
        else:
            hint = (
                f"see who changed {path} (`git log -p {branch} -- {path}`), then `git revert` "
                "that commit, or correct the file, commit and push"
            )
        return StoreDamaged(
            f"the git store at {shown_url(self.url)} cannot be read: {exc}", hint=hint
        )

    def _load(self, tip: str) -> None:
        """Bring ``self._data`` from ``self._sha`` to ``tip``: only the changed files when
        there is a fleet in memory, else every file."""
        try:
            if self._sha is None:
                tree = self._clone.tree(tip, is_board_file)
                blobs = self._clone.blobs(sorted(set(tree.values())))
                files = {path: blobs[blob] for path, blob in tree.items()}
                self._data = load(files)
            else:
                try:
                    changes = self._clone.changes(self._sha, tip, is_board_file)
                except GitFailed:  # the old tip is gone from the clone: read everything
                    self._sha = None
                    self._load(tip)
                    return
                blobs = self._clone.blobs(sorted({c.blob for c in changes if c.blob}))
                apply_changes(
                    self._data, {c.path: blobs[c.blob] if c.blob else None for c in changes}
                )
        except Malformed as exc:
            self._sha = None
            raise self._damaged(exc) from exc
        self._small = small_files(self._data)
        self._sha = tip

    def _start_board(self) -> None:
        """A new fleet: the first commit of the branch. If another process started it at
        the same moment, theirs is the fleet."""
        commit = self._clone.commit(
            None, dict(initial_files()), "start the fleet", "shoal", self._scratch
        )
        if self._clone.push(commit) is None:
            log.info(
                "started a fleet on branch %r of %s",
                self._clone.branch,
                shown_url(self._clone.remote),
            )
            self.created = True
        self._refresh()

    # -- transactions ----------------------------------------------------------------------

    @contextmanager
    def write(self, *, exclusive: bool = False) -> Iterator[_GitTx]:
        with self._lock:
            self._take_turns()
            began = time.monotonic()
            self._refresh()
            data = self._data
            events, logged = data.events, len(data.events)
            tx = _GitTx(data, writable=True)
            try:
                yield tx
            except BaseException:
                tx.rollback()
                raise
            if not tx.journal:
                return
            try:
                files, small = self._changed_files(tx, events, logged)
                if files:
                    new = data.events[logged:] if data.events is events else []
                    message, author = commit_message(new, files)
                    assert self._sha is not None
                    try:
                        commit = self._clone.commit(
                            self._sha, files, message, author, self._scratch
                        )
                    except GitFailed as exc:  # nothing left the clone: the board is as it was
                        raise self._no_cache(exc) from exc
                    refused = self._clone.push(commit)
                    self._commits += 1
                    spent = time.monotonic() - began
                    self._write_time += 0.3 * (spent - self._write_time)
                    if self._commits % COLLECT_EVERY == 0:  # after the push: not in its way
                        self._clone.collect()
                    if refused is not None:
                        self.conflicts += 1
                        self._others_at = time.monotonic()
                        raise WriteConflict(
                            f"another agent changed the fleet first; git said: {refused}",
                            hint="shoal ran the operation again on the new state each time; "
                            "if this names a .lock file on the remote and no push is running, "
                            "a git process killed mid-push left it there: delete that file",
                        )
                    self._sha = commit
                    self._small = small
                    self._won_at = time.monotonic()
                    self._took = self._won_at - began
            except BaseException:
                tx.rollback()
                raise

    def conflict_pause(self, attempt: int, rng: random.Random) -> float:
        """The pause after losing ``attempt`` + 1 pushes in a row (``rerun_on_conflict``
        asks): ``policy.lost_push_pause`` of this store's recent write time."""
        return policy.lost_push_pause(attempt + 1, self._write_time, rng)

    def _take_turns(self) -> None:
        """A writer that just won comes back only after its turn (``policy.turn_wait``)."""
        now = time.monotonic()
        wait = policy.turn_wait(now - self._won_at, now - self._others_at, self._took, self._rng)
        if wait:
            time.sleep(wait)

    @contextmanager
    def read(self) -> Iterator[_MemoryTx]:
        with self._lock:
            self._refresh()
            yield _MemoryTx(self._data, writable=False)

    def _changed_files(
        self, tx: _GitTx, events: list[Event], logged: int
    ) -> tuple[dict[str, bytes | None], dict[str, bytes]]:
        """The files a transaction changed -- path -> new content (None: deleted) -- and
        the small files as they now are."""
        d = self._data
        files: dict[str, bytes | None] = {}
        for task_id in tx.touched_tasks:
            row = d.tasks.get(task_id)
            files[task_path(task_id)] = (
                None if row is None else task_file(row, d.deps.get(task_id, ()))
            )
        for agent_id in tx.touched_agents:
            agent = d.agents.get(agent_id)
            files[agent_path(agent_id)] = None if agent is None else agent_file(agent)
        if d.events is events:  # events only appended
            segments = {event_segment(e.id) for e in d.events[logged:]}
        else:  # a prune dropped some: every file either list had
            segments = {event_segment(e.id) for e in (*events, *d.events)}
        for segment in segments:
            first = segment * EVENTS_PER_FILE
            lo = bisect.bisect_right(d.events, first, key=_event_id)
            hi = bisect.bisect_right(d.events, first + EVENTS_PER_FILE, key=_event_id)
            files[event_path(segment)] = events_file(d.events[lo:hi]) if hi > lo else None
        small = small_files(d)
        files.update(
            (path, content) for path, content in small.items() if self._small.get(path) != content
        )
        return files, small

    # -- the rest of the store contract ---------------------------------------------------

    def claim_directly(
        self,
        agent_id: str,
        n: int,
        now: float,
        tokens: Sequence[str],
        finishing: Sequence[Finishing] = (),
    ) -> DirectOutcome | None:
        """Every write is one push however it is run: nothing to shorten."""
        return None

    def wait_for_change(self, timeout: float) -> bool:
        """Poll the remote's tip until it moves or ``timeout`` passes: the first pause is
        short, and each one that finds nothing new doubles it, up to ``POLL_MAX``."""
        deadline = time.monotonic() + timeout
        looked = 0
        while True:
            if self._clone.remote_tip() != self._sha:
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            looked += 1
            time.sleep(min(policy.doubling_delay(looked, POLL_BASE, POLL_MAX, 1), left))

    def squash_history(self) -> str | None:
        """Make the branch one commit holding the fleet as it is now, in place of its whole
        history (after ``Fleet.prune``, so that finished work stops taking room). A push
        forced only if the branch is still at the tip read; the new tip, or None if another
        agent pushed in between (nothing changed: try again)."""
        with self._lock:
            self._refresh()
            assert self._sha is not None
            commit = self._clone.root_commit(
                self._sha, f"squash the fleet's history (was {self._sha[:12]})"
            )
            if not self._clone.replace_history(commit, self._sha):
                return None
            self._sha = commit
            return commit

    def close(self) -> None:
        pass
