"""Loopback is not trust: a fleet served with no token made is open to the user who started
`shoal serve`, and to nobody else on the machine.

The server keeps a sign-in secret beside the fleet, readable by its owner only; the owner's
CLI finds it by itself, the owner's browser signs in with the link printed to their
terminal, and anyone else -- another local user with curl, or with shoal itself -- gets 401
and changes nothing. The second user is real: ``setpriv`` runs their commands as uid 65534.
"""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import stat
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from shoal import Fleet
from shoal.local_secrets import read_secret, serve_secret_file, state_folder
from tests.faces.cli_support import COMMAND, base_env
from tests.helpers import as_another_user, snapshot
from tests.web.remote_support import answers, free_port, served, stop

pytestmark = pytest.mark.slow

SHOAL_SCRIPT = COMMAND[0]


def curl(*args: str) -> tuple[int, str]:
    """curl run by another local user: (the HTTP status, the body)."""
    done = as_another_user(
        "curl", "-s", "-o", "-", "-w", "\n%{http_code}", *args, env={"PATH": "/usr/bin:/bin"}
    )
    body, _, status = done.stdout.rpartition("\n")
    return int(status), body


def eve_holds_a_lease(url: str) -> str:
    """A fleet where eve holds task 1 (its lease token returned) and task 2 waits."""
    with Fleet.open(url) as fleet:
        fleet.post("eve's work")
        fleet.post("waiting")
        fleet.register("eve")
        return fleet.claim("eve").leases[0].token


def test_another_local_user_can_neither_read_nor_change_an_open_fleet(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 'fleet.db'}"
    token = eve_holds_a_lease(url)
    with served(url, tmp_path) as (base, _):
        with Fleet.open(url) as fleet:
            before = snapshot(fleet)
        for method, path, body in [
            ("POST", "/api/v1/tasks/1/cancel", None),
            ("GET", "/api/v1/agents/eve/leases", None),
            ("POST", "/api/v1/settings", '{"lease_ttl": 1}'),
            ("GET", "/api/v1/tasks", None),
            ("GET", "/metrics", None),
        ]:
            data = ["-H", "Content-Type: application/json", "--data", body] if body else []
            status, text = curl("-X", method, *data, base + path)
            assert status == 401, (path, status, text)
            assert token not in text
        status, _ = curl(base + "/")  # the dashboard sends them to sign in
        assert status == 303
        with Fleet.open(url) as fleet:
            assert snapshot(fleet) == before
            assert fleet.get(1).state == "claimed" and fleet.settings().lease_ttl != 1


def test_the_owners_cli_finds_the_secret_and_another_users_cli_cannot(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 'fleet.db'}"
    eve_holds_a_lease(url)
    with served(url, tmp_path) as (base, _):
        env = base_env({})
        mine = subprocess.run(
            [*COMMAND, "--store", base, "cancel", "2", "--json"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert mine.returncode == 0, mine.stderr
        assert json.loads(mine.stdout)["state"] == "cancelled"
        # Another user, even pointed at the owner's own folder of private files.
        theirs = as_another_user(
            *COMMAND,
            "--store",
            base,
            "cancel",
            "1",
            env={
                "PATH": "/usr/bin:/bin",
                "HOME": "/nonexistent",
                "SHOAL_STATE_DIR": env["SHOAL_STATE_DIR"],
            },
        )
        assert theirs.returncode == 2, theirs.stderr
        assert "sign-in secret" in theirs.stderr and "Traceback" not in theirs.stderr
        secret = read_secret(serve_secret_file(url), "the sign-in secret")
        assert secret is not None and secret not in theirs.stdout + theirs.stderr
        with Fleet.open(url) as fleet:
            assert fleet.get(1).state == "claimed"


def test_the_secret_is_the_owners_alone_and_a_planted_one_is_refused(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 'fleet.db'}"
    Fleet.init(url).close()
    with served(url, tmp_path):
        made = serve_secret_file(url)
        info = os.lstat(made)
        assert made == tmp_path / "fleet.db.secret"
        assert stat.S_ISREG(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o600
        assert info.st_uid == os.geteuid()
        assert stat.S_IMODE(os.lstat(state_folder()).st_mode) == 0o700
    # A secret others can read proves nothing: the server refuses to start on it.
    made.chmod(0o644)
    refused = subprocess.run(
        [*COMMAND, "--store", url, "serve", "--port", str(free_port())],
        env=base_env({}),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert refused.returncode == 2, refused.stderr
    assert "can be read by other users" in refused.stderr and f"rm {made}" in refused.stderr
    made.unlink()
    made.symlink_to(tmp_path / "elsewhere")  # a link planted where the secret goes
    linked = subprocess.run(
        [*COMMAND, "--store", url, "serve", "--port", str(free_port())],
        env=base_env({}),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert linked.returncode == 2 and "symbolic link" in linked.stderr
    assert not (tmp_path / "elsewhere").exists()


def _read_until(fd: int, marker: str, deadline: float) -> str:
    seen = b""
    while marker.encode() not in seen:
        assert time.monotonic() < deadline, f"no {marker!r} in: {seen.decode(errors='replace')}"
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready:
            seen += os.read(fd, 4096)
    text = seen.decode()
    while not text.endswith("\n"):  # the rest of the line
        ready, _, _ = select.select([fd], [], [], 5)
        assert ready, "the sign-in line was cut short"
        text += os.read(fd, 4096).decode()
    return text


def test_the_sign_in_link_goes_to_the_owners_terminal_and_signs_the_browser_in(
    tmp_path: Path,
) -> None:
    url = f"sqlite://{tmp_path / 'fleet.db'}"
    Fleet.init(url).close()
    port = free_port()
    main, terminal = pty.openpty()
    log = tmp_path / "serve.log"
    with log.open("w") as sink:
        proc = subprocess.Popen(
            [*COMMAND, "--store", url, "serve", "--port", str(port), "--log-level", "info"],
            env=base_env({}),
            stdout=sink,
            stderr=terminal,
        )
    os.close(terminal)
    try:
        text = _read_until(main, "login?token=", time.monotonic() + 60)
        link = next(w for w in text.split() if "login?token=" in w)
        base = f"http://127.0.0.1:{port}"
        assert link.startswith(f"{base}/login?token=")
        secret = link.partition("token=")[2]
        assert secret == read_secret(serve_secret_file(url), "the sign-in secret")
        while not answers(base):
            time.sleep(0.05)  # polling a server coming up
        with httpx.Client(base_url=base) as browser:
            signed = browser.get(link.removeprefix(base) + "&next=/tasks")
            assert signed.status_code == 303 and signed.headers["location"] == "/tasks"
            cookie = signed.headers["set-cookie"].lower()
            assert "httponly" in cookie and "samesite=strict" in cookie
            assert browser.get("/tasks").status_code == 200  # the cookie, not the link
            assert browser.get("/api/v1/status").status_code == 200
            assert browser.post("/api/v1/tasks", json={"title": "x"}).status_code == 401
        with httpx.Client(base_url=base) as stranger:
            wrong = stranger.get("/login", params={"token": "x" * 43})
            assert wrong.status_code == 401 and "set-cookie" not in wrong.headers
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=20)
        rest = b""
        while select.select([main], [], [], 0.2)[0]:
            try:
                chunk = os.read(main, 4096)
            except OSError:
                break
            if not chunk:
                break
            rest += chunk
        os.close(main)
    # The access log (info) shows the sign-in request without its secret.
    logged = log.read_text() + rest.decode(errors="replace")
    assert "GET /login?token=***" in logged, logged
    assert secret not in logged


def test_without_a_terminal_the_secret_is_not_printed_and_a_note_says_where_it_is(
    tmp_path: Path,
) -> None:
    url = f"sqlite://{tmp_path / 'fleet.db'}"
    Fleet.init(url).close()
    with served(url, tmp_path) as (_, proc):
        secret = read_secret(serve_secret_file(url), "the sign-in secret")
        assert secret is not None
        notes = list(state_folder().glob("serve-*.json"))
        assert any(json.loads(n.read_text())["pid"] == proc.pid for n in notes)
        stop(proc, keep_err=True)
        err = proc.stderr.read() if proc.stderr else ""
    assert secret not in err
    assert f"with the secret in {serve_secret_file(url)}" in err
    # The server took its note away when it stopped.
    for note in state_folder().glob("serve-*.json"):
        assert json.loads(note.read_text())["pid"] != proc.pid
