"""The files that prove a server's own user: made private and whole, even by processes racing
to make them; refused when someone else could have planted or read them; and found by the
CLI only for a live server of its own user on loopback."""

from __future__ import annotations

import multiprocessing
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from shoal.errors import BadInput
from shoal.local_secrets import (
    forget_server,
    make_secret,
    private_folder,
    read_secret,
    record_server,
    server_secret,
)


def _make(
    path: str, start: multiprocessing.synchronize.Barrier, out: multiprocessing.Queue[str]
) -> None:
    start.wait()
    out.put(make_secret(Path(path), "a test secret"))


def test_processes_racing_to_make_the_secret_all_get_the_one_that_won(tmp_path: Path) -> None:
    path = tmp_path / "fleet.db.secret"
    context = multiprocessing.get_context("spawn")
    start, out = context.Barrier(8), context.Queue()
    procs = [context.Process(target=_make, args=(str(path), start, out)) for _ in range(8)]
    for proc in procs:
        proc.start()
    got = {out.get(timeout=60) for _ in procs}
    for proc in procs:
        proc.join(timeout=60)
    assert len(got) == 1 and len(got.pop()) >= 43
    assert stat.S_IMODE(os.lstat(path).st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fleet.db.secret"]  # no drafts left


def test_a_secret_made_under_a_loose_umask_is_still_private(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        made = tmp_path / "s"
        make_secret(made, "a test secret")
        folder = private_folder(tmp_path / "state" / "deeper")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.lstat(made).st_mode) == 0o600
    assert stat.S_IMODE(os.lstat(folder).st_mode) == 0o700


def test_a_secret_or_folder_others_could_have_touched_is_refused(tmp_path: Path) -> None:
    loose = tmp_path / "loose"
    loose.write_text("x" * 43)
    loose.chmod(0o640)
    with pytest.raises(BadInput, match="can be read by other users"):
        read_secret(loose, "a test secret")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo, 0o600)
    with pytest.raises(BadInput, match="not a regular file"):
        read_secret(fifo, "a test secret")  # and it did not hang
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    with pytest.raises(BadInput, match="open to other users"):
        private_folder(shared)
    if os.geteuid() == 0:
        theirs = tmp_path / "theirs"
        theirs.write_text("y" * 43)
        theirs.chmod(0o600)
        os.chown(theirs, 65534, 65534)
        with pytest.raises(BadInput, match="belongs to another user"):
            read_secret(theirs, "a test secret")


def test_the_cli_finds_a_secret_only_for_a_live_server_of_its_own_on_loopback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SHOAL_STATE_DIR", str(tmp_path / "state"))
    secret_file = tmp_path / "fleet.db.secret"
    secret = make_secret(secret_file, "a test secret")
    record_server(18765, secret_file)
    assert server_secret("http://127.0.0.1:18765") == secret
    assert server_secret("http://localhost:18765/api/v1") == secret
    assert server_secret("http://[::1]:18765") == secret
    assert server_secret("http://fleet.lan:18765") is None  # never off loopback
    assert server_secret("http://127.0.0.1:18766") is None  # no server noted there
    forget_server(18765)
    assert server_secret("http://127.0.0.1:18765") is None
    # A note left by a server that died names a process that is gone: nothing is sent.
    gone = subprocess.run(
        [sys.executable, "-c",
         "import os, sys; from pathlib import Path; from shoal.local_secrets import "
         "record_server; record_server(18765, Path(sys.argv[1]))", str(secret_file)],
        check=True,
    )  # fmt: skip
    assert gone.returncode == 0
    assert (tmp_path / "state" / "serve-18765.json").exists()
    assert server_secret("http://127.0.0.1:18765") is None
