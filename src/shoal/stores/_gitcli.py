"""The git store's hands: the ``git`` command, run on a private bare clone of the board.

Nothing here knows about tasks. It clones, fetches, reads trees and blobs, writes a commit
with ``git fast-import`` (git's own tool for writing commits from a program, so there is no
working tree to keep clean and no index to lock), and pushes. Every command runs with a
fixed locale and no terminal prompt, so a missing credential fails at once with git's own
message instead of waiting for a password nobody will type.

A clone is private to its user (mode 0700) and lives under a cache folder; it is a cache in
the strict sense: the remote is the board, and a broken clone is thrown away and made
again (``GitClone.ensure``).

git is run the way ``_gitguard`` says: hooks, fsmonitor, foreign protocols and the
clone's own program settings off, a clone whose config holds anything shoal did not put
there made again, and the URL's user and password given through the environment only
(``_gitcache`` first makes sure nobody else could have written the clone).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from shoal._log import get_logger
from shoal.errors import StoreError, StoreNotFound, StoreUnavailable
from shoal.stores._gitguard import foreign_settings, git_environment, split_credentials
from shoal.text import shown_url

__all__ = ["Change", "GitClone", "GitFailed", "no_repository"]

log = get_logger(__name__)

#: Phrases in git's messages that mean the local clone itself is broken, not the remote.
_BROKEN = re.compile(
    r"corrupt|bad object|not a git repository|unable to read|loose object|"
    r"bad (?:tree|commit|blob)|missing (?:tree|blob|commit)|invalid object|"
    r"packfile .* (?:cannot|does not)|index file smaller|bad signature|sha1 mismatch|"
    r"object file .* is empty|reference broken|fatal: bad config",
    re.IGNORECASE,
)
#: A push git turned away because the branch moved since our fetch: the compare-and-swap lost.
_REJECTED = re.compile(
    r"\[rejected\]|non-fast-forward|fetch first|stale info|failed to update ref|"
    r"cannot lock ref|failed to lock",
    re.IGNORECASE,
)
#: A ref another process of this host was updating in the same clone at the same moment.
_REF_LOCKED = re.compile(r"cannot lock ref|unable to create .*\.lock", re.IGNORECASE)


#: What git says of a path that holds no repository.
_NO_REPOSITORY = "does not appear to be a git repository"


def no_repository(remote: str) -> StoreNotFound:
    """The error for a ``file://`` remote with no repository at its path."""
    path = urlsplit(remote).path
    return StoreNotFound(
        f"there is no git repository at {path}",
        hint=f"make one with `git init --bare {path}`, then start a fleet in it with "
        f"`shoal init --store git+file://{path}`; or check the path",
    )


class GitFailed(Exception):
    """A git command exited non-zero: which one, and git's own words."""

    def __init__(self, args: tuple[str, ...], code: int, stderr: str) -> None:
        self.args_run = args
        self.code = code
        self.stderr = stderr.strip()
        super().__init__(f"git {args[0]} exited {code}: {self.last_line}")

    @property
    def last_line(self) -> str:
        """git's own reason, in one line: a lock it could not take, else its first
        ``fatal:`` or ``error:`` line (else whatever it said) -- but when that is only git's
        "Could not read from remote repository" after ssh failed, the line before it, where
        ssh said why (no such host, connection refused...)."""
        lines = [line.strip() for line in self.stderr.splitlines() if line.strip()]
        said = (
            [line for line in lines if "cannot lock ref" in line]
            or [line for line in lines if line.startswith(("fatal:", "error:"))]
            or lines
        )
        if not said:
            return "(no message)"
        first = lines.index(said[0])
        if "could not read from remote repository" in said[0].lower() and first:
            return lines[first - 1]
        return said[0].removeprefix("remote: ")

    @property
    def broken_clone(self) -> bool:
        return bool(_BROKEN.search(self.stderr))

    @property
    def rejected(self) -> bool:
        return bool(_REJECTED.search(self.stderr))

    @property
    def ref_locked(self) -> bool:
        return bool(_REF_LOCKED.search(self.stderr))


@dataclass(frozen=True, slots=True)
class Change:
    """One path a commit changed: its new blob (None: deleted)."""

    path: str
    blob: str | None


class GitClone:
    """A private bare clone of ``remote`` at ``path``, tracking one branch."""

    def __init__(self, remote: str, branch: str, path: Path) -> None:
        self.remote = remote  # as the store URL gave it: shown only through shown_url
        self.branch = branch
        self.path = path
        self.tracking = f"refs/remotes/origin/{branch}"
        self._credentials = split_credentials(remote)
        #: The remote as git is told it, in the clone's config: no user or password.
        self.url = self._credentials.url
        self._guards, self._env = git_environment(self._credentials, os.environ)

    # -- running git -----------------------------------------------------------------

    def run(self, *args: str, stdin: bytes | None = None, repo: Path | None = None) -> bytes:
        """Run ``git args`` on the repository ``repo`` (default: the clone); its standard
        output, or ``GitFailed``. The repository is named (``--git-dir``), never found by
        git's search upward from a folder: a clone so damaged that git no longer sees a
        repository in it must fail as such ("not a git repository"), not quietly act on a
        repository that happens to enclose the cache folder."""
        git_dir = repo or self.path
        try:
            done = subprocess.run(
                ["git", *self._guards, f"--git-dir={git_dir}", *args],
                cwd=git_dir.parent,
                input=stdin,
                capture_output=True,
                env=self._env,
                check=False,
            )
        except FileNotFoundError as exc:
            raise StoreUnavailable(
                "the git store needs the `git` command, and it is not installed",
                hint="install git (e.g. `apt-get install git`) and try again",
            ) from exc
        if done.returncode != 0:
            said = (done.stderr + b"\n" + done.stdout).decode("utf-8", "replace")
            raise GitFailed(args, done.returncode, self._scrub(said))
        return done.stdout

    def _scrub(self, said: str) -> str:
        """git's words without the remote's password or token: git hides them itself only
        in a URL it could parse, and one with an unescaped ``/`` or ``?`` in its password
        comes back whole in "unable to access '...'"."""
        for secret in self._credentials.secrets:
            said = said.replace(secret, "***")
        return said

    # -- the clone itself ------------------------------------------------------------

    def ensure(self) -> None:
        """Make sure a sound clone of ``remote`` is at ``path``: clone it if it is missing,
        and clone it again -- saying why -- if it is damaged or tracks another remote."""
        problem = self._problem()
        if problem is None:
            return
        if problem != "missing":
            log.warning(
                "the local clone of the board at %s is unusable (%s); cloning it again from %s",
                self.path,
                problem,
                shown_url(self.remote),
            )
        self.reclone()

    def _problem(self) -> str | None:
        """Why the clone at ``path`` cannot be used as it is (None: it can)."""
        if not self.path.exists():
            return "missing"
        try:  # first whether git sees a repository at all: it says so if not
            self.run("rev-parse", "--git-dir")
            listed = self.run("config", "--local", "--no-includes", "--list", "-z")
        except GitFailed as failed:
            return failed.last_line
        foreign, settings = foreign_settings(listed)
        if foreign:
            return f"its config holds {', '.join(foreign)}, which shoal never puts there"
        origin = settings.get("remote.origin.url")
        if origin is None:
            return "it tracks no remote"
        if origin != [self.url]:
            if [split_credentials(url).url for url in origin] == [self.url]:  # an older shoal's
                return "its config holds the URL's password, which git is now given otherwise"
            shown = ", ".join(shown_url(url) for url in origin)
            return f"it is a clone of {shown}, not of {shown_url(self.url)}"
        return None

    def reclone(self) -> None:
        """Throw the clone away and make a new one (an empty repository tracking the remote;
        the first fetch fills it)."""
        shutil.rmtree(self.path, ignore_errors=True)
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        staging = self.path.with_name(f"{self.path.name}.{os.getpid()}.new")
        shutil.rmtree(staging, ignore_errors=True)
        # No template: nothing of the user's init.templateDir (hooks, a config) comes in.
        self.run("init", "--quiet", "--bare", "--template=", repo=staging)
        os.chmod(staging, 0o700)
        self.run("remote", "add", "origin", self.url, repo=staging)
        for key, value in (
            ("gc.auto", "2000"),  # pack loose objects early: each write makes a few
            ("core.logAllRefUpdates", "false"),
            ("fetch.writeCommitGraph", "false"),
        ):
            self.run("config", key, value, repo=staging)
        try:
            staging.rename(self.path)
        except OSError:  # another process of this host made it first: use theirs
            shutil.rmtree(staging, ignore_errors=True)

    def collect(self) -> None:
        """``git gc --auto`` in the clone: packs its loose objects once there are more than
        ``gc.auto`` (2000, set when it was made), in the background as git does by default.
        Nothing else would: the fetches skip it (``--no-auto-gc``, a process less per
        write), and ``fast-import`` and ``push`` never start it, so without this a clone
        grew by every write's objects, unpacked, for good. A failure is only logged: the
        clone still works, it is just bigger."""
        try:
            self.run("gc", "--auto", "--quiet")
        except GitFailed as failed:
            log.warning("git gc --auto in %s failed: %s", self.path, failed.last_line)

    # -- reading the remote ----------------------------------------------------------

    def fetch(self, known: str | None = None) -> str | None:
        """Bring the branch from the remote; its tip (None: the remote has no such branch).
        An unreachable remote is a ``StoreUnavailable``; nothing local changes. A damaged
        clone is a ``GitFailed`` that says so (``broken_clone``): the store clones again.

        ``known`` is the tip the caller last had (already checked to be a commit): when the
        fetch left the branch there -- every write of a lone writer, most reads -- the ref
        file says so and no ``git rev-parse`` is spawned to ask."""
        for attempt in range(5):
            try:
                self.run(
                    "fetch",
                    "--quiet",
                    "--upload-pack=git-upload-pack",
                    "--no-tags",
                    "--no-write-fetch-head",
                    "--no-auto-gc",
                    "origin",
                    f"+refs/heads/{self.branch}:{self.tracking}",
                )
                break
            except GitFailed as failed:
                if "couldn't find remote ref" in failed.stderr:
                    return None
                if failed.ref_locked and attempt < 4:  # a neighbour fetching the same clone
                    time.sleep(0.005 * 2**attempt)
                    continue
                if failed.broken_clone or failed.ref_locked:  # (a lock a killed git left)
                    raise  # the store clones it again, once
                raise self.unreachable(failed) from failed
        if known is not None and self._tracked_on_disk() == known:
            return known
        return self.tip()

    def _tracked_on_disk(self) -> str | None:
        """The tracked branch's loose ref file, if it is one (git writes it whole, by a
        rename); None when the ref is packed or stored another way -- ask ``tip`` then."""
        try:
            return (self.path / self.tracking).read_text("ascii").strip()
        except (OSError, UnicodeDecodeError):
            return None

    def tip(self) -> str | None:
        """The tracked branch as the last fetch left it."""
        try:
            out = self.run("rev-parse", "--verify", "--quiet", f"{self.tracking}^{{commit}}")
            return out.decode().strip()
        except GitFailed:
            return None

    def remote_tip(self) -> str | None:
        """The branch's tip on the remote right now, without fetching any object (how a
        waiting agent polls cheaply)."""
        try:
            out = self.run(
                "ls-remote", "--upload-pack=git-upload-pack", "origin", f"refs/heads/{self.branch}"
            ).decode()
        except GitFailed as failed:
            raise self.unreachable(failed) from failed
        return out.split()[0] if out.strip() else None

    def unreachable(self, failed: GitFailed, *, pushing: bool = False) -> StoreError:
        """What a failed exchange with the remote means: a local path that holds no
        repository is no fleet at that place (trying again will not help); anything else
        is a remote that did not answer, worth another try. A push that failed and whose
        landing could not be checked (``pushing``) may have landed: the hint says so
        rather than promise that nothing changed."""
        if urlsplit(self.remote).scheme == "file" and _NO_REPOSITORY in failed.stderr:
            return no_repository(self.remote)
        outcome = (
            "the change may have reached it before the connection failed: the next command "
            "reads the board as it is"
            if pushing
            else "nothing was changed"
        )
        return StoreUnavailable(
            f"cannot reach the git remote {shown_url(self.remote)}: {failed.last_line}",
            hint=f"check the URL and your access with `git ls-remote {shown_url(self.remote)}`; "
            + outcome,
        )

    # -- reading a commit ------------------------------------------------------------

    def tree(self, commit: str, wanted: Callable[[str], bool]) -> dict[str, str]:
        """The files of ``commit`` that ``wanted`` asks for: path -> blob. The others are
        never read: a person may keep anything beside the board (a submodule, a binary, a
        name that is not UTF-8) without it costing a read or breaking one."""
        out = self.run("ls-tree", "-r", "-z", "--full-tree", commit)
        files = {}
        for entry in out.split(b"\0"):
            if entry:
                meta, raw = entry.split(b"\t", 1)
                path = raw.decode("utf-8", "surrogateescape")
                if wanted(path):
                    files[path] = meta.split()[2].decode()
        return files

    def changes(self, old: str, new: str, wanted: Callable[[str], bool]) -> list[Change]:
        """The paths ``wanted`` asks for that differ between two commits, with their blobs
        in ``new``."""
        out = self.run("diff-tree", "-r", "-z", "--no-renames", "--no-commit-id", old, new)
        fields = out.split(b"\0")
        changes = []
        for meta, path in zip(fields[0::2], fields[1::2], strict=False):
            if not meta:
                continue
            name = path.decode("utf-8", "surrogateescape")
            if not wanted(name):
                continue
            parts = meta.decode().split()
            status, blob = parts[4], parts[3]
            changes.append(Change(name, None if status == "D" else blob))
        return changes

    def blobs(self, blobs: list[str]) -> dict[str, bytes]:
        """The contents of these blobs, in one ``git cat-file --batch``."""
        if not blobs:
            return {}
        out = self.run("cat-file", "--batch", stdin="".join(f"{b}\n" for b in blobs).encode())
        contents: dict[str, bytes] = {}
        at = 0
        for blob in blobs:
            end = out.index(b"\n", at)
            header = out[at:end].split()
            if len(header) != 3:
                said = b" ".join(header[1:]).decode("utf-8", "replace") or "no answer"
                raise GitFailed(("cat-file",), 1, f"bad object {blob} ({said})")
            size = int(header[2])
            contents[blob] = out[end + 1 : end + 1 + size]
            at = end + 1 + size + 1
        return contents

    # -- writing ---------------------------------------------------------------------

    def commit(
        self,
        parent: str | None,
        files: dict[str, bytes | None],
        message: str,
        author: str,
        scratch: str,
    ) -> str:
        """A commit on ``parent`` that writes (or, for None, deletes) ``files``, by
        ``author``, made with ``git fast-import`` on the private ref ``scratch``; its id."""
        stamp = f"{int(time.time())} +0000"
        who = f"{author} <{author}@shoal>"
        msg = message.encode()
        out = [
            f"commit {scratch}\nmark :1\n".encode(),
            f"author {who} {stamp}\ncommitter shoal <shoal@localhost> {stamp}\n".encode(),
            f"data {len(msg)}\n".encode() + msg + b"\n",
        ]
        if parent:
            out.append(f"from {parent}\n".encode())
        for path, content in sorted(files.items()):
            if content is None:
                out.append(f"D {path}\n".encode())
            else:
                out.append(f"M 100644 inline {path}\ndata {len(content)}\n".encode())
                out.append(content + b"\n")
        # The id, then the scratch ref dropped again: the commit is pushed by its id, and no
        # ref is left behind per process to keep old objects from gc.
        out.append(f"get-mark :1\nreset {scratch}\n\n".encode())
        result = self.run(
            "fast-import", "--quiet", "--force", "--done", stdin=b"".join(out) + b"done\n"
        )
        return result.decode().split()[-1]

    def root_commit(self, commit: str, message: str) -> str:
        """A commit with no parent holding the same files as ``commit``."""
        out = self.run("commit-tree", f"{commit}^{{tree}}", "-m", message)
        return out.decode().strip()

    def push(self, commit: str) -> str | None:
        """Offer ``commit`` as the branch's new tip. It is a plain push (never a forced one):
        the remote takes it only if it descends from the tip there, and the commit's parent
        is the tip this process read -- so it lands only if nobody pushed since (None), and
        is turned away otherwise: then git's reason (the branch moved, or another push
        holds its lock right now)."""
        try:
            self.run(
                "push",
                "--quiet",
                "--porcelain",
                "--receive-pack=git-receive-pack",
                "origin",
                f"{commit}:refs/heads/{self.branch}",
            )
        except GitFailed as failed:
            if failed.rejected:
                return failed.last_line
            if self.landed(commit):
                log.warning(
                    "the push to %s failed (%s), but the remote has the commit: it landed",
                    shown_url(self.remote),
                    failed.last_line,
                )
                return None
            raise self.unreachable(failed, pushing=True) from failed
        return None

    def landed(self, commit: str) -> bool:
        """Whether the remote's branch holds ``commit`` although its push failed: the
        connection dropped after the remote took the push and before it could say so.
        Without this check the caller would be told "nothing was changed" of a change that
        is on the board. The branch is the commit itself, or -- if another agent pushed in
        the meantime -- a descendant of it (a fetch brings that tip to look)."""
        try:
            tip = self.remote_tip()
        except StoreError:
            return False  # the remote does not answer at all: unknown, so not landed
        if tip is None:
            return False
        if tip == commit:
            return True
        try:
            self.fetch()
            self.run("merge-base", "--is-ancestor", commit, self.tracking)
        except (GitFailed, StoreError):
            return False
        return True

    def replace_history(self, commit: str, expected: str) -> bool:
        """Make ``commit`` the branch's tip in place of ``expected`` although it does not
        descend from it (a squash of history a person asked for): a push forced only if
        the remote still has ``expected`` there."""
        try:
            self.run(
                "push",
                "--quiet",
                "--porcelain",
                "--receive-pack=git-receive-pack",
                f"--force-with-lease=refs/heads/{self.branch}:{expected}",
                "origin",
                f"{commit}:refs/heads/{self.branch}",
            )
        except GitFailed as failed:
            if failed.rejected:
                return False
            raise self.unreachable(failed) from failed
        return True
