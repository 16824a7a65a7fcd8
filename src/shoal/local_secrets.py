"""Secrets a shoal server keeps for the user who started it, in files only that user reads.

Loopback is not trust: every user of a machine reaches 127.0.0.1. So a server on loopback
with no access token made (``shoal serve`` on an open fleet, ``shoal mcp --transport http``
with no ``--token-file``) asks each request to prove it comes from the user who started
it, the way Jupyter does: the server keeps a random secret in a file that only its owner
can read, and a request must carry it. Whoever can read the file is that user (or root).

- **The sign-in secret of ``shoal serve``** (``serve_secret_file``): for a SQLite fleet
  beside its database (``.shoal/fleet.db.secret``), so every server of the fleet shares it
  and the browser's session outlives a restart; for a PostgreSQL or git fleet in the
  user's state folder (``state_folder``), named by a hash of the fleet's URL.
- **Which server keeps which secret** (``record_server``): ``serve-PORT.json`` in the
  state folder names the server's process and its secret's file, so the CLI's remote store
  (``--store http://127.0.0.1:PORT``) finds the secret by the address alone, sends it only
  to a loopback address, and only while that process -- this user's -- is alive (a port
  another user took after the server died gets nothing).
- **The bearer token of ``shoal mcp --transport http``** (``mcp_token_file``):
  ``mcp-PORT.token`` in the state folder, which ``shoal mcp config`` points clients at.

Every file is created 0600 (whatever the umask) without following a link, and is refused
when it is a link, not a regular file, another user's, or readable by anyone else: a file
someone else could have planted or read proves nothing. The state folder is made 0700 and
refused on the same terms. Nothing here logs, prints or returns a secret to show.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import ipaddress
import json
import os
import secrets
import stat
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

from shoal.errors import BadInput

__all__ = [
    "STATE_ENV",
    "forget_server",
    "make_secret",
    "mcp_token_file",
    "read_secret",
    "record_server",
    "serve_secret_file",
    "server_secret",
    "state_folder",
]

#: Where shoal keeps a user's private files; default ``$XDG_STATE_HOME/shoal`` or
#: ``~/.local/state/shoal``.
STATE_ENV = "SHOAL_STATE_DIR"
#: The bits a private file or folder must not have: any access by the group or others.
_LOOSE = 0o077
#: The most bytes read from a private file (a secret is 43 characters, a note a path more).
_MAX_READ = 8192


def state_folder(environ: Mapping[str, str] | None = None) -> Path:
    """The user's folder for shoal's private files (not made here)."""
    env = os.environ if environ is None else environ
    if env.get(STATE_ENV):
        return Path(env[STATE_ENV]).expanduser()
    base = env.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "shoal"


def private_folder(folder: Path) -> Path:
    """``folder``, made 0700 with its missing parents if it is not there, and checked to be
    this user's alone; ``BadInput`` saying how to fix it if not."""
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = os.lstat(folder)
    except OSError as exc:
        raise BadInput(
            f"cannot make the private folder {folder}: {exc.strerror}",
            hint=f"make it yourself (mkdir -m 700 {folder}), or set {STATE_ENV} to one of yours",
        ) from None
    if not stat.S_ISDIR(info.st_mode):
        raise BadInput(
            f"{folder} should be shoal's private folder, but it is not a folder (a link?)",
            hint=f"remove it, or set {STATE_ENV} to a folder of yours",
        )
    if info.st_uid != os.geteuid() or stat.S_IMODE(info.st_mode) & _LOOSE:
        whose = "another user's" if info.st_uid != os.geteuid() else "open to other users"
        raise BadInput(
            f"{folder} is shoal's private folder, but it is {whose} (mode "
            f"{stat.S_IMODE(info.st_mode):04o}): a secret kept there would not be yours alone",
            hint=f"chmod 700 {folder} if it is yours, or set {STATE_ENV} to a folder of yours",
        )
    return folder


def read_secret(path: Path, what: str) -> str | None:
    """The secret in ``path``, None if there is no such file; ``BadInput`` if the file is a
    link, not a regular file, another user's or open to others (it proves nothing then)."""
    raw = _read_private(path, what)
    if raw is None:
        return None
    try:
        secret = raw.decode("ascii").strip()
    except UnicodeDecodeError:
        secret = ""
    if not secret or not secret.isprintable() or any(c.isspace() for c in secret):
        raise BadInput(
            f"{path} ({what}) does not hold a secret shoal made",
            hint=f"remove it (rm {path}); a new one is made in its place",
        )
    return secret


def _read_private(path: Path, what: str) -> bytes | None:
    """What the private file ``path`` holds (``read_secret`` says when it is refused)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise BadInput(
                f"{path} ({what}) is a symbolic link; shoal reads a secret only from a file "
                "of its own",
                hint=f"remove the link (rm {path}); a new secret is made in its place",
            ) from None
        raise BadInput(
            f"cannot read {path} ({what}): {exc.strerror}",
            hint="run this as the user who owns it",
        ) from None
    try:
        info = os.fstat(fd)
        _refuse_foreign(path, what, info)
        return os.read(fd, _MAX_READ)
    finally:
        os.close(fd)


def _refuse_foreign(path: Path, what: str, info: os.stat_result) -> None:
    if not stat.S_ISREG(info.st_mode):
        raise BadInput(
            f"{path} ({what}) is not a regular file",
            hint=f"move it away (mv {path} {path}.bak); a new one is made in its place",
        )
    if info.st_uid != os.geteuid():
        raise BadInput(
            f"{path} ({what}) belongs to another user (uid {info.st_uid}); a secret someone "
            "else made proves nothing",
            hint=f"remove it (rm {path}), or run this as the user who owns it",
        )
    if stat.S_IMODE(info.st_mode) & _LOOSE:
        raise BadInput(
            f"{path} ({what}) can be read by other users (mode "
            f"{stat.S_IMODE(info.st_mode):04o}), so it may be known to them",
            hint=f"remove it (rm {path}); a new one, readable by you only, is made in its place",
        )


def make_secret(path: Path, what: str) -> str:
    """The secret in ``path``, made there first if there is none: 256 random bits, written
    whole to a private file beside it and linked into place, so a process racing this one
    finds either no file or the whole secret (and takes the one that won)."""
    found = read_secret(path, what)
    if found is not None:
        return found
    secret = secrets.token_urlsafe(32)
    draft = path.with_name(f".{path.name}.{secrets.token_hex(8)}")
    try:
        fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            os.fchmod(fd, 0o600)
            os.write(fd, f"{secret}\n".encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        with contextlib.suppress(FileExistsError):  # another process made it first: theirs
            os.link(draft, path)  # is read below
    except OSError as exc:
        raise BadInput(
            f"cannot make {path} ({what}): {exc.strerror}",
            hint="check that the folder exists and is yours to write",
        ) from None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(draft)
    made = read_secret(path, what)
    assert made is not None
    return made


def _fleet_key(store_url: str) -> str:
    return hashlib.sha256(store_url.encode()).hexdigest()[:20]


def serve_secret_file(store_url: str, environ: Mapping[str, str] | None = None) -> Path:
    """Where ``shoal serve`` keeps the sign-in secret of the fleet at ``store_url``: beside
    a SQLite fleet's database, else in the private state folder (made if missing)."""
    parts = urlsplit(store_url)
    if parts.scheme == "sqlite":
        raw = (parts.netloc + parts.path) if parts.netloc else parts.path
        database = Path("/" + raw.lstrip("/")) if raw.startswith("/") else Path.cwd() / raw
        return database.with_name(f"{database.name}.secret")
    folder = private_folder(state_folder(environ))
    return folder / f"serve-{_fleet_key(store_url)}.secret"


def mcp_token_file(port: int, environ: Mapping[str, str] | None = None) -> Path:
    """Where ``shoal mcp --transport http`` on loopback port ``port`` keeps its bearer
    token when none is given (the private state folder, made if missing)."""
    return private_folder(state_folder(environ)) / f"mcp-{port}.token"


def _record_file(port: int, environ: Mapping[str, str] | None) -> Path:
    return state_folder(environ) / f"serve-{port}.json"


def record_server(port: int, secret_file: Path, environ: Mapping[str, str] | None = None) -> Path:
    """Note that this process serves loopback port ``port`` with the secret in
    ``secret_file``, for the CLI to find (``server_secret``). Replaces a note left by a
    server that died; ``forget_server`` takes it away when this one stops."""
    folder = private_folder(state_folder(environ))
    note = json.dumps({"pid": os.getpid(), "port": port, "secret_file": str(secret_file)})
    record = _record_file(port, environ)
    draft = folder / f".{record.name}.{secrets.token_hex(8)}"
    fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, note.encode())
    finally:
        os.close(fd)
    os.replace(draft, record)
    return record


def forget_server(port: int, environ: Mapping[str, str] | None = None) -> None:
    """Take away this process's note for ``port`` (not one a later server wrote)."""
    record = _record_file(port, environ)
    with contextlib.suppress(OSError, ValueError, BadInput):
        if _read_note(record).get("pid") == os.getpid():
            os.unlink(record)


def _read_note(record: Path) -> dict[str, object]:
    raw = _read_private(record, "a running server's note")
    note = json.loads(raw or b"{}")
    return note if isinstance(note, dict) else {}


def server_secret(url: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The sign-in secret of the server this user runs at ``url``, or None: when ``url`` is
    not a loopback address, no note names its port, the process that wrote the note is gone
    or not this user's, or any file on the way is not this user's alone. Never raises: a
    client that finds nothing sends nothing, and the server's 401 says what to do."""
    parts = urlsplit(url)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None
    if not _is_loopback(parts.hostname or ""):
        return None
    try:
        folder = state_folder(environ)
        info = os.lstat(folder)
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
            return None
        if stat.S_IMODE(info.st_mode) & _LOOSE:
            return None
        note = _read_note(_record_file(port, environ))
        pid, where = note.get("pid"), note.get("secret_file")
        if not isinstance(pid, int) or not isinstance(where, str) or not _ours_and_alive(pid):
            return None
        return read_secret(Path(where), "the server's sign-in secret")
    except (OSError, ValueError, BadInput):
        return None


def _is_loopback(host: str) -> bool:
    if host.lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _ours_and_alive(pid: int) -> bool:
    """Whether process ``pid`` runs, as this user (``/proc`` says whose it is; elsewhere a
    signal 0 that only this user's processes accept)."""
    proc = Path(f"/proc/{pid}")
    if Path("/proc/self").exists():
        try:
            return os.stat(proc).st_uid == os.geteuid()
        except OSError:
            return False
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True
