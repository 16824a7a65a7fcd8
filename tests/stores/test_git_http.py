"""The git store over git's smart HTTP protocol, as a team's git host serves it: a real
``git http-backend`` behind a local web server, and a fleet started, written and read
through ``git+http://`` by two clones. (``git+https://`` is the same protocol under TLS,
which git itself handles.)"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from http.server import CGIHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest

from shoal import Fleet
from shoal.errors import ShoalError, StoreUnavailable
from shoal.stores.git import GitStore
from tests.helpers import one
from tests.workers import SHOAL

BACKEND = Path("/usr/lib/git-core/git-http-backend")


class _GitHost(CGIHTTPRequestHandler):
    """Runs the CGI in a child process of the test's own user (the stock handler would
    switch to ``nobody`` under root, who may not write the repository)."""

    have_fork = False
    cgi_directories: ClassVar[list[str]] = ["/git"]

    def log_message(self, format: str, *args: object) -> None:
        pass


class _GitHostWithPassword(_GitHost):
    """A git host that wants a user and password (HTTP basic), as a team's host does."""

    wanted: ClassVar[str] = "Basic " + base64.b64encode(b"ada:pa/ss w0rd").decode()
    #: Requests that came with the right credentials.
    let_in: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        if self._allowed():
            super().do_GET()

    def do_POST(self) -> None:
        if self._allowed():
            super().do_POST()

    def _allowed(self) -> bool:
        if self.headers.get("Authorization") == self.wanted:
            self.let_in.append(self.path)
            return True
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Basic realm="board"')
        self.send_header("Content-Length", "0")
        self.end_headers()
        return False


@pytest.fixture
def git_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A git host on a free local port serving one empty repository; its base URL."""
    yield from _serve(tmp_path, monkeypatch, _GitHost)


@pytest.fixture
def git_host_with_password(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The same host, asking for ada's password on every request."""
    _GitHostWithPassword.let_in = []
    yield from _serve(tmp_path, monkeypatch, _GitHostWithPassword)


def _serve(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, handler: type[_GitHost]
) -> Iterator[str]:
    git_http_backend = shutil.which("git-http-backend") or (BACKEND if BACKEND.exists() else None)
    if git_http_backend is None:
        pytest.skip("git's http-backend is not installed (it ships with Debian's git)")
    site = tmp_path / "site"
    (site / "git").mkdir(parents=True)
    (site / "git" / "backend").symlink_to(git_http_backend)
    repos = tmp_path / "repos"
    subprocess.run(["git", "init", "--quiet", "--bare", str(repos / "board.git")], check=True)
    subprocess.run(
        ["git", "-C", str(repos / "board.git"), "config", "http.receivepack", "true"], check=True
    )
    monkeypatch.setenv("GIT_PROJECT_ROOT", str(repos))
    monkeypatch.setenv("GIT_HTTP_EXPORT_ALL", "1")
    monkeypatch.chdir(site)  # the handler serves the folder it runs in
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/git/backend"
    server.shutdown()
    server.server_close()


def test_a_fleet_on_a_git_host_over_http(git_host: str, tmp_path: Path) -> None:
    url = f"git+{git_host}/board.git#fleet"
    hub = Fleet(GitStore(url, cache=tmp_path / "hub"))
    assert hub.created
    hub.register("ada")
    task = hub.post("reviewed over http")
    agent = Fleet(GitStore(url, create=False, cache=tmp_path / "agent"))
    claimed, lease = one(agent.claim("ada"))
    assert claimed.id == task.id
    agent.complete(lease, "ok")
    assert hub.get(task.id).result == "ok"
    log = subprocess.run(
        ["git", "-C", str(tmp_path / "repos" / "board.git"), "log", "--format=%s", "fleet"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert log[:2] == [f"complete {task.id} by ada", f"claim {task.id} by ada"]


def test_a_repository_the_host_does_not_have_is_a_clear_error(
    git_host: str, tmp_path: Path
) -> None:
    with pytest.raises(StoreUnavailable, match="cannot reach the git remote") as raised:
        GitStore(f"git+{git_host}/nowhere.git", cache=tmp_path / "c")
    assert "git ls-remote" in (raised.value.hint or "")


@pytest.mark.parametrize(
    ("userinfo", "secret"),
    [("ada:s3cret-pw", "s3cret-pw"), ("ghp_T0KEN", "ghp_T0KEN")],
)
def test_a_password_or_token_in_the_url_shows_in_no_output_of_a_working_fleet(
    git_host: str, tmp_path: Path, userinfo: str, secret: str
) -> None:
    """init, doctor and status (text, --json, -vv) on a fleet reached with credentials in
    its URL: none prints them (init and doctor used to print the URL whole, and a token
    alone in place of a user was never hidden)."""
    url = "git+" + git_host.replace("http://", f"http://{userinfo}@") + "/board.git"
    env = {**os.environ, "SHOAL_GIT_CACHE": str(tmp_path / "cache")}
    said = []
    for args in (
        ["init"],
        ["init", "--json"],
        ["doctor"],
        ["doctor", "--json"],
        ["-vv", "status"],
        ["status", "--json"],
        ["-vv", "add", "reviewed over http"],
    ):
        done = subprocess.run(
            [*SHOAL, "--store", url, *args], capture_output=True, text=True, env=env, check=False
        )
        said.append(done.stdout + done.stderr)
        assert done.returncode == 0, said[-1]
    assert all(secret not in text for text in said), said
    assert "127.0.0.1" in said[0]


@pytest.mark.parametrize(
    "url",
    [
        "git+https://ada:pa/ss-w0rd@127.0.0.1:9/board.git",
        "git+https://ada:pa?ss-w0rd@127.0.0.1:9/board.git",
        "git+https://ada:pa#ss-w0rd@127.0.0.1:9/board.git",
        "git+http://ss-w0rd@127.0.0.1:9/board.git",
        "git+file://ada:ss-w0rd@localhost",
    ],
)
def test_a_password_a_url_parser_would_misread_never_shows_in_a_message(
    url: str, tmp_path: Path
) -> None:
    """A password with an unescaped / ? or # (which a URL parser reads as the path, the
    query or the branch), or a token in place of a user: the error names the remote
    without it."""
    with pytest.raises(ShoalError) as raised:
        GitStore(url, cache=tmp_path / "c")
    said = f"{raised.value} {raised.value.hint}"
    assert "ss-w0rd" not in said, said
    assert "***" in said


def test_a_password_in_the_url_reaches_the_host_but_no_command_line_and_no_file(
    git_host_with_password: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every git command the store runs goes through a ``git`` that logs its arguments
    (as ``ps`` would show them to any user): the password is in none, nor in the clone's
    config, and still the host let every request in with it. It used to be on the command
    line of ``git remote add``, and in the config, whence git put it on the command line
    of every ``git-remote-http`` it started."""
    real = shutil.which("git")
    assert real is not None
    seen = tmp_path / "argv.log"
    spy = tmp_path / "bin"
    spy.mkdir()
    (spy / "git").write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> {seen}\nexec {real} "$@"\n')
    (spy / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{spy}:{os.environ['PATH']}")
    written = "pa%2Fss%20w0rd"  # "pa/ss w0rd", as a URL must write it
    url = "git+" + git_host_with_password.replace("http://", f"http://ada:{written}@")
    store = GitStore(f"{url}/board.git", cache=tmp_path / "cache")
    hub = Fleet(store)
    hub.register("ada")
    task = hub.post("behind a password")
    agent = Fleet(GitStore(f"{url}/board.git", create=False, cache=tmp_path / "agent"))
    claimed, lease = one(agent.claim("ada"))
    agent.complete(lease, "ok")
    assert hub.get(task.id).result == "ok" and claimed.id == task.id
    commands = seen.read_text()
    assert "fetch" in commands and "push" in commands  # the spy saw the store's commands
    config = (store._clone.path / "config").read_text()
    for secret in (written, "pa/ss w0rd", "w0rd"):
        assert secret not in commands
        assert secret not in config
    assert any("git-receive-pack" in path for path in _GitHostWithPassword.let_in)
    # A clone an older shoal made kept the password in its config: it is made again.
    clone = store._clone.path
    subprocess.run(
        ["git", f"--git-dir={clone}", "config", "remote.origin.url", url[4:] + "/board.git"],
        check=True,
    )
    assert written in (clone / "config").read_text()
    assert [t.id for t in Fleet(GitStore(f"{url}/board.git", cache=tmp_path / "cache")).tasks()]
    assert written not in (clone / "config").read_text()
